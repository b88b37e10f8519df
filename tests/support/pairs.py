"""Two real runs of stage 06 that differ in three known ways, for the tests of a comparison seen
by stage 07, its report and the item browser (``lib.compare.changes``).

Rule-based models over the demo's mcq and vqa sets and a small Scrapbook set, from one call cache:
run B gives model ``r`` another seed (a ``model`` change), model ``q`` its question before the
image (a ``prompt`` change: the same item asked in another order) and reads Scrapbook's answers by
words (a ``scoring`` change of ``yes``'s answers). Both runs live under the outputs root, so stage
07 names the other by its run name.
"""

from __future__ import annotations

from pathlib import Path

from lib.core.paths import stage_dir
from lib.io import artifacts
from lib.models.store import CallStore
from lib.stages import evaluate
from lib.tasks.task import QUESTION_FIRST

YES = {"backend": "constant", "answer": "Yes."}  # right under Scrapbook's reading by words only
MODELS_A = {
    "r": {"backend": "random", "seed": 0},
    "q": {"backend": "random", "seed": 2},
    "yes": YES,
}
MODELS_B = {
    "r": {"backend": "random", "seed": 1},
    "q": {"backend": "random", "seed": 2, "question_first": not QUESTION_FIRST},
    "yes": YES,
}
CHANGED_KEYS = {"models.r.seed", "models.q.question_first", "tasks.scrapbook.qa.exact"}
CAUSE_OF_MODEL = {"r": "model", "q": "prompt", "yes": "scoring"}


def evaluate_pair(root: Path, run_a: str, run_b: str) -> tuple[Path, Path]:
    """Stage 06 of ``run_a`` and ``run_b`` (see the module docstring); their run folders."""
    from tests.test_rescore_stream import make_datasets

    data = make_datasets(root / "data")
    base = dict(
        datasets={k: data[k] for k in ("mcq", "vqa", "scrapbook")},
        styles=["zero_shot"],
        max_new_tokens=6,
        max_items=40,
        n_resamples=200,
    )
    store = CallStore(root / "calls.sqlite")
    folders = []
    for run, change in (
        (run_a, {"models": MODELS_A}),
        (run_b, {"models": MODELS_B, "tasks": {"scrapbook.qa": {"exact": "words"}}}),
    ):
        out = stage_dir(run, artifacts.EVALUATE)
        evaluate.run(evaluate.EvalConfig(**base, **change), out, store=store, progress=False)
        folders.append(out.parent)
    return folders[0], folders[1]


def direction(a: dict, b: dict) -> str:
    """Which way an item's scores moved, worked out here apart from the code under test."""
    diffs = [b[k] - a[k] for k in a if k in b]
    if all(d == 0 for d in diffs):
        return "same scores"
    return "mixed" if min(diffs) < 0 < max(diffs) else "improved" if max(diffs) > 0 else "worsened"
