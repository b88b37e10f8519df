"""Hand a VQA Lab dataset to the evaluation harnesses researchers already run.

    python -m lib.export lmms-eval --dataset DIR --out TASKDIR [--name NAME] [--tasks mcq ...]
    python -m lib.export tsv --dataset DIR --out FILE.tsv      # VLMEvalKit's base64-image TSV

``lmms-eval`` writes a task folder lmms-eval loads with ``--include_path TASKDIR``: per VQA Lab
task in the dataset a YAML (a local JSON dataset, ``generate_until``, greedy, VQA Lab's token
limit) and its ``docs_<task>.jsonl``, a group YAML naming them all, ``utils.py`` (the hooks:
``doc_to_visual``, ``doc_to_text``, ``doc_to_messages``, ``doc_to_target``, ``process_results``
and one aggregation per metric) and ``vqalab.json`` (the dataset folder, the scoring settings, the
metrics and the provenance). The docs carry the prompts VQA Lab asks (zero-shot) and the items;
the aggregations score the replies with VQA Lab's own tasks (:func:`score_rows`), so a model run
through lmms-eval gets the numbers VQA Lab's stage 06 gives it unconstrained
(``constrain: false``), ``invalid_rate`` included.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

import yaml

from lib.io import export_tsv, load_items, write_json, write_jsonl
from lib.provenance import provenance
from lib.schema import Item, Prediction, Response
from lib.tasks import Scoring, get_task
from lib.tasks.base import QUESTION_FIRST

TEMPLATE = Path(__file__).parent / "data" / "lmms_eval" / "utils.py"


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
        preds.append(Prediction(item_id=it.id, model="lmms-eval", task=it.task, raw=raw, parsed=task.jsonable(parsed),
                                method=method, valid=valid))
    state = task.score(preds, items, scoring)
    rows = task.aggregate(preds, items, scoring, state).rows
    out = {r["metric"] if r["subset"] == "all" else f"{r['metric']}[{r['subset']}]": float(r["value"]) for r in rows}
    out["invalid_rate"] = sum(not p.valid for p in preds) / len(preds)
    return out


@lru_cache(maxsize=8)
def _docs(task_dir: str, task: str) -> dict[str, Item]:
    path = Path(task_dir) / f"docs_{_slug(task)}.jsonl"
    with path.open(encoding="utf-8") as f:
        return {d["id"]: Item.from_dict(json.loads(d["item"])) for d in map(json.loads, f)}


_scored: dict = {}


def score_rows(task_dir: str | Path, rows: list[dict]) -> dict[str, float]:
    """What the exported ``utils.py`` aggregations call: lmms-eval's per-doc rows (id, task, raw)
    scored as VQA Lab scores them (once per set of rows; every metric's aggregation asks)."""
    task_dir = str(Path(task_dir).resolve())
    key = (task_dir, tuple((r["task"], r["id"], r["raw"]) for r in rows))
    if key not in _scored:
        export = json.loads((Path(task_dir) / "vqalab.json").read_text())
        tasks = {r["task"] for r in rows}
        if len(tasks) != 1:
            raise ValueError(f"{task_dir}: rows of {sorted(tasks)} in one aggregation; each exported task scores its own")
        items = _docs(task_dir, tasks.pop())
        missing = [r["id"] for r in rows if r["id"] not in items]
        if missing:
            raise KeyError(f"{task_dir}: lmms-eval returned replies for ids not in the exported docs: {missing[:5]}")
        _scored.clear()
        _scored[key] = score_items([items[r["id"]] for r in rows], [r["raw"] for r in rows],
                                   Scoring(**{k: tuple(v) if isinstance(v, list) else v
                                              for k, v in export["scoring"].items()}))
    return _scored[key]


def export_lmms_eval(dataset: str | Path, out: str | Path, name: str | None = None, tasks: list[str] | None = None,
                     max_new_tokens: int = 32, question_first: bool = QUESTION_FIRST,
                     scoring: Scoring | None = None) -> dict:
    """Write the lmms-eval task folder of ``dataset`` (see the module docstring); returns its
    ``vqalab.json``. The metrics each task reports are found by scoring its gold answers."""
    dataset, out = Path(dataset).resolve(), Path(out)
    scoring = scoring or Scoring()
    name = _slug(name or dataset.name)
    items = [it for it in load_items(dataset) if not tasks or it.task in tasks]
    if not items:
        raise ValueError(f"{dataset}/items.jsonl: no items{' of tasks ' + str(tasks) if tasks else ''} to export")
    by_task: dict[str, list[Item]] = {}
    for it in items:
        by_task.setdefault(it.task, []).append(it)
    out.mkdir(parents=True, exist_ok=True)
    metrics, gold, names = {}, {}, []
    for task_name, its in by_task.items():
        task = get_task(task_name)
        docs = []
        for it in its:
            p = task.prompt(it, dataset)
            docs.append({"id": it.id, "task": it.task, "prompt": p.text, "images": list(it.images),
                         "target": task.target_text(it), "item": json.dumps(it.to_dict())})
        slug = _slug(task_name)
        write_jsonl(out / f"docs_{slug}.jsonl", docs)
        gold[task_name] = score_items(its, [d["target"] for d in docs], scoring)
        metrics[task_name] = sorted(gold[task_name])
        lmms_task = f"vqalab_{name}_{slug}"
        names.append(lmms_task)
        config = {"task": lmms_task, "dataset_path": "json",
                  "dataset_kwargs": {"data_files": {"test": str((out / f"docs_{slug}.jsonl").resolve())}},
                  "test_split": "test", "output_type": "generate_until",
                  "doc_to_visual": "!function utils.doc_to_visual", "doc_to_text": "!function utils.doc_to_text",
                  "doc_to_messages": "!function utils.doc_to_messages", "doc_to_target": "!function utils.doc_to_target",
                  "process_results": "!function utils.process_results",
                  "generation_kwargs": {"max_new_tokens": max_new_tokens, "temperature": 0, "do_sample": False,
                                        "num_beams": 1},
                  "metric_list": [{"metric": m, "aggregation": f"!function utils.aggregate_{_slug(m)}",
                                   "higher_is_better": m != "invalid_rate"} for m in metrics[task_name]],
                  "metadata": {"version": 1, "vqalab_task": task_name}}
        _write_yaml(out / f"{lmms_task}.yaml", config)
    _write_yaml(out / f"vqalab_{name}.yaml", {"group": f"vqalab_{name}", "task": names})
    every = sorted({m for ms in metrics.values() for m in ms})
    hooks = TEMPLATE.read_text() + "".join(f"\n\ndef aggregate_{_slug(m)}(rows):\n    return _aggregate({m!r}, rows)\n"
                                           for m in every)
    (out / "utils.py").write_text(hooks)
    info = {"dataset": str(dataset), "name": name, "tasks": names, "question_first": question_first,
            "max_new_tokens": max_new_tokens, "metrics": metrics, "gold_scores": gold,
            "scoring": {k: list(v) if isinstance(v, tuple) else v for k, v in scoring.__dict__.items()},
            "n_items": {t: len(its) for t, its in by_task.items()},
            "provenance": provenance("export lmms-eval", {"dataset": str(dataset), "tasks": tasks or sorted(by_task),
                                                          "max_new_tokens": max_new_tokens})}
    write_json(out / "vqalab.json", info)
    return info


def _write_yaml(path: Path, config: dict) -> None:
    """YAML with lmms-eval's ``!function`` tags unquoted (PyYAML would quote them as strings)."""
    text = yaml.safe_dump(config, sort_keys=False, width=1000)
    path.write_text(re.sub(r"'(!function [\w.]+)'", r"\1", text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.export", description="Export a VQA Lab dataset to other harnesses.")
    sub = ap.add_subparsers(dest="format", required=True)
    lm = sub.add_parser("lmms-eval", help="an lmms-eval task folder (YAML + utils.py + docs)")
    lm.add_argument("--dataset", required=True, help="a VQA Lab dataset folder (items.jsonl, images)")
    lm.add_argument("--out", required=True, help="the task folder to write (lmms-eval --include_path)")
    lm.add_argument("--name", help="the task name's middle part (default: the dataset folder's name)")
    lm.add_argument("--tasks", nargs="*", help="only these VQA Lab tasks")
    lm.add_argument("--max-new-tokens", type=int, default=32)
    lm.add_argument("--question-first", action="store_true", help="the question before the images")
    tsv = sub.add_parser("tsv", help="a VLMEvalKit TSV (base64 images)")
    tsv.add_argument("--dataset", required=True)
    tsv.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    try:
        if args.format == "tsv":
            n = export_tsv(args.dataset, load_items(args.dataset), args.out)
            print(json.dumps({"out": args.out, "items": n}))
        else:
            info = export_lmms_eval(args.dataset, args.out, args.name, args.tasks, args.max_new_tokens,
                                    args.question_first or QUESTION_FIRST)
            print(json.dumps({"out": args.out, "tasks": info["tasks"], "items": info["n_items"]}))
    except (FileNotFoundError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
