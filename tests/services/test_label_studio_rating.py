"""People rating model answers through a real Label Studio (its own venv, SQLite, 127.0.0.1): the
project ``lib.rating.labelstudio`` writes is created with label-studio-sdk, rated through the API by three
annotators, exported, read back as human labels and held against every metric and judge by
``lib.agreement.scorers``."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from lib.agreement import scorers
from lib.models.store import CallStore
from lib.rating import labelstudio

from .servers import label_studio_server

HERE = Path(__file__).parent
QUESTION = "Why is this image funny?"
REFERENCES = {
    "i0": "a man buys a gym membership but then eats a whole cake at home",
    "i1": "a phone shows one percent battery but the charger is across the room",
    "i2": "a cat ignores an expensive bed and sleeps in its cardboard box",
    "i3": "a sign says quiet zone while a loud party happens right under it",
}
ANSWERS = {  # model -> image -> answer: the good one says the reference again, the bad one does not
    "good": {i: ref.replace("a ", "the ", 1) for i, ref in REFERENCES.items()},
    "bad": {i: "two dogs are playing in a park on a sunny day" for i in REFERENCES},
}
YES, NO = "Yes", "No"
RATINGS = {  # answer_id -> annotator -> criterion -> choice
    "good:i0": {
        "ana": {"correctness": YES, "faithfulness": YES},
        "ben": {"correctness": YES, "faithfulness": YES},
        "cy": {"correctness": NO, "faithfulness": YES},
    },
    "good:i1": {"ana": {"correctness": YES}, "ben": {"correctness": YES}},
    "good:i2": {"ben": {"correctness": YES, "faithfulness": NO}},
    "good:i3": {"cy": {"correctness": YES, "faithfulness": YES}},
    "bad:i0": {
        "ana": {"correctness": NO},
        "ben": {"correctness": NO},
        "cy": {"correctness": YES},
    },
    "bad:i1": {  # a tie on correctness: no verdict
        "ana": {"correctness": NO, "faithfulness": NO},
        "ben": {"correctness": YES, "faithfulness": NO},
    },
    "bad:i2": {"ana": {"correctness": NO}, "ben": {"correctness": NO}, "cy": {"correctness": NO}},
    # bad:i3: nobody rates it
}
EXPECTED = {  # (answer_id, criterion) -> the majority, worked by hand
    ("good:i0", "correctness"): 1,
    ("good:i0", "faithfulness"): 1,
    ("good:i1", "correctness"): 1,
    ("good:i2", "correctness"): 1,
    ("good:i2", "faithfulness"): 0,
    ("good:i3", "correctness"): 1,
    ("good:i3", "faithfulness"): 1,
    ("bad:i0", "correctness"): 0,
    ("bad:i1", "faithfulness"): 0,
    ("bad:i2", "correctness"): 0,
}
METRICS = ["bleu", "rouge_l", "meteor", "cider"]


@pytest.fixture
def profile(tmp_path, monkeypatch):
    """Four of YesBut's text metrics and a judge that rates every answer 3 (SmolLM2 as the judge
    costs minutes here on two cores; the judges' own tests hold them, this test the round trip)."""
    params = tmp_path / "params"
    params.mkdir()
    (params / "common.rate.yaml").write_text(
        "run: rate\noffline: true\nstages: [06_evaluate]\nmodels:\n"
        "  vlm: {backend: constant, answer: x}\n  sure: {backend: constant, answer: 'So rating=3'}\n"
    )
    (params / "06_evaluate.rate.yaml").write_text(
        f"judge: sure\ntasks:\n  yesbut.understanding: {{text_metrics: {json.dumps(METRICS)}}}\n"
    )
    monkeypatch.setenv("VQALAB_PARAMS", str(params))
    return "rate"


def _answers(files: Path) -> list[dict]:
    (files / "images").mkdir(parents=True)
    rows = []
    for n, image in enumerate(REFERENCES):
        path = files / "images" / f"{image}.png"
        Image.new("RGB", (64, 32), (60 * n, 255 - 60 * n, 128)).save(path)
        for model, by in ANSWERS.items():
            rows.append(
                {
                    "answer_id": f"{model}:{image}",
                    "cluster": image,
                    "image": str(path),
                    "question": QUESTION,
                    "references": [REFERENCES[image]],
                    "answer": by[image],
                    "model": model,
                }
            )
    return rows


def test_people_rate_answers_in_a_real_label_studio_and_every_scorer_is_held_to_them(
    label_studio_python, tmp_path, profile
):
    files, project_dir = tmp_path / "files", tmp_path / "project"
    answers = _answers(files)
    about = labelstudio.make_project(answers, project_dir, ("correctness", "faithfulness"))
    assert about["document_root"] == str(files.resolve()) and about["answers"] == 8
    (tmp_path / "ratings.json").write_text(json.dumps(RATINGS))
    token = secrets.token_hex(20)
    server = label_studio_server(
        label_studio_python,
        tmp_path / "ls-data",
        Path(about["document_root"]),
        tmp_path / "ls.log",
        token,
    )
    with server:
        done = subprocess.run(
            [
                label_studio_python,
                str(HERE / "label_studio_rate.py"),
                server.base_url,
                token,
                str(project_dir),
                str(tmp_path / "ratings.json"),
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:] + "\n" + server.tail()
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(info["tasks"]) == {a["answer_id"] for a in answers}
    # the image of a task is the file, as Label Studio serves it from the project's storage
    shown = json.loads((tmp_path / "image.json").read_text())["answer_id"]
    source = next(a["image"] for a in answers if a["answer_id"] == shown)
    assert (tmp_path / "image.bin").read_bytes() == Path(source).read_bytes()

    # the labels read back are the majorities of what was submitted; the tie and the unrated
    # answer are left out and counted
    export = tmp_path / "export.json"
    labels = scorers.read_labels(export)
    assert {(r.answer_id, r.criterion): r.label for r in labels.itertuples()} == EXPECTED
    assert labels.attrs["left_out"] == {
        "tasks": 8,
        "raters": 3,
        "unrated": 1,
        "unrated_criteria": 3,  # good:i1, bad:i0 and bad:i2 were rated on correctness only
        "tied": 1,
    }
    by_id = {a["answer_id"]: a for a in answers}
    for r in labels.itertuples():
        a = by_id[r.answer_id]
        assert (r.cluster, r.question, r.references, r.answer) == (
            a["cluster"],
            a["question"],
            a["references"],
            a["answer"],
        )
    # a choice outside the config (Label Studio does not validate results) is refused by task id
    bad = info["tasks"]["good:i3"]
    with pytest.raises(
        scorers.AgreementError, match=rf"export_bad.json: task {bad}: correctness: .*Maybe"
    ):
        scorers.read_labels(tmp_path / "export_bad.json")

    # lib.agreement.scorers end to end on the export: a row per scorer with its interval over the images
    out = tmp_path / "agreement"
    summary = scorers.run(
        export,
        out,
        profile,
        task="yesbut.understanding",
        n_resamples=200,
        store=CallStore(tmp_path / "calls.sqlite"),
    )
    assert summary["answers"] == 7 and summary["clusters"] == 4
    assert summary["left_out"] == labels.attrs["left_out"]
    assert summary["scorers"] == [*METRICS, "lave[judge]", "verdict[judge]"]
    table = pd.read_csv(out / "agreement.csv")
    auc = table[(table["statistic"] == "roc_auc") & (table["criterion"] == "correctness")]
    assert sorted(auc["scorer"]) == sorted(summary["scorers"])
    for row in auc.itertuples():
        if row.n:  # a judge whose every rating was unreadable has nothing to interval
            assert np.isfinite([row.value, row.ci_low, row.ci_high]).all(), row
            assert row.ci_low <= row.value <= row.ci_high and row.n_clusters == 4, row
    text = auc.set_index("scorer").loc[METRICS]
    assert (text["n"] == 6).all() and (text["value"] == 1.0).all()  # the good answers say it again
    assert set(table["criterion"]) == {"correctness", "faithfulness"}
