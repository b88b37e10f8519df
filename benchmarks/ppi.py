"""A judge's accuracy corrected by people (``make bench``): writes outputs/bench/ppi.json.

Two measurements of :mod:`lib.metrics.ppi`, prediction-powered inference of an accuracy:

- by simulation (:func:`coverage`): how often each 95% interval covers the true
  accuracy - the corrected estimate with the paper's interval (answers independent) and with ours
  (images resampled), people's mean on the labelled answers alone, and the judge's raw mean - on
  data shaped like YesBut's human evaluation (30 images, 5 answers each, 50 labelled at random),
  with a judge that is lenient and barely right (:data:`SHAPE`) and with one that
  agrees with people, and like a full evaluation whose people label whole images (200 images, 15
  answers each, 20 of them labelled), with each interval's mean width;
- on YesBut's human evaluation (``../shared/data/yesbut/Human_Eval_Results.csv``, 150 answers
  about 30 images, every one judged by people) scored by the yesbut profile's judge (SmolLM2,
  through ``python -m lib.agreement`` and the call store): over many random draws of 50 kept
  labels, how often the corrected interval and people's-mean-alone interval cover people's mean
  on all 150, and their mean widths.

The targets say the clustered interval covers within the simulation's band in every shape and on
the real labels; the paper's interval and the raw judge are findings beside it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.records import host_state, record
from lib.agreement import scorers as agreement
from lib.core.paths import ROOT
from lib.metrics import ppi
from lib.metrics.stats import CONFIDENCE, mean_ci

LABELS = ROOT.parent / "shared" / "data" / "yesbut" / "Human_Eval_Results.csv"
PROFILE = "yesbut"  # the profile whose stage 07 holds its judge to these labels
REPS, N_RESAMPLES = 1000, 1000  # simulated evaluations per shape; bootstrap resamples each
SPLITS = 500  # random draws of kept labels on YesBut's verdicts
_SE = (0.95 * 0.05 / REPS) ** 0.5  # a coverage's binomial standard error at REPS runs
BAND = (0.95 - 3 * _SE, 0.95 + 3 * _SE)  # where a 95% interval's coverage lands, all but rarely
SHAPES = {
    "yesbut_like_labelled_at_random": dict(n_images=30, per_image=5, n_labelled=50),
    "yesbut_like_a_judge_that_agrees": dict(
        n_images=30, per_image=5, n_labelled=50, shape={"lenience": 0.0, "skill": 3.0}
    ),
    "whole_images_labelled": dict(n_images=200, per_image=15, n_labelled=300, whole_images=True),
}
TARGETS = {
    "clustered_within_band": "== true",
    "yesbut.every_judge_corrected_coverage_at_least": ">= 0.9",
}


# the intervals the simulation compares: the corrected estimate with the paper's interval and with
# ours, people's mean on the labelled answers alone, and the judge's mean taken as it is
METHODS = ("ppi_paper", "ppi_clustered", "human_only", "judge_raw")


def _simulated(rng, n_images: int, per_image: int, shape: dict) -> tuple:
    """One evaluation like YesBut's human evaluation: per image a difficulty and a judge leniency
    (normal, ``spread`` on the logit scale: the answers about one image move together), a verdict
    per answer, and a judge that says yes more often than people (``lenience``) and somewhat more
    often to right answers (``skill``)."""
    from scipy.special import expit

    image = np.repeat(np.arange(n_images), per_image)
    difficulty, leniency = rng.normal(size=(2, n_images)) * shape["spread"]
    y = (rng.random(len(image)) < expit(shape["base"] + difficulty[image])).astype(float)
    says_yes = shape["lenience"] + shape["skill"] * (2 * y - 1) + leniency[image]
    return y, (rng.random(len(image)) < expit(says_yes)).astype(float), image


SHAPE = {"base": -1.0, "spread": 1.0, "lenience": 1.0, "skill": 1.0}  # coverage's default data


def coverage(
    n_images: int = 30,
    per_image: int = 5,
    n_labelled: int = 50,
    reps: int = 200,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    shape: dict | None = None,
    confidence: float = CONFIDENCE,
    whole_images: bool = False,
) -> dict[str, dict]:
    """Per method of :data:`METHODS`, how often its interval covers the true accuracy (people's
    mean over the whole population of images, by quadrature) in ``reps`` simulated evaluations
    (:func:`_simulated` with ``shape``, default :data:`SHAPE`), ``n_labelled`` answers labelled at
    random (``whole_images``: every answer of ``n_labelled / per_image`` images, as people label
    an image's answers together), and its mean width."""
    from scipy.special import expit

    shape = {**SHAPE, **(shape or {})}
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    truth = float(weights @ expit(shape["base"] + shape["spread"] * nodes) / weights.sum())
    rng = np.random.default_rng(seed)
    found = {m: [] for m in METHODS}
    for rep in range(reps):
        y, f, image = _simulated(rng, n_images, per_image, shape)
        if whole_images:
            kept = np.isin(image, rng.choice(n_images, n_labelled // per_image, replace=False))
        else:
            kept = np.zeros(len(y), dtype=bool)
            kept[rng.choice(len(y), size=n_labelled, replace=False)] = True
        args = (y[kept], f[kept], f[~kept], confidence)
        at = {"clusters": image[kept], "clusters_unlabelled": image[~kept]}
        found["ppi_paper"].append(ppi.ppi_mean_ci(*args))
        found["ppi_clustered"].append(
            ppi.ppi_mean_ci(*args, **at, n_resamples=n_resamples, seed=rep)
        )
        found["human_only"].append(mean_ci(y[kept], n_resamples, confidence, rep, image[kept]))
        found["judge_raw"].append(mean_ci(f, n_resamples, confidence, rep, image))
    return {
        m: {
            "coverage": float(np.mean([low <= truth <= high for _, low, high in rows])),
            "mean_width": float(np.mean([high - low for _, low, high in rows])),
            "truth": truth,
        }
        for m, rows in found.items()
    }


def simulated() -> dict:
    """Per shape, each method's coverage and mean width."""
    return {
        name: {**kw, "methods": coverage(**kw, reps=REPS, n_resamples=N_RESAMPLES, seed=0)}
        for name, kw in SHAPES.items()
    }


def on_yesbut() -> dict:
    """Per judge, over :data:`SPLITS` draws of a third of the labels: coverage of people's mean on
    every answer by the corrected and the people-only intervals, their widths, the raw mean."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "agreement"
        summary = agreement.run(LABELS, out, PROFILE)
        scores = pd.read_csv(out / "scores.csv", keep_default_na=False, na_values=[""])
        labels = pd.read_csv(out / "labels.csv", keep_default_na=False, na_values=[""])
    right = labels[labels["criterion"] == ppi.CRITERION].set_index("answer_id")["label"]
    human = right.reindex(scores["answer_id"]).to_numpy(dtype=float)
    clusters = scores["cluster"].astype(str).to_numpy()
    judges = [s for s in summary["scorers"] if s.endswith("]")]
    found = {}
    for judge in judges:
        f = np.nan_to_num(scores[judge].to_numpy(dtype=float), nan=0.0)
        rows = pd.DataFrame(
            [
                ppi.corrected(f, human, clusters, ppi.held_out(len(f), seed=s), 1000, seed=s)
                for s in range(SPLITS)
            ]
        )
        found[judge] = {
            "judge_raw": float(rows["judge_raw"].iloc[0]),
            "human_all": float(rows["human_all"].iloc[0]),
            "corrected_coverage": float(rows["corrected_covers"].mean()),
            "human_only_coverage": float(rows["human_only_covers"].mean()),
            "corrected_mean_width": float((rows["corrected_high"] - rows["corrected_low"]).mean()),
            "human_only_mean_width": float(
                (rows["human_only_high"] - rows["human_only_low"]).mean()
            ),
        }
    worst = min(j["corrected_coverage"] for j in found.values()) if found else None
    return {
        "labels": str(LABELS.relative_to(ROOT.parent)),
        "profile": PROFILE,
        "answers": summary["answers"],
        "labelled_per_split": int(ppi.held_out(summary["answers"]).sum()),
        "splits": SPLITS,
        "judges": found,
        "every_judge_corrected_coverage_at_least": worst,
    }


def main() -> dict:
    before = host_state()
    shapes = simulated()
    result = {
        "reps": REPS,
        "n_resamples": N_RESAMPLES,
        "band": list(BAND),
        "shapes": shapes,
        "clustered_within_band": all(
            BAND[0] <= s["methods"]["ppi_clustered"]["coverage"] <= BAND[1] for s in shapes.values()
        ),
        "yesbut": on_yesbut() if LABELS.exists() else {"skipped": f"{LABELS} is absent"},
    }
    return record("ppi", result, before, TARGETS)


if __name__ == "__main__":
    main()
