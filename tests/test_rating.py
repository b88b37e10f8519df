"""python -m lib.rating: a Label Studio rating project of a run's answers, and its JSON export read
back as human labels (the majority per answer; ties and unrated answers left out and counted)."""

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote
from xml.etree import ElementTree

import pytest

from lib.agreement import scorers
from lib.families.yesbut.paper import HUMAN_CRITERIA
from lib.io import annotations, artifacts, kind_of, load_items
from lib.models.store import CallStore
from lib.rating import labelstudio
from lib.stages import evaluate
from lib.stages.setup import demo_datasets

ANSWERS = [
    {
        "answer_id": f"vqa:m{m}:zero_shot:q{i}",
        "cluster": f"images/{i}.png",
        "image": f"/data/vqa/images/{i}.png",
        "question": f"What is in picture {i}?",
        "references": ["a dog", "dog", "a dog"],
        "answer": answer,
        "model": f"m{m}",
    }
    for i in (1, 2)
    for m, answer in ((1, "a dog"), (2, "a cat"))
]


def test_the_rating_criteria_are_named_as_yesbuts_human_evaluation_names_them():
    assert tuple(labelstudio.CRITERIA) == HUMAN_CRITERIA


def test_the_config_shows_image_question_references_answer_and_a_yes_no_choice_per_criterion():
    view = ElementTree.fromstring(labelstudio.rating_config(("correctness", "faithfulness")))
    shown = {e.get("name"): e.get("value") for e in view if e.tag in ("Image", "Text")}
    assert shown == {
        "image": "$image",
        "question": "$asked",
        "reference": "$reference",
        "answer": "$answer",
    }
    choices = {e.get("name"): e for e in view.iter("Choices")}
    assert list(choices) == ["correctness", "faithfulness"]
    for c in choices.values():
        assert [x.get("value") for x in c] == ["Yes", "No"] and c.get("toName") == "answer"
    assert choices["correctness"].get("required") == "true"
    assert choices["faithfulness"].get("required") is None
    with pytest.raises(labelstudio.RatingError, match="must include 'correctness'"):
        labelstudio.rating_config(("faithfulness",))
    with pytest.raises(labelstudio.RatingError, match="be among correctness"):
        labelstudio.rating_config(("correctness", "fluency"))


def test_tasks_carry_each_answer_with_its_image_under_the_document_root_and_its_references(
    tmp_path,
):
    tasks = labelstudio.rating_tasks(ANSWERS, "/data")
    assert len(tasks) == 4 and all(set(t) == {"data"} for t in tasks)
    first = tasks[0]["data"]
    assert first["image"] == "/data/local-files/?d=vqa/images/1.png"
    assert first["references"] == ["a dog", "dog", "a dog"]  # read back as they were
    assert first["reference"] == "a dog\ndog"  # shown once each
    assert first["model"] == "m1" and first["answer"] == "a dog"  # kept, but the config hides it
    assert first["asked"] == first["question"] == "What is in picture 1?"
    spaced = labelstudio.rating_tasks([{**ANSWERS[0], "image": "/data/my pics/1.png"}], "/data")
    assert unquote(spaced[0]["data"]["image"].split("d=")[1]) == "my pics/1.png"
    assert labelstudio.rating_tasks(ANSWERS[:1])[0]["data"]["image"] == "/data/vqa/images/1.png"
    with pytest.raises(labelstudio.RatingError, match="not under the document root /elsewhere"):
        labelstudio.rating_tasks(ANSWERS, "/elsewhere")
    with pytest.raises(
        labelstudio.RatingError, match="answer 1: answer_id 'vqa:m1:zero_shot:q1' given twice"
    ):
        labelstudio.rating_tasks([ANSWERS[0], ANSWERS[0]])
    with pytest.raises(labelstudio.RatingError, match="no answers to rate"):
        labelstudio.make_project([], tmp_path / "none")
    with pytest.raises(labelstudio.RatingError, match="answer 0: missing image"):
        labelstudio.rating_tasks([{k: v for k, v in ANSWERS[0].items() if k != "image"}])


def _choice(name, value):
    return {"from_name": name, "to_name": "answer", "type": "choices", "value": {"choices": value}}


def _annotation(who, ratings, n=1, cancelled=False):
    return {
        "id": n,
        "completed_by": who,
        "was_cancelled": cancelled,
        "result": [_choice(c, [v]) for c, v in ratings.items()],
    }


def _export(tmp_path, annotations_of):
    """A Label Studio JSON export of the four ANSWERS' tasks, with the annotations given by task."""
    tasks = labelstudio.rating_tasks(ANSWERS)
    exported = [
        {
            "id": 10 + i,
            "data": t["data"],
            "annotations": annotations_of.get(i, []),
            "predictions": [],
        }
        for i, t in enumerate(tasks)
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(exported))
    return path


RATED = {
    0: [  # three people: correct by two to one; faithful by all three
        _annotation(1, {"correctness": "Yes", "faithfulness": "Yes"}, 1),
        _annotation(2, {"correctness": "No", "faithfulness": "Yes"}, 2),
        _annotation(3, {"correctness": "Yes", "faithfulness": "Yes"}, 3),
    ],
    1: [  # two people split on correctness (a tie), a third skipped the task
        _annotation(1, {"correctness": "No"}, 4),
        _annotation(2, {"correctness": "Yes"}, 5),
        _annotation(3, {}, 6, cancelled=True),
    ],
    2: [  # one person changed their mind: their later annotation counts
        _annotation(2, {"correctness": "Yes"}, 8),
        _annotation(2, {"correctness": "No"}, 9),
    ],
    # task 3: nobody rated it
}


def test_an_export_gives_the_majority_and_counts_ties_and_unrated_answers_never_guessing(tmp_path):
    path = _export(tmp_path, RATED)
    rows, left = labelstudio.read_export(path)
    got = {(r["answer_id"], r["criterion"]): r["label"] for _, r in rows}
    assert got == {
        ("vqa:m1:zero_shot:q1", "correctness"): 1,
        ("vqa:m1:zero_shot:q1", "faithfulness"): 1,
        ("vqa:m1:zero_shot:q2", "correctness"): 0,
    }
    assert left == {"tasks": 4, "raters": 3, "unrated": 1, "unrated_criteria": 2, "tied": 1}
    assert rows[0][0] == f"{path}: task 10 (correctness)"
    labels = scorers.read_labels(path)  # the labels file lib.agreement.scorers reads
    assert list(labels.columns) == list(scorers.LABEL_COLUMNS) and len(labels) == 3
    assert labels.loc[0, "references"] == ["a dog", "dog", "a dog"]
    assert labels.attrs["left_out"] == left


@pytest.mark.parametrize(
    "annotations, match",
    [
        (
            {2: [_annotation(1, {"correctness": "Maybe"})]},
            r"task 12: correctness: expected one of Yes, No, got \['Maybe'\]",
        ),
        (
            {3: [_annotation(1, {"fluency": "Yes"})]},
            r"task 13: a result for 'fluency', no rating criterion",
        ),
        ({}, r"no ratings with a verdict in its 4 tasks"),
        (
            {1: [_annotation(1, {"correctness": "Yes"}), _annotation(2, {"correctness": "No"}, 2)]},
            r"no ratings with a verdict",
        ),
    ],
)
def test_a_choice_outside_the_config_or_an_export_without_ratings_is_an_error_naming_the_file(
    tmp_path, annotations, match
):
    path = _export(tmp_path, annotations)
    with pytest.raises(
        scorers.AgreementError, match=f"{path}: .*{match}" if "task" in match else match
    ) as e:
        scorers.read_labels(path)
    assert str(path) in str(e.value)


def test_a_json_file_that_is_no_rating_export_is_refused_naming_what_it_lacks(tmp_path):
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"answer_id": "a"}))
    with pytest.raises(scorers.AgreementError, match="not a Label Studio JSON export"):
        scorers.read_labels(path)
    path.write_text(json.dumps([{"id": 7, "data": {"image": "x.png"}, "annotations": []}]))
    with pytest.raises(
        scorers.AgreementError, match=r"task 7: no rating task \(its data lacks answer_id"
    ):
        scorers.read_labels(path)
    path.write_text(json.dumps([{"id": 7, "data": ANSWERS[0]}, {"id": 8, "data": ANSWERS[0]}]))
    with pytest.raises(
        scorers.AgreementError, match=r"task 8: answer 'vqa:m1:zero_shot:q1' is also .*task 7"
    ):
        scorers.read_labels(path)


def _evaluate(root: Path) -> Path:
    """A real stage 06 on the demo's vqa and mcq sets under ``root``: two constant models, so every
    answer is known."""
    data = demo_datasets(root / "data")
    constant = lambda answer: {"backend": "constant", "answer": answer}
    cfg = evaluate.EvalConfig(
        datasets={"vqa": str(data["vqa"]), "mcq": str(data["mcq"])},
        models={"dog": constant("a dog"), "cat": constant("a cat")},
        styles=["zero_shot"],
        max_new_tokens=6,
        n_resamples=20,
    )
    evaluate.run(
        cfg, root / artifacts.EVALUATE, store=CallStore(root / "calls.sqlite"), progress=False
    )
    return root / artifacts.EVALUATE


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A real stage 06, left as it finished (tests that change a run make their own)."""
    return _evaluate(tmp_path_factory.mktemp("rating"))


def test_a_runs_answers_to_an_open_task_become_rating_rows_with_their_items(evaluated):
    rows = labelstudio.run_answers(str(evaluated), "vqa.open")
    items = {
        it.id: it
        for it in load_items(
            json.loads((evaluated / artifacts.EVAL_CONFIG).read_text())["datasets"]["vqa"]
        )
    }
    assert len(rows) == 2 * len(items) and {r["model"] for r in rows} == {"dog", "cat"}
    for r in rows:
        it = items[r["item_id"]]
        assert r["answer_id"] == f"vqa:{r['model']}:zero_shot:{it.id}"
        assert r["answer"] == ("a dog" if r["model"] == "dog" else "a cat")
        assert r["references"] == list(it.answer) and r["question"] == it.question
        assert r["asked"].startswith(it.question) and r["asked"] != it.question  # the prompt
        assert Path(r["image"]).is_file() and r["cluster"] == it.images[0]
    assert len(labelstudio.run_answers(str(evaluated), "vqa.open", models=["cat"])) == len(items)
    with pytest.raises(
        labelstudio.RatingError, match=r"--task mcq: not an open-answer task \(those: .*vqa.open"
    ):
        labelstudio.run_answers(str(evaluated), "mcq")
    with pytest.raises(
        labelstudio.RatingError, match="no valid answers to vqa.open with these filters"
    ):
        labelstudio.run_answers(str(evaluated), "vqa.open", styles=["cot"])


def _command(*args):
    return subprocess.run(
        [sys.executable, "-m", "lib.rating", *map(str, args)], capture_output=True, text=True
    )


def test_the_command_writes_a_project_whose_images_label_studio_serves_from_its_storage(
    evaluated, tmp_path
):
    out = tmp_path / "rate"
    done = _command(evaluated, "--task", "vqa.open", "--out", out, "--limit", 5, "--seed", 3)
    assert done.returncode == 0, done.stderr
    project = json.loads((out / labelstudio.PROJECT).read_text())
    assert project == json.loads(done.stdout)
    assert project["answers"] == 5 and project["available"] == 16 and project["task"] == "vqa.open"
    root, storages = Path(project["document_root"]), [Path(p) for p in project["storages"]]
    assert len(storages) == 1 and storages[0].parent == root
    storage = storages[0]
    tasks = json.loads((out / labelstudio.TASKS).read_text())
    assert (
        len(tasks) == 5 and len({t["data"]["model"] for t in tasks}) == 2
    )  # shuffled, not a block
    for t in tasks:
        path = root / unquote(t["data"]["image"].removeprefix(labelstudio.LOCAL_FILES))
        assert path.is_file() and storage in path.parents
    assert (out / labelstudio.CONFIG).read_text() == labelstudio.rating_config()
    assert kind_of(out) == labelstudio.KIND
    again = _command(evaluated, "--task", "vqa.open", "--out", out, "--limit", 5, "--seed", 3)
    assert again.returncode == 0 and json.loads((out / labelstudio.TASKS).read_text()) == tasks
    refused = _command(evaluated, "--task", "mcq", "--out", tmp_path / "mcq")
    assert refused.returncode == 2 and refused.stderr.startswith("error: --task mcq")
    assert not (tmp_path / "mcq").exists()
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    assert _command(evaluated, "--task", "vqa.open", "--out", mine).returncode == 2
    assert [p.name for p in mine.iterdir()] == ["todo.txt"]


# --- an export read with limits; a run checked as rescore checks it; only the images' folders ---

TASK = {
    "id": 7,
    "data": {**ANSWERS[0], "references": ["a dog"]},
    "annotations": [_annotation(1, {"correctness": "Yes"})],
}


def _task():
    """A copy of :data:`TASK` and where in it to break it."""
    t = json.loads(json.dumps(TASK))
    return t, t["annotations"][0], t["annotations"][0]["result"][0]


@pytest.mark.parametrize(
    "edit, field, expected",
    [
        (lambda t, a, r: t.update(id=[7]), "id", "a whole number"),
        (lambda t, a, r: t.update(annotations="Yes"), "annotations", "a list"),
        (lambda t, a, r: t["annotations"].append({**a, "id": "2"}), "annotations[1].id", "a whole"),
        (lambda t, a, r: t["annotations"].append("Yes"), "annotations[1]", "an object"),
        (lambda t, a, r: a.update(result={"x": 1}), "annotations[0].result", "a list"),
        (lambda t, a, r: a.update(result=["Yes"]), "annotations[0].result[0]", "an object"),
        (lambda t, a, r: r.update(value="Yes"), "annotations[0].result[0].value", "an object"),
        (
            lambda t, a, r: r["value"].update(choices="Yes"),
            "annotations[0].result[0].value.choices",
            "a list",
        ),
        (lambda t, a, r: r.update(from_name=None), "annotations[0].result[0].from_name", "text"),
        (lambda t, a, r: a.update(completed_by=[1]), "annotations[0].completed_by", "a user id"),
        (
            lambda t, a, r: a.update(was_cancelled="no"),
            "annotations[0].was_cancelled",
            "true or false",
        ),
        (lambda t, a, r: t["data"].update(answer_id=["x"]), "data.answer_id", "text"),
        (
            lambda t, a, r: t["data"].update(references=3),
            "data.references",
            "text or a list of text",
        ),
        (lambda t, a, r: t["data"].update(cluster=3), "data.cluster", "text"),
    ],
)
def test_a_malformed_export_is_an_error_naming_the_file_the_task_and_the_field(
    tmp_path, edit, field, expected
):
    task, annotation, result = _task()
    edit(task, annotation, result)
    path = tmp_path / "export.json"
    path.write_text(json.dumps([task]))
    where = "task #1" if field == "id" else "task 7"
    with pytest.raises(labelstudio.RatingError) as e:
        labelstudio.read_export(path)
    assert str(e.value).startswith(f"{path}: {where}: field {field}: expected {expected}")
    if field in ("id", "annotations", "annotations[1].id"):  # the command says so, no traceback
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "lib.agreement",
                "--labels",
                str(path),
                "--out",
                str(tmp_path / "o"),
            ]
            + ["--task", "vqa.open"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2 and done.stderr.startswith(f"error: {path}: {where}: field")
        assert "Traceback" not in done.stderr


def test_an_export_past_the_size_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = _export(tmp_path, RATED)
    monkeypatch.setattr(annotations, "MAX_LABELS_BYTES", path.stat().st_size - 1)
    with pytest.raises(labelstudio.RatingError, match=r"export.json: larger than .* bytes"):
        labelstudio.read_export(path)


def test_a_run_rescore_would_refuse_is_not_rated(tmp_path):
    """Stopped part way, answers edited, a dataset rewritten since: each refused with why, so no
    rater reads today's question beside an answer to another one."""
    folder = _evaluate(tmp_path)
    assert labelstudio.run_answers(str(folder), "vqa.open")  # as it finished: rated
    predictions = folder / artifacts.PREDICTIONS
    kept = predictions.read_text()
    first = json.loads(kept.splitlines()[0])
    edited = json.dumps({**first, "raw": "a horse"}) + "\n" + kept.split("\n", 1)[1]
    predictions.write_text(edited)
    with pytest.raises(
        labelstudio.RatingError, match=r"not a run to rate: .*the answers changed after"
    ):
        labelstudio.run_answers(str(folder), "vqa.open")
    predictions.write_text(kept)
    items = (
        Path(json.loads((folder / artifacts.EVAL_CONFIG).read_text())["datasets"]["vqa"])
        / "items.jsonl"
    )
    items.write_text(items.read_text().replace("?", "??", 1))
    with pytest.raises(
        labelstudio.RatingError, match=r"dataset 'vqa' .* changed since it was evaluated"
    ):
        labelstudio.run_answers(str(folder), "vqa.open")
    items.write_text(items.read_text().replace("??", "?", 1))
    assert labelstudio.run_answers(str(folder), "vqa.open")
    (
        folder / artifacts.EVAL_MANIFEST
    ).unlink()  # as a stage 06 stopped before its manifest leaves it
    done = _command(folder, "--task", "vqa.open", "--out", tmp_path / "rate")
    assert done.returncode == 2 and "the evaluation did not finish" in done.stderr
    assert (
        done.stderr.startswith(f"error: {folder}: not a run to rate")
        and "Traceback" not in done.stderr
    )
    assert not (tmp_path / "rate").exists()


def _at(image: str, dataset: str, i: int) -> dict:
    return {**ANSWERS[0], "answer_id": f"a{i}", "image": image, "dataset": dataset}


def test_a_project_serves_each_datasets_image_folder_never_the_whole_disk(tmp_path):
    answers = [
        _at("/data/vqa/images/1.png", "vqa", 1),
        _at("/data/vqa/images/2.png", "vqa", 2),
        _at("/data/mcq/images/sub/3.png", "mcq", 3),
        _at("/data/mcq/images/4.png", "mcq", 4),
    ]
    project = labelstudio.make_project(answers, tmp_path / "rate")
    assert project["document_root"] == "/data"
    assert project["storages"] == ["/data/mcq/images", "/data/vqa/images"]
    tasks = json.loads((tmp_path / "rate" / labelstudio.TASKS).read_text())
    assert tasks[2]["data"]["image"] == labelstudio.LOCAL_FILES + "mcq/images/sub/3.png"
    one = labelstudio.make_project(
        answers[:2], tmp_path / "one"
    )  # one folder: its parent is the root
    assert one["document_root"] == "/data/vqa" and one["storages"] == ["/data/vqa/images"]
    for trees in (
        [_at("/data/vqa/1.png", "vqa", 1), _at("/srv/mcq/2.png", "mcq", 2)],
        [_at("/data/vqa/1.png", "vqa", 1), _at("/srv/vqa/2.png", "vqa", 2)],
        [_at("/1.png", "vqa", 1)],
    ):
        with pytest.raises(
            labelstudio.RatingError, match=r"document root would be /, serving the whole disk"
        ):
            labelstudio.make_project(trees, tmp_path / "trees")
        assert not (tmp_path / "trees").exists()
