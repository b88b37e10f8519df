"""Stage 06's scores of given answers, by the path users run: the answers written as an evaluation
folder (``config.json``, ``predictions.jsonl``) and rescored (:func:`lib.eval.rescore.rescore_folder`,
what ``python -m lib.stages.evaluate rescore`` runs). No test scores through a path of its own."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from lib.core.schema import Prediction
from lib.eval.manifest import answer_digest, manifest
from lib.eval.rescore import rescore_folder, saved_config
from lib.eval.settings import EvalConfig
from lib.io import artifacts, read_jsonl, write_json, write_jsonl


def rescored(
    cfg: EvalConfig, preds: list[Prediction], folder: str | Path
) -> tuple[list[Prediction], pd.DataFrame]:
    """The predictions as a rescore of ``folder`` leaves them (read again and scored), and its
    ``metrics.csv``. ``cfg.datasets`` must name the folders of the predictions' items."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / artifacts.EVAL_CONFIG, cfg.to_dict())
    write_jsonl(folder / artifacts.PREDICTIONS, (p.to_dict() for p in preds))
    rescore_folder(folder, unverified=True)  # no manifest: these answers were not asked by stage 06
    return [
        Prediction.from_dict(d) for d in read_jsonl(folder / artifacts.PREDICTIONS)
    ], pd.read_csv(folder / artifacts.METRICS)


def restamp(folder: str | Path) -> None:
    """A finished evaluation folder edited by hand (a test's hostile replies or judgements) made to
    verify again, as if stage 06 had written it so: its manifest rewritten over the files as they
    are, then its tables rescored from its predictions (which records that manifest)."""
    folder = Path(folder)
    answers = hashlib.sha256()
    for d in read_jsonl(folder / artifacts.PREDICTIONS):
        answer_digest(answers, Prediction.from_dict(d))
    write_json(
        folder / artifacts.EVAL_MANIFEST,
        manifest(folder, saved_config(folder), answers.hexdigest()),
    )
    rescore_folder(folder, unverified=True)
