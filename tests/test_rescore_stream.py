"""Stage 06's streamed rescore (:func:`lib.eval.rescore.rescore_folder` over :class:`lib.tasks.Scorer`)
gives the tables and scores of the in-memory path it replaced: pinned against what that path
wrote on the demo datasets and a small Scrapbook set (``tests/snapshots/stage06/``, written by
``python -m tests.test_rescore_stream`` with the code of the time; the tolerance is zero: the same
counts reach the same seeded bootstrap), in chunks of any size, and Scrapbook's streamed scorer
against the tests' reference reading of the protocol on a frame of every answer
(tests/scrapbook/reference_consistency.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest

from lib import tasks
from lib.core.schema import Prediction
from lib.eval import rescore as rescore_module
from lib.families.scrapbook import ScrapbookParams
from lib.families.scrapbook import generate as scrapbook
from lib.io import load_items, read_jsonl
from lib.models.store import CallStore
from lib.stages import evaluate as evaluate_stage
from lib.stages.setup import demo_datasets
from lib.tasks.registry import get_task
from tests.scrapbook.reference_consistency import FrameQA

SNAPSHOT = Path(__file__).parent / "snapshots" / "stage06"
TABLES = ("metrics.csv", "levels.csv", "errors.csv")
SCORES = "scores.csv"  # each prediction's scores as the stage wrote them
# rule-based models: the same answers on every machine; together right, wrong, several and no answers
MODELS = {
    "yes": {"backend": "constant", "answer": "yes"},
    "no": {"backend": "constant", "answer": "no"},
    "two": {"backend": "constant", "answer": "There are 2 red circles, yes."},
    "rnd": {"backend": "random", "seed": 0},
}
SCRAPBOOK = {
    "canvas": [160, 160],
    "size_start": 30,
    "size_step": 10,
    "n_sets": 1,
    "objects_per_set": 3,
    "n_backgrounds": 1,
    "n_arrangements": 1,
    "objects_per_image": 3,
    "n_region_pairs": 1,
    "n_questions_per_type": 1,
    "types": ["presence", "counting", "recognition", "confirmation"],
}


def make_datasets(root: Path) -> dict[str, str]:
    folders = {k: str(v) for k, v in demo_datasets(root / "demo").items()}
    scrapbook(ScrapbookParams.from_dict(SCRAPBOOK), root / "scrapbook", progress=False)
    return {**folders, "scrapbook": str(root / "scrapbook")}


def evaluate(root: Path) -> Path:
    """Stage 06 on the demo datasets and the Scrapbook set: four baselines, both styles, a LAVE judge."""
    from tests.support.openai_server import OpenAIStub

    out = root / "06_evaluate"
    with mock.patch.dict(os.environ, {"VQALAB_JUDGE_KEY": "sk-test"}), OpenAIStub() as server:
        judge = {
            "backend": "openai",
            "name": "judge",
            "base_url": server.url,
            "api_key_env": "VQALAB_JUDGE_KEY",
        }
        cfg = evaluate_stage.EvalConfig(
            datasets=make_datasets(root / "data"),
            models=MODELS,
            styles=["zero_shot", "cot"],
            max_new_tokens=6,
            cot_max_new_tokens=8,
            max_items=150,
            n_resamples=200,
            judge=judge,
            tasks={
                "yesbut.understanding": {"text_metrics": ["bleu", "rouge_l", "meteor", "cider"]},
                "vqa.open": {"judge": "lave"},
            },
        )
        evaluate_stage.run(cfg, out, store=CallStore(root / "calls.sqlite"), progress=False)
    return out


def scores(folder: Path) -> pd.DataFrame:
    """Each prediction's scores, in file order, as a table (a latency differs from run to run)."""
    rows = [
        {
            "dataset": d["dataset"],
            "item_id": d["item_id"],
            "model": d["model"],
            "style": d["style"],
            "valid": d["valid"],
            "correct": d["correct"],
            "scores": json.dumps(d["scores"], sort_keys=True),
            "category": d["meta"].get("category", ""),
        }
        for d in read_jsonl(folder / "predictions.jsonl")
    ]
    return pd.DataFrame(rows)


def write_snapshot(target: Path = SNAPSHOT) -> None:
    import tempfile

    out = evaluate(Path(tempfile.mkdtemp(prefix="vqalab-stage06-snapshot-")))
    target.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        shutil.copy(out / name, target / name)
    scores(out).to_csv(target / SCORES, index=False)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return evaluate(tmp_path_factory.mktemp("stage06-stream"))


def _same_tables(a: Path, b: Path) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(
            pd.read_csv(a / name), pd.read_csv(b / name), check_exact=True
        )


def test_the_tables_and_scores_are_those_the_in_memory_path_wrote(finished):
    _same_tables(finished, SNAPSHOT)
    assert scores(finished).to_csv(index=False) == (SNAPSHOT / SCORES).read_text()


def test_rescoring_in_chunks_of_any_size_writes_the_same_files(finished, tmp_path, monkeypatch):
    for chunk in (1, 7, 10**6):
        monkeypatch.setattr(rescore_module, "RESCORE_CHUNK", chunk)
        folder = tmp_path / f"chunk{chunk}"
        shutil.copytree(finished, folder)
        evaluate_stage.rescore_folder(folder)
        _same_tables(finished, folder)
        assert (folder / "predictions.jsonl").read_bytes() == (
            finished / "predictions.jsonl"
        ).read_bytes()
        assert not list(folder.glob("predictions.*.jsonl"))  # the passes' files are gone


def _answers(finished: Path) -> tuple[list[Prediction], list]:
    cfg = evaluate_stage.EvalConfig(**json.loads((finished / "config.json").read_text()))
    items = {it.id: it for it in load_items(cfg.datasets["scrapbook"])}
    preds = [
        Prediction.from_dict(d)
        for d in read_jsonl(finished / "predictions.jsonl")
        if d["dataset"] == "scrapbook"
    ]
    return preds, [items[p.item_id] for p in preds]


@pytest.mark.parametrize("exact", ["paper", "words"])
def test_the_streamed_scrapbook_scorer_equals_the_protocols_frame(finished, exact):
    """Per (model, style): the scorer fed a few answers at a time scores each answer and makes
    every row, level and error as the reference's frame functions do on all of them at once
    (:class:`FrameQA` through the plain :class:`lib.tasks.Scorer`)."""
    task, scoring = (
        get_task("scrapbook.qa"),
        tasks.Scoring(n_resamples=200, seed=3, tasks={"scrapbook.qa": {"exact": exact}}),
    )
    preds, items = _answers(finished)
    groups: dict = {}
    for p, it in zip(preds, items):
        groups.setdefault((p.model, p.style), []).append((p, it))
    assert len(groups) == len(MODELS) * 2
    for pairs in groups.values():
        made = {}
        for kind, scorer, step in (
            ("frame", tasks.Scorer(FrameQA(), scoring), len(pairs)),
            ("streamed", task.scorer(scoring), 5),
        ):
            group = [Prediction.from_dict(p.to_dict()) for p, _ in pairs]
            for k in range(0, len(group), step):
                scorer.add(group[k : k + step], [it for _, it in pairs[k : k + step]])
            scored = [scorer.score(Prediction.from_dict(p.to_dict())) for p in group]
            for i, fix in scorer.corrections().items():
                scored[i].scores = fix
            made[kind] = ([(p.correct, p.scores, p.meta) for p in scored], scorer.tables())
        (held, held_tables), (streamed, streamed_tables) = made.values()
        assert streamed == held
        pd.testing.assert_frame_equal(
            pd.DataFrame(streamed_tables.rows), pd.DataFrame(held_tables.rows)
        )
        pd.testing.assert_frame_equal(
            streamed_tables.tables["levels"], held_tables.tables["levels"]
        )
        pd.testing.assert_frame_equal(
            streamed_tables.tables["errors"], held_tables.tables["errors"]
        )


if __name__ == "__main__":  # python -m tests.test_rescore_stream [FOLDER]: write the snapshot
    write_snapshot(Path(sys.argv[1]) if len(sys.argv) > 1 else SNAPSHOT)
