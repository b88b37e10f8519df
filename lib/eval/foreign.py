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

What lmms-eval sent is known as far as it logged it
(:func:`lib.eval.foreign_samples.logged_request`): the prompt text (``input``); the path its model
took (``results.json``'s ``model_backend``: ``chat`` sends the export's own message, images and text
in VQA Lab's order, ``simple`` lets the model wrap the text and place the images); the token limits
(each task's ``generation_kwargs``). Where the samples lack ``input`` or the results file is
missing, a changed reply cannot be put on the prompt or on the model alone: the comparison says so
(:data:`lib.eval.foreign_samples.NO_INPUT`, :data:`lib.eval.foreign_samples.NO_PATH`).

Finding the files is :mod:`lib.eval.foreign_files`, one sample :mod:`lib.eval.foreign_samples`,
the imported config :mod:`lib.eval.foreign_config`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from lib.core.schema import Prediction
from lib.eval.foreign_config import (
    HARNESS,
    generation_kwargs,
    imported_config,
    model_label,
    model_path,
)
from lib.eval.foreign_files import check_sampled, doc_ids, find_exports, ours
from lib.eval.foreign_samples import sample_prediction
from lib.eval.foreign_schema import (
    RESULTS,
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
    swap_in,
    write_json,
    write_jsonl,
)
from lib.io.folders import Legacy, NotOurFolder, check_ours, mark
from lib.io.provenance import write_provenance

FOREIGN = "foreign.json"  # an imported evaluation folder's record: what was imported from where
KIND = "lmms-eval import"  # the kind its marker names (lib.io.folders): no other folder is written into
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


def _predictions(
    files: dict, found: dict, results: dict, label: str
) -> tuple[list[Prediction], dict, dict, dict]:
    """Every sample as a :class:`Prediction` (checked against its export's docs, each item once),
    the token limit of each VQA Lab task, the samples per lmms-eval task, and where each item's
    sample is (``FILE:LINE`` by dataset, task and id)."""
    preds, limits, seen, counts = [], {}, {}, {}
    for lmms_task, path in sorted(files.items()):
        folder, info = found[lmms_task]
        ids, generation = doc_ids(folder), generation_kwargs(results, lmms_task)
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
        "path": model_path(results),
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
    them; ``label``: the model's label (default :func:`lib.eval.foreign_config.model_label`). Returns the record written to
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
    label = label or model_label(found)
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
