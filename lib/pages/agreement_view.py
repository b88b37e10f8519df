"""What a reader sees of stage 07's scorers against human labels (``human_labels``:
:mod:`lib.agreement.scorers`'s tables under ``07_analyze/agreement/``): the report's section "Which score
agrees with people" (:func:`section`) - per criterion and scorer every statistic with its interval
over the images, flagged instead where too few images, or too few answers labelled yes or no
(:data:`lib.metrics.rater_agreement.MIN_PER_CLASS`), hold one, and where a statistic has no value the reason
(no positive label, say); the paired "A agrees better than B"
rows; each judge's accuracy corrected by people's verdicts (:func:`corrected_rows`); the
judge checks; what the papers say of it beside ours
(:func:`lib.core.papers.agreement_claims`) - and the item browser's rows of the labelled answers, each
naming the judges people disagree with
(:func:`browser_rows`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lib.core.papers import agreement_claims
from lib.io import artifacts
from lib.metrics import ppi
from lib.metrics.rater_agreement import MIN_PER_CLASS
from lib.metrics.stats import MIN_CLUSTERS, interval_text
from lib.pages.render import table

HEADING = "Which score agrees with people"
ANCHOR = "agreement"  # the report's section id
DATASET = "human labels"  # the browser's dataset of the labelled answers
STATISTICS = ("roc_auc", "kendall_tau_b", "cohen_kappa", "krippendorff_alpha")
NO_SCORER = (
    "no score was held to them: the task's stage-06 options name no text metric and no judge model "
    "was given (stage 06's judge, or stage 07's human_labels_judges)."
)


def read_agreed(run_folder: str | Path) -> dict[str, pd.DataFrame] | None:
    """07's agreement tables (:data:`lib.io.artifacts.AGREED_TABLES`, and the corrected accuracies
    :data:`lib.metrics.ppi.TABLE`, empty in a folder written before it) by name; None when 07 held
    no scorer to human labels. Text stays text ("NA" is an answer, not a missing value)."""
    folder = artifacts.stage_folder(run_folder, artifacts.ANALYZE) / artifacts.AGREED
    if not (folder / "agreement.csv").exists():
        return None
    found = {name: _read(folder / f"{name}.csv") for name in artifacts.AGREED_TABLES}
    corrected = folder / f"{ppi.TABLE}.csv"
    return found | {ppi.TABLE: _read(corrected) if corrected.exists() else pd.DataFrame()}


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
    """The labelled answers as rows of the item browser (:mod:`lib.pages.browser`; dataset
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


def shown(value, low, high, r) -> str:
    """A statistic as the section shows it: :func:`lib.metrics.stats.interval_text`, flagged
    instead where too few answers are labelled yes or no, or the reason it has no value (``r``:
    its row, with ``n_clusters``, ``n_positive``, ``n_negative`` and perhaps ``note``)."""
    if pd.isna(value):
        note = getattr(r, "note", "")
        return f"n/a ({note})" if isinstance(note, str) and note else "n/a"
    yes, no = getattr(r, "n_positive", None), getattr(r, "n_negative", None)
    if r.n_clusters >= MIN_CLUSTERS and yes is not None and min(yes, no) < MIN_PER_CLASS:
        return (
            f"{value:.3f} (too few answers labelled yes or no for an interval: {yes} yes, {no} no)"
        )
    return interval_text(value, low, high, r.n_clusters)


def agreement_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per criterion and scorer: each statistic as :func:`shown` shows it, n and
    n_clusters, in the order ``lib.agreement.scorers`` wrote them."""
    rows = []
    for (criterion, scorer), g in table.groupby(["criterion", "scorer"], sort=False):
        first = g.iloc[0]
        row = {"criterion": criterion, "scorer": scorer}
        for r in g.itertuples():
            row[r.statistic] = shown(r.value, r.ci_low, r.ci_high, r)
        rows.append({**row, "n": int(first["n"]), "n_clusters": int(first["n_clusters"])})
    columns = ["criterion", "scorer", *STATISTICS, "n", "n_clusters"]
    return pd.DataFrame(rows).reindex(columns=columns).fillna("")


def paired_rows(paired: pd.DataFrame) -> pd.DataFrame:
    """The best scorer by ROC AUC against each other one: the AUC difference with its paired
    interval (flagged as :func:`shown` does)."""
    columns = ["criterion", "better", "than"]
    if paired.empty:
        return pd.DataFrame(columns=[*columns, "AUC difference (95% CI)", "n", "n_clusters"])
    diffs = [shown(r.auc_difference, r.ci_low, r.ci_high, r) for r in paired.itertuples()]
    return paired[columns].assign(
        **{"AUC difference (95% CI)": diffs, "n": paired["n"], "n_clusters": paired["n_clusters"]}
    )


CORRECTED = {  # corrected_rows' columns: the estimate each shows
    "judge raw (95% CI)": "judge_raw",
    "corrected by people (95% CI)": "corrected",
    "people alone (95% CI)": "human_only",
}


def corrected_rows(corrected: pd.DataFrame) -> pd.DataFrame:
    """Per judge and model: the judge's raw accuracy, the one corrected by the kept labels and
    people's mean on those labels alone, each as :func:`lib.metrics.stats.interval_text` shows it
    (flagged where the kept labels are about too few images), and people's mean on every answer."""
    head = ["scorer", "model", "n", "n_labelled"]
    if corrected.empty:
        return pd.DataFrame(columns=[*head, *CORRECTED, "people on every answer"])
    rows = []
    for r in corrected.itertuples():
        row = {c: getattr(r, c) for c in head}
        for column, v in CORRECTED.items():
            value, low, high = (getattr(r, f"{v}{end}") for end in ("", "_low", "_high"))
            row[column] = interval_text(value, low, high, r.n_clusters)
            if r.few_clusters and v != "judge_raw" and not pd.isna(value):
                row[column] = f"{value:.3f} (too few labelled images for an interval)"
        rows.append(row)
    return pd.DataFrame(rows).assign(**{"people on every answer": corrected["human_all"].round(3)})


def section(run_folder: str | Path) -> dict | None:
    """What the report's section (``lib/data/templates/agreement.html``) shows: the labelled answers,
    images and criteria, how many statistics are flagged, and its tables (:func:`lib.pages.render.table`;
    only the papers' claims when no scorer covered the labels); None when 07 held no scorer to
    human labels."""
    found = read_agreed(run_folder)
    if found is None:
        return None
    labels, agreed = found["labels"], found["agreement"]
    claims = (agreement_claims(), "What the papers say of how their scores agree with people")
    said = {
        "heading": HEADING,
        "anchor": ANCHOR,
        "no_scorer": NO_SCORER,
        "answers": labels["answer_id"].nunique(),
        "images": labels["cluster"].nunique(),
        "criteria": ", ".join(dict.fromkeys(labels["criterion"])),
        "scored": not agreed.empty,
        "statistics": len(agreed),
    }
    if agreed.empty:
        return said | {"tables": [table(*claims, max_rows=len(claims[0]), index=False)]}
    flags = [c for c in ("few_clusters", "few_labels") if c in agreed]
    flagged = int((agreed[flags].astype(bool).any(axis=1) & agreed["value"].notna()).sum())
    checks = found["judge_checks"]
    parts = [
        (
            agreement_rows(agreed),
            "Per criterion and scorer: ROC AUC and Kendall tau-b of its score against people's "
            "verdict; for a judge, Cohen's kappa and Krippendorff's alpha of its top rating",
        ),
        (paired_rows(found["paired"]), "Does the best scorer agree better than each other one?"),
        (
            corrected_rows(found[ppi.TABLE]),
            "What the labels buy: each judge's accuracy on people's correctness verdicts, per "
            "model and over all - taken as it is, corrected by the n_labelled verdicts kept at "
            "random (prediction-powered inference: the judge's mean on the other answers plus "
            "the mean of people minus judge on the kept ones; interval over images), and "
            "people's mean on the kept verdicts alone - beside people's mean on every answer, "
            "which the two estimates aim at",
        ),
        (
            checks,
            "Judge checks: unreadable ratings; self-consistency with the references reordered; "
            "right answers padded with a true but irrelevant sentence (how often the rating moved)"
            if len(checks)
            else "Judge checks: none - the run's stage 06 names no judge",
        ),
        claims,
    ]
    tables = [table(df, caption, max_rows=len(df), index=False) for df, caption in parts]
    return said | {"flagged": flagged, "tables": tables}
