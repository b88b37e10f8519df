"""python -m lib.agreement: human labels read with checks, every metric and judge of a profile held
to them with intervals over images, written all or nothing into a folder of its own."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from lib import agreement as G
from lib.io import kind_of

from .support.data import SHARED_DATA

# two images, three answers each: the right ones repeat the reference, the wrong ones do not
ROWS = [
    {
        "answer_id": f"{img}:{k}",
        "cluster": img,
        "question": "Why is this image funny?",
        "references": ["a dog wears a hat at the beach"],
        "answer": text,
        "criterion": "correctness",
        "label": label,
    }
    for img in ("i1.png", "i2.png")
    for k, text, label in (
        ("m1", "a dog wears a hat at the beach", "yes"),
        ("m2", "a cat sleeps", "no"),
        ("m3", "the dog wears a hat", 1),
    )
]


def _labels(tmp_path, rows=ROWS, name="labels.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def profile(tmp_path, monkeypatch):
    """A profile whose stage 06 scores with two text metrics and judges with a constant rating."""
    params = tmp_path / "params"
    params.mkdir()
    (params / "common.t.yaml").write_text(
        "run: t\noffline: true\nstages: [06_evaluate]\nmodels:\n  vlm: {backend: constant, answer: x}\n"
        "  sure: {backend: constant, answer: 'So rating=3'}\n  mute: {backend: constant, answer: 'no idea'}\n"
    )
    (params / "06_evaluate.t.yaml").write_text(
        "judge: sure\ntasks:\n  yesbut.understanding: {text_metrics: [bleu, rouge_l]}\n"
    )
    monkeypatch.setenv("VQALAB_PARAMS", str(params))
    return "t"


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda r: r.pop("cluster"), r"labels.jsonl:1: missing cluster"),
        (
            lambda r: r.update(label="maybe"),
            r"labels.jsonl:1: label: expected 1/0, yes/no or true/false, got 'maybe'",
        ),
        (
            lambda r: r.update(references=[]),
            r"labels.jsonl:1: references: expected a non-empty string or list",
        ),
        (lambda r: r.update(answer=3), r"labels.jsonl:1: answer: expected text, got 3"),
    ],
)
def test_a_bad_label_row_is_an_error_naming_file_line_and_field(tmp_path, edit, match):
    rows = [dict(r) for r in ROWS]
    edit(rows[0])
    with pytest.raises(G.AgreementError, match=match):
        G.read_labels(_labels(tmp_path, rows))


def test_one_answer_judged_on_two_criteria_must_be_the_same_answer(tmp_path):
    rows = ROWS + [{**ROWS[0], "criterion": "faithfulness", "answer": "something else"}]
    with pytest.raises(G.AgreementError, match=r"labels.jsonl:7: answer 'i1.png:m1' has another"):
        G.read_labels(_labels(tmp_path, rows))


def test_metrics_and_judges_are_held_to_the_labels_with_intervals_over_images(tmp_path, profile):
    out = tmp_path / "agreement"
    summary = G.run(
        _labels(tmp_path),
        out,
        profile,
        task="yesbut.understanding",
        judges=["mute"],
        n_resamples=50,
    )
    assert summary["answers"] == 6 and summary["clusters"] == 2
    assert summary["scorers"] == [  # every judge the families declare, on every judge model
        "bleu",
        "rouge_l",
        "lave[judge]",
        "verdict[judge]",
        "lave[mute]",
        "verdict[mute]",
    ]
    table = pd.read_csv(out / "agreement.csv")
    rouge = table[(table["scorer"] == "rouge_l") & (table["statistic"] == "roc_auc")].iloc[0]
    assert rouge["value"] == 1.0 and rouge["n"] == 6 and rouge["n_clusters"] == 2
    sure = table[table["scorer"] == "lave[judge]"]
    assert set(sure["statistic"]) == {
        "roc_auc",
        "kendall_tau_b",
        "cohen_kappa",
        "krippendorff_alpha",
    }
    assert (
        sure.set_index("statistic").loc["roc_auc", "value"] == 0.5
    )  # one rating for all: no better than chance
    mute = table[table["scorer"] == "lave[mute]"]
    assert (mute["n"] == 0).all() and mute[
        "value"
    ].isna().all()  # unreadable: left out, never a middle score
    checks = pd.read_csv(out / "judge_checks.csv").set_index("judge")
    assert checks.loc["lave[mute]", "unreadable_share"] == 1.0
    assert checks.loc["verdict[mute]", "unreadable_share"] == 1.0  # "no idea" says neither word
    assert checks.loc["lave[judge]", "unreadable"] == 0
    assert checks.loc["lave[judge]", "padded"] == 4  # the answers people judged right
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 6 and scores["lave[mute]"].isna().all()
    assert kind_of(out) == G.KIND


def test_the_command_refuses_a_folder_of_another_kind_and_leaves_it(tmp_path, profile):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.agreement",
            "--labels",
            str(_labels(tmp_path)),
            "--out",
            str(notes),
            "--profile",
            profile,
            "--task",
            "yesbut.understanding",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.startswith("error:") and "todo.txt" in done.stderr
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]


@pytest.mark.needs_data("yesbut/Human_Eval_Results.csv")
def test_yesbuts_human_evaluation_is_150_model_answers_about_30_images():
    labels = G.read_labels(SHARED_DATA / "yesbut" / "Human_Eval_Results.csv")
    answers = G.answers_of(labels)
    assert len(answers) == 150 and answers["cluster"].nunique() == 30
    correct = labels[labels["criterion"] == "correctness"]
    assert correct["label"].sum() == 40  # judged correct by people (majority of three)
    assert set(labels["criterion"]) == {
        "correctness",
        "appropriate_length",
        "visual_completeness",
        "faithfulness",
    }
    assert (
        not answers["answer_id"].str.contains("humanannotation").any()
    )  # the person's text is the reference
