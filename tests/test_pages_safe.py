"""Pages never run text from data (headless Chromium, from ``file://``).

A run is built whose every field that reaches a page carries a payload: the question, the options,
the reference, the raw reply and the answer read from it (a constant baseline replying with one),
the subset (an MCQ type), the LAVE rationale, the run's name, topic words and a figure's caption;
then, in a second run, the dataset, model and style labels themselves (config refuses such labels,
so they are written into the files as an attacker with write access to a run would). Each payload
would set ``document.body.dataset.pwned`` to the name of its field if it ran; the report and the
browser must show every payload as text, set no marker and hold only their templates' scripts.
"""

import json
import re
import shutil

import pandas as pd
import pytest
from PIL import Image

from lib.core.schema import Item
from lib.io import artifacts, dataset_info, save_dataset
from lib.models.store import CallStore
from lib.pages.browser import write_browser
from lib.pages.report import build_report
from lib.stages import evaluate
from tests.support.chromium import chromium_page
from tests.support.stage06 import restamp

pytestmark = pytest.mark.usefixtures("chromium")


def payload(field: str) -> str:
    """Text that runs script setting the marker to ``field`` if a page ever treats it as markup."""
    mark = f"document.body.dataset.pwned='{field}'"
    return (
        f'</script><script>{mark}</script><img src=x onerror="{mark}"><svg onload="{mark}">'
        f"\u2028<!--{field}-->&amp;"
    )


def _slashless(field: str) -> str:
    """A payload a file or folder name can carry (no ``/``)."""
    return f"<img src=x onerror=\"document.body.dataset.pwned='{field}'\">"


RUN_NAME = "run" + _slashless("run name")
FIELDS = ("question", "option", "reference", "raw reply", "subset", "rationale", "topic words")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    data = root / "data" / "hostile"
    (data / "images").mkdir(parents=True)
    Image.new("RGB", (32, 32), "red").save(data / "images" / "a.png")
    items = [
        Item(
            "q1",
            "mcq",
            payload("question"),
            ["images/a.png"],
            [payload("option"), "blue"],
            [0],
            {"general_type": "t", "specific_type": payload("subset")},
        ),
        Item("q2", "vqa.open", "What colour?", ["images/a.png"], None, [payload("reference")] * 3),
    ]
    save_dataset(data, items, dataset_info("hostile"))
    cfg = evaluate.EvalConfig(
        datasets={"hostile": str(data)},
        models={"const": {"backend": "constant", "answer": payload("raw reply")}},
        styles=["zero_shot"],
        n_resamples=20,
    )
    run = root / RUN_NAME
    evaluate.run(
        cfg, run / artifacts.EVALUATE, store=CallStore(root / "calls.sqlite"), progress=False
    )
    judged = {
        "item_id": "q2",
        "model": "const",
        "judge": "j",
        "rating": 1,
        "score": 0.0,
        "rationale": payload("rationale"),
        "raw": "",
        "valid": True,
        "meta": {"dataset": "hostile", "style": "zero_shot"},
    }
    (run / artifacts.EVALUATE / artifacts.JUDGEMENTS).write_text(json.dumps(judged) + "\n")
    restamp(
        run / artifacts.EVALUATE
    )  # a finished run holding a hostile rationale, as a comparison accepts it
    analyze = artifacts.stage_folder(run, artifacts.ANALYZE)
    (analyze / artifacts.TABLES).mkdir(parents=True)
    pd.DataFrame({"topic": [0], "words": [payload("topic words")]}).to_csv(
        analyze / artifacts.TABLES / "topics.csv", index=False
    )
    (analyze / "figures").mkdir()
    Image.new("RGB", (8, 8)).save(analyze / "figures" / f"{_slashless('figure caption')}.png")
    write_browser(run)
    build_report(run)
    return run


@pytest.fixture(scope="module")
def hostile_labels(hostile_run, tmp_path_factory):
    """The same run with the dataset, model and style labels in its files made hostile."""
    run = tmp_path_factory.mktemp("labels") / "run"
    shutil.copytree(hostile_run, run)
    folder = run / artifacts.EVALUATE
    labels = {
        "dataset": payload("dataset label"),
        "model": payload("model label"),
        "style": payload("style label"),
    }
    cfg = json.loads((folder / artifacts.EVAL_CONFIG).read_text())
    cfg["datasets"] = {labels["dataset"]: cfg["datasets"]["hostile"]}
    (folder / artifacts.EVAL_CONFIG).write_text(json.dumps(cfg))
    rows = [
        json.loads(line)
        for line in (folder / artifacts.PREDICTIONS).read_text().split("\n")
        if line
    ]
    (folder / artifacts.PREDICTIONS).write_text(
        "".join(json.dumps({**r, **labels}) + "\n" for r in rows)
    )
    write_browser(run)
    build_report(run)
    return run, labels


@pytest.fixture(scope="module")
def page(chromium):
    with chromium_page() as page:
        yield page


def _scripts(page) -> list[str]:
    return page.eval_on_selector_all(
        "script", "els => els.map(e => (e.getAttribute('src') || '') + '|' + e.type)"
    )


def _assert_inert(page, url, texts):
    page.goto(url)
    page.wait_for_load_state("load")
    assert page.evaluate("document.body.dataset.pwned") is None
    assert not page.query_selector("img[src=x], svg")  # no payload became an element
    shown = page.inner_text("body")
    for t in texts:
        assert t in shown, f"{t[:60]!r} is not shown as text"


def test_a_report_shows_every_payload_as_text_and_runs_none(hostile_run, page):
    report = (hostile_run / artifacts.REPORT).read_text()
    assert len(re.findall(r"<script", report, re.I)) == 0  # the report has no script at all
    assert "Content-Security-Policy" in report
    _assert_inert(
        page,
        (hostile_run / artifacts.REPORT).as_uri(),
        [
            payload("subset").replace("\u2028", " ")[:40],
            payload("topic words")[:40],
            _slashless("run name"),
            _slashless("figure caption"),
        ],
    )


def test_the_browser_shows_every_payload_as_text_and_runs_none(hostile_run, page):
    index = (hostile_run / "browser" / "index.html").read_text()
    assert _template_scripts(index) == [
        '<script type="application/json" id="index">',
        '<script src="browser.js">',
    ]
    _assert_inert(page, (hostile_run / "browser" / "index.html").as_uri(), [_slashless("run name")])
    page.wait_for_selector("#count")
    cells = page.inner_text("#items")
    for field in ("question", "option", "reference", "raw reply", "rationale"):
        assert payload(field)[:40] in cells, field
    options = page.eval_on_selector_all("#f-subset option", "els => els.map(e => e.value)")
    assert payload("subset") in options
    assert page.evaluate("document.body.dataset.pwned") is None
    assert page.query_selector("#stale") is None  # the answers are the ones the metrics came from


def _template_scripts(page_html: str) -> list[str]:
    """The page's script tags; a page holding a payload verbatim (in any field) fails here too."""
    assert (
        "</script><script>" not in page_html
        and "<img src=x" not in page_html
        and "\u2028" not in page_html
    )
    return re.findall(r"<script[^>]*>", page_html, re.I)


def test_hostile_labels_stay_text_and_the_browser_says_its_answers_are_not_the_reports(
    hostile_labels, page
):
    run, labels = hostile_labels
    index = (run / "browser" / "index.html").read_text()
    assert _template_scripts(index) == [
        '<script type="application/json" id="index">',
        '<script src="browser.js">',
    ]
    _assert_inert(page, (run / "browser" / "index.html").as_uri(), [])
    page.wait_for_selector("#count")
    assert "python -m lib.stages.evaluate rescore" in page.inner_text(
        "#stale"
    )  # on the first screen, naming the fix
    assert page.locator("#stale").bounding_box()["y"] < 900
    cells = page.inner_text("#items")
    for field, text in labels.items():
        assert text[:40] in cells, field
    assert page.evaluate("document.body.dataset.pwned") is None
    _assert_inert(page, (run / artifacts.REPORT).as_uri(), ["Stale results withheld"])


@pytest.fixture(scope="module")
def hostile_comparison(hostile_run, tmp_path_factory):
    """The hostile run (A, its name a payload) compared with a copy (B) whose raw replies and whose
    model's answer in the config are payloads too: a ``model`` change on every answer, shown side
    by side in B's browser and counted in B's report (:mod:`lib.compare.changes`)."""
    from lib.compare.changes import side_by_side, write_comparison

    run = tmp_path_factory.mktemp("compared") / "run"
    shutil.copytree(hostile_run, run)
    folder = run / artifacts.EVALUATE
    cfg = json.loads((folder / artifacts.EVAL_CONFIG).read_text())
    cfg["models"]["const"]["answer"] = payload("config value")
    (folder / artifacts.EVAL_CONFIG).write_text(json.dumps(cfg))
    rows = [
        json.loads(line)
        for line in (folder / artifacts.PREDICTIONS).read_text().split("\n")
        if line
    ]
    (folder / artifacts.PREDICTIONS).write_text(
        "".join(json.dumps({**r, "raw": payload("B raw reply")}) + "\n" for r in rows)
    )
    restamp(folder)  # B as if stage 06 had written these replies (a comparison refuses edited runs)
    result = side_by_side(hostile_run / artifacts.EVALUATE, folder)
    assert result["changed"] == len(rows) and result["causes"]["model"]["items"] == len(rows)
    write_comparison(artifacts.stage_folder(run, artifacts.ANALYZE), result)
    write_browser(run, result)
    build_report(run)
    return run


def test_a_comparison_shows_both_runs_payloads_as_text_and_runs_none(hostile_comparison, page):
    run = hostile_comparison
    index = (run / "browser" / "index.html").read_text()
    assert _template_scripts(index) == [
        '<script type="application/json" id="index">',
        '<script src="browser.js">',
    ]
    _assert_inert(
        page, (run / "browser" / "index.html").as_uri() + "#cause=model", [_slashless("run name")]
    )
    page.wait_for_selector("tr.pair")
    pairs = page.inner_text("#items")
    for field in (
        "raw reply",
        "B raw reply",
        "question",
        "option",
    ):  # A's and B's replies, both prompts
        assert payload(field)[:40] in pairs, field
    assert payload("question")[:40] in page.inner_text("tr.pair tr.side-prompt")
    assert page.evaluate("document.body.dataset.pwned") is None and not page.query_selector(
        "img[src=x], svg"
    )
    report = (run / artifacts.REPORT).read_text()
    assert len(re.findall(r"<script", report, re.I)) == 0
    _assert_inert(
        page,
        (run / artifacts.REPORT).as_uri(),
        [f"Compared with {RUN_NAME}", payload("config value").replace("\u2028", " ")[:40]],
    )


def test_a_csp_stops_a_script_an_escape_would_have_missed(tmp_path, page):
    """The second wall: a page with the pages' policy (scripts from files beside it allowed) and an
    injected inline script runs none of it."""
    from lib.pages.render import ENV

    mark = "document.body.dataset.pwned='inline'"
    injected = f'<script>{mark}</script><img src=x onerror="{mark}">'
    template = '{% extends "page.html" %}{% set scripts = true %}{% block body %}'
    (tmp_path / "p.html").write_text(
        ENV.from_string(template + injected + "{% endblock %}").render()
    )
    page.goto((tmp_path / "p.html").as_uri())
    page.wait_for_load_state("load")
    assert page.evaluate("document.body.dataset.pwned") is None


def test_a_value_is_text_never_markup_or_a_template():
    """What a template puts in is escaped, and never rendered again: ``{{ }}`` in data stays text."""
    from lib.pages.render import ENV, Link, table

    hostile = ["{{ 7 * 7 }}{% if true %}x{% endif %}", '"><img src=x onerror="alert(1)">']
    shown = table(pd.DataFrame({"cell": hostile, "link": [Link("a.csv?x=1&y=2", hostile[1])] * 2}))
    page = ENV.from_string('{% from "tables.html" import table %}{{ table(t) }}').render(t=shown)
    assert "{{ 7 * 7 }}{% if true %}x{% endif %}" in page and "49" not in page
    assert "<img" not in page and "&#34;&gt;&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
    assert 'href="a.csv?x=1&amp;y=2"' in page
