"""Stage 06 · Evaluate: ask models the tasks' questions, read the answers honestly, score them.

    evaluate(config, out)                      # predictions, judgements, metrics, Scrapbook tables
    python -m lib.evaluate rescore --run RUN   # recompute every table from stored outputs, no model

Every model call goes through the call cache, so a killed evaluation resumes without repeating
finished calls, and rescoring needs no model at all. Answers are read as :mod:`lib.tasks` defines:
constrained decoding over the closed answer set where the task has one (and ``constrain`` is on),
robust parsing otherwise. What cannot be read stays in ``raw`` with ``valid=False`` and counts
as wrong in every denominator; ``n_invalid`` sits beside every metric.

Zero-shot chain of thought (``style="cot"``) is two calls, as in Kojima et al.: the prompt plus
"Let's think step by step." gives the reasoning (kept in ``meta.reasoning``), then the task's
answer trigger gives the answer, constrained like a zero-shot answer.

Outputs under ``outputs/<run>/06_evaluate/``: ``predictions.jsonl``, ``judgements.jsonl`` (LAVE),
``metrics.csv`` (model, dataset, task, style, subset, metric, value, ci_low, ci_high, n, n_invalid),
``levels.csv`` and ``errors.csv`` (Scrapbook, shaped like the paper's Tables 8-15), ``config.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from lib.io import load_items, read_jsonl, write_json, write_jsonl
from lib.metrics import classification as C
from lib.metrics import consistency as S
from lib.metrics import text as T
from lib.metrics.lave import judge as lave_judge
from lib.metrics.stats import bootstrap_ci, mean_ci
from lib.models import Constraint, Request, generate, load_model
from lib.models.base import ERROR, Response
from lib.schema import Item, Judgement, Prediction
from lib.tasks import LETTERS, STYLES, build_prompt, is_constrained, is_multi, prompts, read_response, target

TEXT_METRICS = ("bleu", "rouge_l", "meteor", "bertscore", "cider")
_TEXT_FNS = {"bleu": T.bleu, "rouge_l": T.rouge_l, "meteor": T.meteor, "bertscore": T.bertscore, "cider": T.cider}
OPEN_METRICS = ("exact_match", "anls", "vqa_accuracy")
LEVEL_COLUMNS = ["dataset", "style", "model", "level", "concepts", "concept", "type", "subgroup", "form", "n", "correct",
                 "accuracy", "passed"]
ERROR_COLUMNS = ["dataset", "style", "model", "filter", "unit", "category", "count", "share", "correct", "accuracy"]


@dataclass
class EvalConfig:
    """What to evaluate: dataset folders by name, model specs by label, prompt styles, settings."""

    datasets: dict[str, str]
    models: dict[str, dict]
    styles: list[str] = field(default_factory=lambda: ["zero_shot"])
    tasks: list[str] = field(default_factory=list)  # empty: every task found in the datasets
    constrain: bool = True  # constrained decoding over closed answer sets where the backend allows it
    max_new_tokens: int = 32
    cot_max_new_tokens: int = 128
    judge: dict | None = None  # LAVE judge model spec (None: no LAVE)
    judge_tasks: list[str] = field(default_factory=lambda: ["vqa.open"])
    judge_max_new_tokens: int = 96
    text_metrics: list[str] = field(default_factory=lambda: list(TEXT_METRICS))
    bertscore_model: str | None = None  # HF id or path; None = the local MiniLM
    max_items: int = 0  # per dataset (0: all); Scrapbook samples whole images so versions stay together
    n_resamples: int = 1000
    seed: int = 0

    def __post_init__(self):
        bad = [s for s in self.styles if s not in STYLES]
        if bad:
            raise ValueError(f"EvalConfig.styles: unknown style(s) {bad}; choose from {STYLES}")
        bad = [m for m in self.text_metrics if m not in _TEXT_FNS]
        if bad:
            raise ValueError(f"EvalConfig.text_metrics: unknown metric(s) {bad}; choose from {TEXT_METRICS}")


# --- items ----------------------------------------------------------------------------------------

def resolve_folder(run: str, folder: str) -> str:
    """``stage:04_scrapbook/dataset`` -> that folder inside ``outputs/<run>/``; other paths unchanged."""
    from lib.paths import stage_dir

    if folder.startswith("stage:"):
        stage, _, sub = folder[len("stage:"):].partition("/")
        return str(stage_dir(run, stage, create=False) / sub)
    return folder


def resolve_spec(run: str, spec: dict) -> dict:
    """A model spec whose ``name`` may be a ``stage:...`` folder of this run (e.g. 05's weights)."""
    return {**spec, "name": resolve_folder(run, spec["name"])} if "name" in spec else dict(spec)



def load_eval_items(cfg: EvalConfig) -> dict[str, tuple[Path, list[Item]]]:
    """Each dataset's folder and items (filtered by task, sampled to ``max_items``)."""
    out = {}
    for name, folder in cfg.datasets.items():
        folder = Path(folder)
        if not (folder / "items.jsonl").exists():
            raise FileNotFoundError(f"dataset {name!r}: {folder}/items.jsonl not found (check the `datasets` parameter)")
        items = [it for it in load_items(folder) if not cfg.tasks or it.task in cfg.tasks]
        out[name] = (folder, sample_items(items, cfg.max_items, cfg.seed))
    return out


def sample_items(items: list[Item], max_items: int, seed: int) -> list[Item]:
    """At most ``max_items`` items, drawn with ``seed``. Scrapbook items are drawn by question - one
    query within one image chain, with every version (paraphrase x form) on every image of the
    chain, so the protocol's consistency and precedence checks stay whole - lowest levels first
    (level gating starts from level 1), randomly within a level."""
    if not max_items or len(items) <= max_items:
        return items
    rng = np.random.default_rng(seed)
    if all(it.task == "scrapbook.qa" for it in items):
        groups: dict = defaultdict(list)
        for it in items:
            groups[(tuple(it.meta.get("unit") or ()), S.query_key(it.meta["query"]))].append(it)
        keys = list(groups)
        order = sorted(range(len(keys)), key=lambda k, r=rng.random(len(keys)): (groups[keys[k]][0].meta["level"], r[k]))
        keep, n = set(), 0
        for k in order:
            chunk = groups[keys[k]]
            if n + len(chunk) > max_items:
                continue
            keep.update(it.id for it in chunk)
            n += len(chunk)
        return [it for it in items if it.id in keep]
    idx = sorted(rng.choice(len(items), size=max_items, replace=False))
    return [items[i] for i in idx]


# --- asking ---------------------------------------------------------------------------------------

def _content(text: str, images, question_first: bool) -> list[dict]:
    parts = [{"type": "image", "image": im} for im in images]
    return [{"type": "text", "text": text}] + parts if question_first else parts + [{"type": "text", "text": text}]


def _constraint(choices, constrain: bool, model) -> Constraint | None:
    if not (constrain and choices) or getattr(model, "supports_choices", True) is False:
        return None
    return Constraint(choices=choices)


def predict(label: str, model, items: list[Item], root: Path, style: str, cfg: EvalConfig, store=None,
            progress: bool = True, dataset: str = "") -> list[Prediction]:
    """One Prediction per item (raw output kept, answer read per the task, method recorded)."""
    from lib.store import call_key

    qf = bool(model.spec.get("question_first", False))
    prompts_ = [build_prompt(it, root) for it in items]
    first = [Request([{"role": "user", "content": _content(p.text, p.images, qf)}], max_new_tokens=cfg.max_new_tokens,
                     constraint=_constraint(p.choices, cfg.constrain, model), seed=cfg.seed) for p in prompts_]
    if style == "cot":
        trigger = prompts()["cot"]["reasoning_trigger"]
        reasoning_reqs = [Request([{"role": "user", "content": _content(f"{p.text}\n{trigger}", p.images, qf)}],
                                  max_new_tokens=cfg.cot_max_new_tokens, seed=cfg.seed) for p in prompts_]
        reasoning = generate(model, reasoning_reqs, store=store, progress=progress, desc=f"{label} reasoning")
        final = [Request(r.messages + [{"role": "assistant", "content": [{"type": "text", "text": z.text}]},
                                       {"role": "user", "content": [{"type": "text", "text": p.answer_trigger}]}],
                         max_new_tokens=cfg.max_new_tokens, constraint=_constraint(p.choices, cfg.constrain, model),
                         seed=cfg.seed) for r, z, p in zip(reasoning_reqs, reasoning, prompts_)]
    else:
        reasoning, final = [None] * len(items), first
    responses = generate(model, final, store=store, progress=progress, desc=f"{label} {style}")
    fp = model.fingerprint
    preds = []
    for it, req, resp, why in zip(items, final, responses, reasoning):
        meta = {"dataset": dataset or Path(root).name}
        if why is not None:
            meta["reasoning"] = why.text
        error = (why.error if why is not None else None) or resp.error  # a failed reasoning call fails the answer
        if error:
            parsed, method, valid = None, ERROR, False
            meta["error"] = error
        else:
            parsed, method, valid = read_response(it, resp)
        preds.append(Prediction(item_id=it.id, model=label, task=it.task, raw=resp.text, parsed=_jsonable(parsed),
                                style=style, method=method, valid=valid, prompt_tokens=resp.prompt_tokens,
                                completion_tokens=resp.completion_tokens, latency_s=resp.latency_s,
                                cost_usd=resp.cost_usd, call_key=call_key(fp, req), meta=meta))
    return preds


def _jsonable(value):
    return sorted(value) if isinstance(value, frozenset) else value


# --- scoring (no model) ---------------------------------------------------------------------------

def score_predictions(items: dict[str, Item], preds: list[Prediction], cfg: EvalConfig,
                      frames: dict | None = None) -> list[Prediction]:
    """Fill ``correct`` and ``scores`` of every prediction from its stored output (re-parsed, so a
    parser fix applies on rescoring). Invalid answers score 0 / wrong. The Scrapbook groups' scored
    frames are put in ``frames`` (keyed like the groups) so the tables reuse them."""
    groups = defaultdict(list)
    for p in preds:
        if p.item_id not in items:
            raise KeyError(f"prediction for item {p.item_id!r} ({p.task}) has no item in the evaluated datasets")
        if p.method != ERROR and not is_constrained(p.method):
            parsed, p.method, p.valid = read_response(items[p.item_id], Response(text=p.raw, method="free"))
            p.parsed = _jsonable(parsed)
        groups[(p.model, p.meta.get("dataset", ""), p.task, p.style)].append(p)
    frames = frames if frames is not None else {}
    for key, group in groups.items():
        task = key[2]
        its = [items[p.item_id] for p in group]
        if task == "mcq":
            for p, it in zip(group, its):
                gold = set(it.answer)
                if is_multi(it):
                    pred = None if p.parsed is None else set(p.parsed)
                else:
                    pred = None if p.parsed is None else {LETTERS.index(p.parsed)}
                p.scores = {"exact": float(pred is not None and pred == gold), "jaccard": C.jaccard(gold, pred)}
                p.correct = bool(p.scores["exact"])
        elif task in ("yesbut.detection", "yesbut.completion"):
            for p, it in zip(group, its):
                p.correct = p.parsed == target(it)
                p.scores = {"accuracy": float(p.correct)}
        elif task in ("yesbut.understanding", "vqa.open"):
            cands = [p.parsed if p.valid else "" for p in group]
            refs = [target(it) for it in its]
            names = list(cfg.text_metrics) if task == "yesbut.understanding" else list(OPEN_METRICS)
            table = {}
            for name in names:
                if name == "bertscore":
                    table[name] = T.bertscore(cands, refs, model=cfg.bertscore_model)
                else:
                    table[name] = (_TEXT_FNS.get(name) or getattr(T, name))(cands, refs)
            for i, p in enumerate(group):
                p.scores = {k: (float(v[i]) if p.valid else 0.0) for k, v in table.items()}
                if task == "vqa.open":
                    p.correct = bool(p.scores["exact_match"])
        elif task == "scrapbook.qa":
            frame = frames[key] = S.score_versions(scrapbook_frame(group, its))
            for p, cat, ok, strict in zip(group, frame["category"], frame["correct"], frame["correct_strict"]):
                p.correct = bool(ok)
                p.scores = {"correct": float(ok), "correct_strict": float(strict)}
                p.meta["category"] = cat
    return preds


def answer_spaces(items: list[Item]) -> dict:
    """Each Scrapbook question kind's answer vocabulary: the alternatives its enumerated form lists
    (union over the dataset); kinds without an enumerated question use the expected answers seen."""
    spaces: dict = defaultdict(set)
    for it in items:
        kind = (it.meta["type"], it.meta["query"].get("ask"))
        spaces[kind].update(it.meta.get("alternatives") or [a for a in it.answer if a != S.UNK])
    return {k: tuple(sorted(v)) for k, v in spaces.items()}


def scrapbook_frame(preds: list[Prediction], items: list[Item], spaces: dict | None = None) -> pd.DataFrame:
    spaces = spaces or answer_spaces(items)
    rows = []
    for p, it in zip(preds, items):
        m = it.meta
        rows.append({"model": f"{p.model} [{p.style}]", "item_id": it.id, "image": m["image"], "parent": m.get("parent"),
                     "query": S.query_key(m["query"]), "type": m["type"], "form": m["form"], "level": m["level"],
                     "concepts": tuple(m["concepts"]), "subgroup": m["subgroup"], "absurd": bool(m["absurd"]),
                     "expected": it.answer[0], "output": None if p.method == ERROR else (p.parsed if p.valid else p.raw),
                     "space": spaces[(m["type"], m["query"].get("ask"))]})
    return pd.DataFrame(rows)


def _row(model, dataset, task, style, subset, metric, values_or_stat, n, n_invalid, ci=None, cfg=None) -> dict:
    if ci is None:
        value, low, high = mean_ci(values_or_stat, **({"n_resamples": cfg.n_resamples, "seed": cfg.seed} if cfg else {}))
    else:
        value, low, high = ci
    return {"model": model, "dataset": dataset, "task": task, "style": style, "subset": subset, "metric": metric, "value": value,
            "ci_low": low, "ci_high": high, "n": n, "n_invalid": n_invalid}


def metrics_table(items: dict[str, Item], preds: list[Prediction], judgements: list[Judgement],
                  cfg: EvalConfig, frames: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(metrics, levels, errors) from scored predictions and LAVE judgements (``frames``: the Scrapbook
    frames :func:`score_predictions` made, reused instead of scoring those answers again)."""
    frames = frames or {}
    rows, level_frames, error_frames = [], [], []

    def row(*args, ci=None) -> dict:
        return _row(*args, ci=ci, cfg=cfg)

    groups = defaultdict(list)
    for p in preds:
        groups[(p.model, p.meta.get("dataset", ""), p.task, p.style)].append(p)
    lave = {(j.model, j.meta.get("dataset", ""), j.item_id, j.meta.get("style", "zero_shot")): j for j in judgements}
    for (model, dataset, task, style), group in sorted(groups.items()):
        its = [items[p.item_id] for p in group]
        n, n_inv = len(group), sum(not p.valid for p in group)
        rows.append(row(model, dataset, task, style, "all", "invalid_rate", [float(not p.valid) for p in group], n, n_inv))
        if task == "mcq":
            types = [it.meta.get("specific_type", "all") for it in its]
            for metric in ("exact", "jaccard"):
                vals = [p.scores[metric] for p in group]
                rows.append(row(model, dataset, task, style, "all", f"{metric}_micro", vals, n, n_inv))
                stat, arrays = C.macro_over_types_statistic(vals, types)
                rows.append(row(model, dataset, task, style, "all", f"{metric}_macro", None, n, n_inv,
                                 ci=bootstrap_ci(stat, arrays, cfg.n_resamples, seed=cfg.seed)))
                for t in sorted(set(types)):
                    sub = [v for v, tt in zip(vals, types) if tt == t]
                    sub_inv = sum(not p.valid for p, tt in zip(group, types) if tt == t)
                    rows.append(row(model, dataset, task, style, t, metric, sub, len(sub), sub_inv))
        elif task == "yesbut.detection":
            gold = [target(it) for it in its]
            pred = [p.parsed if p.valid else None for p in group]
            rows.append(row(model, dataset, task, style, "all", "accuracy", [p.scores["accuracy"] for p in group], n, n_inv))
            for metric, labels in (("f1", ["Y"]), ("macro_f1", ["Y", "N"])):
                stat, arrays = C.f1_statistic(gold, pred, labels)
                rows.append(row(model, dataset, task, style, "all", metric, None, n, n_inv,
                                 ci=bootstrap_ci(stat, arrays, cfg.n_resamples, seed=cfg.seed)))
        elif task == "yesbut.completion":
            rows.append(row(model, dataset, task, style, "all", "accuracy", [p.scores["accuracy"] for p in group], n, n_inv))
        elif task in ("yesbut.understanding", "vqa.open"):
            key = "part" if task == "yesbut.understanding" else None
            subsets = {"all": list(range(n))}
            if key:
                for i, it in enumerate(its):
                    subsets.setdefault(it.meta.get(key, "all"), []).append(i)
                    if "stage" in it.meta:
                        subsets.setdefault(f"{it.meta.get(key)}/stage {it.meta['stage']}", []).append(i)
            for subset, idx in subsets.items():
                for metric in group[0].scores:
                    vals = [group[i].scores[metric] for i in idx]
                    rows.append(row(model, dataset, task, style, subset, metric, vals, len(idx),
                                     sum(not group[i].valid for i in idx)))
            js = [lave.get((model, dataset, p.item_id, style)) for p in group]
            if any(j is not None for j in js):
                judged = [j for j in js if j is not None]
                # an unread rating counts as 0 so the judge's failures stay visible (n_invalid is the judge's)
                rows.append(row(model, dataset, task, style, "all", "lave", [j.score if j.valid else 0.0 for j in judged],
                                 len(judged), sum(not j.valid for j in judged)))
        elif task == "scrapbook.qa":
            key = (model, dataset, task, style)
            frame = frames[key] if key in frames else S.score_versions(scrapbook_frame(group, its))
            qs = S.questions(frame)
            for form, sub in frame.groupby("form"):
                rows.append(row(model, dataset, task, style, f"form={form}", "accuracy", sub["correct"].astype(float).tolist(),
                                 len(sub), int(sum(not group[i].valid for i in sub.index))))
            for filt, q in (("non-absurd", qs[~qs["absurd"]]), ("full", qs)):
                for metric, col in (("accuracy_all_forms", "correct_all"), ("accuracy_all_forms_strict", "correct_all_strict"),
                                    ("consistent_rate", "consistent")):
                    rows.append(row(model, dataset, task, style, filt, metric, q[col].astype(float).tolist(), len(q), n_inv))
            levels = S.levels(frame)
            errors = S.error_table(frame, qs)
            overall = S.overall_table(frame, qs)
            for df in (levels, errors, overall):
                df.insert(0, "style", style)
                df.insert(0, "dataset", dataset)
                df["model"] = model
            level_frames.append(levels)
            error_frames.append(pd.concat([errors, overall.rename(columns={"questions": "count"}).assign(
                unit="questions", category="overall")], ignore_index=True))
    metrics = pd.DataFrame(rows, columns=["model", "dataset", "task", "style", "subset", "metric", "value", "ci_low",
                                          "ci_high", "n", "n_invalid"])
    levels = pd.concat(level_frames, ignore_index=True) if level_frames else pd.DataFrame(columns=LEVEL_COLUMNS)
    errors = pd.concat(error_frames, ignore_index=True) if error_frames else pd.DataFrame(columns=ERROR_COLUMNS)
    return metrics, levels, errors


# --- the stage ------------------------------------------------------------------------------------

def evaluate(cfg: EvalConfig, out: str | Path, store=None, progress: bool = True) -> dict:
    """Run every model on every dataset in every style, judge open answers, score, write outputs."""
    from lib.store import CallStore

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = store if store is not None else CallStore.default()
    data = load_eval_items(cfg)
    write_json(out / "config.json", {**asdict(cfg), "datasets": {k: str(v) for k, v in cfg.datasets.items()}})
    preds, judgements = [], []
    start = time.perf_counter()
    for label, spec in cfg.models.items():
        model = load_model(spec)
        for name, (root, items) in data.items():
            for style in cfg.styles:
                preds.extend(predict(label, model, items, root, style, cfg, store, progress, dataset=name))
    if cfg.judge:
        judge_model = load_model(cfg.judge)
        by_id = {it.id: it for _, items in data.values() for it in items}
        todo = [p for p in preds if p.task in cfg.judge_tasks]
        if todo:
            js = lave_judge(judge_model, [by_id[p.item_id].question for p in todo], [target(by_id[p.item_id]) for p in todo],
                            [p.raw for p in todo], store=store, item_ids=[p.item_id for p in todo],
                            max_new_tokens=cfg.judge_max_new_tokens, progress=progress)
            for j, p in zip(js, todo):
                j.model = p.model
                j.meta.update(style=p.style, dataset=p.meta.get("dataset", ""))
            judgements.extend(js)
    write_jsonl(out / "predictions.jsonl", (p.to_dict() for p in preds))
    write_jsonl(out / "judgements.jsonl", (j.to_dict() for j in judgements))
    seconds = time.perf_counter() - start
    summary = rescore_folder(out)
    summary.update({"predict_seconds": round(seconds, 2), "predictions": len(preds), "judgements": len(judgements)})
    write_json(out / "summary.json", summary)
    return summary


def rescore_folder(out: str | Path) -> dict:
    """Recompute predictions' scores, metrics.csv, levels.csv and errors.csv from the stored
    predictions, judgements and datasets of an evaluation folder - no model is loaded or called."""
    out = Path(out)
    cfg_path = out / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path} not found: {out} holds no finished evaluation to rescore")
    cfg = EvalConfig(**json.loads(cfg_path.read_text()))
    start = time.perf_counter()
    items = {it.id: it for _, its in load_eval_items(cfg).values() for it in its}
    preds = [Prediction.from_dict(d) for d in read_jsonl(out / "predictions.jsonl")]
    judgements = [Judgement.from_dict(d) for d in read_jsonl(out / "judgements.jsonl")] \
        if (out / "judgements.jsonl").exists() else []
    frames: dict = {}
    preds = score_predictions(items, preds, cfg, frames)
    metrics, levels, errors = metrics_table(items, preds, judgements, cfg, frames)
    write_jsonl(out / "predictions.jsonl", (p.to_dict() for p in preds))
    metrics.to_csv(out / "metrics.csv", index=False)
    levels.to_csv(out / "levels.csv", index=False)
    errors.to_csv(out / "errors.csv", index=False)
    return {"rescore_seconds": round(time.perf_counter() - start, 3), "metrics": len(metrics),
            "invalid": int(sum(not p.valid for p in preds))}


def invalid_summary(out: str | Path) -> pd.DataFrame:
    """Invalid answers per model, task and style: count, total, rate and the methods that read the rest."""
    rows = defaultdict(lambda: defaultdict(int))
    for d in read_jsonl(Path(out) / "predictions.jsonl"):
        key = (d["model"], d["meta"].get("dataset", ""), d["task"], d["style"])
        rows[key]["n"] += 1
        rows[key]["invalid"] += not d["valid"]
        rows[key][f"method {d['method']}"] += 1
    df = pd.DataFrame([{"model": k[0], "dataset": k[1], "task": k[2], "style": k[3], **v} for k, v in rows.items()]).fillna(0)
    df["invalid_rate"] = df["invalid"] / df["n"]
    return df


def main(argv: list[str] | None = None) -> int:
    from lib.paths import stage_dir

    ap = argparse.ArgumentParser(prog="python -m lib.evaluate", description="Evaluation tools.")
    sub = ap.add_subparsers(dest="command", required=True)
    rs = sub.add_parser("rescore", help="recompute metrics.csv, levels.csv, errors.csv from stored outputs")
    rs.add_argument("--run", required=True, help="the run whose 06_evaluate folder to rescore")
    args = ap.parse_args(argv)
    folder = stage_dir(args.run, "06_evaluate", create=False)
    summary = rescore_folder(folder)
    print(json.dumps({"folder": str(folder), **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
