"""The manifest of an evaluation folder: the fingerprints that tie its parts together (config,
answers, judgements, the datasets as evaluated), written last by :func:`lib.eval.ask.ask` and
checked before a rescore trusts the folder."""

from __future__ import annotations

import json
from pathlib import Path

from lib import artifacts as A
from lib.eval.settings import EvalConfig
from lib.io import file_sha256
from lib.schema import Prediction

def answer_digest(h, p: Prediction) -> None:
    """Add what identifies a stored answer to ``h``: its item, model, style and raw output (not
    its scores, which rescoring rewrites). Made from the predictions as they are written:
    reading a large predictions file again only to hash it doubled the check."""
    h.update(json.dumps([p.dataset, p.item_id, p.model, p.style, p.raw, p.call_key]).encode())


def manifest(out: Path, cfg: EvalConfig, answers: str) -> dict:
    """The fingerprints that tie a finished evaluation's parts together: its config, its answers
    (:func:`answer_digest` of every prediction written), its judgements and every dataset's items as
    they were evaluated."""
    return {"config": file_sha256(out / A.EVAL_CONFIG, remember=False), "answers": answers,
            "judgements": file_sha256(out / A.JUDGEMENTS, remember=False),
            "datasets": {name: file_sha256(Path(folder) / "items.jsonl") for name, folder in cfg.datasets.items()}}


def check_manifest(out: Path, cfg: EvalConfig, answers: str | None = None) -> None:
    """Refuse a folder whose parts do not belong together (an unfinished rerun, a dataset changed
    since the evaluation), saying which part and what to do. ``answers``: the digest of its
    predictions file (:func:`answer_digest`'s, made while a rescore streams it) - checked alone;
    without it, everything else is."""
    path = out / A.EVAL_MANIFEST
    if not path.exists():
        raise ValueError(f"{path} not found: the evaluation in {out} did not finish (a rerun was stopped, or the "
                         f"folder predates manifests), so its config and predictions may belong to different runs; "
                         f"rerun the stage (the call cache keeps it cheap), or rescore with --unverified")
    saved, now = json.loads(path.read_text()), manifest(out, cfg, answers)
    for part in ("config", "judgements") if answers is None else ("answers",):
        if saved.get(part) != now[part]:
            raise ValueError(f"{out}: the {part} changed after the evaluation finished; rerun the stage")
    for name, digest in now["datasets"].items() if answers is None else ():
        if saved.get("datasets", {}).get(name) != digest:
            raise ValueError(f"{out}: dataset {name!r} ({cfg.datasets[name]}/items.jsonl) changed since it was evaluated: "
                             f"rescoring would grade the stored answers against other questions; rerun the stage")
