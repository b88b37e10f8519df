"""LAVE: an LLM judge rates a candidate answer 1-3 against the references; score = (rating - 1) / 2.

The prompt is built as the reference implementation (mair-lab/lave, ``lave.py``) builds it: its
task definition; 8 demonstrations ("<rationale> So rating=N"), the binary set when the most common
*raw* reference is yes/no; references filtered by its rare-answer rule (an answer whose count is at
most a quarter of the most common answer's is dropped, duplicates kept, so "red" x8 + "maroon" x2
shows how the annotators split) and written sorted and quoted (``'a', 'b'``: a reference holding a
comma stays one). The wording is data in ``lib/families/lave/prompts.yaml``.

Reading the rating: :func:`read_rating` never guesses - no rating, or two different ratings, is
invalid (counted); when ``constrain`` is set the judge is asked once more with its answer restricted
to "1", "2", "3" (recorded as a constrained rating). The reference instead takes the last character
of the output and falls back to 2 when it is not a rating: :func:`reference_rating`, whose score
every judgement also keeps (``meta.score_reference``) so both numbers are visible.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import yaml

from lib.core.schema import Judgement
from lib.models import Constraint, Request, generate
from lib.tasks import metric_row
from lib.tasks.judges import Judge

_RATING = re.compile(r"rating\s*(?:is|of|=|:)?\s*\**\s*([1-3])\b", re.IGNORECASE)
_YES_NO = {"yes", "no"}
REFERENCE_FALLBACK = 2  # the reference implementation's rating when the output ends in no rating


@lru_cache(maxsize=1)
def prompt_data() -> dict:
    return yaml.safe_load(Path(__file__).with_name("prompts.yaml").read_text())


def filter_references(references: Sequence[str], share: float | None = None) -> list[str]:
    """The reference's rare-answer filter: drop every answer whose count is at most ``share``
    (0.25) of the most common answer's count; the others are kept with their duplicates, in order."""
    share = prompt_data()["rare_answer_share"] if share is None else share
    refs = list(references)
    if not refs:
        return []
    counts = Counter(refs)
    top = max(counts.values())
    return [r for r in refs if counts[r] / top > share]


def format_references(references: Sequence[str]) -> str:
    """Sorted and single-quoted, comma-separated: ``'cat', 'cat', 'kitten'``."""
    return ", ".join(f"'{r}'" for r in sorted(references))


def is_yes_no(references: Sequence[str]) -> bool:
    """A binary question: its most common raw reference is yes or no."""
    refs = list(references)
    return bool(refs) and Counter(refs).most_common(1)[0][0].lower().rstrip(".") in _YES_NO


def render_prompt(question: str, references: Sequence[str], candidate: str) -> str:
    """The full judge prompt: task definition, the matching demonstrations, then the test input."""
    data = prompt_data()
    demos = data["demonstrations"]["yes_no" if is_yes_no(references) else "general"][
        : data["num_shots"]
    ]
    fmt, out = data["example_template"], data["demonstration_output"]
    blocks = [data["task_description"]]
    blocks += [
        fmt.format(
            question=d["question"],
            references=format_references(d["references"]),
            candidate=d["candidate"],
            output=out.format(rationale=d["rationale"], rating=d["rating"]),
        )
        for d in demos
    ]
    blocks.append(
        fmt.format(
            question=question,
            references=format_references(filter_references(references)),
            candidate=candidate,
            output="",
        )
    )
    return "\n\n".join(blocks).strip()


def read_rating(text: str) -> tuple[int | None, str]:
    """(rating, rationale) from the judge's output; rating None when none or several differ."""
    found = [int(m.group(1)) for m in _RATING.finditer(text)]
    if not found:
        tail = text.strip().rstrip(".").strip()
        found = (
            [int(tail[-1])]
            if tail and tail[-1] in "123" and (len(tail) == 1 or not tail[-2].isalnum())
            else []
        )
    if len(set(found)) != 1:
        return None, text.strip()
    m = _RATING.search(text)
    rationale = text[: m.start()].strip() if m else text.strip()[:-1].strip()
    return found[0], rationale


def reference_rating(text: str) -> int:
    """The rating as the reference implementation reads it: the output's last character when it is
    1, 2 or 3, else 2."""
    tail = text.strip()
    return int(tail[-1]) if tail and tail[-1] in "123" else REFERENCE_FALLBACK


def score(rating: int | None) -> float | None:
    """LAVE score in [0, 1]: (rating - 1) / 2; None for an unread rating."""
    return None if rating is None else (rating - 1) / 2


def judge_requests(
    questions: Sequence[str],
    references: Sequence[Sequence[str]],
    candidates: Sequence[str],
    max_new_tokens: int,
):
    return [
        Request.simple(render_prompt(q, r, c), max_new_tokens=max_new_tokens)
        for q, r, c in zip(questions, references, candidates)
    ]


def _constrained_ratings(
    model, requests: list, first: list, parsed: list, methods: list, store, progress: bool
) -> None:
    """Ask again, constrained to "1", "2" or "3", where a reply held no rating (``parsed`` and
    ``methods`` updated in place; the rationale stays the first reply's)."""
    retry = [i for i, (rating, _) in enumerate(parsed) if rating is None and first[i].error is None]
    if not retry:
        return
    followup = [
        Request(
            messages=requests[i].messages
            + [
                {"role": "assistant", "content": first[i].text},
                {"role": "user", "content": prompt_data()["rating_followup"]},
            ],
            max_new_tokens=2,
            constraint=Constraint(choices=("1", "2", "3")),
        )
        for i in retry
    ]
    second = generate(
        model, followup, store=store, progress=progress, desc="LAVE constrained ratings"
    )
    for i, resp in zip(retry, second):
        if resp.valid and resp.parsed in ("1", "2", "3"):
            parsed[i] = (int(resp.parsed), first[i].text.strip())
            methods[i] = resp.method


def judge(
    model,
    questions: Sequence[str],
    references: Sequence[Sequence[str]],
    candidates: Sequence[str],
    max_new_tokens: int,
    store=None,
    item_ids: Sequence[str] | None = None,
    answer_model: str = "",
    constrain: bool = True,
    progress: bool = True,
) -> list[Judgement]:
    """Rate every candidate with ``model`` (any backend) through the call cache; one Judgement each.
    ``max_new_tokens`` bounds the judge's reply (stage 06's ``judge_max_new_tokens``)."""
    if not (len(questions) == len(references) == len(candidates)):
        raise ValueError("judge: questions, references and candidates must have the same length")
    requests = judge_requests(questions, references, candidates, max_new_tokens)
    first = generate(
        model, requests, store=store, progress=progress, desc=f"LAVE judge {model.name}"
    )
    parsed = [read_rating(r.text) if r.error is None else (None, "") for r in first]
    methods = ["parse:rating" if rating is not None else "invalid" for rating, _ in parsed]
    if constrain:
        _constrained_ratings(model, requests, first, parsed, methods, store, progress)
    ids = list(item_ids) if item_ids is not None else [str(i) for i in range(len(questions))]
    out = []
    for i, ((rating, rationale), resp) in enumerate(zip(parsed, first)):
        out.append(
            Judgement(
                item_id=ids[i],
                model=answer_model,
                judge=model.name,
                rating=rating,
                score=score(rating),
                rationale=rationale,
                raw=resp.text,
                valid=rating is not None,
                meta={
                    "method": methods[i],
                    "references": filter_references(references[i]),
                    "score_reference": None if resp.error else score(reference_rating(resp.text)),
                    "error": resp.error,
                },
            )
        )
    return out


class Lave(Judge):
    """LAVE as stage 06 runs it (``tasks: {<task>: {judge: lave}}``): :func:`judge`, and beside its
    ``lave`` row the ``lave_reference`` row (the reference implementation's reading, where every
    judgement kept it)."""

    name = "lave"

    def judge(self, model, *args, **kwargs) -> list[Judgement]:
        """:func:`judge` (the protocol's arguments, in its order)."""
        return judge(model, *args, **kwargs)

    def rows(self, rated, clusters, scoring) -> list[dict]:
        rows = super().rows(rated, clusters, scoring)
        ref = [j.meta.get("score_reference") for j, _ in rated]
        if rows and all(x is not None for x in ref):
            cut = sum(c for _, c in rated)
            rows.append(
                metric_row(
                    "all",
                    "lave_reference",
                    ref,
                    len(rated),
                    0,
                    scoring=scoring,
                    n_truncated=cut,
                    clusters=clusters,
                )
            )
        return rows
