"""What every judge is: a model that scores open answers against their references, as a metric does.

A judge is declared by its family (``JUDGES`` in the family's ``__init__``, :mod:`lib.tasks.registry`)
and named by the tasks it rates (``tasks: {<task>: {judge: <name>}}`` in stage 06's params); the
stage's ``judge`` is the model it runs on, any backend. The evaluation engine asks it for
:class:`~lib.core.schema.Judgement` records (kept in ``judgements.jsonl``) and for its metric rows, and
names no judge. A rating the judge cannot read is kept raw, marked invalid and counted: it is
never turned into a middle score (:meth:`Judge.value` counts it as 0 in the judge's row).
"""

from __future__ import annotations

from collections.abc import Sequence

from lib.core.schema import Judgement
from lib.tasks.scoring import metric_row


class Judge:
    """A judge: subclasses set ``name`` (its params name and its metric row) and :meth:`judge`."""

    name: str = ""

    def judge(
        self,
        model,
        questions: Sequence[str],
        references: Sequence[Sequence[str]],
        candidates: Sequence[str],
        max_new_tokens: int,
        store=None,
        item_ids: Sequence[str] | None = None,
        progress: bool = True,
    ) -> list[Judgement]:
        """One judgement per candidate by ``model`` through the call store (``store``), in order."""
        raise NotImplementedError

    def value(self, j: Judgement) -> float:
        """The judgement as the judge's row counts it: its score, 0 when it could not be read (so
        a judge's failures stay visible in its mean)."""
        return float(j.score) if j.valid and j.score is not None else 0.0

    def rows(self, rated: list[tuple[Judgement, bool]], clusters, scoring) -> list[dict]:
        """A group's metric rows from its judged answers (each judgement and whether its answer was
        cut off), their intervals over ``clusters`` (each judged answer's cluster code)."""
        if not rated:
            return []
        return [
            metric_row(
                "all",
                self.name,
                [self.value(j) for j, _ in rated],
                len(rated),
                sum(not j.valid for j, _ in rated),
                scoring=scoring,
                n_truncated=sum(cut for _, cut in rated),
                clusters=clusters,
            )
        ]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
