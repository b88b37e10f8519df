"""One lmms-eval sample of an import (:mod:`lib.eval.foreign`): its reply as the model gave it, the
:class:`lib.core.schema.Prediction` it becomes, and the request it was asked with as far as lmms-eval
logged it (:func:`logged_request`, which the run comparison reads)."""

from __future__ import annotations

import json

from lib.core.schema import Prediction
from lib.eval.foreign_schema import ROW_KEY, ForeignError

STYLE = "zero_shot"  # the export's prompts are stage 06's zero-shot prompts
NO_INPUT = (
    "lmms-eval logged no prompt text (`input`) for this item: whether it asked what VQA Lab asks is "
    "unknown"
)
NO_PATH = (
    "no lmms-eval results.json beside the samples: whether its model got VQA Lab's message (chat path) or "
    "placed the images itself (simple path) is unknown"
)
SIMPLE_PATH = (
    "lmms-eval simple path (doc_to_text): the model's own prompt template and image placement"
)


def reply(sample: dict, where: str) -> str:
    """The reply as the model gave it: ``resps`` (before lmms-eval stripped it) where logged, else
    ``filtered_resps``, else the export's row's ``raw``; a missing one is the empty reply (read as
    invalid, like any unreadable answer)."""
    for key in ("resps", "filtered_resps"):
        if key in sample:
            value = sample[key]
            while isinstance(
                value, list
            ):  # lmms-eval wraps a doc's requests and their replies in lists
                if len(value) != 1:
                    raise ForeignError(
                        f"{where}: {key} holds {len(value)} replies; VQA Lab keeps one answer per "
                        f"item (run lmms-eval with --repeats 1)"
                    )
                value = value[0]
            return "" if value is None else value if isinstance(value, str) else json.dumps(value)
    raw = sample[ROW_KEY].get("raw")
    return raw if isinstance(raw, str) else ""


def sample_prediction(sample: dict, where: str, dataset: str, label: str) -> Prediction:
    """The :class:`Prediction` of one sample row (unread: :func:`import_lmms_eval` reads and scores
    them all); what lmms-eval logged of the request goes into ``meta['lmms_eval']``."""
    row = sample.get(ROW_KEY)
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("id"), str)
        or not isinstance(row.get("task"), str)
    ):
        raise ForeignError(
            f"{where}: no VQA Lab row under {ROW_KEY!r} (the item's id and task, as the exported "
            f"process_results writes them): not a task `python -m lib.export lmms-eval` wrote"
        )
    raw = reply(sample, where)
    counts = next((c for c in sample.get("token_counts") or [] if isinstance(c, dict)), {})
    tokens = int(counts.get("output_tokens") or 0)
    logged = {"line": int(where.rsplit(":", 1)[1]), "doc_id": sample.get("doc_id")}
    if isinstance(sample.get("input"), str):
        logged["input"] = sample["input"]
    filtered = sample.get("filtered_resps")
    if filtered is not None and filtered != raw:
        logged["filtered_resps"] = filtered
    return Prediction(
        item_id=row["id"],
        model=label,
        task=row["task"],
        raw=raw,
        dataset=dataset,
        style=STYLE,
        prompt_tokens=int(counts.get("input_tokens") or 0),
        completion_tokens=tokens,
        meta={"lmms_eval": logged},
    )


def logged_request(parts: dict, row: dict, record: dict) -> dict:
    """The request an imported answer was asked with, in :func:`lib.compare.evaluations.request_parts`'s
    terms: stage 06's for the export's settings (``parts``, rebuilt from the imported config) with
    what lmms-eval logged in its place - the prompt text it sent, its simple path - and, under
    ``unsplit``, why a changed reply cannot be put on the prompt or the model alone."""
    logged = (row.get("meta") or {}).get("lmms_eval") or {}
    parts = dict(parts)
    if isinstance(logged.get("input"), str):
        parts["texts"] = [logged["input"]]
    if record.get("path") == "simple":
        parts["style texts"] = SIMPLE_PATH
    why = [
        w
        for w, unknown in ((NO_INPUT, "input" not in logged), (NO_PATH, not record.get("path")))
        if unknown
    ]
    if why:
        parts["unsplit"] = "; ".join(why)
    return parts
