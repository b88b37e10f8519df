"""LAVE: an LLM judge rates a candidate answer 1-3 against the references; score = (rating - 1) / 2.

The prompt (task description, demonstrations, format) is data in ``lib/data/prompts/lave.yaml``.
:func:`judge_requests` builds one request per answer, :func:`read_rating` reads the rating from the
judge's text and never guesses: no rating, or two different ratings ("provide only one rating"
ignored), is invalid. :func:`judge` runs a judge model through the call cache; when the text has no
readable rating and ``constrain`` is set, the judge is asked once more with its answer restricted to
"1", "2", "3" (a constrained rating, recorded as such) - otherwise the rating stays invalid.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

import yaml

from lib.paths import DATA
from lib.schema import Judgement

_RATING = re.compile(r"rating\s*(?:is|of|=|:)?\s*\**\s*([1-3])\b", re.IGNORECASE)
_YES_NO = {"yes", "no"}


@lru_cache(maxsize=1)
def prompt_data() -> dict:
    return yaml.safe_load((DATA / "prompts" / "lave.yaml").read_text())


def filter_references(references: Sequence[str]) -> list[str]:
    """LAVE's rare-answer filter: when some answer was given by several annotators, answers given by
    only one are dropped; the rest are deduplicated, most frequent first."""
    counts = Counter(r.strip() for r in references if r.strip())
    if counts and max(counts.values()) > 1:
        counts = Counter({r: c for r, c in counts.items() if c > 1})
    return [r for r, _ in counts.most_common()]


def is_yes_no(references: Sequence[str]) -> bool:
    refs = {r.strip().lower().rstrip(".") for r in references}
    return bool(refs) and refs <= _YES_NO


def render_prompt(question: str, references: Sequence[str], candidate: str) -> str:
    """The full judge prompt: task description, the matching demonstrations, then the test input."""
    data = prompt_data()
    refs = filter_references(references)
    demos = data["demonstrations"]["yes_no" if is_yes_no(refs) else "general"]
    fmt = data["demonstration_template"]
    blocks = [data["task_description"]]
    blocks += [fmt.format(question=d["question"], references=", ".join(d["references"]), candidate=d["candidate"],
                          output=d["output"]) for d in demos]
    blocks.append(fmt.format(question=question, references=", ".join(refs), candidate=candidate, output="").rstrip())
    return "\n\n".join(blocks)


def read_rating(text: str) -> tuple[int | None, str]:
    """(rating, rationale) from the judge's output; rating None when none or several differ."""
    found = [int(m.group(1)) for m in _RATING.finditer(text)]
    if not found:
        tail = text.strip().rstrip(".").strip()
        found = [int(tail[-1])] if tail and tail[-1] in "123" and (len(tail) == 1 or not tail[-2].isalnum()) else []
    if len(set(found)) != 1:
        return None, text.strip()
    m = _RATING.search(text)
    rationale = text[:m.start()].strip() if m else text.strip()[:-1].strip()
    return found[0], rationale


def score(rating: int | None) -> float | None:
    """LAVE score in [0, 1]: (rating - 1) / 2; None for an unread rating."""
    return None if rating is None else (rating - 1) / 2


def judge_requests(questions: Sequence[str], references: Sequence[Sequence[str]], candidates: Sequence[str],
                   max_new_tokens: int = 96):
    from lib.models import Request

    return [Request.simple(render_prompt(q, r, c), max_new_tokens=max_new_tokens)
            for q, r, c in zip(questions, references, candidates)]


def judge(model, questions: Sequence[str], references: Sequence[Sequence[str]], candidates: Sequence[str],
          store=None, item_ids: Sequence[str] | None = None, answer_model: str = "", constrain: bool = True,
          max_new_tokens: int = 96, progress: bool = True) -> list[Judgement]:
    """Rate every candidate with ``model`` (any backend) through the call cache; one Judgement each."""
    from lib.models import Constraint, Request, generate

    if not (len(questions) == len(references) == len(candidates)):
        raise ValueError("judge: questions, references and candidates must have the same length")
    requests = judge_requests(questions, references, candidates, max_new_tokens)
    first = generate(model, requests, store=store, progress=progress, desc=f"LAVE judge {model.name}")
    parsed = [read_rating(r.text) if r.error is None else (None, "") for r in first]
    methods = ["parse:rating" if rating is not None else "invalid" for rating, _ in parsed]
    retry = [i for i, (rating, _) in enumerate(parsed) if rating is None and first[i].error is None]
    if constrain and retry:
        followup = [Request(messages=requests[i].messages + [
            {"role": "assistant", "content": first[i].text},
            {"role": "user", "content": prompt_data()["rating_followup"]}],
            max_new_tokens=2, constraint=Constraint(choices=("1", "2", "3"))) for i in retry]
        second = generate(model, followup, store=store, progress=progress, desc="LAVE constrained ratings")
        for i, resp in zip(retry, second):
            if resp.valid and resp.parsed in ("1", "2", "3"):
                parsed[i] = (int(resp.parsed), first[i].text.strip())
                methods[i] = resp.method
    ids = list(item_ids) if item_ids is not None else [str(i) for i in range(len(questions))]
    out = []
    for i, ((rating, rationale), resp) in enumerate(zip(parsed, first)):
        out.append(Judgement(item_id=ids[i], model=answer_model, judge=model.name, rating=rating, score=score(rating),
                             rationale=rationale, raw=resp.text, valid=rating is not None,
                             meta={"method": methods[i], "references": filter_references(references[i]),
                                   "error": resp.error}))
    return out
