"""Scrapbook's rules on coded answers (:mod:`lib.families.scrapbook.coded`, what stage 06's streamed
scorer runs) against the tests' reference reading of the protocol on pandas frames
(tests/scrapbook/reference_consistency.py, through the plain :class:`lib.tasks.Scorer`) on messy
answer sets: random answers (right, wrong, several, none, not applicable, failed calls), questions
out of order (the grouping's sorting path), images whose parent has no answer (a chain cut),
several levels and both matchings."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from lib import tasks
from lib.core.schema import ERROR, Prediction
from lib.families.scrapbook import ScrapbookParams, coded, generate
from lib.families.scrapbook.task import Codes, Fixed
from lib.io import load_items
from lib.tasks.registry import get_task
from tests.scrapbook.reference_consistency import FrameQA

PARAMS = {
    "canvas": [160, 160],
    "size_start": 30,
    "size_step": 10,
    "n_sets": 2,
    "objects_per_set": 4,
    "n_backgrounds": 1,
    "n_arrangements": 1,
    "objects_per_image": 3,
    "n_region_pairs": 1,
    "n_questions_per_type": 2,  # two paraphrases: consistent_rate pools them per query
}
NOISE = [
    "yes",
    "no",
    "2",
    "3",
    "0",
    "yes and no",
    "not applicable",
    "<unk>",
    "",
    "red",
    "upper left",
    "There are 2 red circles, yes.",
]


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    out = tmp_path_factory.mktemp("coded")
    generate(ScrapbookParams.from_dict(PARAMS), out, progress=False)
    return load_items(out)


def _answers(items, seed: int, right: float) -> list[tuple[Prediction, object]]:
    """Each item answered at random (``right``: the share answered as expected), in file order."""
    rng = random.Random(seed)
    pairs = []
    for it in items:
        roll = rng.random()
        raw = (
            it.answer[0]
            if roll < right
            else rng.choice(NOISE + list(it.meta.get("alternatives") or []))
        )
        failed = rng.random() < 0.03
        pairs.append(
            (
                Prediction(
                    item_id=it.id,
                    model=f"m{seed}",
                    task=it.task,
                    raw="" if failed else raw,
                    dataset="d",
                    method=ERROR if failed else "free",
                    valid=not failed and roll < 0.9,
                    truncated=rng.random() < 0.05,
                ),
                it,
            )
        )
    return pairs


def _both(pairs, scoring, step: int):
    """(scores, tables) of the plain Scorer running the reference (the frame functions on every
    answer) and of lib's streamed Scrapbook scorer fed ``step`` answers at a time (every caller's,
    the harness export's included: :func:`lib.eval.score.score_group`)."""
    task = get_task("scrapbook.qa")
    made = []
    for scorer, chunk in (
        (tasks.Scorer(FrameQA(), scoring), len(pairs)),
        (task.scorer(scoring), step),
    ):
        group = [Prediction.from_dict(p.to_dict()) for p, _ in pairs]
        for k in range(0, len(group), chunk):
            scorer.add(group[k : k + chunk], [it for _, it in pairs[k : k + chunk]])
        scored = [scorer.score(Prediction.from_dict(p.to_dict())) for p in group]
        for i, fix in scorer.corrections().items():
            scored[i].scores = fix
        made.append(([(p.correct, p.scores, p.meta) for p in scored], scorer.tables()))
    return made


@pytest.mark.parametrize(
    "seed,right,order,exact",
    [
        (0, 0.7, "file", "paper"),
        (1, 0.9, "shuffled", "paper"),
        (2, 0.5, "by form", "words"),
        (3, 0.95, "cut chains", "paper"),
        (4, 0.0, "shuffled", "words"),
    ],
)
def test_the_coded_rules_equal_the_protocols_frame(items, seed, right, order, exact):
    pairs = _answers(items, seed, right)
    rng = random.Random(seed)
    if order == "shuffled":
        rng.shuffle(pairs)
    elif order == "by form":  # a question's versions far apart
        pairs.sort(key=lambda pair: pair[1].meta["form"])
    elif order == "cut chains":  # some images' parents asked nothing: their chains stop there
        parents = sorted({it.meta["parent"] for _, it in pairs if it.meta.get("parent")})
        dropped = set(rng.sample(parents, len(parents) // 2))
        pairs = [pair for pair in pairs if pair[1].meta["image"] not in dropped]
    scoring = tasks.Scoring(n_resamples=50, seed=seed, tasks={"scrapbook.qa": {"exact": exact}})
    (held, held_tables), *libs = _both(pairs, scoring, step=97)
    assert (
        sum(s["correct"] != s["correct_strict"] for _, s, _ in held) > 0
    )  # precedence was at work
    for scores, tables in libs:
        assert scores == held
        pd.testing.assert_frame_equal(pd.DataFrame(tables.rows), pd.DataFrame(held_tables.rows))
        for name in ("levels", "errors"):
            pd.testing.assert_frame_equal(tables.tables[name], held_tables.tables[name])


def test_groups_number_rows_in_order_of_first_appearance_either_way():
    runs = np.array([5, 5, 2, 2, 2, 9])  # each key in one run: no sort
    scattered = np.array([5, 2, 5, 9, 2, 2])
    assert [g.tolist() for g in coded.groups(runs)] == [[0, 0, 1, 1, 1, 2], [0, 2, 5]]
    assert [g.tolist() for g in coded.groups(scattered)] == [[0, 1, 0, 2, 1, 1], [0, 1, 3]]
    a, b = np.array([1, 1, 0, 0]), np.array([0, 1, 0, 0])
    assert [g.tolist() for g in coded.groups(a, b)] == [[0, 1, 2, 2], [0, 1, 2]]


def test_codes_widen_as_values_come_and_fixed_answers_are_a_mapping():
    codes = Codes()
    for v in range(300):
        codes.add(f"v{v}")
    codes.add("v7")
    assert codes.codes.typecode == "H" and codes.array()[-1] == 7 and codes[299] == "v299"
    fixed = Fixed(np.array([False, True, False, True]), {"correct": 1.0, "correct_strict": 0.0})
    assert (
        1 in fixed
        and 2 not in fixed
        and 9 not in fixed
        and len(fixed) == 2
        and list(fixed) == [1, 3]
    )
    assert fixed[3] == {"correct": 1.0, "correct_strict": 0.0} and dict(fixed.items()).keys() == {
        1,
        3,
    }
