"""The papers' stated numbers beside ours: lib/data/papers.yaml read by lib.stages.analyze into 07's paper.csv."""

import json
import shutil

import pandas as pd
import pytest

from lib.core.papers import PAPER_COLUMNS, STATED, agreement_claims, papers, stated_label
from lib.core.paths import stage_dir
from lib.families.memeqa.collect import memeqa_dataset
from lib.families.memeqa.paper import memeqa_reproduction
from lib.families.yesbut.paper import HUMAN_CRITERIA, yesbut_reproduction
from lib.families.yesbut.release import yesbut_stage
from lib.io import artifacts
from lib.pages.report import build_report
from lib.stages import analyze

from .support.data import SHARED_DATA

YESBUT, MEMEQA = SHARED_DATA / "yesbut", SHARED_DATA / "memeqa"
needs_yesbut = pytest.mark.needs_data("yesbut/Human_Eval_Results.csv")
needs_memeqa = pytest.mark.needs_data("memeqa/none-minus/train.json")


def stated(paper: str) -> dict:
    """Row name -> the paper's value, as papers.yaml has it."""
    return {stated_label(q): q["value"] for q in papers()[paper]["stated"].values()}


def check_rows(table: pd.DataFrame, paper: str) -> None:
    """One row per stated number carrying papers.yaml's value; drawn rows carry none; a row that is
    not equal (or has no paper value) always says why; every row names the command."""
    assert list(table.columns) == PAPER_COLUMNS and (table["paper"] == paper).all()
    values = stated(paper)
    by_name = table.set_index("quantity")["paper_value"]
    assert by_name.index.is_unique and {q: by_name[q] for q in values} == values
    drawn = table[~table["quantity"].isin(values)]
    assert drawn["paper_value"].isna().all() and drawn["equal"].isna().all()
    assert (table["note"] == "").eq(table["equal"].fillna(False)).all()
    assert (table["command"] == papers()[paper]["command"]).all()


def test_every_number_in_papers_yaml_says_where_it_comes_from_and_how_it_is_stated():
    for paper, spec in papers().items():
        assert spec["command"].startswith("make ") and spec["source"], paper
        for key, q in spec["stated"].items():
            assert q["quantity"] and q["where"] and isinstance(q["value"], (int, float)), (
                paper,
                key,
            )
            assert q.get("stated", "exactly") in STATED, (paper, key)
            assert q.get("stated") != "rounded" or q["precision"] > 0, (paper, key)
        assert all(
            d["quantity"] and d["where"] and d["note"] for d in spec.get("drawn", {}).values()
        ), paper


def test_a_yesbut_image_stage_follows_its_half_styles():
    assert yesbut_stage("20240101_173532.jpg") == 2
    assert yesbut_stage("20240101_173605_STICK_YES_STICK_BUT.jpg") == 3
    assert yesbut_stage("20240101_174927_ORIG_YES_STICK_BUT.jpg") == 3
    assert yesbut_stage("20240101_180509_STICK_YES_3D_BUT.jpg") == 4


@needs_yesbut
def test_yesbut_figure3_and_figure14_numbers_beside_ours():
    table = yesbut_reproduction(YESBUT)
    check_rows(table, "YesBut")
    spec = papers()["YesBut"]["stated"]
    equal = dict(zip(table["quantity"], table["equal"]))
    # the text's 13.5% is no share of the 283 images; its 36.66 is a truncated 36.67
    assert {k for k, q in spec.items() if not equal[stated_label(q)]} == {
        "medium_or_hard",
        "gap_faithfulness",
    }
    release = pd.read_csv(YESBUT / "YesBut_Stage2_Annotation.csv")
    ours = table.set_index("quantity")["ours"]
    assert ours[stated_label(spec["images"])] == len(release)
    drawn = table[table["paper_value"].isna()]
    figure3 = drawn[drawn["quantity"].str.contains(r"\(Figure 3\(")]
    assert len(figure3) == 4 + 2 + 3 and figure3["ours"].sum() == 3 * len(
        release
    )  # each panel counts every image
    assert len(drawn) - len(figure3) == 6 * len(HUMAN_CRITERIA)  # Figure 14: 6 sources x 4 criteria


@needs_yesbut
def test_yesbut_without_the_human_evaluation_says_why_its_rows_are_empty(tmp_path):
    shutil.copy(YESBUT / "YesBut_Stage2_Annotation.csv", tmp_path)
    table = yesbut_reproduction(tmp_path)
    check_rows(table, "YesBut")
    empty = table[table["ours"].isna()]
    assert len(empty) == sum(
        k.startswith(("human_eval", "gap_")) for k in papers()["YesBut"]["stated"]
    )
    assert empty["note"].str.contains("Human_Eval_Results.csv").all()


@pytest.fixture(scope="module")
def memeqa_run():
    """A run whose stage 01 collected the released MemeQA train and dev splits (None-)."""
    run = stage_dir("papers-memeqa", artifacts.COLLECT).parent
    for split in ("train", "dev"):
        memeqa_dataset(
            MEMEQA / "none-minus" / f"{split}.json",
            MEMEQA / "images",
            artifacts.dataset_folder(
                artifacts.stage_folder(run, artifacts.COLLECT), f"memeqa_{split}"
            ),
        )
    return run


@needs_memeqa
def test_memeqa_release_statistics_beside_ours(memeqa_run):
    table = memeqa_reproduction(memeqa_run)
    check_rows(table, "MemeQA")
    spec = papers()["MemeQA"]["stated"]
    rows = table.set_index("quantity")
    splits = {
        s: json.loads((MEMEQA / "none-minus" / f"{s}.json").read_text()) for s in ("train", "dev")
    }
    assert rows.loc[stated_label(spec["questions"]), "ours"] == sum(map(len, splits.values()))
    assert rows.loc[stated_label(spec["train_questions"]), "ours"] == len(splits["train"])
    types = rows.loc[stated_label(spec["question_types"])]
    assert (
        types["ours"] == len({r["specific_type"] for rs in splits.values() for r in rs})
        and types["equal"]
    )
    assert (
        rows["note"].str.contains(f"train {len(splits['train']):,}").sum() == (~rows["equal"]).sum()
    )


@needs_yesbut
@needs_memeqa
def test_the_stage_writes_both_papers_rows_in_one_paper_csv_and_the_report_shows_it(memeqa_run):
    out = artifacts.stage_folder(memeqa_run, artifacts.ANALYZE)
    table = analyze.paper_table(analyze.AnalyzeConfig(paper_data={"yesbut": str(YESBUT)}), out)
    written = pd.read_csv(out / artifacts.PAPER, keep_default_na=False)
    assert list(written["paper"].unique()) == ["MemeQA", "YesBut"] and len(written) == len(table)
    for paper in ("YesBut", "MemeQA"):
        values = dict(zip(written["quantity"], written["paper_value"]))
        assert {q: float(values[q]) for q in stated(paper)} == stated(paper)
    page = build_report(memeqa_run).read_text()
    assert "07_analyze/paper.csv" in page and "this run computes none" not in page.lower()


def test_without_the_papers_data_the_stage_writes_no_paper_csv():
    out = stage_dir("papers-bare", artifacts.ANALYZE)
    (out / artifacts.PAPER).write_text("paper,quantity\nYesBut,left by an earlier run\n")
    assert analyze.paper_table(analyze.AnalyzeConfig(), out) is None
    assert not (out / artifacts.PAPER).exists()


SEEDS = {"YesBut": "001_cff4cffb7ad98524.txt", "LAVE": "002_1ef572e342c2980d.txt"}


@pytest.mark.needs_data("../seeds/002_1ef572e342c2980d.txt")
@pytest.mark.needs_data("../seeds/001_cff4cffb7ad98524.txt")
def test_what_the_papers_say_of_agreement_with_people_is_quoted_from_them():
    """Every claim papers.yaml puts beside our agreement table is in its paper's text word for word,
    and a figure is given only where the quote states it."""
    claims = agreement_claims()
    assert set(claims["paper"]) == set(SEEDS)
    for paper, where, quote, figure in claims.itertuples(index=False):
        seed = (SHARED_DATA.parent / "seeds" / SEEDS[paper]).read_text()
        assert " ".join(quote.split()) in " ".join(seed.split()), (paper, where)
        assert figure == "none stated" or str(figure) in quote, (paper, where)
