"""The yes/no judge, and a judge as a plug-in: stage 06 runs whichever judge a task's options name,
its rows carry that judge's name, and a rescore gives them back; a judge nobody declared, or the
old boolean, is refused naming the key."""

import pandas as pd
import pytest

from lib.config import ParamsError
from lib.core.schema import ERROR, Response
from lib.families.verdict import judge as verdict
from lib.io import read_jsonl
from lib.models import load_model
from lib.models.store import CallStore
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from lib.tasks.registry import get_judge, registry

SMOLLM = {"backend": "tiny", "name": "smollm2"}
TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}


@pytest.mark.parametrize(
    "resp, word",
    [
        (Response(text="yes", parsed="yes", method="constrained:loglik"), "yes"),
        (Response(text="No."), "no"),
        (Response(text="Yes, it is correct."), "yes"),
        (Response(text="yes or no, hard to say"), None),  # both words: never a guess
        (Response(text="No idea."), None),  # "no" as a word of something else
        (Response(text="**No**, the reference says red"), "no"),
        (Response(text="The answer names a cat."), None),  # neither
        (Response(text="", method=ERROR, valid=False, error="timeout"), None),
    ],
)
def test_the_verdict_is_read_without_guessing(resp, word):
    assert verdict.read_verdict(resp)[0] == word


def test_the_prompt_quotes_sorted_references_and_the_candidate():
    text = verdict.render_prompt("What animal?", ["kitten", "cat"], "a cat")
    assert "Reference answers: 'cat', 'kitten'" in text and "Candidate answer: 'a cat'" in text
    assert text.rstrip().endswith("Correct:")


def test_a_judge_model_gives_one_readable_verdict_per_answer_through_the_store(tmp_path):
    model, store = load_model(SMOLLM), CallStore(tmp_path / "calls.sqlite")
    args = (["What animal?", "What colour?"], [["cat"], ["red"]], ["a cat", "blue"], 4)
    first = get_judge("verdict").judge(model, *args, store=store, progress=False)
    assert [j.valid for j in first] == [True, True]  # constrained to the two words
    assert all(j.rating in (0, 1) and j.score == float(j.rating) for j in first)
    again = get_judge("verdict").judge(model, *args, store=store, progress=False)
    assert [j.to_dict() for j in again] == [j.to_dict() for j in first]


def test_the_families_declare_both_judges():
    assert {"lave", "verdict"} <= set(registry().judges)
    assert type(get_judge("verdict")).__module__ == "lib.families.verdict.judge"


def test_stage_06_runs_the_judge_a_task_names_and_a_rescore_gives_its_rows_back(tmp_path):
    folders = demo_datasets(tmp_path / "demo")
    cfg = evaluate.EvalConfig.from_params(
        {
            "datasets": {"vqa": str(folders["vqa"])},
            "models": {"tiny": TINY},
            "styles": ["zero_shot"],
            "max_new_tokens": 4,
            "n_resamples": 20,
            "judge": SMOLLM,
            "judge_max_new_tokens": 4,
            "tasks": {"vqa.open": {"judge": "verdict"}},
        }
    )
    out = tmp_path / "eval"
    evaluate.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    metrics = pd.read_csv(out / "metrics.csv")
    names = set(metrics[metrics["task"] == "vqa.open"]["metric"])
    assert "verdict" in names and not {"lave", "lave_reference"} & names
    judged = list(read_jsonl(out / "judgements.jsonl"))
    assert len(judged) == len(list(read_jsonl(out / "predictions.jsonl")))
    row = metrics[metrics["metric"] == "verdict"].iloc[0]
    assert row["value"] == pytest.approx(sum(j["score"] or 0 for j in judged) / len(judged))
    evaluate.rescore_folder(out)
    pd.testing.assert_frame_equal(pd.read_csv(out / "metrics.csv"), metrics)


@pytest.mark.parametrize(
    "value, message",
    [
        (True, r"tasks.vqa.open.judge must be str \| None, got bool True"),
        ("lvae", r"tasks.vqa.open.judge: unknown judge 'lvae' \(did you mean 'lave'\?\)"),
    ],
)
def test_a_judge_is_named_by_a_declared_name(value, message):
    with pytest.raises(ParamsError, match=message):
        evaluate.EvalConfig.from_params({"tasks": {"vqa.open": {"judge": value}}})
