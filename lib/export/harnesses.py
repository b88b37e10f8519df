"""Hand a VQA Lab dataset to the evaluation harnesses researchers already run.

    python -m lib.export lmms-eval --dataset DIR --out TASKDIR [--name NAME] [--tasks mcq ...]
                                   [--profile P [--model LABEL]] [--max-new-tokens N] [--[no-]question-first]
    python -m lib.export tsv --dataset DIR --out FILE.tsv      # VLMEvalKit's base64-image TSV

``lmms-eval`` writes a task folder lmms-eval loads with ``--include_path TASKDIR``: per VQA Lab
task in the dataset a YAML (a local JSON dataset, ``generate_until``, greedy, the answer's token
limit) and its ``docs_<task>.jsonl``, ``utils.py`` (the hooks: ``doc_to_visual``, ``doc_to_text``,
``doc_to_messages``, ``doc_to_target``, ``process_results`` and one aggregation per metric) and
``vqalab.json`` (the dataset folder and the SHA-256 of its ``items.jsonl``, which the import
checks, the scoring settings, the metrics and the provenance). Every
task YAML carries the ``tag`` ``vqalab_<name>``, so ``--tasks vqalab_<name>`` runs them all: lmms-eval
0.7 keeps ``group`` for group configs that aggregate over their subtasks and advises ``tag`` where
nothing is aggregated (VQA Lab's tasks have different metrics; there is no mean to take). The docs
carry the prompts VQA Lab asks (zero-shot) and the items; the aggregations score the replies with
VQA Lab's own tasks (:func:`score_rows`), so a model run through lmms-eval gets the numbers VQA
Lab's stage 06 gives it unconstrained (``constrain: false``), ``invalid_rate`` included.

The settings that change what a model answers come from the evaluation they are compared with:
``--profile P`` resolves stage 06's config of profile ``P`` (as the pipeline does) and takes its
token limits (``max_new_tokens``, and each task's own under ``tasks``), its scoring settings and the question
order of one of its models (``--model LABEL``, default the first of ``models``: its spec's
``question_first``). ``--max-new-tokens`` and ``--question-first`` / ``--no-question-first`` given
on the command line win. Without ``--profile``: 32 new tokens, images before the question, the
default scoring.

The metric list of a task YAML is fixed at export (from the whole dataset); a metric without rows
in the evaluated docs - a subset ``--limit`` left out - reports NaN: lmms-eval needs a number, and
0 would read as a score. Stage 06 has no row for such a subset.

Which hook lmms-eval calls decides whether the prompts are stage 06's. Models with a chat class
(``llava_hf`` among them) take ``doc_to_messages``: VQA Lab's own message, images and text in VQA
Lab's order, rendered by the model's chat template, as stage 06 sends it. The "simple" path
(``doc_to_text``; a model without a chat class, or ``--force_simple``) gets the bare prompt and the
model adds its image tokens where it puts them (``llava_hf``: ``<image>`` and a newline before the
text, whatever the question order), so its prompts, replies and numbers differ from stage 06's;
compare models on the chat path. lmms-eval strips every reply before ``process_results``; VQA Lab
reads an answer without its surrounding whitespace, so that moves no score.

Where lmms-eval runs, VQA Lab must be importable (``pip install --no-deps -e <vqa-lab>``) with the
packages its scoring imports: the ``lmms-eval`` extra of ``pyproject.toml`` (``pip install
"vqalab[lmms-eval]"``, or its list beside a ``--no-deps`` install; ``services/lmms-eval-venv.sh``
builds such a venv with lmms-eval itself).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import yaml

from lib.config import ParamsError, resolve
from lib.core.paths import DATA
from lib.core.schema import Item, Prediction, Response
from lib.eval.score import score_group
from lib.eval.settings import EvalConfig
from lib.formats import export_tsv
from lib.io import file_sha256, load_items, share_strings, write_json, write_jsonl
from lib.io.provenance import provenance
from lib.tasks import Scoring
from lib.tasks.registry import get_task
from lib.tasks.task import QUESTION_FIRST, wants_question_first

TEMPLATE = DATA / "lmms_eval" / "utils.py"
ANSWER_TOKENS = (
    EvalConfig.max_new_tokens
)  # without a profile: stage 06's own default, from its config class


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()


def score_items(items: list[Item], raws: list[str], scoring: Scoring) -> dict[str, float]:
    """The metrics VQA Lab's stage 06 reports for one task's items answered by ``raws`` (free text,
    read as unconstrained answers): ``metric`` for the whole set, ``metric[subset]`` for a subset
    (Scrapbook's forms and filters), plus ``invalid_rate``."""
    if not items:
        return {}
    task = get_task(items[0].task)
    preds = []
    for it, raw in zip(items, raws):
        parsed, method, valid = task.read_response(it, Response(text=raw, method="free"))
        preds.append(
            Prediction(
                item_id=it.id,
                model="lmms-eval",
                task=it.task,
                raw=raw,
                parsed=task.reader.jsonable(parsed),
                method=method,
                valid=valid,
            )
        )
    rows = score_group(task, preds, items, scoring).tables().rows
    out = {
        r["metric"] if r["subset"] == "all" else f"{r['metric']}[{r['subset']}]": float(r["value"])
        for r in rows
    }
    out["invalid_rate"] = sum(not p.valid for p in preds) / len(preds)
    return out


@lru_cache(maxsize=8)
def _docs(task_dir: str, task: str) -> dict[str, Item]:
    path = Path(task_dir) / f"docs_{_slug(task)}.jsonl"
    with path.open(encoding="utf-8") as f:
        return {
            d["id"]: Item.from_dict(share_strings(json.loads(d["item"]), Item.REPEATED))
            for d in map(json.loads, f)
        }


_scored: dict = {}


def score_rows(task_dir: str | Path, rows: list[dict]) -> dict[str, float]:
    """What the exported ``utils.py`` aggregations call: lmms-eval's per-doc rows (id, task, raw)
    scored as VQA Lab scores them (once per set of rows; every metric's aggregation asks). A metric
    with no rows here (a subset the evaluated docs lack) is absent: see :func:`metric_value`."""
    if not rows:
        return {}
    task_dir = str(Path(task_dir).resolve())
    key = (task_dir, tuple((r["task"], r["id"], r["raw"]) for r in rows))
    if key not in _scored:
        export = json.loads((Path(task_dir) / "vqalab.json").read_text())
        tasks = {r["task"] for r in rows}
        if len(tasks) != 1:
            raise ValueError(
                f"{task_dir}: rows of {sorted(tasks)} in one aggregation; each exported task scores its own"
            )
        items = _docs(task_dir, tasks.pop())
        missing = [r["id"] for r in rows if r["id"] not in items]
        if missing:
            raise KeyError(
                f"{task_dir}: lmms-eval returned replies for ids not in the exported docs: {missing[:5]}"
            )
        _scored.clear()
        _scored[key] = score_items(
            [items[r["id"]] for r in rows], [r["raw"] for r in rows], Scoring(**export["scoring"])
        )
    return _scored[key]


def metric_value(task_dir: str | Path, metric: str, rows: list[dict]) -> float:
    """One exported aggregation: ``metric`` of ``rows`` as :func:`score_rows` gives it, NaN when
    the rows have none (lmms-eval wants a number; NaN says "not measured" where 0 would be a score)."""
    return score_rows(task_dir, rows).get(metric, math.nan)


def profile_settings(profile: str, model: str | None = None) -> dict:
    """What an export takes from stage 06's config of ``profile``: ``max_new_tokens``,
    ``task_max_new_tokens`` (the limits its tasks' options set), ``scoring`` and ``question_first``
    of the model labelled ``model`` (default: the config's first model), plus ``profile`` and ``model``."""
    cfg = resolve(EvalConfig, profile).cfg
    label = model or next(iter(cfg.models))
    if label not in cfg.models:
        raise ParamsError(
            f"--model {label!r}: profile {profile} evaluates no such model (models of its 06_evaluate: "
            f"{', '.join(cfg.models)})"
        )
    return {
        "profile": profile,
        "model": label,
        "max_new_tokens": cfg.max_new_tokens,
        "task_max_new_tokens": {
            name: o.max_new_tokens
            for name, o in cfg.options.items()
            if o.max_new_tokens is not None
        },
        "scoring": cfg.scoring(),
        "question_first": wants_question_first(cfg.models[label]),
    }


def _task_config(
    lmms_task: str, tag: str, docs: Path, limit: int, metrics: list[str], task_name: str
) -> dict:
    """One lmms-eval task's YAML: its docs file, the hooks of ``utils.py``, greedy decoding up to
    ``limit`` tokens and an aggregation per metric."""
    return {
        "task": lmms_task,
        "tag": tag,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(docs.resolve())}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_visual": "!function utils.doc_to_visual",
        "doc_to_text": "!function utils.doc_to_text",
        "doc_to_messages": "!function utils.doc_to_messages",
        "doc_to_target": "!function utils.doc_to_target",
        "process_results": "!function utils.process_results",
        "generation_kwargs": {
            "max_new_tokens": limit,
            "temperature": 0,
            "do_sample": False,
            "num_beams": 1,
        },
        "metric_list": [
            {
                "metric": m,
                "aggregation": f"!function utils.aggregate_{_slug(m)}",
                "higher_is_better": m != "invalid_rate",
            }
            for m in metrics
        ],
        "metadata": {"version": 1, "vqalab_task": task_name},
    }


def _task_docs(task, items: list[Item], dataset: Path) -> list[dict]:
    """The lmms-eval docs of one task's items: the prompt stage 06 builds, the images, the target
    text and the whole item (which the exported scoring reads)."""
    docs = []
    for it in items:
        p = task.prompt(it, dataset)
        docs.append(
            {
                "id": it.id,
                "task": it.task,
                "prompt": p.text,
                "images": list(it.images),
                "target": task.reader.target_text(it),
                "item": json.dumps(it.to_dict()),
            }
        )
    return docs


def _write_task(
    out: Path, tag: str, task_name: str, items: list[Item], dataset: Path, scoring, limit: int
) -> tuple[str, dict]:
    """One VQA Lab task's docs and YAML written into ``out``; returns its lmms-eval task name and
    the scores of its gold answers (whose keys are the metrics it reports)."""
    docs = _task_docs(get_task(task_name), items, dataset)
    slug = _slug(task_name)
    write_jsonl(out / f"docs_{slug}.jsonl", docs)
    gold = score_items(items, [d["target"] for d in docs], scoring)
    lmms_task = f"{tag}_{slug}"
    config = _task_config(
        lmms_task, tag, out / f"docs_{slug}.jsonl", limit, sorted(gold), task_name
    )
    _write_yaml(out / f"{lmms_task}.yaml", config)
    return lmms_task, gold


def _write_hooks(out: Path, metrics: dict) -> None:
    """``utils.py``: the template's hooks and one aggregation function per metric reported."""
    every = sorted({m for ms in metrics.values() for m in ms})
    hooks = TEMPLATE.read_text() + "".join(
        f"\n\ndef aggregate_{_slug(m)}(rows):\n    return _aggregate({m!r}, rows)\n" for m in every
    )
    (out / "utils.py").write_text(hooks)


def _items_by_task(dataset: Path, tasks: list[str] | None) -> dict[str, list[Item]]:
    """The dataset's items (of ``tasks`` only, when given) by task; none to export is an error."""
    items = [it for it in load_items(dataset) if not tasks or it.task in tasks]
    if not items:
        raise ValueError(
            f"{dataset}/items.jsonl: no items{' of tasks ' + str(tasks) if tasks else ''} to export"
        )
    by_task: dict[str, list[Item]] = {}
    for it in items:
        by_task.setdefault(it.task, []).append(it)
    return by_task


def export_lmms_eval(
    dataset: str | Path,
    out: str | Path,
    name: str | None = None,
    tasks: list[str] | None = None,
    max_new_tokens: int = ANSWER_TOKENS,
    question_first: bool = QUESTION_FIRST,
    scoring: Scoring | None = None,
    task_max_new_tokens: dict[str, int] | None = None,
    settings_from: dict | None = None,
) -> dict:
    """Write the lmms-eval task folder of ``dataset`` (see the module docstring); returns its
    ``vqalab.json``. The metrics each task reports are found by scoring its gold answers. A task's
    token limit is ``task_max_new_tokens[task]``, else ``max_new_tokens`` (as stage 06's
    ``answer_tokens``); ``settings_from`` (profile and model) is recorded in ``vqalab.json``."""
    dataset, out = Path(dataset).resolve(), Path(out)
    scoring = scoring or Scoring()
    task_max_new_tokens = task_max_new_tokens or {}
    name = _slug(name or dataset.name)
    # before reading: the import refuses the set changed since
    digest = file_sha256(dataset / "items.jsonl")
    by_task = _items_by_task(dataset, tasks)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"vqalab_{name}"
    _remove_old_group(out / f"{tag}.yaml", tag)
    metrics, gold, names, limits = {}, {}, [], {}
    for task_name, its in by_task.items():
        limits[task_name] = task_max_new_tokens.get(task_name, max_new_tokens)
        lmms_task, gold[task_name] = _write_task(
            out, tag, task_name, its, dataset, scoring, limits[task_name]
        )
        metrics[task_name] = sorted(gold[task_name])
        names.append(lmms_task)
    _write_hooks(out, metrics)
    info = {
        "dataset": str(dataset),
        "items_sha256": digest,
        "name": name,
        "tag": tag,
        "tasks": names,
        "question_first": question_first,
        "max_new_tokens": limits,
        "settings_from": settings_from,
        "metrics": metrics,
        "gold_scores": gold,
        "scoring": asdict(scoring),
        "n_items": {t: len(its) for t, its in by_task.items()},
        "provenance": provenance(
            "export lmms-eval",
            {
                "dataset": str(dataset),
                "tasks": tasks or sorted(by_task),
                "max_new_tokens": limits,
                "question_first": question_first,
                "settings_from": settings_from,
            },
        ),
    }
    write_json(out / "vqalab.json", info)
    return info


def _remove_old_group(path: Path, tag: str) -> None:
    """Delete the group YAML an older export wrote for ``tag`` (lmms-eval would register the name
    as that group instead of the tag); a file of anyone else stays."""
    try:
        old = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return
    if isinstance(old, dict) and set(old) == {"group", "task"} and old["group"] == tag:
        path.unlink()


def _write_yaml(path: Path, config: dict) -> None:
    """YAML with lmms-eval's ``!function`` tags unquoted (PyYAML would quote them as strings)."""
    text = yaml.safe_dump(config, sort_keys=False, width=1000)
    path.write_text(re.sub(r"'(!function [\w.]+)'", r"\1", text))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m lib.export", description="Export a VQA Lab dataset to other harnesses."
    )
    sub = ap.add_subparsers(dest="format", required=True)
    lm = sub.add_parser("lmms-eval", help="an lmms-eval task folder (YAML + utils.py + docs)")
    lm.add_argument(
        "--dataset", required=True, help="a VQA Lab dataset folder (items.jsonl, images)"
    )
    lm.add_argument(
        "--out", required=True, help="the task folder to write (lmms-eval --include_path)"
    )
    lm.add_argument(
        "--name", help="the task name's middle part (default: the dataset folder's name)"
    )
    lm.add_argument("--tasks", nargs="*", help="only these VQA Lab tasks")
    lm.add_argument(
        "--profile",
        help="take the token limits, scoring and question order from this profile's stage 06",
    )
    lm.add_argument(
        "--model", help="the --profile model whose question order to use (default: its first)"
    )
    lm.add_argument(
        "--max-new-tokens",
        type=int,
        help=f"every task's answer token limit (default: the profile's, else {ANSWER_TOKENS})",
    )
    lm.add_argument(
        "--question-first",
        action=argparse.BooleanOptionalAction,
        help="the question before the images (default: the profile model's order, else images first)",
    )
    tsv = sub.add_parser("tsv", help="a VLMEvalKit TSV (base64 images)")
    tsv.add_argument("--dataset", required=True)
    tsv.add_argument("--out", required=True)
    return ap


def _lmms_eval_command(args) -> dict:
    """``lmms-eval``: the export, its settings from the command line over the profile's; what it
    prints."""
    if args.model and not args.profile:
        raise ValueError("--model names a model of a profile: give --profile too")
    settings = profile_settings(args.profile, args.model) if args.profile else {}
    limits = settings.get("task_max_new_tokens", {})
    if args.max_new_tokens is not None:  # said on the command line: every task
        limits = {}
    question_first = args.question_first
    if question_first is None:
        question_first = settings.get("question_first", QUESTION_FIRST)
    info = export_lmms_eval(
        args.dataset,
        args.out,
        args.name,
        args.tasks,
        args.max_new_tokens
        if args.max_new_tokens is not None
        else settings.get("max_new_tokens", ANSWER_TOKENS),
        question_first,
        settings.get("scoring"),
        limits,
        {k: settings[k] for k in ("profile", "model")} if settings else None,
    )
    return {
        "out": args.out,
        "tag": info["tag"],
        "tasks": info["tasks"],
        "items": info["n_items"],
        "question_first": info["question_first"],
        "max_new_tokens": info["max_new_tokens"],
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.format == "tsv":
            n = export_tsv(args.dataset, load_items(args.dataset), args.out)
            print(json.dumps({"out": args.out, "items": n}))
        else:
            print(json.dumps(_lmms_eval_command(args)))
    except (FileNotFoundError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
