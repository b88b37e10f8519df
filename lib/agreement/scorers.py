"""Which score agrees with people: every text metric of a task and every judge, against human labels.

    python -m lib.agreement --labels FILE --out DIR [--profile P] [--judge NAME ...] [--task T]

Human labels are a CSV or JSONL file, one row per answer and criterion (:data:`LABEL_COLUMNS`):
``answer_id``; ``cluster`` (what the answer is about, the image: intervals resample it);
``question``; ``references`` (a JSON list of strings, or one string); ``answer`` (the text people
judged); ``criterion`` (e.g. ``correctness``); ``label`` (1/0, yes/no, true/false). A family may
declare a reader for a release's own file (``HUMAN_LABELS``: file name -> reader, e.g. YesBut's
``Human_Eval_Results.csv``), so its path can be given as it is; a ``.json`` file is Label Studio's
export of a rating project (:mod:`lib.rating.labelstudio`: the majority per answer, ties and unrated answers
left out and counted in the summary's ``left_out``). Several rows for one answer and criterion (a
row per rater, or two files joined) are its raters: the label is their majority, a tie left out,
both counted in ``left_out`` (``rated_by_several``, ``tied``). A labels file is read only when it
is a regular file of at most :data:`lib.io.annotations.MAX_LABELS_BYTES`.

The answers are scored by each text metric of the task (its options in the profile's stage 06, e.g.
``yesbut.understanding``'s BLEU, ROUGE-L, METEOR, CIDEr, BERTScore) and by every judge the families
declare (LAVE, the yes/no verdict: :mod:`lib.tasks.judges`) on each judge model (the profile's
stage-06 judge, plus ``--judge`` names of its models), through the call store; a scorer is named
``<judge>[<model>]``.
Writes, all or nothing, into ``--out`` (a folder of its own kind, never one holding anything else):

- ``agreement.csv``: per scorer and criterion, ROC AUC and Kendall tau-b (and for a judge, Cohen's
  kappa and Krippendorff's alpha of its top score against the verdict), each with a clustered interval
  (:mod:`lib.metrics.rater_agreement`); an unreadable rating is left out and counted, never a middle score;
- ``paired.csv``: per criterion, the best scorer by AUC against each other one (paired interval);
- ``judge_checks.csv``: per judge, unreadable ratings, self-consistency (references in reverse
  order) and a verbosity probe (answers people judged right, padded with a true but irrelevant
  sentence: how often the rating moved);
- ``corrected.csv``: per judge and model (an answer id ``<cluster>:<model>`` names it), its raw
  accuracy, the one corrected by a third of people's ``correctness`` verdicts and people's mean on
  that third alone, each with its interval, beside people's mean on all (:mod:`lib.metrics.ppi`);
- ``scores.csv``: every answer's score by every scorer; ``labels.csv``: the labels, with the task.

A row of ``agreement.csv`` or ``paired.csv`` whose interval rests on fewer than
:data:`MIN_CLUSTERS` clusters is flagged ``few_clusters``, and one whose answers hold fewer than
:data:`MIN_PER_CLASS` labelled yes or no ``few_labels``: its interval is not to be trusted. A
statistic with no value says why in ``note`` (no positive label, say). With no scorer (the task has
no text metric and no judge is named) the tables are written empty and the summary says so.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from lib import config
from lib.eval.settings import EvalConfig
from lib.io import NotOurFolder, artifacts, aside_folder, check_ours, mark, swap_in, write_csv
from lib.io.annotations import (
    LABEL_COLUMNS,
    LabelsError,
    by_raters,
    check_label,
    label_rows,
    labels_file,
)
from lib.metrics import ppi, text
from lib.metrics.rater_agreement import (
    CATEGORICAL,
    GRADED,
    MIN_PER_CLASS,
    agreement,
    paired_agreement,
)
from lib.metrics.stats import MIN_CLUSTERS, N_RESAMPLES
from lib.models import load_model
from lib.models.store import CallStore
from lib.rating.labelstudio import RatingError, is_export, read_export
from lib.tasks.registry import get_task, registry

KIND = "agreement"  # the output folder's marker (lib.io.folders)
FLAGS = ("few_clusters", "few_labels")  # a row whose interval is not to be trusted
# the verbosity probe's padding: true of any image an answer is about, and no answer to any question
PADDING = "The picture is stored as an image file."
_COUNTS = ("ci_low", "ci_high", "n", "n_clusters", "n_positive", "n_negative")
AGREEMENT_COLUMNS = ("scorer", "criterion", "statistic", "value", *_COUNTS, "note", *FLAGS)
PAIRED_COLUMNS = ("criterion", "better", "than", "auc_difference", *_COUNTS, *FLAGS)
NO_SCORER = (
    "no scorer held to the labels: the task's stage-06 options name no text metric and no judge "
    "model was given (the profile's judge, or --judge)"
)


class AgreementError(ValueError):
    """Labels that cannot be read, or an output folder that is not this command's."""


def _family_rows(path: Path, reader) -> list[tuple[str, dict]]:
    """(where, row) of a release's file, read by its family's reader (``FILE: row N``)."""
    labels_file(path)  # a regular file within the cap, before the reader opens it
    try:
        found = reader(path)
    except (ValueError, KeyError) as e:  # the reader's own errors name the file and line
        raise AgreementError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
    return [(f"{path}: row {i + 1}", r) for i, r in enumerate(found.to_dict("records"))]


def read_labels(path: str | Path) -> pd.DataFrame:
    """The labels of ``path`` (:data:`LABEL_COLUMNS`), each row checked; a family's release file is
    read by the reader it declares, a Label Studio export by :func:`lib.rating.labelstudio.read_export` (what it
    left out in ``attrs["left_out"]``); several rows for one answer and criterion by
    :func:`lib.io.annotations.by_raters`. Errors name the file, the line (or task) and the field."""
    path = Path(path)
    if not path.exists():
        raise AgreementError(f"{path}: no such labels file")
    _, reader = registry().human_labels.get(path.name, (None, None))
    left_out = {}
    try:
        if reader:
            rows = _family_rows(path, reader)
        elif is_export(path):
            rows, left_out = read_export(path)
        else:
            rows = label_rows(path)
        rows = [(where, check_label(where, row)) for where, row in rows]
    except (RatingError, LabelsError) as e:
        raise AgreementError(str(e)) from None
    checked, seen = [], {}
    for where, r in rows:
        same = {c: r[c] for c in ("cluster", "question", "answer")} | {
            "references": tuple(r["references"])
        }
        first, before = seen.setdefault(r["answer_id"], (where, same))
        if before != same:
            raise AgreementError(
                f"{where}: answer {r['answer_id']!r} has another cluster, question, answer or "
                f"references than on its first row ({first})"
            )
        checked.append(r)
    checked, several = by_raters(checked)
    if several:
        left_out = {**left_out, **several, "tied": left_out.get("tied", 0) + several["tied"]}
    if not checked:
        raise AgreementError(
            f"{path}: no labels" + (f" with a verdict ({several})" if several else "")
        )
    labels = pd.DataFrame(checked, columns=list(LABEL_COLUMNS))
    labels.attrs["left_out"] = left_out  # what a rating export or a tie could not give a verdict on
    return labels


def answers_of(labels: pd.DataFrame) -> pd.DataFrame:
    """One row per answer, in the order the labels first name them."""
    return (
        labels.drop_duplicates("answer_id")
        .drop(columns=["criterion", "label"])
        .reset_index(drop=True)
    )


def metric_scores(
    answers: pd.DataFrame, metrics, bertscore_model: str | None = None
) -> dict[str, np.ndarray]:
    """Each text metric's per-answer score (:mod:`lib.metrics.text`) against the references."""
    cands, refs = answers["answer"].tolist(), answers["references"].tolist()
    return {
        m: np.asarray(
            text.bertscore(cands, refs, model=bertscore_model)
            if m == "bertscore"
            else getattr(text, m)(cands, refs),
            dtype=float,
        )
        for m in metrics
    }


def judge_scores(
    judge,
    model,
    answers: pd.DataFrame,
    max_new_tokens: int,
    store,
    references=None,
    candidates=None,
) -> np.ndarray:
    """``judge``'s score (in [0, 1]) of every answer on ``model``; NaN where it could not be read."""
    judged = judge.judge(
        model,
        answers["question"].tolist(),
        references if references is not None else answers["references"].tolist(),
        candidates if candidates is not None else answers["answer"].tolist(),
        max_new_tokens,
        store=store,
        item_ids=answers["answer_id"].tolist(),
        progress=False,
    )
    return np.array([j.score if j.valid else math.nan for j in judged], dtype=float)


def judge_check(
    name: str,
    judge,
    model,
    answers: pd.DataFrame,
    labels: pd.DataFrame,
    ratings: np.ndarray,
    max_new_tokens: int,
    store,
) -> dict:
    """One judge's reliability: unreadable share; the same answers judged with their references
    reversed (NaN where every answer has one reference: nothing to reorder); right answers
    (``correctness`` 1, else every answer) padded with :data:`PADDING`."""
    row = {
        "judge": name,
        "n": len(ratings),
        "unreadable": int(np.isnan(ratings).sum()),
        "unreadable_share": float(np.isnan(ratings).mean()),
    }
    multi = answers["references"].map(len) > 1
    if multi.any():
        again = judge_scores(
            judge,
            model,
            answers[multi],
            max_new_tokens,
            store,
            references=[list(reversed(r)) for r in answers.loc[multi, "references"]],
        )
        both = ~np.isnan(again) & ~np.isnan(ratings[multi.to_numpy()])
        row.update(
            reordered=int(multi.sum()),
            self_consistency=float((again[both] == ratings[multi.to_numpy()][both]).mean())
            if both.any()
            else math.nan,
        )
    else:
        row.update(reordered=0, self_consistency=math.nan)
    right = labels[(labels["criterion"] == "correctness") & (labels["label"] == 1)]["answer_id"]
    probe = answers[answers["answer_id"].isin(set(right))] if len(right) else answers
    padded = judge_scores(
        judge,
        model,
        probe,
        max_new_tokens,
        store,
        candidates=[f"{a.rstrip()} {PADDING}" for a in probe["answer"]],
    )
    before = ratings[answers["answer_id"].isin(set(probe["answer_id"])).to_numpy()]
    both = ~np.isnan(padded) & ~np.isnan(before)
    row.update(
        padded=len(probe),
        padded_raised=int((padded[both] > before[both]).sum()),
        padded_lowered=int((padded[both] < before[both]).sum()),
        padded_mean_change=float((padded[both] - before[both]).mean()) if both.any() else math.nan,
    )
    return row


def _verdicts(answers: pd.DataFrame, labels: pd.DataFrame):
    """Per criterion, people's verdict on each answer in ``answers``' order (NaN: not judged on it)."""
    for criterion, lab in labels.groupby("criterion", sort=False):
        by_answer = lab.set_index("answer_id")["label"].reindex(answers["answer_id"])
        yield criterion, by_answer.to_numpy(dtype=float)


def agreement_table(
    scores: dict[str, np.ndarray],
    answers: pd.DataFrame,
    labels: pd.DataFrame,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per scorer and criterion, each statistic with its interval over clusters (``scores``: scorer
    -> per-answer score, NaN where a judge's rating was unreadable: left out, ``n`` says how many
    answers a row rests on). A judge (``<judge>[<model>]``) is also held categorically: its top
    score (LAVE's rating 3, the verdict's yes) or not."""
    clusters = answers["cluster"].to_numpy()
    rows = []
    for criterion, verdict in _verdicts(answers, labels):
        for scorer, s in scores.items():
            keep = ~np.isnan(s) & ~np.isnan(verdict)
            found = agreement(
                s[keep], verdict[keep], clusters[keep], GRADED, n_resamples, seed=seed
            )
            if scorer.split("[")[0] in registry().judges and scorer.endswith("]"):
                found += agreement(
                    (s[keep] == 1).astype(float),
                    verdict[keep],
                    clusters[keep],
                    CATEGORICAL,
                    n_resamples,
                    seed=seed,
                )
            rows += [{"scorer": scorer, "criterion": criterion, **r} for r in found]
    table = pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))
    return table.assign(**_flags(table))


def corrected_table(scores, answers, labels, n_resamples=N_RESAMPLES, seed=0) -> pd.DataFrame:
    """:func:`lib.metrics.ppi.corrected_table` of the judges (``<judge>[<model>]``) of ``scores``."""
    judges = {k: s for k, s in scores.items() if k.endswith("]")}
    verdict = dict(_verdicts(answers, labels)).get(ppi.CRITERION, np.full(len(answers), np.nan))
    ids, at = answers["answer_id"].astype(str), answers["cluster"].astype(str).to_numpy()
    models = [a[len(c) + 1 :] if a.startswith(f"{c}:") else "" for a, c in zip(ids, at)]
    return ppi.corrected_table(judges, verdict, at, models, n_resamples=n_resamples, seed=seed)


def _flags(table: pd.DataFrame) -> dict:
    """A row's interval is not to be trusted: ``few_clusters`` (images), ``few_labels`` (answers
    labelled yes, or no)."""
    fewest = table[["n_positive", "n_negative"]].min(axis=1)
    return {
        "few_clusters": (table["n_clusters"] < MIN_CLUSTERS).astype(bool),
        "few_labels": (fewest < MIN_PER_CLASS).astype(bool),
    }


def paired_table(
    scores: dict[str, np.ndarray],
    answers: pd.DataFrame,
    labels: pd.DataFrame,
    table: pd.DataFrame,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per criterion, the scorer with the highest ROC AUC in ``table`` (:func:`agreement_table`'s)
    against each other scorer: the paired difference of their AUCs over the answers both scored,
    with its interval over clusters."""
    clusters = answers["cluster"].to_numpy()
    auc = table[table["statistic"] == "roc_auc"].dropna(subset=["value"])
    rows = []
    for criterion, verdict in _verdicts(answers, labels):
        ranked = sorted(
            auc[auc["criterion"] == criterion][["value", "scorer"]].itertuples(index=False)
        )
        if not ranked:
            continue
        best = ranked[-1][1]
        for other in (k for k in scores if k != best):
            keep = ~np.isnan(scores[best]) & ~np.isnan(scores[other]) & ~np.isnan(verdict)
            diff, low, high = paired_agreement(
                scores[best][keep],
                scores[other][keep],
                verdict[keep],
                clusters[keep],
                "roc_auc",
                n_resamples,
                seed=seed,
            )
            rows.append(
                {
                    "criterion": criterion,
                    "better": best,
                    "than": other,
                    "auc_difference": diff,
                    "ci_low": low,
                    "ci_high": high,
                    "n": int(keep.sum()),
                    "n_clusters": len(set(clusters[keep])),
                    "n_positive": int((verdict[keep] == 1).sum()),
                    "n_negative": int((verdict[keep] == 0).sum()),
                }
            )
    table = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))
    return table.assign(**_flags(table))


def scorers(
    profile: str | None,
    task: str,
    judges: list[str],
    profile_judge: bool = True,
) -> tuple[list[str], str | None, dict, int, int]:
    """What scores the answers, from the profile's stage 06 config (``judges``: more of its models
    by name): ``(text metrics, bertscore_model, judge name -> spec (the judge unless
    ``profile_judge`` is off), judge_max_new_tokens, n_resamples)``."""
    resolved = config.resolve(EvalConfig, profile)
    cfg, prof = resolved.cfg, resolved.profile
    opts = cfg.options[get_task(task).name]
    found = {"judge": cfg.judge} if cfg.judge and profile_judge else {}
    for name in judges:
        if prof is None or name not in prof.models:
            known = ", ".join(prof.models) if prof else "none"
            raise AgreementError(f"--judge {name}: not a model of the profile (models: {known})")
        found[name] = prof.models[name]
    return (
        list(getattr(opts, "text_metrics", ())),
        getattr(opts, "bertscore_model", None),
        found,
        cfg.judge_max_new_tokens,
        cfg.n_resamples,
    )


def _write(out: Path, tables: dict[str, pd.DataFrame]) -> None:
    """The tables into ``out``, all or nothing: built aside, marked, swapped in whole."""
    building = aside_folder(out)
    for name in (*artifacts.AGREED_TABLES, ppi.TABLE):
        write_csv(building / f"{name}.csv", tables[name])
    mark(building, KIND)
    swap_in(building, out)


def run(
    labels_path: str | Path,
    out: str | Path,
    profile: str | None = None,
    task: str | None = None,
    judges: list[str] = (),
    profile_judge: bool = True,
    n_resamples: int | None = None,
    seed: int = 0,
    store=None,
) -> dict:
    """Score the labelled answers with every metric and judge, write the tables into ``out`` (built
    aside, swapped in whole; a folder of another kind is refused) and return a summary.
    ``n_resamples``: None takes the profile's stage 06 setting."""
    out = Path(out)
    check_ours(out, KIND)
    labels = read_labels(labels_path)
    task = task or registry().human_labels.get(Path(labels_path).name, (None,))[0]
    if task is None:
        raise AgreementError(
            f"{labels_path}: say which task the answers are of (--task), for its text metrics"
        )
    metrics, bert_model, judge_specs, max_tokens, resamples = scorers(
        profile, task, list(judges), profile_judge
    )
    n_resamples = resamples if n_resamples is None else n_resamples
    answers = answers_of(labels)
    scores = metric_scores(answers, metrics, bert_model)
    store = store or CallStore.default()
    checks = []
    for name, spec in judge_specs.items():
        model = load_model(spec)
        for judge in registry().judges.values():
            scorer = f"{judge.name}[{name}]"
            scores[scorer] = judge_scores(judge, model, answers, max_tokens, store)
            checks.append(
                judge_check(
                    scorer, judge, model, answers, labels, scores[scorer], max_tokens, store
                )
            )
    table = agreement_table(scores, answers, labels, n_resamples, seed)
    tables = {
        "agreement": table,
        "paired": paired_table(scores, answers, labels, table, n_resamples, seed),
        "judge_checks": pd.DataFrame(checks),
        ppi.TABLE: corrected_table(scores, answers, labels, n_resamples, seed),
        "scores": pd.concat([answers[["answer_id", "cluster"]], pd.DataFrame(scores)], axis=1),
        "labels": labels.assign(references=labels["references"].map(json.dumps), task=task),
    }
    _write(out, tables)
    return {
        "labels": str(labels_path),
        "task": task,
        "answers": len(answers),
        "clusters": answers["cluster"].nunique(),
        "criteria": sorted(labels["criterion"].unique()),
        "scorers": list(scores),
        "left_out": labels.attrs["left_out"],
        "out": str(out),
    } | ({} if scores else {"note": NO_SCORER})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.agreement", description=__doc__.split(".")[0])
    add = ap.add_argument
    add("--labels", required=True, help="CSV/JSONL, a Label Studio export or a release's file")
    add("--out", required=True, help="the folder to write (new, empty, or an earlier agreement's)")
    add("--profile", help="whose stage 06 settings and models score (default: $VQALAB_PROFILE)")
    add("--task", help="the task the answers are of (its text metrics); known for a release's file")
    add("--judge", action="append", default=[], help="another judge: a model name of the profile")
    add("--no-profile-judge", action="store_true", help="leave out the profile's stage-06 judge")
    add("--n-resamples", type=int, help="default: the profile's stage 06 setting")
    args = ap.parse_args(argv)
    try:
        summary = run(
            args.labels,
            args.out,
            args.profile,
            args.task,
            args.judge,
            not args.no_profile_judge,
            args.n_resamples,
        )
    except (AgreementError, config.ParamsError, NotOurFolder, KeyError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    table = pd.read_csv(Path(args.out) / "agreement.csv")
    print(
        table.to_string(index=False, float_format=lambda x: f"{x:.3f}") if len(table) else NO_SCORER
    )
    print(json.dumps(summary, indent=1))
    return 0
