"""The item bank: answers pooled per item (dataset, digest, id) across runs, appended without
duplicates, a changed dataset kept apart, people's verdicts joined, bad input named; and its
command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lib.io import artifacts, write_json, write_jsonl
from lib.items import bank
from lib.items.__main__ import main


def _answer(item, model, correct, parsed="A", dataset="d", style="zero_shot", **more) -> dict:
    return {
        "item_id": item,
        "model": model,
        "task": "mcq",
        "raw": str(parsed),
        "dataset": dataset,
        "parsed": parsed,
        "style": style,
        "valid": parsed is not None,
        "correct": correct,
        **more,
    }


def make_run(root: Path, name: str, rows: list[dict], digests: dict | None = None) -> Path:
    """A run folder whose stage 06 answered ``rows`` under the dataset ``digests``."""
    folder = root / name / artifacts.EVALUATE
    folder.mkdir(parents=True)
    write_jsonl(folder / artifacts.PREDICTIONS, rows)
    write_json(folder / artifacts.EVAL_MANIFEST, {"datasets": digests or {"d": "v1"}})
    return root / name


ROWS = [
    _answer("q1", "m1", True),
    _answer("q1", "m2", False, parsed="B"),
    _answer("q2", "m1", False, parsed=[1, 0]),
    _answer("q2", "m2", None, parsed=None),
]


def test_a_run_becomes_one_row_per_item_and_respondent(tmp_path):
    table = bank.build([make_run(tmp_path, "r1", ROWS)])
    assert list(table.columns) == list(bank.COLUMNS)
    assert len(table) == 4 and set(table["run"]) == {"r1"} and set(table["digest"]) == {"v1"}
    q2 = table[table["item_id"] == "q2"].set_index("model")
    assert q2.loc["m1", "answer"] == "[1, 0]" and pd.isna(q2.loc["m2", "answer"])
    assert not q2.loc["m1", "correct"] and pd.isna(q2.loc["m2", "correct"])  # unscored
    assert bank.responses(table).loc[("d", "v1", "q1")].tolist() == [1.0, 0.0]


def test_a_06_evaluate_folder_or_a_run_folder_name_the_same_run(tmp_path):
    run = make_run(tmp_path, "r1", ROWS)
    assert bank.build([run]).equals(bank.build([run / artifacts.EVALUATE]))


def test_the_bank_is_parquet_that_pandas_opens_directly(tmp_path):
    table = bank.build([make_run(tmp_path, "r1", ROWS)])
    path = bank.write(table, tmp_path / "bank.parquet")
    assert pd.read_parquet(path).shape == table.shape
    assert bank.read(path).equals(table)


def test_appending_a_run_again_replaces_its_rows_and_never_duplicates(tmp_path):
    path = tmp_path / "bank.parquet"
    r1 = make_run(tmp_path, "r1", ROWS)
    r2 = make_run(tmp_path, "r2", [_answer("q1", "m1", False, parsed="C")])
    bank.append(path, r1)
    bank.append(path, r2)
    twice = bank.append(path, r1)
    assert len(twice) == 5 and twice.groupby("run").size().to_dict() == {"r1": 4, "r2": 1}
    write_jsonl(r1 / artifacts.EVALUATE / artifacts.PREDICTIONS, ROWS[:1])  # r1 rerun: one answer
    rerun = bank.append(path, r1)
    assert rerun.groupby("run").size().to_dict() == {"r1": 1, "r2": 1}
    assert bank.read(path).equals(rerun)


def test_an_item_whose_dataset_changed_is_a_new_item_never_its_old_self(tmp_path):
    old = make_run(tmp_path, "old", [_answer("q1", "m1", True)], {"d": "v1"})
    same = make_run(tmp_path, "same", [_answer("q1", "m1", False)], {"d": "v1"})
    new = make_run(tmp_path, "new", [_answer("q1", "m1", False)], {"d": "v2"})
    matrix = bank.responses(bank.build([old, same, new]))
    assert list(matrix.index) == [("d", "v1", "q1"), ("d", "v2", "q1")]
    assert matrix.loc[("d", "v1", "q1")].dropna().tolist() == [1.0, 0.0]  # old and same pooled
    assert matrix.loc[("d", "v2", "q1")].dropna().tolist() == [0.0]  # new alone


def test_peoples_verdicts_join_the_answers_they_rated(tmp_path):
    run = make_run(tmp_path, "r1", ROWS)
    labels = run / artifacts.ANALYZE / artifacts.AGREED / "labels.csv"
    labels.parent.mkdir(parents=True)
    rated = {
        "answer_id": ["d:m1:zero_shot:q1", "d:m2:zero_shot:q1", "release-answer-7"],
        "criterion": ["correctness", "correctness", "correctness"],
        "label": ["1", "0", "1"],  # the last rates an answer of no run (a release's file)
    }
    pd.DataFrame(rated).to_csv(labels, index=False)
    table = bank.build([run]).set_index(["item_id", "model"])
    assert table.loc[("q1", "m1"), "human_correctness"] == 1
    assert table.loc[("q1", "m2"), "human_correctness"] == 0
    assert table.loc[("q2", "m1"), "human_correctness"] is pd.NA
    pd.DataFrame({**rated, "label": ["1", "maybe", "1"]}).to_csv(labels, index=False)
    with pytest.raises(bank.BankError, match=r"labels.csv: a label is 1 or 0, got .*maybe"):
        bank.build([run])


@pytest.mark.parametrize(
    "rows, digests, says",
    [
        ([_answer("q1", "m1", True, dataset="other")], None, "line 1: key 'dataset': 'other'"),
        ([_answer("q1", "m1", "yes")], None, "key 'correct': expected bool or null, got str"),
        (
            [{**_answer("q1", "m1", True), "item_id": 7}],
            None,
            "line 1: key 'item_id': expected str",
        ),
        ([_answer("q1", "m1", True)] * 2, None, "answered an item twice"),
        ([_answer("q1", "m1", True)], {"d": 1}, "manifest.json: 'datasets' must map"),
    ],
)
def test_bad_input_is_an_error_naming_the_file_and_key(tmp_path, rows, digests, says):
    run = make_run(tmp_path, "r1", rows, digests)
    with pytest.raises(bank.BankError, match="manifest.json|predictions.jsonl") as e:
        bank.build([run])
    assert says in str(e.value)


def test_a_folder_without_answers_or_a_file_that_is_no_bank_is_refused(tmp_path):
    with pytest.raises(bank.BankError, match="no predictions.jsonl"):
        bank.build([tmp_path])
    run = make_run(tmp_path, "r1", ROWS)
    (run / artifacts.EVALUATE / artifacts.EVAL_MANIFEST).unlink()
    with pytest.raises(bank.BankError, match="manifest.json: not found"):
        bank.build([run])
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "x.parquet")
    with pytest.raises(bank.BankError, match=r"x.parquet: not an item bank: no column"):
        bank.read(tmp_path / "x.parquet")
    again = make_run(tmp_path, "r2", ROWS)
    with pytest.raises(bank.BankError, match="given twice"):
        bank.build([again, again / artifacts.EVALUATE])


def test_the_command_builds_a_bank_and_reports_each_dataset(tmp_path, capsys):
    path = tmp_path / "bank.parquet"
    assert main(["build", "--runs", str(make_run(tmp_path, "r1", ROWS)), "--bank", str(path)]) == 0
    assert "4 answers to 2 items from 1 run(s)" in capsys.readouterr().out
    r2 = make_run(tmp_path, "r2", [_answer("q1", "m3", True)])
    assert main(["append", "--run", str(r2), "--bank", str(path)]) == 0
    assert "5 answers" in capsys.readouterr().out
    csv = tmp_path / "items.csv"
    assert main(["report", "--bank", str(path), "--items", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "d (v1): 2 items, up to 3 respondents" in out
    assert "2PL: not enough respondents (n = 3 < 20)" in out
    assert "subset: not enough respondents (n = 3 < 10)" in out
    assert set(pd.read_csv(csv)["item_id"]) == {"q1", "q2"}


def test_the_command_says_what_is_wrong_and_exits_2(tmp_path, capsys):
    assert main(["report", "--bank", str(tmp_path / "none.parquet")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'none.parquet'}: no bank")
    made = tmp_path / "x.parquet"
    assert main(["build", "--runs", str(tmp_path / "nowhere"), "--bank", str(made)]) == 2
    assert "nowhere: no predictions.jsonl" in capsys.readouterr().err
    assert not made.exists()


def test_an_answer_is_stored_as_canonical_json():
    row = bank._checked(Path("p"), 1, _answer("q", "m", False, parsed={"b": 1, "a": 2}), {"d": "v"})
    assert json.loads(row["answer"]) == {"a": 2, "b": 1} and row["answer"] == '{"a": 2, "b": 1}'
