"""What a reader sees of stage 07's scorers against human labels (``human_labels``:
:mod:`lib.agreement`'s tables under ``07_analyze/agreement/``): the report's section "Which score
agrees with people" (:func:`section`) - per criterion and scorer every statistic with its interval
over the images, flagged instead where too few images hold one; the paired "A agrees better than B"
rows; the judge checks; what the papers say of it beside ours
(:func:`lib.papers.agreement_claims`) - and the item browser's rows of the labelled answers, each
naming the judges people disagree with
(:func:`browser_rows`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from lib import artifacts as A
from lib.htmlsafe import text
from lib.metrics.stats import interval_text
from lib.papers import agreement_claims

HEADING = "Which score agrees with people"
ANCHOR = "agreement"  # the report's section id
DATASET = "human labels"  # the browser's dataset of the labelled answers
STATISTICS = ("roc_auc", "kendall_tau_b", "cohen_kappa", "krippendorff_alpha")


def read_agreed(run_folder: str | Path) -> dict[str, pd.DataFrame] | None:
    """07's agreement tables (:data:`lib.artifacts.AGREED_TABLES`) by name; None when 07 held no
    scorer to human labels. Text stays text ("NA" is an answer, not a missing value)."""
    folder = A.stage_folder(run_folder, A.ANALYZE) / A.AGREED
    if not (folder / "agreement.csv").exists():
        return None
    return {name: _read(folder / f"{name}.csv") for name in A.AGREED_TABLES}


def _read(path: Path) -> pd.DataFrame:
    """A table as written (an empty one - no judge, so no judge checks - has no columns)."""
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def judges(found: dict[str, pd.DataFrame]) -> list[str]:
    """The judge scorers (``<judge>[<model>]``): those with a judge check."""
    checks = found["judge_checks"]
    return list(checks["judge"]) if "judge" in checks else []


def disagreements(found: dict[str, pd.DataFrame]) -> dict[str, list[str]]:
    """Per answer, each ``<judge> · <criterion>`` where the judge's verdict (its top rating or not,
    as the agreement table holds a judge categorically) differs from people's; an unreadable rating
    disagrees with nothing."""
    scores = found["scores"].set_index("answer_id")
    out = {str(a): [] for a in scores.index}
    for answer, criterion, label in found["labels"][["answer_id", "criterion", "label"]].values:
        for judge in judges(found):
            rating = scores.at[answer, judge]
            if not pd.isna(rating) and (rating == 1) != bool(label):
                out[str(answer)].append(f"{judge} · {criterion}")
    return out


def browser_rows(found: dict[str, pd.DataFrame]) -> tuple[list[dict], list[str]]:
    """The labelled answers as rows of the item browser (:mod:`lib.browser`; dataset
    :data:`DATASET`, outcome: people's verdict on the first criterion, "read as": all their
    verdicts, and every scorer's score) each with the ``disagree`` values it shows under
    (:func:`disagreements`); and every value of that filter."""
    labels, scores = found["labels"], found["scores"].set_index("answer_id")
    verdicts = labels.groupby("answer_id", sort=False)
    wrong = disagreements(found)
    rows = []
    for answer, lab in verdicts:
        first = lab.iloc[0]
        said = " · ".join(
            f"{c} {'yes' if v else 'no'}" for c, v in lab[["criterion", "label"]].values
        )
        rated = scores.loc[answer].drop("cluster")
        rows.append(
            {
                "dataset": DATASET,
                "task": first["task"],
                "model": "",
                "style": "",
                "subset": "",
                "item_id": str(answer),
                "question": first["question"],
                "options": [],
                "reference": " | ".join(json.loads(first["references"])),
                "raw": "" if pd.isna(first["answer"]) else first["answer"],
                "parsed": f"people: {said}",
                "outcome": "right" if first["label"] else "wrong",
                "rating": "scores",
                "rationale": " · ".join(
                    f"{k} {'-' if pd.isna(v) else f'{v:.3f}'}" for k, v in rated.items()
                ),
                "images": [],
                "disagree": wrong[str(answer)],
            }
        )
    values = [f"{j} · {c}" for j in judges(found) for c in dict.fromkeys(labels["criterion"])]
    return rows, values


def agreement_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per criterion and scorer: each statistic with its interval (:func:`lib.metrics.stats.interval_text`), n and
    n_clusters, in the order ``lib.agreement`` wrote them."""
    rows = []
    for (criterion, scorer), g in table.groupby(["criterion", "scorer"], sort=False):
        first = g.iloc[0]
        row = {"criterion": criterion, "scorer": scorer}
        for r in g.itertuples():
            row[r.statistic] = interval_text(r.value, r.ci_low, r.ci_high, r.n_clusters)
        rows.append({**row, "n": int(first["n"]), "n_clusters": int(first["n_clusters"])})
    columns = ["criterion", "scorer", *STATISTICS, "n", "n_clusters"]
    return pd.DataFrame(rows).reindex(columns=columns).fillna("")


def paired_rows(paired: pd.DataFrame) -> pd.DataFrame:
    """The best scorer by ROC AUC against each other one: the AUC difference with its paired
    interval (flagged as :func:`lib.metrics.stats.interval_text` does)."""
    shown = [
        interval_text(r.auc_difference, r.ci_low, r.ci_high, r.n_clusters)
        for r in paired.itertuples()
    ]
    return paired[["criterion", "better", "than"]].assign(
        **{"AUC difference (95% CI)": shown, "n": paired["n"], "n_clusters": paired["n_clusters"]}
    )


def section(run_folder: str | Path, table: Callable[..., str]) -> str:
    """The report's section (empty when 07 held no scorer to human labels); ``table`` renders a
    frame as the report does (``table(df, caption, max_rows=..., index=False)``)."""
    found = read_agreed(run_folder)
    if found is None:
        return ""
    labels, few = found["labels"], found["agreement"]["few_clusters"].astype(bool)
    n, images = labels["answer_id"].nunique(), labels["cluster"].nunique()
    criteria = ", ".join(dict.fromkeys(labels["criterion"]))
    intro = (
        f"<p>{n} answers about {images} images, each judged by people on {text(criteria)}, "
        f"scored by every text metric of its task and every judge of the run's stage 06. Each "
        f"statistic has its 95% bootstrap interval over the n_clusters images the n answers are "
        f"about (a judge's unreadable ratings are left out of n and counted in the judge checks); "
        f"{int(few.sum())} of {len(few)} statistics rest on too few images for an interval "
        f"(lib.metrics.stats.MIN_CLUSTERS) and are flagged instead.</p>"
    )
    checks = found["judge_checks"]
    parts = [
        (
            agreement_rows(found["agreement"]),
            "Per criterion and scorer: ROC AUC and Kendall tau-b of its score against people's "
            "verdict; for a judge, Cohen's kappa and Krippendorff's alpha of its top rating",
        ),
        (paired_rows(found["paired"]), "Does the best scorer agree better than each other one?"),
        (
            checks,
            "Judge checks: unreadable ratings; self-consistency with the references reordered; "
            "right answers padded with a true but irrelevant sentence (how often the rating moved)"
            if len(checks)
            else "Judge checks: none - the run's stage 06 names no judge",
        ),
        (agreement_claims(), "What the papers say of how their scores agree with people"),
    ]
    tables = "".join(table(df, caption, max_rows=len(df), index=False) for df, caption in parts)
    return f"<h2 id='{ANCHOR}'>{HEADING}</h2>" + intro + tables
