"""Prompt styles as objects: how a model is asked, given each item's zero-shot request.

- :class:`ZeroShot`: the request as it is.
- :class:`ChainOfThought`: zero-shot chain of thought as Kojima et al. ask it, in two calls - the
  prompt plus the reasoning trigger ("Let's think step by step.") gives the reasoning, then the
  task's answer trigger, after that reasoning, gives the answer (constrained like a zero-shot one).

A style's :meth:`~Style.final` returns the requests whose replies are the answers, and the
reasoning replies (None for a style without them); stage 06 reads the answers the same way for
every style. Adding a style is one class here and one entry in :data:`STYLES`.
"""

from __future__ import annotations

from collections.abc import Callable

from lib.models import Request, generate
from lib.tasks.task import Prompt, style_prompts, user_content


class Style:
    """A prompt style: its ``name`` labels predictions and metric rows."""

    name = ""

    def final(
        self,
        model,
        first: list[Request],
        asked: Callable[[], list[Prompt]],
        question_first: bool,
        max_new_tokens: int,
        seed: int,
        store=None,
        progress: bool = True,
        desc: str = "",
    ) -> tuple[list[Request], list]:
        """``(requests, reasoning)``: the requests that give the answers, and per request the
        reasoning reply it follows (None where there is none). ``asked`` gives the items' prompts
        (made only by a style that needs them); ``max_new_tokens`` bounds a reasoning reply and
        ``desc`` labels its progress bar."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ZeroShot(Style):
    name = "zero_shot"

    def final(
        self,
        model,
        first,
        asked,
        question_first,
        max_new_tokens,
        seed,
        store=None,
        progress=True,
        desc="",
    ):
        return first, [None] * len(first)


class ChainOfThought(Style):
    """Two calls per item: reasoning (up to ``max_new_tokens`` tokens), then the answer."""

    name = "cot"

    def final(
        self,
        model,
        first,
        asked,
        question_first,
        max_new_tokens,
        seed,
        store=None,
        progress=True,
        desc="",
    ):
        trigger, asked = style_prompts()["cot"]["reasoning_trigger"], asked()
        reasoning_reqs = [
            Request(
                [
                    {
                        "role": "user",
                        "content": user_content(f"{p.text}\n{trigger}", p.images, question_first),
                    }
                ],
                max_new_tokens=max_new_tokens,
                seed=seed,
            )
            for p in asked
        ]
        reasoning = generate(model, reasoning_reqs, store=store, progress=progress, desc=desc)
        final = [
            Request(
                r.messages
                + [
                    {"role": "assistant", "content": [{"type": "text", "text": z.text}]},
                    {"role": "user", "content": [{"type": "text", "text": p.answer_trigger}]},
                ],
                max_new_tokens=f.max_new_tokens,
                constraint=f.constraint,
                seed=seed,
            )
            for r, z, p, f in zip(reasoning_reqs, reasoning, asked, first)
        ]
        return final, reasoning


STYLES: dict[str, Style] = {s.name: s for s in (ZeroShot(), ChainOfThought())}
PROMPT_STYLES = tuple(STYLES)
