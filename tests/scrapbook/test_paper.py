"""The Unique All Scrapbook (Table 2's parameters) beside the paper: question set, counts, labels, words."""

import json
from collections import Counter
from pathlib import Path

import pytest

from lib.families.scrapbook import consistency, paper, questions
from lib.families.scrapbook.layout import OTHER_REGION_SHARE, region_shares, relation


@pytest.fixture(scope="module")
def originals(unique_all):
    """The dataset folder, its original-form rows and its scenes."""
    folder = unique_all[0]
    rows = [
        json.loads(line)
        for line in Path(folder / "items.jsonl").read_text().splitlines()
        if '"form":"original"' in line
    ]
    scenes = [json.loads(line) for line in Path(folder / "scenes.jsonl").read_text().splitlines()]
    assert rows and all(r["meta"]["form"] == "original" for r in rows)
    return folder, rows, scenes


def test_tables_5_and_6_present_and_wrong_position_rows_match_the_paper_exactly(originals):
    rows = paper.concept_rows(originals[0])
    present = rows[
        (rows["subgroup"] == 1)
        | ((rows["level"] == 2) & (rows["subgroup"] == 2) & (rows["concept"] != "color + object"))
    ]
    assert present["match"].all(), present[~present["match"]].to_dict("records")
    assert len(present) == 13
    # every other row is an absent-object row, explained by the paper's own numbers
    assert (rows.loc[~rows["match"], "note"] == paper.ABSENT_NOTE).all()


def test_per_type_counts_are_reported_beside_the_paper(originals):
    counts = paper.type_counts(originals[0]).set_index("type")
    assert set(counts.index) == {"presence", "counting", "confirmation", "recognition", "total"}
    assert counts.loc["total", "paper"] == paper.QUESTIONS
    assert (
        counts.loc[["presence", "counting"], "original"] == counts.loc["presence", "original"]
    ).all()
    assert (
        counts.drop(columns=["paper", "ratio", "note"]).drop(index="total").nunique(axis=1) == 1
    ).all()  # 4 forms each
    assert 0 < paper.absurd_share(originals[0])["ours"] < 1


def _subgroups(rows, qtype):
    return {(r["meta"]["group"], r["meta"]["subgroup"]) for r in rows if r["meta"]["type"] == qtype}


def test_every_subgroup_the_paper_defines_is_asked(originals):
    _, rows, _ = originals
    full = {
        ("np", 1),
        ("np", 2),
        ("abs", 1),
        ("abs", 2),
        ("abs", 3),
        ("rel", 1),
        ("rel", 2),
        ("rel", 3),
        ("rel", 4),
    }
    for qtype in ("presence", "counting", "confirmation"):
        assert _subgroups(rows, qtype) == full, qtype
    assert _subgroups(rows, "recognition") == {("np", 1), ("abs", 1), ("rel", 1)}
    unk = [r for r in rows if r["meta"]["type"] == "confirmation" and r["answer"] == ["<unk>"]]
    assert unk and all(r["meta"]["absurd"] for r in unk)
    levels = {(r["meta"]["type"], r["meta"]["level"]) for r in rows}
    assert {("confirmation", 4), ("recognition", 4), ("presence", 4), ("counting", 4)} <= levels
    assert max(r["meta"]["level"] for r in rows) == 4 and all(
        len(r["meta"]["concepts"]) <= 4 for r in rows
    )


def test_wrong_values_are_spread_over_the_allowed_values(originals):
    _, rows, _ = originals
    colours = Counter(
        r["meta"]["query"]["assert"]["color"]
        for r in rows
        if r["meta"]["type"] == "confirmation"
        and "color" in r["meta"]["query"]["assert"]
        and r["answer"] == ["no"]
    )
    assert len(colours) >= 6 and max(colours.values()) < 0.3 * sum(colours.values())


def test_recognition_subjects_are_described_by_attribute(originals):
    _, rows, _ = originals
    texts = {r["question"] for r in rows if r["meta"]["type"] == "recognition"}
    described = [
        r
        for r in rows
        if r["meta"]["type"] == "recognition"
        and r["meta"]["group"] != "np"
        and r["meta"]["query"]["target"]
    ]
    assert described and any(t.startswith("what is the color of the circle on the") for t in texts)
    assert any(" to the left of the " in t and "what is the shape of the" in t for t in texts)


def test_the_papers_example_wordings_and_no_awkward_ones(originals):
    _, rows, _ = originals
    texts = {r["question"] for r in rows}
    for example in (
        "here, circles, are there any?",
        "about circles... can we find any?",
        "how many circles are there?",
        "how many items are black here?",
    ):
        assert example in texts, example
    for phrase in (
        "left half",
        "absolute right",
        "down left",
        "up left",
        "in the middle",
        "in the center",
    ):
        assert any(phrase in t for t in texts), phrase
    for bad in (
        "on the center?",
        "on the middle?",
        "on the center ",
        "are black objects here",
        "aware of one ",
    ):
        assert not [
            t for t in texts if bad in t and not any(bad + side in t for side in ("left", "right"))
        ], bad


def test_spatial_labels_a_person_agrees_with(originals):
    _, _, scenes = originals
    for scene in scenes:
        objs = {o["role"]: o for o in scene["objects"]}
        if "reference" not in objs:
            continue
        ref = objs["reference"]["box"]
        assert relation(objs["main"]["box"], ref) == scene["relation"]
        for o in scene["objects"]:
            if o["role"] == "other":
                assert relation(o["box"], ref) not in (None, scene["relation"])
                shares = region_shares(o["box"], scene["width"], scene["height"])
                assert max(shares.values()) >= OTHER_REGION_SHARE and o["region"] == max(
                    shares, key=shares.get
                )


def test_cardinal_relations_need_overlap_on_the_other_axis():
    ref = (500, 300, 600, 400)
    assert relation((300, 320, 400, 420), ref) == "left"  # 80% vertical overlap
    assert relation((300, 380, 400, 480), ref) is None  # 20%: looks diagonal, so no relation at all
    assert relation((300, 401, 400, 480), ref) == "lower left"


def test_the_matcher_accepts_every_region_name_the_generator_uses():
    regions = tuple(questions.expressions()["regions"])
    for region, names in questions.expressions()["regions"].items():
        for name in names:
            assert (
                consistency.categorize(f"it is on the {name}", region, "original", regions)
                == consistency.CORRECT
            ), (
                region,
                name,
            )
            assert (
                consistency.categorize(name, region, "condition", regions) == consistency.CORRECT
            ), (region, name)


def test_the_reproduction_table_puts_each_paper_number_beside_ours(unique_all):
    """What stage 04 writes as paper.csv with compare_to_paper (the report's Reproduction section)."""
    table = paper.reproduction(unique_all[0])
    assert list(table.columns) == [
        "paper",
        "quantity",
        "paper_value",
        "ours",
        "equal",
        "note",
        "command",
    ]
    images = table[table["quantity"].str.startswith("images")].iloc[0]
    assert images["paper_value"] == images["ours"] == paper.IMAGES and images["equal"]
    assert (table["note"] == "").eq(table["equal"]).all()  # a difference always says why
    assert len(table[table["quantity"].str.startswith("Table ")]) == len(paper.TABLES_5_6)
