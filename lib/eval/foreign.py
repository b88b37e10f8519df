"""Foreign runs: another harness's answers to a VQA Lab export as an evaluation folder, which
:mod:`lib.compare.explain` pairs with a stage 06 run item by item (issue #46).

lmms-eval (0.7.x) run with ``--log_samples`` on the tasks ``python -m lib.export lmms-eval`` wrote
leaves, per task, ``<output_path>/<model>/<date>_samples_<task>.jsonl`` beside
``<date>_results.json``. Each sample row carries, under every metric key, the row the export's
``process_results`` made (the item's ``id``, its VQA Lab ``task`` and the reply lmms-eval
stripped); lmms-eval adds the prompt text it sent (``input``) and the reply as the model gave it
(``resps``, written only where it differs from the stripped ``filtered_resps``). The export
folder's ``vqalab.json`` names the dataset, the tag and tasks, the question order and the scoring.

:func:`import_lmms_eval` writes one :class:`lib.core.schema.Prediction` per sample, the reply kept as the
model gave it, then reads and scores them with VQA Lab's own task code
(:func:`lib.eval.rescore.rescore_folder`): an unreadable reply is kept raw and counted invalid,
never dropped. Beside ``predictions.jsonl``: ``config.json`` (the export's dataset, the model as
lmms-eval recorded it - an ``imported`` spec, :mod:`lib.models.imported` -, lmms-eval's token
limits, free generation, the export's scoring), ``foreign.json`` (:data:`FOREIGN`: what was
imported from where, lmms-eval's own numbers, what of its requests is known) and
``provenance.json`` (each config value's source). The files are read as a parser with limits
(:mod:`lib.eval.foreign_schema`: regular files, a line-length limit, a schema of every field used):
one that cannot be imported raises :class:`ForeignError` naming the file, the line and the field.
The export's dataset must be the one it recorded (``items_sha256``; an older export without it
imports with a warning), and hold every item answered. The folder is built aside and swapped in
whole (all or nothing), marked as :data:`KIND`; a folder of another kind is never written into.

What lmms-eval sent is known as far as it logged it (:func:`logged_request`): the prompt text
(``input``); the path its model took (``results.json``'s ``model_backend``: ``chat`` sends the
export's own message, images and text in VQA Lab's order, ``simple`` lets the model wrap the text
and place the images); the token limits (each task's ``generation_kwargs``). Where the samples
lack ``input`` or the results file is missing, a changed reply cannot be put on the prompt or on
the model alone: the comparison says so (:data:`NO_INPUT`, :data:`NO_PATH`).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from lib.core.schema import Prediction
from lib.eval.foreign_schema import (
    EXPORT,
    RESULTS,
    ROW_KEY,
    SAMPLES,
    ForeignError,
    check_tasks,
    clean,
    lmms_eval_files,
    printable,
    read_json,
    read_samples,
)
from lib.eval.rescore import rescore_folder
from lib.eval.settings import EvalConfig
from lib.io import (
    artifacts,
    aside_folder,
    file_sha256,
    item_index,
    read_jsonl,
    swap_in,
    write_json,
    write_jsonl,
)
from lib.io.folders import Legacy, NotOurFolder, check_ours, mark
from lib.io.provenance import write_provenance

FOREIGN = "foreign.json"  # an imported evaluation folder's record: what was imported from where
KIND = "lmms-eval import"  # the kind its marker names (lib.io.folders): no other folder is written into
HARNESS = "lmms-eval"
# an import made before markers: only the files an import writes (the tables rescoring writes among
# them), its foreign.json naming lmms-eval
LEGACY = Legacy(
    (
        FOREIGN,
        artifacts.EVAL_CONFIG,
        artifacts.PREDICTIONS,
        artifacts.JUDGEMENTS,
        artifacts.PROVENANCE,
        artifacts.TABLES_META,
    ),
    patterns=("*.csv",),
    says=(FOREIGN, "harness", HARNESS),
)
STYLE = "zero_shot"  # the export's prompts are stage 06's zero-shot prompts
NO_INPUT = (
    "lmms-eval logged no prompt text (`input`) for this item: whether it asked what VQA Lab asks is "
    "unknown"
)
NO_PATH = (
    "no lmms-eval results.json beside the samples: whether its model got VQA Lab's message (chat path) or "
    "placed the images itself (simple path) is unknown"
)
SIMPLE_PATH = (
    "lmms-eval simple path (doc_to_text): the model's own prompt template and image placement"
)


# --- finding the files ------------------------------------------------------------------------------


def is_lmms_eval_output(path: str | Path) -> bool:
    """Does ``path`` look like lmms-eval output (a samples or results file, a folder holding them)
    rather than an evaluation folder? (Results without samples fail the import, saying why.)"""
    path = Path(path)
    if path.is_file():
        return bool(SAMPLES.match(path.name)) or path.name.endswith("_results.json")
    return (
        path.is_dir()
        and not (path / artifacts.PREDICTIONS).exists()
        and any(
            f for pattern in ("*_samples_*.jsonl", "*_results.json") for f in path.rglob(pattern)
        )
    )


def check_sampled(files: dict, results: dict, results_path: Path | None, given: Path) -> None:
    """Refuse a run whose results file names a VQA Lab task without its samples file (unless one
    samples file was given: that task alone is imported)."""
    if results_path is None or SAMPLES.match(given.name):
        return
    date = results_path.name.removesuffix("_results.json")
    missing = [
        t
        for t, c in (results.get("configs") or {}).items()
        if "vqalab_task" in ((c or {}).get("metadata") or {}) and t not in files
    ]
    if missing:
        raise ForeignError(
            "; ".join(
                f"{results_path}: task {t} has no samples file (looked for "
                f"{results_path.parent}/{date}_samples_{t}.jsonl)"
                for t in missing
            )
            + ": rerun lmms-eval with --log_samples, or import one samples file alone"
        )


def _read_export(folder: Path) -> dict:
    """An export's ``vqalab.json`` (:data:`lib.eval.foreign_schema.EXPORT`), its labels made printable."""
    info = read_json(folder / "vqalab.json", "the export's vqalab.json", EXPORT)
    return {
        **info,
        "name": printable(info["name"]),
        "settings_from": clean(info.get("settings_from")),
    }


def find_exports(tasks, results: dict, folders=()) -> dict[str, tuple[Path, dict]]:
    """Each lmms-eval task's VQA Lab export (its folder and ``vqalab.json``): from ``folders``
    given, else the folder ``results.json`` says the task's docs came from."""
    given = [Path(f) for f in folders]
    recorded = [
        Path(t).parent
        for c in (results.get("configs") or {}).values()
        if isinstance(c, dict)
        for t in [((c.get("dataset_kwargs") or {}).get("data_files") or {}).get("test")]
        if isinstance(t, str)
    ]
    found = {}
    for folder in [*given, *recorded]:
        if not (folder / "vqalab.json").exists():
            if folder in given:
                raise ForeignError(
                    f"{folder}: no vqalab.json: not a folder `python -m lib.export lmms-eval --out` "
                    f"wrote"
                )
            continue
        info = _read_export(folder)
        for task in info.get("tasks", []):
            found.setdefault(task, (folder, info))
    missing = sorted(set(tasks) - set(found))
    if missing:
        looked = (
            ", ".join(map(str, dict.fromkeys([*given, *recorded])))
            or "nowhere: no results.json names one"
        )
        raise ForeignError(
            f"lmms-eval task(s) {missing}: no VQA Lab export of them found (looked in {looked}); give "
            f"the folder `python -m lib.export lmms-eval --out` wrote (--export TASKDIR)"
        )
    return {t: found[t] for t in tasks}


def ours(files: dict, results: dict) -> tuple[dict, list[str]]:
    """The samples files of VQA Lab's exported tasks, and the other tasks of the run (its results
    file says which: an exported task's config carries ``metadata.vqalab_task``); without a
    results file every task is taken for VQA Lab's."""
    configs = results.get("configs") or {}
    others = [
        t
        for t in files
        if isinstance(configs.get(t), dict)
        and "vqalab_task" not in (configs[t].get("metadata") or {})
    ]
    if len(others) == len(files):
        raise ForeignError(
            f"{', '.join(map(str, files.values()))}: no task here was exported by VQA Lab "
            f"(`python -m lib.export lmms-eval`): nothing to import"
        )
    return {t: f for t, f in files.items() if t not in others}, others


def _doc_ids(folder: Path) -> set[tuple[str, str]]:
    """(VQA Lab task, item id) of every doc the export wrote (``docs_<task>.jsonl``)."""
    try:
        return {
            (d["task"], d["id"]) for f in sorted(folder.glob("docs_*.jsonl")) for d in read_jsonl(f)
        }
    except (OSError, ValueError, KeyError, TypeError) as e:  # an export edited by hand
        raise ForeignError(
            f"{folder}: the export's docs cannot be read ({e}): export the dataset again"
        ) from None


# --- one sample -------------------------------------------------------------------------------------


def reply(sample: dict, where: str) -> str:
    """The reply as the model gave it: ``resps`` (before lmms-eval stripped it) where logged, else
    ``filtered_resps``, else the export's row's ``raw``; a missing one is the empty reply (read as
    invalid, like any unreadable answer)."""
    for key in ("resps", "filtered_resps"):
        if key in sample:
            value = sample[key]
            while isinstance(
                value, list
            ):  # lmms-eval wraps a doc's requests and their replies in lists
                if len(value) != 1:
                    raise ForeignError(
                        f"{where}: {key} holds {len(value)} replies; VQA Lab keeps one answer per "
                        f"item (run lmms-eval with --repeats 1)"
                    )
                value = value[0]
            return "" if value is None else value if isinstance(value, str) else json.dumps(value)
    raw = sample[ROW_KEY].get("raw")
    return raw if isinstance(raw, str) else ""


def sample_prediction(sample: dict, where: str, dataset: str, label: str) -> Prediction:
    """The :class:`Prediction` of one sample row (unread: :func:`import_lmms_eval` reads and scores
    them all); what lmms-eval logged of the request goes into ``meta['lmms_eval']``."""
    row = sample.get(ROW_KEY)
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("id"), str)
        or not isinstance(row.get("task"), str)
    ):
        raise ForeignError(
            f"{where}: no VQA Lab row under {ROW_KEY!r} (the item's id and task, as the exported "
            f"process_results writes them): not a task `python -m lib.export lmms-eval` wrote"
        )
    raw = reply(sample, where)
    counts = next((c for c in sample.get("token_counts") or [] if isinstance(c, dict)), {})
    tokens = int(counts.get("output_tokens") or 0)
    logged = {"line": int(where.rsplit(":", 1)[1]), "doc_id": sample.get("doc_id")}
    if isinstance(sample.get("input"), str):
        logged["input"] = sample["input"]
    filtered = sample.get("filtered_resps")
    if filtered is not None and filtered != raw:
        logged["filtered_resps"] = filtered
    return Prediction(
        item_id=row["id"],
        model=label,
        task=row["task"],
        raw=raw,
        dataset=dataset,
        style=STYLE,
        prompt_tokens=int(counts.get("input_tokens") or 0),
        completion_tokens=tokens,
        meta={"lmms_eval": logged},
    )


def logged_request(parts: dict, row: dict, record: dict) -> dict:
    """The request an imported answer was asked with, in :func:`lib.compare.explain.request_parts`'s
    terms: stage 06's for the export's settings (``parts``, rebuilt from the imported config) with
    what lmms-eval logged in its place - the prompt text it sent, its simple path - and, under
    ``unsplit``, why a changed reply cannot be put on the prompt or the model alone."""
    logged = (row.get("meta") or {}).get("lmms_eval") or {}
    parts = dict(parts)
    if isinstance(logged.get("input"), str):
        parts["texts"] = [logged["input"]]
    if record.get("path") == "simple":
        parts["style texts"] = SIMPLE_PATH
    why = [
        w
        for w, unknown in ((NO_INPUT, "input" not in logged), (NO_PATH, not record.get("path")))
        if unknown
    ]
    if why:
        parts["unsplit"] = "; ".join(why)
    return parts


# --- the run ----------------------------------------------------------------------------------------


def _path(results: dict) -> str | None:
    """``chat`` or ``simple``: the path lmms-eval's model took (its ``model_backend``), None unknown."""
    m = re.search(r"\((\w+)\)\s*$", str((results.get("config") or {}).get("model_backend") or ""))
    return m.group(1) if m else None


def _generation(results: dict, task: str) -> dict:
    return dict(((results.get("configs") or {}).get(task) or {}).get("generation_kwargs") or {})


def _one(values: dict, what: str):
    """The one value every export agrees on; several raise (import those lmms-eval tasks apart)."""
    distinct = {json.dumps(v, sort_keys=True): v for v in values.values()}
    if len(distinct) > 1:
        raise ForeignError(
            f"the exports differ in {what} ({', '.join(f'{k}: {v}' for k, v in values.items())}): "
            f"import their lmms-eval tasks one at a time (a samples file each)"
        )
    return next(iter(distinct.values()))


def model_spec(results: dict, exports: dict, tasks) -> dict:
    """The ``imported`` spec of the model lmms-eval ran (:mod:`lib.models.imported`), as it recorded it."""
    config = results.get("config") or {}
    generation = _one(
        {
            t: {k: v for k, v in _generation(results, t).items() if k != "max_new_tokens"}
            for t in tasks
        },
        "decoding settings",
    )
    spec = {
        "backend": "imported",
        "harness": HARNESS,
        "harness_version": results.get("lmms_eval_version"),
        "name": results.get("model_name") or config.get("model"),
        "model": results.get("model_source"),
        "model_args": config.get("model_args"),
        "path": _path(results),
        "generation": generation or None,
        "question_first": _one(
            {name: info["question_first"] for name, (_, info) in exports.items()}, "question order"
        ),
    }
    return clean({k: v for k, v in spec.items() if v is not None})  # labels a comparison prints


def _label(found: dict) -> str:
    """The imported model's label: the stage 06 model the exports took their settings from (so the
    comparison pairs it with that model's answers), else ``lmms-eval``."""
    labels = {(info.get("settings_from") or {}).get("model") for _, info in found.values()}
    return labels.pop() if len(labels) == 1 and None not in labels else HARNESS


def _predictions(
    files: dict, found: dict, results: dict, label: str
) -> tuple[list[Prediction], dict, dict, dict]:
    """Every sample as a :class:`Prediction` (checked against its export's docs, each item once),
    the token limit of each VQA Lab task, the samples per lmms-eval task, and where each item's
    sample is (``FILE:LINE`` by dataset, task and id)."""
    preds, limits, seen, counts = [], {}, {}, {}
    for lmms_task, path in sorted(files.items()):
        folder, info = found[lmms_task]
        ids, generation = _doc_ids(folder), _generation(results, lmms_task)
        for line, sample in read_samples(path):
            where = f"{path}:{line}"
            p = sample_prediction(sample, where, info["name"], label)
            if (p.task, p.item_id) not in ids:
                raise ForeignError(
                    f"{where}: item {p.item_id!r} ({p.task}) is not among the docs of the export "
                    f"{folder}: these samples come from another export"
                )
            key = (p.dataset, p.task, p.item_id)
            if key in seen:
                raise ForeignError(
                    f"{where}: item {p.item_id!r} ({p.task}) again (first at {seen[key]})"
                )
            seen[key] = where
            limit = int(generation.get("max_new_tokens") or info["max_new_tokens"].get(p.task) or 0)
            if not limit:
                raise ForeignError(
                    f"{folder / 'vqalab.json'}: field max_new_tokens.{p.task}: expected a whole number "
                    f">= 1, got nothing (and lmms-eval's results name no limit): export it again"
                )
            if limits.setdefault(p.task, limit) != limit:
                raise ForeignError(
                    f"{where}: task {p.task} asked with {limit} new tokens here, {limits[p.task]} "
                    f"elsewhere: import these samples files one at a time"
                )
            p.truncated = (
                bool(p.completion_tokens) and p.completion_tokens >= limit
            )  # as stage 06: no end within it
            preds.append(p)
            counts[lmms_task] = counts.get(lmms_task, 0) + 1
        if not counts.get(lmms_task):
            raise ForeignError(
                f"{path}: no samples in it (an lmms-eval run stopped before its first doc?)"
            )
    return preds, limits, counts, seen


def check_datasets(named: dict, found: dict, preds: list[Prediction], where: dict) -> list[str]:
    """Refuse a dataset changed since its export (``items.jsonl``'s SHA-256 against the one the
    export recorded) or one that lacks an item answered; returns the datasets whose export
    records no digest (an older export: imported unverified, with a warning)."""
    unverified = []
    for name, folder in named.items():
        info = next(info for f, info in found.values() if f == folder)
        data = Path(info["dataset"])
        items = data / "items.jsonl"
        if not items.is_file():
            raise ForeignError(
                f"dataset {name} ({data}): no items.jsonl there: the dataset the export {folder} "
                f"was made of moved or was removed"
            )
        recorded, now = info.get("items_sha256"), file_sha256(items)
        if recorded is None:
            unverified.append(name)
            print(
                printable(
                    f"warning: the export {folder} records no digest of dataset {name} ({data}), so a "
                    f"change of its answers since cannot be seen: export it again to have it checked"
                ),
                file=sys.stderr,
            )
        elif recorded != now:
            raise ForeignError(
                f"dataset {name} ({data}): items.jsonl changed since the export {folder} (sha256 "
                f"{recorded[:12]}... then, {now[:12]}... now): lmms-eval answered the items as "
                f"exported; export the dataset again and rerun lmms-eval, or restore the dataset"
            )
        ids = {p.item_id for p in preds if p.dataset == name}
        try:
            there = item_index(data, wanted=ids)
        except (OSError, ValueError) as e:  # IncompleteDataset: its manifest says it is not whole
            raise ForeignError(f"dataset {name} ({data}): {e}") from None
        for p in preds:
            if p.dataset == name and p.item_id not in there:
                raise ForeignError(
                    f"{where[(p.dataset, p.task, p.item_id)]}: item {p.item_id!r} ({p.task}) is not in "
                    f"the dataset {name} ({data}): removed since the export {folder}? Export the "
                    f"dataset again and rerun lmms-eval"
                )
    return unverified


def imported_config(
    found: dict, results: dict, results_path: Path | None, label: str, limits: dict
) -> tuple:
    """The imported folder's :class:`EvalConfig` and where each of its values came from (recorded
    as provenance's ``params_from``, which the comparison's config diff shows)."""
    exports = {info["name"]: (folder, info) for folder, info in found.values()}
    scoring = _one(
        {
            name: {k: info["scoring"][k] for k in ("n_resamples", "seed")}
            for name, (_, info) in exports.items()
        },
        "scoring settings",
    )
    tasks: dict = {}
    for name, (_, info) in exports.items():
        for task, options in (info["scoring"].get("tasks") or {}).items():
            if options is None:  # null: the task's defaults, as absent
                continue
            tasks[task] = _one(
                {"before": tasks.get(task, options), name: options}, f"task {task}'s options"
            )
    base = max(sorted(set(limits.values())), key=list(limits.values()).count)  # the commonest limit
    for task, limit in limits.items():
        if limit != base or "max_new_tokens" in tasks.get(task, {}):
            tasks[task] = {**tasks.get(task, {}), "max_new_tokens": limit}
    try:
        cfg = EvalConfig(
            datasets={name: info["dataset"] for name, (_, info) in exports.items()},
            models={label: model_spec(results, exports, found)},
            styles=[STYLE],
            constrain=False,
            max_new_tokens=base,
            tasks=tasks,
            judge=None,
            **scoring,
        )
    except ValueError as e:  # ParamsError: a label or an export's setting this version refuses
        raise ForeignError(f"the imported config: {e}") from None
    ran = (
        f"lmms-eval {printable(results_path.name)}"
        if results_path
        else "the export's vqalab.json (no lmms-eval results.json)"
    )
    sources = {
        "datasets": "the export's vqalab.json",
        "models": ran,
        "styles": "the export (zero-shot prompts)",
        "constrain": "lmms-eval generate_until (free generation)",
        "max_new_tokens": ran,
        "tasks": ran,
        "n_resamples": "the export's vqalab.json",
        "seed": "the export's vqalab.json",
    }
    for name in (
        "demo_data",
        "only_tasks",
        "cot_max_new_tokens",
        "judge",
        "judge_max_new_tokens",
        "max_items",
    ):
        sources[name] = "not used by an lmms-eval import"
    return cfg, sources


def _reported(results: dict, task: str) -> dict:
    """lmms-eval's own numbers of a task (its aggregations: VQA Lab's scoring, run inside lmms-eval)."""
    values = (results.get("results") or {}).get(task) or {}
    return {
        k.removesuffix(",none"): v
        for k, v in values.items()
        if k.endswith(",none") and "_stderr" not in k
    }


def _write(out: Path, cfg: EvalConfig, preds: list[Prediction], record: dict, sources: dict) -> int:
    """The imported folder's files, written into ``out`` (a new folder) and scored; returns the
    count of answers VQA Lab could not read."""
    write_json(out / artifacts.EVAL_CONFIG, cfg.to_dict())
    write_jsonl(out / artifacts.PREDICTIONS, (p.to_dict() for p in preds))
    write_json(out / FOREIGN, record)
    write_provenance(
        out,
        "import lmms-eval",
        {k: record[k] for k in ("source", "samples", "results", "exports")},
        seed=cfg.seed,
        origin={"fields": sources},
    )
    return rescore_folder(out, unverified=True)["invalid"]


def _check_target(out: Path) -> None:
    """Refuse an ``out`` that is not empty or a previous import (its marker, or :data:`LEGACY`)."""
    try:
        check_ours(out, KIND, legacy=LEGACY)
    except NotOurFolder as e:
        raise ForeignError(str(e)) from None


def _built_aside(out: Path, write) -> int:
    """``write(folder)`` on a new folder beside ``out``, marked and swapped in whole: ``out`` is the
    previous import or this one, never part of either. Returns what ``write`` returns."""
    try:
        tmp = aside_folder(out, "importing")
    except OSError as e:
        raise ForeignError(
            f"{out}: cannot write beside it ({e.strerror}): import into another folder"
        ) from None
    try:
        result = write(tmp)
        mark(tmp, KIND)
        _check_target(out)  # made meanwhile by someone else: still not replaced
        swap_in(tmp, out)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(
            e, OSError
        ):  # a full disk, a folder taken away: nothing of this import is left
            raise ForeignError(
                f"{out}: the import could not be written ({e}); {out} is as it was"
            ) from None
        if isinstance(e, (KeyError, ValueError)) and not isinstance(e, ForeignError):
            raise ForeignError(f"{out}: the imported answers cannot be scored: {e}") from None
        raise
    return result


def _record(
    output, files: dict, results_path: Path | None, results: dict, named: dict, label: str
) -> dict:
    """``foreign.json``: what was imported from where, and what lmms-eval recorded of its run."""
    config = results.get("config") or {}
    return {
        "harness": HARNESS,
        "version": results.get("lmms_eval_version"),
        "source": str(Path(output).resolve()),
        "samples": {t: str(p.resolve()) for t, p in files.items()},
        "results": str(results_path.resolve()) if results_path else None,
        "exports": {name: str(Path(folder).resolve()) for name, folder in named.items()},
        "model": label,
        "path": _path(results),
        "settings": {k: config.get(k) for k in ("limit", "offset", "gen_kwargs", "random_seed")}
        | {
            k: results.get(k)
            for k in ("system_instruction", "chat_template", "fewshot_as_multiturn", "n-shot")
        },
        "reported": {t: _reported(results, t) for t in files},
    }


def import_lmms_eval(
    output: str | Path, out: str | Path, exports=(), label: str | None = None
) -> dict:
    """Import one lmms-eval run's ``--log_samples`` output (:func:`lmms_eval_files`: its output
    folder, a samples file or its results file) into the evaluation folder ``out``, read and scored
    by VQA Lab (module docstring); all or nothing, and never into a folder of another kind
    (:data:`KIND`). ``exports``: the export folders, where ``results.json`` no longer points at
    them; ``label``: the model's label (default :func:`_label`). Returns the record written to
    ``foreign.json``, with ``invalid``: the answers VQA Lab could not read."""
    out = Path(out)
    _check_target(out)
    files, results_path = lmms_eval_files(output)
    results = read_json(results_path, "lmms-eval's results file", RESULTS) if results_path else {}
    check_sampled(files, results, results_path, Path(output))
    files, others = ours(files, results)
    check_tasks(results, files, str(results_path))
    found = find_exports(sorted(files), results, exports)
    named: dict = {}
    for folder, info in found.values():
        if named.setdefault(info["name"], folder) != folder:
            raise ForeignError(
                f"two exports named {info['name']!r} ({named[info['name']]}, {folder}): export one "
                f"with another --name"
            )
    label = label or _label(found)
    preds, limits, counts, where = _predictions(files, found, results, label)
    unverified = check_datasets(named, found, preds, where)
    cfg, sources = imported_config(found, results, results_path, label, limits)
    record = clean(
        {
            **_record(output, files, results_path, results, named, label),
            "n_samples": counts,
            "logged_input": sum("input" in p.meta["lmms_eval"] for p in preds),
            "not_vqalab": sorted(others),
            "unverified_datasets": unverified,
        }
    )
    invalid = _built_aside(out, lambda folder: _write(folder, cfg, preds, record, sources))
    return {**record, "invalid": invalid}
