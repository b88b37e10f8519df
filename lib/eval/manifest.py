"""The manifest of an evaluation folder: the fingerprints that tie its parts together (config,
answers, judgements, the datasets as evaluated), written last by :func:`lib.eval.ask.ask`, and
:func:`check_manifest`, the one check of whether a folder is a finished evaluation left as it
was: a rescore (:mod:`lib.eval.rescore`) and a comparison (:mod:`lib.compare.explain`) make it
before they trust the folder."""

from __future__ import annotations

import json
from pathlib import Path

from lib.core.schema import Prediction
from lib.eval.settings import EvalConfig
from lib.io import artifacts, file_sha256

# what check_manifest verifies: a rescore checks the first three before it reads the answers, then
# the answers; a comparison checks all but the datasets (a dataset changed since is a cause of its own)
BEFORE_READING = ("config", "judgements", "datasets")
PARTS = (*BEFORE_READING, "answers", "scores")
_FILES = {
    "config": f"{artifacts.EVAL_CONFIG} no longer matches",
    "judgements": f"{artifacts.JUDGEMENTS} no longer matches",
    "answers": f"the replies in {artifacts.PREDICTIONS} no longer match",
}


class Unverified(ValueError):
    """An evaluation folder that did not finish, or whose parts were changed after it finished."""


def answer_digest(h, p: Prediction) -> None:
    """Add what identifies a stored answer to ``h``: its item, model, style and raw output (not
    its scores, which rescoring rewrites). Made from the predictions as they are written:
    reading a large predictions file again only to hash it doubled the check."""
    h.update(json.dumps([p.dataset, p.item_id, p.model, p.style, p.raw, p.call_key]).encode())


def manifest(out: Path, cfg: EvalConfig, answers: str) -> dict:
    """The fingerprints that tie a finished evaluation's parts together: its config, its answers
    (:func:`answer_digest` of every prediction written), its judgements and every dataset's items as
    they were evaluated."""
    return {
        "config": file_sha256(out / artifacts.EVAL_CONFIG, remember=False),
        "answers": answers,
        "judgements": file_sha256(out / artifacts.JUDGEMENTS, remember=False),
        "datasets": {
            name: file_sha256(Path(folder) / "items.jsonl") for name, folder in cfg.datasets.items()
        },
    }


def changed_datasets(cfg: EvalConfig, saved: dict) -> dict[str, str | None]:
    """The datasets whose ``items.jsonl`` is no longer the one the evaluation asked, by name, with
    the digest the manifest ``saved`` records of the one it asked."""
    recorded = saved.get("datasets") or {}
    return {
        name: recorded.get(name)
        for name, folder in cfg.datasets.items()
        if recorded.get(name) != file_sha256(Path(folder) / "items.jsonl")
    }


def saved_manifest(out: Path) -> dict:
    """An evaluation folder's manifest, refused (:class:`Unverified`) when the evaluation did not finish."""
    path = out / artifacts.EVAL_MANIFEST
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        raise Unverified(
            f"{out}: the evaluation did not finish ({path.name} not found: stage 06 was stopped part way, "
            f"or the folder predates manifests), so its config and predictions may belong to different "
            f"runs; rerun stage 06 to finish it (the call cache keeps it cheap)"
        ) from None
    except ValueError:
        raise Unverified(
            f"{path} is not readable JSON: the evaluation did not finish; rerun stage 06 to finish "
            f"it"
        ) from None
    if not isinstance(saved, dict):
        raise Unverified(
            f"{path} is not a manifest (a JSON object): rerun stage 06 to finish the evaluation"
        )
    return saved


def check_scores(out: Path) -> None:
    """Refuse a predictions file whose scores (or tables) are not those recorded when it was last
    scored (:func:`lib.io.artifacts.stale_tables`: edited since, or a rescore stopped part way)."""
    if artifacts.stale_tables(out) or not (out / artifacts.TABLES_META).exists():
        raise Unverified(
            f"{out}: the scores are not those recorded when it was last scored ({artifacts.PREDICTIONS} or its "
            f"tables were edited since, or a rescore stopped part way); recompute them from the stored "
            f"replies (no model is called): python -m lib.stages.evaluate rescore --run {out.parent.name}"
        )


def check_manifest(
    out: Path, cfg: EvalConfig, answers: str | None = None, parts=BEFORE_READING
) -> dict:
    """Refuse (:class:`Unverified`) a folder whose parts do not belong together or were changed after
    the evaluation finished - an unfinished run, a dataset changed since, edited replies or scores -
    naming the part and what to do; returns its manifest. ``parts`` (of :data:`PARTS`) are checked:
    ``answers`` against ``answers``, the digest of its predictions (:func:`answer_digest`'s, made
    while the caller reads them), ``scores`` by :func:`check_scores`."""
    out = Path(out)
    saved = saved_manifest(out) if set(parts) - {"scores"} else {}
    now = {
        "config": file_sha256(out / artifacts.EVAL_CONFIG, remember=False),
        "answers": answers,
        "judgements": file_sha256(out / artifacts.JUDGEMENTS, remember=False),
    }
    for part in (p for p in ("config", "judgements", "answers") if p in parts):
        if saved.get(part) != now[part]:
            raise Unverified(
                f"{out}: the {part} changed after the evaluation finished ({_FILES[part]} what its "
                f"{artifacts.EVAL_MANIFEST} records); rerun stage 06"
            )
    for name in changed_datasets(cfg, saved) if "datasets" in parts else ():
        raise Unverified(
            f"{out}: dataset {name!r} ({cfg.datasets[name]}/items.jsonl) changed since it was evaluated: "
            f"rescoring would grade the stored answers against other questions; rerun stage 06"
        )
    if "scores" in parts:
        check_scores(out)
    return saved
