"""What a Label Studio export of an item review (:mod:`lib.items.review`) says of each item: its
fields checked (:func:`check`: an error as ``FILE: task N: field X: expected ..., got ...``), each
annotator's verdict read (:func:`vote`), and the item's verdict decided by the majority of its
reviewers, a tie left as no verdict (:func:`decide`).
"""

from __future__ import annotations

from collections import Counter

from lib.core.schema import Item
from lib.io.labelstudio_files import LabelStudioError

VERDICTS = ("keep", "fix key", "rewrite", "drop")
TASK_DATA = ("review_id", "dataset", "digest", "item_id", "flags", "option_choices")
# the verdict's follow-up fields in the config, by verdict
FIX, ANSWER, REWRITE = "right_option", "right_answer", "rewritten"


class ReviewError(LabelStudioError):
    """A review project that cannot be made, or an export that cannot be applied."""


def _expect(where: str, field: str, value, ok: bool, expected: str) -> None:
    if not ok:
        raise ReviewError(f"{where}: field {field}: expected {expected}, got {value!r:.80}")


def _text_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check(task: dict, where: str) -> None:
    """The fields the reading uses, checked (the export's shape, as Label Studio writes it)."""
    data = task["data"]
    missing = [k for k in TASK_DATA if k not in data]
    if missing:
        raise ReviewError(f"{where}: no review task (its data lacks {', '.join(missing)})")
    for k in ("review_id", "dataset", "digest", "item_id"):
        _expect(where, f"data.{k}", data[k], isinstance(data[k], str), "text")
    _expect(where, "data.flags", data["flags"], _text_list(data["flags"]), "a list of text")
    annotations = task.get("annotations") or []
    _expect(where, "annotations", annotations, isinstance(annotations, list), "a list")
    for i, a in enumerate(annotations):
        at = f"annotations[{i}]"
        _expect(where, at, a, isinstance(a, dict), "an object")
        result = a.get("result") or []
        _expect(where, f"{at}.result", result, isinstance(result, list), "a list")
        for j, r in enumerate(result):
            ok = isinstance(r, dict) and isinstance(r.get("from_name"), str)
            _expect(where, f"{at}.result[{j}]", r, ok, "an object with a from_name")
            value = r.get("value")
            ok = isinstance(value, dict) and any(
                _text_list(value.get(k)) for k in ("choices", "text")
            )
            _expect(where, f"{at}.result[{j}].value", value, ok, "choices or text (lists of text)")


def vote(annotation: dict, data: dict, item: Item, where: str) -> tuple | None:
    """One annotator's verdict: ``(verdict, what)`` - the new key (a tuple of option indices, or
    of answer texts) for a fix, the new question for a rewrite; None where it gives no verdict."""
    got = {r["from_name"]: r["value"] for r in annotation.get("result") or []}
    choices = (got.get("verdict") or {}).get("choices") or []
    if not choices:
        return None
    if len(choices) != 1 or choices[0] not in VERDICTS:
        raise ReviewError(
            f"{where}: verdict: expected one of {', '.join(VERDICTS)}, got {choices!r}"
        )
    verdict, text = (
        choices[0],
        lambda name: "\n".join((got.get(name) or {}).get("text") or []).strip(),
    )
    if verdict == "rewrite":
        if not text(REWRITE):
            raise ReviewError(f"{where}: rewrite without the corrected question ({REWRITE})")
        return verdict, text(REWRITE)
    if verdict != "fix key":
        return verdict, None
    if item.options is None:
        if not text(ANSWER):
            raise ReviewError(f"{where}: fix key on an open question without {ANSWER}")
        return verdict, (text(ANSWER),)
    values = [c["value"] for c in data["option_choices"] if isinstance(c, dict)]
    picked = (got.get(FIX) or {}).get("choices") or []
    unknown = [p for p in picked if p not in values]
    if unknown or (len(item.answer) == 1 and len(picked) != 1):
        raise ReviewError(
            f"{where}: {FIX}: expected {'one' if len(item.answer) == 1 else 'some'} of the "
            f"item's options, got {picked!r}"
        )
    return verdict, tuple(sorted(values.index(p) for p in picked))


_TIE = object()


def _majority(votes: list):
    """The one value most of ``votes`` give; :data:`_TIE` where two give it as often."""
    top = Counter(votes).most_common()
    return _TIE if len(top) > 1 and top[0][1] == top[1][1] else top[0][0]


def decide(votes: dict) -> tuple[str, object, int] | str:
    """``(verdict, what, reviewers who said it)``, or why none: ``unreviewed`` or ``tied``."""
    if not votes:
        return "unreviewed"
    verdict = _majority([v for v, _ in votes.values()])
    what = _TIE if verdict is _TIE else _majority([w for v, w in votes.values() if v == verdict])
    if what is _TIE:
        return "tied"
    return verdict, what, sum(v == (verdict, what) for v in votes.values())
