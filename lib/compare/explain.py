"""Why two numbers differ: two evaluation folders compared item by item (issue #46).

Every item both runs answered is followed down the pipeline and its change, if any, put on its
first cause: ``dataset`` (the dataset was rewritten in place since one run asked it, so what that
run was asked is gone), ``prompt`` (the request sent differs: style, template, option order, image
order, token limit, constraint, seed), ``model`` (the same request, another raw reply), ``reading``
(the same reply, read differently: parser, constrained choice) or ``scoring`` (the same reading,
scored differently: a metric's option or version, the judge). Each cause names the config difference
that explains it. Items only one run has are counted apart. For every per-item metric the two
means, their paired difference with a small-sample interval over the items' clusters (images,
image chains: :mod:`lib.eval.paired`), its test adjusted across rows (Holm, Benjamini-Hochberg),
the smallest difference it could detect, a McNemar test for 0/1 scores that counts clusters, a
verdict in words, and the share of the difference each cause accounts for (the causes partition the items, so
the shares add up to the difference). Beside it the config diff of the two runs, with where each value came from.

A prediction row keeps its ``call_key`` (model and request hashed together), not a digest of the
request alone, so the request is rebuilt here from the run's config and dataset by the function
stage 06 builds it with (:func:`lib.eval.requests.zero_shot`, the request every style starts
from) - no model is loaded or called. Both folders are first verified as a rescore verifies one
(:func:`lib.eval.manifest.check_manifest`): a run that did not finish, or whose config, replies,
judgements or scores changed after it finished, is refused. :mod:`lib.compare.runs` is the command line.

A run as it is read (:mod:`lib.compare.evaluations`) and the config diff
(:mod:`lib.compare.config_diff`) are their own modules.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from lib.compare.config_diff import config_diff, flatten
from lib.compare.evaluations import (
    CompareError,
    Run,
    foreign_notes,
    open_run,
    prompt_difference,
    unsplit,
)
from lib.core.schema import ERROR, is_constrained
from lib.eval.paired import adjust, clusters_are, metric_rows
from lib.tasks.registry import get_task

CAUSES = (
    "dataset",
    "prompt",
    "model",
    "reading",
    "scoring",
)  # pipeline order: a change is put on the first
DIMENSIONS = (
    "dataset",
    "task",
    "model",
    "style",
)  # what a filter may select, one value or one per run


# --- one item ---------------------------------------------------------------------------------------


def judged_score(j: dict | None) -> float | None:
    """A judgement's score as the judge's row counts it (an unread rating is 0, as
    :meth:`lib.tasks.judges.Judge.value`); None when not judged."""
    return (
        None
        if j is None
        else (float(j["score"]) if j.get("valid") and j.get("score") is not None else 0.0)
    )


def outcome(row: dict, j: dict | None, judge: str = "judge") -> dict:
    """An answer's per-item metrics: its scores and, where judged, the judge's score under the
    judge's name (its metric row's)."""
    scores = {
        k: float(v) for k, v in (row.get("scores") or {}).items() if isinstance(v, (int, float))
    }
    if j is not None:
        scores[judge] = judged_score(j)
    return scores


def judge_name(run: Run, row: dict) -> str:
    """The name of the judge that rated an answer of ``run``: its task's ``tasks.<task>.judge``."""
    return run.cfg.options[row["task"]].judge or "judge"


def _reading(row: dict) -> tuple:
    return row.get("parsed"), row.get("method"), row.get("valid")


def first_cause(
    a: dict, b: dict, ra: dict | None, rb: dict | None, ja: dict | None, jb: dict | None
) -> str | None:
    """Where two answers to one item first part ways (:data:`CAUSES`), or None when they never do.
    Without the two requests (``None``: a dataset changed since), from the replies on."""
    if ra is not None and rb is not None and prompt_difference(ra, rb):
        return "prompt"
    if (a.get("raw"), a["meta"].get("reasoning"), a["meta"].get("error")) != (
        b.get("raw"),
        b["meta"].get("reasoning"),
        b["meta"].get("error"),
    ):
        return "model"
    if _reading(a) != _reading(b):
        return "reading"
    judge = lambda j: None if j is None else (j.get("rating"), j.get("valid"), j.get("score"))
    if (
        outcome(a, ja) != outcome(b, jb)
        or a.get("correct") != b.get("correct")
        or judge(ja) != judge(jb)
    ):
        return "scoring"
    return None


def _spec_difference(a: dict | None, b: dict | None, what: str) -> list[str]:
    flat_a, flat_b = flatten(a or {}), flatten(b or {})
    return [
        f"{what} {k}" for k in sorted(set(flat_a) | set(flat_b)) if flat_a.get(k) != flat_b.get(k)
    ]


def _code(run_a: Run, run_b: Run) -> str:
    """The code named when the config explains nothing: the two commits, or the one both record."""
    if run_a.sha != run_b.sha:
        return f"code {str(run_a.sha)[:8]} vs {str(run_b.sha)[:8]}"
    return "code (same recorded commit: re-read or rescored since)"


def because(
    cause: str, run_a: Run, run_b: Run, a: dict, b: dict, ra: dict, rb: dict, ja, jb
) -> list[str]:
    """The differences that explain an item's ``cause``, named from the requests and the configs."""
    if cause == "prompt":
        return prompt_difference(ra, rb)
    if cause == "model":
        named = _spec_difference(
            run_a.cfg.models.get(a["model"]), run_b.cfg.models.get(b["model"]), "model"
        )
        return named or ["decoding (same model spec and request)"]
    if cause == "reading":
        if is_constrained(a.get("method") or "") != is_constrained(
            b.get("method") or ""
        ) and ERROR not in (a.get("method"), b.get("method")):
            return ["constrained choice"]
        return [f"parser: {_code(run_a, run_b)}"]
    task = a["task"]
    named = _spec_difference(
        run_a.cfg.tasks.get(task), run_b.cfg.tasks.get(task), f"metric option tasks.{task}"
    )
    if (ja and ja.get("rating"), ja and ja.get("valid")) != (
        jb and jb.get("rating"),
        jb and jb.get("valid"),
    ):
        named += (
            _spec_difference(run_a.cfg.judge, run_b.cfg.judge, "judge")
            or (
                ["judge token limit"]
                if run_a.cfg.judge_max_new_tokens != run_b.cfg.judge_max_new_tokens
                else []
            )
            or [f"judge prompt or reading: {_code(run_a, run_b)}"]
        )
    return named or [f"metric version: {_code(run_a, run_b)}"]


# --- pairing ----------------------------------------------------------------------------------------


def side_filters(filters: dict[str, list[str] | None]) -> tuple[dict, dict, set]:
    """Run A's and run B's selections from the filters (one value: both runs; two: one each), and
    the dimensions mapped from one value to another (left out of the pairing key)."""
    fa, fb, mapped = {}, {}, set()
    for dim in DIMENSIONS:
        values = filters.get(dim) or []
        if len(values) > 2:
            raise CompareError(
                f"--{dim} takes one value (both runs) or two (run A's, run B's), got {values}"
            )
        if values:
            fa[dim], fb[dim] = values[0], values[-1]
            if values[0] != values[-1]:
                mapped.add(dim)
    return fa, fb, mapped


def _selected(run: Run, want: dict, side: str) -> list[dict]:
    for dim, value in want.items():
        have = sorted({r[dim] for r in run.rows})
        if value not in have:
            raise CompareError(
                f"run {side} ({run.folder}) has no {dim} {value!r}; it has: {', '.join(have) or 'nothing'}"
            )
    return [r for r in run.rows if all(r[d] == v for d, v in want.items())]


def pair(run_a: Run, run_b: Run, filters: dict) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """``(pairs, only_a, only_b)``: the keys (group, item id) of the items both runs answered with
    their two rows, and the keys one run alone has. An item is (dataset, id); the group is every
    dimension not mapped by the filters."""
    fa, fb, mapped = side_filters(filters)
    keep = [d for d in DIMENSIONS if d not in mapped]

    def keyed(rows):
        out = {}
        for r in rows:
            out[(tuple(r[d] for d in keep), r["dataset"], r["item_id"])] = r
        return out

    rows_a, rows_b = keyed(_selected(run_a, fa, "A")), keyed(_selected(run_b, fb, "B"))
    pairs = [(k, rows_a[k], rows_b[k]) for k in rows_a if k in rows_b]
    return (
        pairs,
        sorted(k for k in rows_a if k not in rows_b),
        sorted(k for k in rows_b if k not in rows_a),
    )


# --- the whole comparison ---------------------------------------------------------------------------


def _item_row(key: tuple, cause: str, named: list[str], oa: dict, ob: dict) -> dict:
    group, dataset, item_id = key
    return {
        "group": list(group),
        "dataset": dataset,
        "item_id": item_id,
        "cause": cause,
        "because": named,
        "outcome_changed": oa != ob,
        "A": oa,
        "B": ob,
    }


def dataset_change(run_a: Run, run_b: Run, a: dict, b: dict) -> list[str] | None:
    """Why a pair's requests cannot be rebuilt: its dataset was rewritten in place since run A or
    run B asked it (:attr:`Run.stale`), named; None when neither. When both runs asked the same
    version of it, nothing left tells a prompt change from the model's: that is refused
    (:class:`CompareError`) rather than put on the dataset, which did not change between them."""
    named = [
        f"dataset {row['dataset']!r} changed since run {side}"
        for side, run, row in (("A", run_a, a), ("B", run_b, b))
        if row["dataset"] in run.stale
    ]
    asked = run_a.asked.get(a["dataset"])
    if named and asked is not None and asked == run_b.asked.get(b["dataset"]):
        side, run = ("A", run_a) if a["dataset"] in run_a.stale else ("B", run_b)
        raise CompareError(
            f"dataset {a['dataset']!r} ({run.cfg.datasets[a['dataset']]}/items.jsonl) changed since "
            f"{'both runs were' if len(named) == 2 else f'run {side} was'} evaluated, and both runs "
            f"asked the same version of it: the requests they were sent cannot be rebuilt to tell a "
            f"prompt change from the model's; restore it, or rerun stage 06 for both runs"
        )
    return named or None


def stale_notes(run_a: Run, run_b: Run) -> list[str]:
    """The datasets rewritten in place since a run asked them, in words (the report prints them)."""
    return [
        f"dataset {name!r} ({run.cfg.datasets[name]}/items.jsonl) was rewritten since run {side} asked it: its "
        f"changed items are put on the dataset, its prompts in run {side} are not known"
        for side, run in (("A", run_a), ("B", run_b))
        for name in run.stale
    ]


def _cluster(run_a: Run, run_b: Run, a: dict) -> tuple[tuple, tuple]:
    """What a paired item's interval resamples it with: its task's cluster (its image) in its
    dataset, as either run's dataset has the item, and the item's images; the item alone where
    neither has it any more."""
    for run in (run_a, run_b):
        try:
            item = run.item(a["dataset"], a["item_id"])
            return (a["dataset"], get_task(a["task"]).cluster(item)), tuple(item.images)
        except (KeyError, LookupError, ValueError):
            continue
    return (a["dataset"], "item", a["item_id"]), ()


def _pair_cause(run_a: Run, run_b: Run, key: tuple, a: dict, b: dict) -> dict:
    """One pair with its judgements, requests, outcomes, first cause and unit (None for an item
    whose dataset changed since: its cause is ``dataset`` when the answers part ways at all)."""
    ja = run_a.judgements.get((a["model"], a["dataset"], a["item_id"], a["style"]))
    jb = run_b.judgements.get((b["model"], b["dataset"], b["item_id"], b["style"]))
    oa, ob = outcome(a, ja, judge_name(run_a, a)), outcome(b, jb, judge_name(run_b, b))
    p = {"key": key, "a": a, "b": b, "ja": ja, "jb": jb, "oa": oa, "ob": ob}
    p["cluster"], p["images"] = _cluster(run_a, run_b, a)
    if gone := dataset_change(run_a, run_b, a, b):
        changed = first_cause(a, b, None, None, ja, jb) is not None
        return {
            **p,
            "qa": None,
            "qb": None,
            "cause": "dataset" if changed else None,
            "unit": None,
            "because": gone,
        }
    qa, qb = run_a.request(a), run_b.request(b)
    cause, named = unsplit(first_cause(a, b, qa, qb, ja, jb), qa, qb)
    unit = get_task(a["task"]).unit(run_a.item(a["dataset"], a["item_id"]))
    unit = None if unit is None else (key[0], a["dataset"], unit.key)
    return {**p, "qa": qa, "qb": qb, "cause": cause, "unit": unit, "because": named}


def _classified(run_a: Run, run_b: Run, pairs: list[tuple]) -> list[dict]:
    """Each pair as :func:`_pair_cause` finds it; a score that changed only because another answer
    of its unit (:meth:`Task.unit`) changed (a whole-unit score such as Scrapbook's
    ``correct_strict``) takes that answer's cause, the earliest in its unit."""
    out, earliest, scoring = [], {}, CAUSES.index("scoring")
    for key, a, b in pairs:
        p = _pair_cause(run_a, run_b, key, a, b)
        if p["cause"] not in (None, "scoring") and p["unit"] is not None:
            earliest[p["unit"]] = min(earliest.get(p["unit"], scoring), CAUSES.index(p["cause"]))
        out.append(p)
    for p in out:
        if p["cause"] == "scoring" and p["unit"] in earliest:
            p["cause"], p["because"] = (
                CAUSES[earliest[p["unit"]]],
                ["scored with its unit, whose answers changed"],
            )
    return out


def check_two_runs(a: str | Path, b: str | Path, filters: dict | None = None) -> None:
    """Refuse to compare a folder with itself (links resolved) unless a filter gives each run its
    own value (``--model untrained trained``): a run compared with itself agrees on every item,
    which a typo, a link or two imports into one folder would report as two runs agreeing."""
    folder = Path(a).resolve()
    if folder == Path(b).resolve() and not side_filters(filters or {})[2]:
        given = f" (given as {a} and {b})" if str(a) != str(b) else ""
        raise CompareError(
            f"runs A and B are one folder, {folder}{given}: a run compared with itself always "
            f"agrees; name two runs, or give a filter two values (e.g. --model untrained trained) "
            f"to compare within one"
        )


def open_runs(a: str | Path | Run, b: str | Path | Run, filters: dict | None) -> tuple[Run, Run]:
    """Both runs read and verified (:func:`open_run`); two folders that are one are refused first
    (:func:`check_two_runs`). A :class:`Run` given is taken as it is."""
    if not isinstance(a, Run) and not isinstance(b, Run):
        check_two_runs(a, b, filters)
    return tuple(x if isinstance(x, Run) else open_run(x) for x in (a, b))


def compare(a: str | Path | Run, b: str | Path | Run, filters: dict | None = None) -> dict:
    """Compare two evaluation folders item by item (module docstring): the counts of unpaired
    items, each cause's items and what explains them, every changed item, the metric rows
    (:func:`metric_rows`, with Holm's and Benjamini-Hochberg's p across them: :func:`adjust`) and
    the config diff. The intervals are small-sample t ones (:mod:`lib.eval.paired`), which draw
    nothing at random. One folder given as both runs is refused (:func:`check_two_runs`)."""
    run_a, run_b = open_runs(a, b, filters)
    pairs, only_a, only_b = pair(run_a, run_b, filters or {})
    causes = {c: {"items": 0, "outcome_changed": 0, "because": Counter()} for c in CAUSES}
    items, scored, seen = [], defaultdict(list), defaultdict(lambda: defaultdict(set))
    for p in _classified(run_a, run_b, pairs):
        cause, oa, ob = p["cause"], p["oa"], p["ob"]
        scored[p["key"][0]].append((oa, ob, cause, p["cluster"]))
        seen[p["key"][0]][p["cluster"]].update(p["images"])
        if cause is None:
            continue
        named = p.get("because") or because(
            cause, run_a, run_b, p["a"], p["b"], p["qa"], p["qb"], p["ja"], p["jb"]
        )
        causes[cause]["items"] += 1
        causes[cause]["outcome_changed"] += oa != ob
        causes[cause]["because"].update(named)
        items.append(_item_row(p["key"], cause, named, oa, ob))
    _, _, mapped = side_filters(filters or {})
    return {
        "A": str(run_a.folder),
        "B": str(run_b.folder),
        "filters": dict(filters or {}),
        "group_by": [d for d in DIMENSIONS if d not in mapped],
        "paired": len(pairs),
        "changed": len(items),
        "only_A": len(only_a),
        "only_B": len(only_b),
        "only_A_items": [list(k[1:]) for k in only_a[:20]],
        "only_B_items": [list(k[1:]) for k in only_b[:20]],
        "causes": {c: {**v, "because": dict(v["because"])} for c, v in causes.items()},
        "metrics": adjust(
            [
                r
                for g in sorted(scored)
                for r in metric_rows(g, scored[g], CAUSES, clusters_are(seen[g].values()))
            ]
        ),
        "config": config_diff(run_a, run_b),
        "notes": foreign_notes(run_a, run_b) + stale_notes(run_a, run_b),
        "items": items,
    }
