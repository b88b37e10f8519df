"""Stage 07's item quality on a planted run: a fake stage 06 whose answers make one item saturated,
one never right with scattered mistakes and one never right with every respondent on one wrong
option (agreed wrong). The section finds exactly those, writes its tables, figures and cards, the
report shows the flagged items with their images (capped, "and N more"), and the item browser's
flag filter shows exactly their answers."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
from PIL import Image

from lib.core.schema import Item
from lib.io import artifacts, dataset_info, save_dataset, write_json, write_jsonl
from lib.items import quality
from lib.items.classical import FLAGS
from lib.pages import browser, items_view
from lib.stages import analyze

MODELS = ("m1", "m2", "m3", "m4", "m5")  # five respondents: enough to flag (4), too few for 2PL
# per item, each respondent's answer (the key is A): q0 saturated; q1 never right, mistakes
# scattered; q2 never right, four of five on C (agreed wrong); q3-q5 mixed
ANSWERS = {
    "q0": "AAAAA",
    "q1": "BCDBC",
    "q2": "CCCCB",
    "q3": "AABCA",
    "q4": "ABADA",
    "q5": "AAABB",
}


def _dataset(folder) -> None:
    (folder / "images").mkdir(parents=True)
    items = []
    for i, item_id in enumerate(ANSWERS):
        Image.new("RGB", (64, 48), (40 * i, 90, 200 - 30 * i)).save(folder / f"images/{i}.png")
        question = f"<b>Which colour is picture {i}?</b>"  # markup in data stays text
        items.append(
            Item(
                item_id, "mcq", question, [f"images/{i}.png"], ["red", "green", "blue", "grey"], [0]
            )
        )
    save_dataset(folder, items, dataset_info("quiz"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The planted run after stage 07's item-quality step, browser and report."""
    root = tmp_path_factory.mktemp("quality")
    _dataset(root / "data" / "quiz")
    folder = root / "planted" / artifacts.EVALUATE
    folder.mkdir(parents=True)
    rows = [
        {
            "item_id": item_id,
            "model": model,
            "task": "mcq",
            "raw": letter,
            "dataset": "quiz",
            "parsed": letter,
            "style": "zero_shot",
            "valid": True,
            "correct": letter == "A",
        }
        for item_id, letters in ANSWERS.items()
        for model, letter in zip(MODELS, letters)
    ]
    write_jsonl(folder / artifacts.PREDICTIONS, rows)
    write_json(folder / artifacts.EVAL_MANIFEST, {"datasets": {"quiz": "v1"}})
    write_json(folder / artifacts.EVAL_CONFIG, {"datasets": {"quiz": str(root / "data" / "quiz")}})
    cfg, out = analyze.AnalyzeConfig(), root / "planted" / artifacts.ANALYZE
    found = analyze.item_quality(cfg, out)
    summary = analyze.finish(cfg, out, None, [], {"topics": "none"}, {}, None, found)
    assert summary["items"]["flagged"]["never_right"] == 2  # the stage's summary counts them
    return root / "planted", found


def test_the_planted_items_and_only_they_are_flagged(run):
    folder, found = run
    flags = quality.read_table(folder, artifacts.ITEM_FLAGS).set_index("item_id")
    assert flags.loc["q0", "saturated"] == 1 and flags.loc["q1", "never_right"] == 1
    assert flags.loc["q2", ["never_right", "agreed_wrong"]].tolist() == [1, 1]
    assert set(flags.index) == {"q0", "q1", "q2"}  # flags.csv holds the flagged items only
    assert flags.loc["q1", "agreed_wrong"] == 0  # scattered mistakes are no agreement
    stats = quality.read_table(folder, artifacts.ITEM_STATS).set_index("item_id")
    assert stats.loc["q2", "wrong_answer"] == '"C"' and stats.loc["q2", "wrong_share"] == 0.8
    assert len(stats) == 6 and (stats["n"] == 5).all()


def test_what_cannot_be_computed_is_said_not_raised(run):
    folder, found = run
    datasets = quality.read_table(folder, artifacts.ITEM_DATASETS)
    assert datasets[["items", "respondents", "never_right", "agreed_wrong"]].values.tolist() == [
        [6, 5, 2, 1]
    ]
    assert datasets["irt"].tolist() == ["not enough respondents"]
    said = quality.read_summary(folder)["datasets"][0]["said"]
    assert "2PL: not enough respondents (n = 5 < 20) for a 2PL fit" in said
    assert any("n = 5 < 10" in s for s in said)  # negative discrimination and the subset check
    assert not (folder / artifacts.ANALYZE / artifacts.ITEM_IRT).exists()  # no fit, no table
    figures = folder / artifacts.ANALYZE / artifacts.ITEMS / artifacts.FIGURES
    assert {p.name for p in figures.glob("*.png")} >= {"item_difficulty.png"}


def test_the_dataset_card_says_what_a_reader_needs(run):
    folder, _ = run
    cards = folder / artifacts.ANALYZE / artifacts.ITEM_CARDS
    card = json.loads((cards / "quiz.json").read_text())
    assert card["items"] == 6 and card["respondents"] == 5
    assert card["flags"] == {
        "saturated": 1,
        "never_right": 2,
        "negative_discrimination": 0,
        "agreed_wrong": 1,
        "blind_solvable": 0,  # the blind and leak audits' flags, counted though none fired
        "leaked_image": 0,
        "repeated_question": 0,
    }
    assert card["irt"] == "not enough respondents" and card["difficulty"]["median"] == 0.6
    text = (cards / "quiz.md").read_text()
    assert text.startswith("# quiz\n") and "never right 2" in text and "n = 5 < 20" in text
    for figure in card["figures"]:  # the links resolve from the card's folder
        assert (cards / figure).is_file()


def test_the_report_shows_the_flagged_items_with_their_images(run):
    folder, _ = run
    page = (folder / artifacts.REPORT).read_text()
    section = page.split("<h2 id='items'>", 1)[1].split("<nav>", 1)[0]
    assert "Flagged agreed wrong: 1 items of this run" in section
    assert section.count("data:image/jpeg;base64,") == 1 + 2 + 1  # per flag, its items' images
    assert "C (80% of respondents)" in section  # the agreed wrong answer and its share
    assert "&lt;b&gt;Which colour is picture 2?&lt;/b&gt;" in section  # data stays text
    assert "not enough respondents (n = 5 &lt; 20)" in section
    assert 'href="browser/index.html#dataset=quiz&amp;flag=never_right"' in section
    assert "07_analyze/items/cards/quiz.md" in section
    assert '<a href="#items">' in page  # in the contents


def test_the_report_caps_the_items_per_flag_and_says_how_many_more(run, monkeypatch):
    folder, _ = run
    monkeypatch.setattr(items_view, "SHOWN_PER_FLAG", 1)
    section = items_view.section(folder)
    never = next(f for f in section["flagged"] if f["flag"] == "never_right")
    assert len(never["rows"]) == 1 and never["more"] == 1 and never["total"] == 2
    assert never["link"] == "browser/index.html#flag=never_right"


def _index(folder) -> dict:
    page = (folder / browser.FOLDER / "index.html").read_text()
    return json.loads(re.search(r'id="index">(.*?)</script>', page, re.S).group(1))


def test_the_browser_offers_a_flag_filter_fed_by_stage_07(run):
    folder, _ = run
    index = _index(folder)
    assert "flag" in index["filters"]
    every = [*FLAGS, "blind_solvable", "leaked_image", "repeated_question"]
    assert index["values"]["flag"] == every  # every flag, even one no item carries
    data = (folder / browser.FOLDER / index["files"]["quiz"]).read_text()
    rows = json.loads(data[data.index(", ") + 2 : data.rindex(");")])
    flagged = {r["item_id"]: r["flag"] for r in rows}
    assert flagged["q0"] == ["saturated"] and flagged["q2"] == ["never_right", "agreed_wrong"]
    assert flagged["q3"] == [] and browser.link(flag="saturated").endswith("#flag=saturated")


def test_a_run_without_item_quality_has_no_section_and_no_flag_filter(tmp_path):
    assert items_view.section(tmp_path) is None
    assert browser.item_flags(tmp_path) == ({}, [])


def test_the_flag_filter_shows_exactly_the_answers_to_flagged_items(run, chromium):
    from playwright.sync_api import expect

    from tests.support.chromium import chromium_page

    folder, _ = run
    with chromium_page() as page:
        page.goto((folder / browser.FOLDER / "index.html").as_uri())
        for flag, n in (("saturated", 5), ("never_right", 10), ("agreed_wrong", 5)):
            page.select_option("#f-flag", flag)
            expect(page.locator("#count")).to_have_text(re.compile(rf"^{n} answers"))
        page.select_option("#f-flag", "")
        expect(page.locator("#count")).to_have_text(re.compile(rf"^{len(MODELS) * 6} answers"))


def test_a_stale_bank_is_withheld_with_its_reason(run, tmp_path):
    folder, _ = run
    copy = tmp_path / "stale"
    shutil.copytree(folder / artifacts.EVALUATE, copy / artifacts.EVALUATE)
    pd.DataFrame({"x": [1]}).to_parquet(copy / artifacts.EVALUATE / artifacts.ITEM_BANK)
    pd.DataFrame({"metric": ["a"]}).to_csv(copy / artifacts.EVALUATE / "metrics.csv")
    assert analyze.item_quality(analyze.AnalyzeConfig(), copy / artifacts.ANALYZE) is None
    section = items_view.section(copy)
    assert "rescore" in section["withheld"]
