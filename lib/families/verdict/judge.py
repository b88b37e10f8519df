"""The yes/no judge: one request per answer, constrained to the two words where the backend can
constrain. Free text counts only when it is the word, alone or followed by punctuation ("Yes.",
"No, the reference says red"): "no idea" or "yes or no" is invalid and counted, never guessed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import yaml

from lib.core.schema import ERROR, INVALID, PARSE_EXACT, Judgement, is_constrained
from lib.models import Constraint, Request, generate
from lib.tasks.judges import Judge


@cache
def prompt_data() -> dict:
    return yaml.safe_load(Path(__file__).with_name("prompts.yaml").read_text())


def render_prompt(question: str, references: Sequence[str], candidate: str) -> str:
    """The judge's prompt: references sorted and quoted, one line each field."""
    refs = ", ".join(f"'{r}'" for r in sorted(references))
    return prompt_data()["template"].format(question=question, references=refs, candidate=candidate)


def read_verdict(resp) -> tuple[str | None, str]:
    """``(word, method)``: the constrained word as decoded, else the word the reply is (alone, or
    followed by punctuation), else ``(None, "invalid")``."""
    choices = tuple(prompt_data()["choices"])
    if resp.error is not None:
        return None, ERROR
    if is_constrained(resp.method) and resp.valid and resp.parsed in choices:
        return resp.parsed, resp.method
    words = "|".join(map(re.escape, choices))
    found = re.match(rf"\s*\**({words})\**\s*(?:[.,:;!]|$)", str(resp.text), re.IGNORECASE)
    return (found[1].lower(), PARSE_EXACT) if found else (None, INVALID)


class Verdict(Judge):
    """Correct (1) or not (0), as the judge model says."""

    name = "verdict"

    def judge(
        self,
        model,
        questions,
        references,
        candidates,
        max_new_tokens,
        store=None,
        item_ids=None,
        progress=True,
    ) -> list[Judgement]:
        choices = tuple(prompt_data()["choices"])
        requests = [
            Request.simple(
                render_prompt(q, r, c),
                max_new_tokens=max_new_tokens,
                constraint=Constraint(choices=choices),
            )
            for q, r, c in zip(questions, references, candidates)
        ]
        replies = generate(model, requests, store=store, progress=progress, desc="verdict judge")
        ids = list(item_ids) if item_ids is not None else [str(i) for i in range(len(requests))]
        out = []
        for i, resp in enumerate(replies):
            word, method = read_verdict(resp)
            rating = None if word is None else int(word == choices[0])
            out.append(
                Judgement(
                    item_id=ids[i],
                    model="",
                    judge=model.name,
                    rating=rating,
                    score=None if rating is None else float(rating),
                    raw=resp.text,
                    valid=rating is not None,
                    meta={"method": method, "error": resp.error},
                )
            )
        return out
