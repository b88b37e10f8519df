"""The changed items of a run comparison (:mod:`lib.compare.explain`) as a reader goes through them
(issue #46).

:func:`side_by_side` is the comparison whose changed items also carry what each run asked
(:func:`prompt_text`), so the item browser (:func:`lib.pages.browser.write_browser`) can show both runs'
prompt, raw reply, read answer and scores side by side. :func:`comparison_tables` turns a
comparison into the tables stage 07 writes (:func:`write_comparison`) and its report shows: per
cause, the changed items and which way their scores moved (:func:`lib.metrics.stats.score_change`:
improved, worsened, mixed, same scores); per group and per-item metric A, B, B - A with its paired
interval and McNemar p, the group's headline score marked (the per-answer score its task's headline
is made of, :attr:`lib.tasks.Task.headline_score`), with Holm's and Benjamini-Hochberg's p
across the rows and the verdict in words (:mod:`lib.eval.paired`); the config diff.

    result = side_by_side("outputs/base/06_evaluate", "outputs/demo/06_evaluate")
    write_browser("outputs/demo", result)      # the browser's change and cause filters
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lib.compare.explain import CAUSES, DIMENSIONS, Run, compare, open_runs, pair
from lib.io import artifacts, write_json, write_jsonl
from lib.io.folders import Legacy, mark
from lib.metrics.stats import CHANGES, score_change
from lib.tasks.registry import get_task

KIND = "run comparison"  # the marker of the folder write_comparison writes (lib.io.folders)
# a comparison written before markers: the files write_comparison writes, nothing else
LEGACY = Legacy(
    tuple(
        Path(p).name
        for p in (
            artifacts.COMPARED,
            artifacts.COMPARED_CAUSES,
            artifacts.COMPARED_METRICS,
            artifacts.COMPARED_CONFIG,
        )
        + (artifacts.COMPARED_ITEMS,)
    )
)


def prompt_text(parts: dict) -> str:
    """A request (:func:`lib.compare.explain.request_parts`) as a reader reads it: its texts and
    images in the order they were sent (an image as ``[image k]``), then the prompt style's own
    texts, the token limit and the constraint on the answer."""
    texts, lines, k = iter(parts["texts"]), [], 0
    for kind in parts["layout"]:
        if kind == "image":
            k += 1
            lines.append(f"[image {k}]")
        else:
            lines.append(next(texts, ""))
    if parts["style texts"]:
        lines.append(
            f"[{parts['style']}: "
            + " ... ".join(str(v) for v in parts["style texts"].values())
            + "]"
        )
    settings = [f"token limit {parts['token limit']}"]
    constraint = parts["constraint"] or {}
    if constraint.get("choices"):
        settings.append(
            f"answer constrained to one of: {' | '.join(constraint['choices'])} ({constraint['method']})"
        )
    elif constraint.get("json_schema"):
        settings.append("answer constrained to a JSON schema")
    return "\n".join(lines + [f"[{'; '.join(settings)}]"])


def asked(run: Run, row: dict, side: str) -> str:
    """What ``run`` asked for ``row`` (:func:`prompt_text`), or why it is not known: its dataset was
    rewritten in place since (:attr:`lib.compare.explain.Run.stale`), so the request cannot be rebuilt."""
    if row["dataset"] in run.stale:
        return f"(not known: dataset {row['dataset']!r} changed since run {side} asked it)"
    return prompt_text(run.request(row))


def side_by_side(a: str | Path | Run, b: str | Path | Run, filters: dict | None = None) -> dict:
    """:func:`lib.compare.explain.compare` whose changed items also carry both runs' prompts
    (``item["prompt"] = {"A": ..., "B": ...}``, :func:`prompt_text`) and which way their scores
    moved (``item["change"]``). Nothing is asked of a model: the requests are rebuilt."""
    run_a, run_b = open_runs(a, b, filters)
    result = compare(run_a, run_b, filters)
    changed = {(tuple(it["group"]), it["dataset"], it["item_id"]): it for it in result["items"]}
    pairs, _, _ = pair(run_a, run_b, filters or {})
    for key, ra, rb in pairs:
        if key in changed:
            changed[key]["prompt"] = {"A": asked(run_a, ra, "A"), "B": asked(run_b, rb, "B")}
    for it in result["items"]:
        it["change"] = score_change(it["A"], it["B"])
    return result


def cause_table(result: dict) -> pd.DataFrame:
    """Per cause: the changed items, how many of them improved, worsened, moved both ways or kept
    their scores, and what explains them (``name (items)``, most items first)."""
    rows = []
    for cause in CAUSES:
        items = [it for it in result["items"] if it["cause"] == cause]
        moved = [it.get("change") or score_change(it["A"], it["B"]) for it in items]
        named = sorted(result["causes"][cause]["because"].items(), key=lambda kv: (-kv[1], kv[0]))
        rows.append(
            {
                "cause": cause,
                "items": len(items),
                **{c: moved.count(c) for c in CHANGES},
                "because": "; ".join(f"{k} ({v})" for k, v in named),
            }
        )
    return pd.DataFrame(rows, columns=["cause", "items", *CHANGES, "because"])


def _dimension(result: dict, group: list, dim: str, side: int) -> str:
    """A group's value of ``dim`` on one side (0: run A, -1: run B): its own, or the filter's."""
    if dim in result["group_by"]:
        return group[result["group_by"].index(dim)]
    return result["filters"][dim][side]


# a metric row's statistics as the table keeps them (lib.eval.paired.metric_rows, adjust)
STATISTICS = (
    "n_clusters",
    "clusters_are",
    "A",
    "B",
    "difference",
    "ci_low",
    "ci_high",
    "df",
    "detectable",
    "p",
    "p_holm",
    "p_bh",
    "holm",
    "bh",
    "mcnemar_p",
    "verdict",
    "words",
)


def metric_table(result: dict) -> pd.DataFrame:
    """Per group (its dataset, task, model and style; ``A -> B`` where a filter maps one onto
    another) and per-item metric: n, A, B, B - A, the small-sample interval, its test with Holm's
    and Benjamini-Hochberg's p across the rows and whether the row survives each, McNemar's p, the
    verdict in words and each cause's share of B - A; ``headline`` marks the per-answer score the
    group's task leads with."""
    rows = []
    for m in result["metrics"]:
        dims = {
            d: (_dimension(result, m["group"], d, 0), _dimension(result, m["group"], d, -1))
            for d in DIMENSIONS
        }
        task = get_task(dims["task"][1])
        rows.append(
            {
                **{d: a if a == b else f"{a} -> {b}" for d, (a, b) in dims.items()},
                "metric": m["metric"],
                "headline": m["metric"] == (task.headline_score or task.headline[1]),
                "n": m["n"],
                **{k: m.get(k) for k in STATISTICS},
                **{f"{c} share": m["by_cause"][c] for c in CAUSES},
            }
        )
    columns = [
        *DIMENSIONS,
        "metric",
        "headline",
        "n",
        *STATISTICS,
        *(f"{c} share" for c in CAUSES),
    ]
    return pd.DataFrame(rows, columns=columns)


def _value(v) -> str:
    """A config value as a table cell: text as it is, anything else as JSON (``null``, ``[1, 2]``)."""
    return v if isinstance(v, str) else json.dumps(v, default=str)


def config_table(result: dict) -> pd.DataFrame:
    """The config diff: every resolved value that differs, A's and B's, and where each came from."""
    rows = [
        {
            "key": r["key"],
            "A": _value(r["A"]),
            "A from": r["A_from"],
            "B": _value(r["B"]),
            "B from": r["B_from"],
        }
        for r in result["config"]
    ]
    return pd.DataFrame(rows, columns=["key", "A", "A from", "B", "B from"])


def comparison_tables(result: dict) -> dict[str, pd.DataFrame]:
    """The comparison's tables by name: ``causes`` (:func:`cause_table`), ``metrics``
    (:func:`metric_table`), ``config`` (:func:`config_table`)."""
    return {
        "causes": cause_table(result),
        "metrics": metric_table(result),
        "config": config_table(result),
    }


def write_comparison(stage_out: str | Path, result: dict) -> dict[str, Path]:
    """A comparison under a stage folder (07's ``comparison/``): the result without its items
    (:data:`lib.io.artifacts.COMPARED`), its tables as CSV and the changed items as JSONL. Returns
    the paths by name. The folder is marked as a comparison (:data:`KIND`), so a rerun replaces
    it and nothing else."""
    out = Path(stage_out)
    paths = {
        "result": out / artifacts.COMPARED,
        "causes": out / artifacts.COMPARED_CAUSES,
        "metrics": out / artifacts.COMPARED_METRICS,
        "config": out / artifacts.COMPARED_CONFIG,
        "items": out / artifacts.COMPARED_ITEMS,
    }
    paths["result"].parent.mkdir(parents=True, exist_ok=True)
    mark(paths["result"].parent, KIND)
    for name, table in comparison_tables(result).items():
        table.to_csv(paths[name], index=False)
    write_jsonl(paths["items"], result["items"])
    write_json(paths["result"], {k: v for k, v in result.items() if k != "items"})
    return paths
