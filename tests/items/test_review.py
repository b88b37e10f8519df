"""The review loop with people: a planted run whose stage 07 flags a wrong key becomes a Label
Studio review project carrying that item and its flag; a Label Studio export (fix key on one item,
drop on another, a tie on a third) becomes a new dataset version with the fixed key, without the
dropped item, the tied one unchanged, a changelog of exactly the two changes with their reasons,
and the original folder untouched. A malformed export is an error naming the file and the task."""

from __future__ import annotations

import hashlib
import json

import pytest
from PIL import Image

from lib.core.schema import Item
from lib.io import (
    artifacts,
    dataset_info,
    file_sha256,
    load_dataset_info,
    load_items,
    save_dataset,
    write_json,
    write_jsonl,
)
from lib.io.labelstudio_files import LOCAL_FILES
from lib.items import quality, review
from lib.items.__main__ import main

MODELS = ("m1", "m2", "m3", "m4", "m5")
# each respondent's answer (the key is A): q2's respondents agree on C - its key is wrong
ANSWERS = {"q0": "AAAAA", "q1": "BCDBC", "q2": "CCCCB", "q3": "AABCA", "q4": "ABADA"}
OPTIONS = ["red", "green", "blue", "grey"]


def _digest(folder) -> str:
    """Every file of a folder, its path and bytes, as one digest."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder whose 06 answers and 07 item tables flag q0 (saturated), q1 (never right) and
    q2 (agreed wrong), and its dataset folder."""
    root = tmp_path_factory.mktemp("review")
    data = root / "data" / "quiz"
    (data / "images").mkdir(parents=True)
    items = []
    for i, item_id in enumerate(ANSWERS):
        Image.new("RGB", (32, 24), (40 * i, 90, 200 - 30 * i)).save(data / f"images/{i}.png")
        items.append(Item(item_id, "mcq", f"Colour of {i}?", [f"images/{i}.png"], OPTIONS, [0]))
    save_dataset(data, items, dataset_info("quiz", version="3"))
    folder = root / "planted" / artifacts.EVALUATE
    folder.mkdir(parents=True)
    rows = [
        {"item_id": q, "model": m, "task": "mcq", "raw": a, "dataset": "quiz", "parsed": a}
        | {"style": "zero_shot", "valid": True, "correct": a == "A"}
        for q, letters in ANSWERS.items()
        for m, a in zip(MODELS, letters)
    ]
    write_jsonl(folder / artifacts.PREDICTIONS, rows)
    digest = file_sha256(data / "items.jsonl", remember=False)
    write_json(folder / artifacts.EVAL_MANIFEST, {"datasets": {"quiz": digest}})
    write_json(folder / artifacts.EVAL_CONFIG, {"datasets": {"quiz": str(data)}})
    found = quality.assess(quality.gather([folder]), audits=(quality.classical,))
    quality.write(found, root / "planted" / artifacts.ANALYZE / artifacts.ITEMS)
    return root / "planted", data


def test_the_project_carries_the_flagged_wrong_key_with_its_flag(run, tmp_path):
    folder, data = run
    project = review.review_project(folder, tmp_path / "project")
    tasks = json.loads((tmp_path / "project" / review.TASKS).read_text())
    by_id = {t["data"]["item_id"]: t["data"] for t in tasks}
    assert set(by_id) == {"q0", "q1", "q2"} and project["items"] == 3  # q0: saturated
    assert by_id["q0"]["flags"] == ["saturated"]
    q2 = by_id["q2"]
    assert "agreed_wrong" in q2["flags"] and "agreed wrong" in q2["why"]
    assert q2["key"] == "A. red" and ("C" in q2["wrong"] or "blue" in q2["wrong"])
    assert [c["value"] for c in q2["option_choices"]] == [
        f"{'ABCD'[i]}. {o}" for i, o in enumerate(OPTIONS)
    ]
    assert q2["images"] == [LOCAL_FILES + "images/2.png"]  # under the document root
    assert project["document_root"] == str(data.resolve())
    assert project["storages"] == [str((data / "images").resolve())]
    config = (tmp_path / "project" / review.CONFIG).read_text()
    for verdict in ("keep", "fix key", "rewrite", "drop"):
        assert f'<Choice value="{verdict}"/>' in config
    only = review.review_project(folder, tmp_path / "only", flags=("agreed_wrong",))
    assert only["items"] == 1
    with pytest.raises(review.ReviewError, match="--flag typo: not a flag"):
        review.review_project(folder, tmp_path / "bad", flags=("typo",))


def _result(name, value, kind="choices"):
    return {"from_name": name, "to_name": "question", "type": kind, "value": {kind: value}}


def _annotation(n, who, verdict, **extra):
    result = [_result("verdict", [verdict])]
    if "option" in extra:
        result.append(_result("right_option", [extra["option"]]))
    if "text" in extra:
        result.append(_result("rewritten", [extra["text"]], "text"))
    return {"id": n, "completed_by": {"id": who}, "was_cancelled": False, "result": result}


def _export(path, tasks):
    """Label Studio's JSON export of the review project's tasks, annotated as given."""
    path.write_text(json.dumps(tasks))
    return path


@pytest.fixture()
def exported(run, tmp_path):
    """The project's tasks for q0, q1, q2, annotated: q2 fixed to C by two
    of three, q1 dropped, q0 tied (one keep, one rewrite)."""
    folder, _ = run
    review.review_project(folder, tmp_path / "project")
    tasks = {
        t["data"]["item_id"]: t
        for t in json.loads((tmp_path / "project" / review.TASKS).read_text())
    }
    q0 = tasks["q0"]["data"]
    c = "C. blue"
    out = [
        {
            "id": 11,
            "data": tasks["q2"]["data"],
            "annotations": [
                _annotation(1, 1, "fix key", option=c),
                _annotation(2, 2, "fix key", option=c),
                _annotation(3, 3, "keep"),
            ],
        },
        {
            "id": 12,
            "data": tasks["q1"]["data"],
            "annotations": [_annotation(4, 1, "drop"), _annotation(5, 2, "drop")],
        },
        {
            "id": 13,
            "data": q0,
            "annotations": [
                _annotation(6, 1, "keep"),
                _annotation(7, 2, "rewrite", text="Which colour?"),
            ],
        },
    ]
    return _export(tmp_path / "export.json", out)


def test_the_verdicts_make_a_new_version_with_a_changelog_and_leave_the_original(
    run, exported, tmp_path
):
    _, data = run
    before, parent = _digest(data), file_sha256(data / "items.jsonl", remember=False)
    out = tmp_path / "quiz-v2"
    summary = review.apply_review(exported, data, out)
    assert _digest(data) == before  # the original folder is only read
    items = {it.id: it for it in load_items(out)}
    assert set(items) == {"q0", "q2", "q3", "q4"}  # q1 dropped
    assert items["q2"].answer == [2]  # the key fixed to C
    assert items["q0"].question == "Colour of 0?"  # tied: unchanged
    assert (out / "images/2.png").read_bytes() == (data / "images/2.png").read_bytes()
    info = load_dataset_info(out)
    assert info["parent"]["digest"] == parent and info["version"] == "3+review"
    assert summary["tied"] == 1 and summary["changed"] == 2
    log = [json.loads(line) for line in (out / review.CHANGELOG).read_text().splitlines()]
    assert [(r["item_id"], r["change"]) for r in log] == [("q1", "dropped"), ("q2", "key")]
    q2 = log[1]
    assert (q2["old"], q2["new"], q2["reviewers"], q2["of"]) == ("A. red", "C. blue", 2, 3)
    assert "agreed_wrong" in q2["why"] and "never_right" in log[0]["why"]
    assert "| q2 | key | A. red | C. blue |" in (out / review.CHANGES).read_text()


def test_a_malformed_export_is_an_error_naming_the_file_and_the_task(run, exported, tmp_path):
    _, data = run
    tasks = json.loads(exported.read_text())
    tasks[1]["annotations"][0]["result"][0]["value"] = "drop"
    bad = _export(tmp_path / "bad.json", tasks)
    with pytest.raises(review.ReviewError, match=r"bad\.json: task 12: field .*result\[0\]\.value"):
        review.apply_review(bad, data, tmp_path / "v2")
    tasks[1]["annotations"][0]["result"][0]["value"] = {"choices": ["burn it"]}
    bad = _export(tmp_path / "bad.json", tasks)
    with pytest.raises(review.ReviewError, match=r"bad\.json: task 12: verdict: expected one of"):
        review.apply_review(bad, data, tmp_path / "v2")
    assert not (tmp_path / "v2").exists()


def test_the_commands_write_the_project_and_the_version_and_say_errors(
    run, exported, tmp_path, capsys
):
    folder, data = run
    assert main(["review", "--run", str(folder), "--out", str(tmp_path / "p"), "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == 1
    assert (
        main(
            [
                "apply",
                "--export",
                str(exported),
                "--dataset",
                str(data),
                "--out",
                str(tmp_path / "v"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "apply",
                "--export",
                str(tmp_path / "none.json"),
                "--dataset",
                str(data),
                "--out",
                str(tmp_path / "w"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("error: ")
