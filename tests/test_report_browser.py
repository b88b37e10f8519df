"""The report and the item browser as a reader sees them, in headless Chromium (Debian's `chromium`,
through playwright) from ``file://``: the first screen is the results summary, its numbers are
metrics.csv's, every headline links to the answers behind it, and the browser's filters show
exactly the predictions of predictions.jsonl. Screenshots of both are saved for the docs
(``outputs/screenshots/``)."""

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import expect

from lib.core.paths import ROOT
from lib.core.schema import Prediction
from lib.io import artifacts
from lib.models.store import CallStore
from lib.pages.browser import outcome, write_browser
from lib.pages.report import build_report, headline_rows
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from tests.support.chromium import chromium_page


def _wait_count(page, n: int) -> None:
    """Until the browser's count says ``n`` answers. Waited for with playwright's ``expect``, which
    polls from its own script: a string predicate (``wait_for_function``) is evaluated in the page,
    whose Content-Security-Policy forbids eval, so it failed whenever the count was not there at once."""
    expect(page.locator("#count")).to_have_text(re.compile(rf"^{n} answers"), timeout=30_000)


pytestmark = pytest.mark.usefixtures("chromium")
TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A run with stage 06 only: the tiny VLM on the demo's mcq, vqa and yesbut sets."""
    root = tmp_path_factory.mktemp("report-run")
    folders = {k: str(v) for k, v in demo_datasets(root / "data").items()}
    cfg = evaluate.EvalConfig(
        datasets=folders,
        models={"tiny": TINY},
        styles=["zero_shot"],
        max_new_tokens=6,
        n_resamples=50,
        tasks={"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}},
    )
    run = root / "run"
    evaluate.run(
        cfg, run / artifacts.EVALUATE, store=CallStore(root / "calls.sqlite"), progress=False
    )
    write_browser(run)
    build_report(run)
    return run


@pytest.fixture(scope="module")
def page(chromium):
    with chromium_page() as page:
        yield page


def _shot(page, name):
    folder = (
        ROOT / "outputs" / "screenshots"
    )  # the project's, not the tests' temporary outputs root
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name))


def test_the_report_opens_with_the_results_and_they_are_metrics_csv(run_folder, page):
    page.goto((run_folder / artifacts.REPORT).as_uri())
    table = page.locator("h2#results + h4 + table")
    assert table.is_visible() and table.bounding_box()["y"] < 900  # on the first screen
    _shot(page, "report-summary.png")
    shown = pd.read_html(io.StringIO(table.inner_html().join(("<table>", "</table>"))))[0]
    metrics = pd.read_csv(run_folder / artifacts.EVALUATE / artifacts.METRICS)
    expected = headline_rows(metrics)
    assert len(shown) == len(expected)
    for (_, s), (_, e) in zip(shown.iterrows(), expected.iterrows()):
        assert (s["dataset"], s["task"], s["model"], s["metric"]) == (
            e["dataset"],
            e["task"],
            e["model"],
            e["metric"],
        )
        shown_as = (
            f"{e['value']:.3f} (too few images for an interval: {e['n_clusters']})"
            if e["n_clusters"] < 5  # lib.metrics.stats.MIN_CLUSTERS: an interval not to be trusted
            else f"{e['value']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"
        )
        assert s["value (95% CI)"] == shown_as
        assert s["n_clusters"] == e["n_clusters"] <= s["n"]  # the images its interval resampled
    old = metrics.drop(columns="n_clusters")  # a table from before: its intervals resampled answers
    assert (headline_rows(old)["n_clusters"] == expected["n"]).all()
    assert (
        page.locator("nav a[href='#stage-06_evaluate']").count() == 1
    )  # contents after the results


def test_a_headline_links_to_exactly_its_answers_and_filters_narrow_them(run_folder, page):
    preds = [
        Prediction.from_dict(json.loads(line))
        for line in Path(run_folder / artifacts.EVALUATE / artifacts.PREDICTIONS)
        .read_text()
        .splitlines()
    ]
    page.goto((run_folder / artifacts.REPORT).as_uri())
    link = page.locator("h2#results + h4 + table a").first
    href = link.get_attribute("href")
    link.click()  # as a reader does
    filters = dict(part.split("=") for part in href.split("#")[1].split("&"))
    group = [p for p in preds if all(str(getattr(p, k)) == v for k, v in filters.items())]
    page.wait_for_selector("#count")
    assert page.inner_text("#count").startswith(f"{len(group)} answers")
    _shot(page, "item-browser.png")
    for want in ("wrong", "right"):
        page.select_option("#f-outcome", want)
        expect(page.locator("#f-outcome")).to_have_value(want, timeout=30_000)
        expect(page).to_have_url(re.compile(f"outcome={want}"), timeout=30_000)
        n = sum(outcome(p) == want for p in group)
        _wait_count(page, n)
        rows = page.locator("tr.item")
        assert rows.count() == min(n, 50) and all(
            rows.nth(i).get_attribute("data-outcome") == want for i in range(rows.count())
        )
    page.select_option("#f-outcome", "")
    page.select_option("#f-dataset", "")
    others = [
        p
        for p in preds
        if all(str(getattr(p, k)) == v for k, v in filters.items() if k != "dataset")
    ]
    _wait_count(page, len(others))
    assert page.locator("img").count() > 0  # thumbnails are files next to the page
    assert all(
        src.startswith("thumbs/")
        for src in page.eval_on_selector_all(
            "tr.item img", "els => els.map(e => e.getAttribute('src'))"
        )
    )


# --- a run compared with another: the change and cause filters ----------------------------------


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory):
    """Two runs differing in a model, a prompt and a scoring rule (:mod:`tests.support.pairs`);
    stage 07 of the second compares it with the first (its browser, its report)."""
    from lib.stages import analyze
    from tests.support.pairs import evaluate_pair

    base, new = evaluate_pair(tmp_path_factory.mktemp("pair"), "browse-base", "browse-new")
    cfg = analyze.AnalyzeConfig(compare_with="browse-base")
    out = new / artifacts.ANALYZE
    analyze.finish(cfg, out, None, [], {"topics": "none"}, {}, analyze.comparison(cfg, out))
    return base, new


@pytest.fixture(scope="module")
def served(pair_run):
    """The compared run's folder served over HTTP on 127.0.0.1, as `python -m http.server` would."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(pair_run[1]))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(10)


def _answers(run) -> dict[tuple, dict]:
    return {
        (r["dataset"], r["task"], r["model"], r["style"], r["item_id"]): r
        for r in map(json.loads, open(run / artifacts.EVALUATE / artifacts.PREDICTIONS))
    }


def _changed(run) -> list[dict]:
    return [json.loads(line) for line in open(run / artifacts.ANALYZE / artifacts.COMPARED_ITEMS)]


def test_the_change_and_cause_filters_show_exactly_those_answers_side_by_side(
    pair_run, served, page
):
    """Over HTTP, as a reader picks a cause and a change: exactly the answers the comparison put
    there, each under both runs' prompt, raw reply and reading as the two predictions files hold them."""
    from tests.support.pairs import direction

    base, new = pair_run
    ours, theirs, changed = _answers(new), _answers(base), _changed(new)
    page.goto(f"{served}/browser/index.html")
    page.wait_for_selector("#count")
    assert page.inner_text("#count").startswith(f"{len(ours)} answers")
    assert "Compared with browse-base" in page.inner_text("#compared")
    for cause, change in (
        ("model", "improved"),
        ("model", "worsened"),
        ("prompt", "improved"),
        ("scoring", "improved"),
    ):
        page.select_option("#f-cause", cause)
        page.select_option("#f-change", change)
        want = [
            it for it in changed if it["cause"] == cause and direction(it["A"], it["B"]) == change
        ]
        assert want, (cause, change)
        expect(page).to_have_url(
            re.compile(f"(?=.*cause={cause})(?=.*change={change})"), timeout=30_000
        )
        _wait_count(page, len(want))
        rows = page.locator("tr.item")
        assert rows.count() == len(want) == page.locator("tr.pair").count()
        assert {rows.nth(i).get_attribute("data-cause") for i in range(rows.count())} == {cause}
        assert {rows.nth(i).get_attribute("data-change") for i in range(rows.count())} == {change}
        by_key = {tuple(it["group"]) + (it["item_id"],): it for it in want}
        shown = []
        for i in range(rows.count()):
            where, item_id = rows.nth(i).locator("td").nth(1).text_content().split("\n")
            key = (
                *where.split(" · "),
                *rows.nth(i).locator("td").nth(2).text_content().split(" · "),
                item_id,
            )
            shown.append(key)
            pair = page.locator("tr.pair").nth(i)  # the row under it
            a_raw, b_raw = (
                pair.locator("tr.side-raw-reply td").nth(k).inner_text() for k in (0, 1)
            )
            assert (a_raw, b_raw) == (theirs[key]["raw"], ours[key]["raw"])
            a_prompt, b_prompt = (
                pair.locator("tr.side-prompt td").nth(k).inner_text() for k in (0, 1)
            )
            assert (a_prompt, b_prompt) == (by_key[key]["prompt"]["A"], by_key[key]["prompt"]["B"])
            assert f"first cause: {cause}" in pair.locator("p.why").inner_text()
        assert sorted(shown) == sorted(by_key)
    _shot(page, "item-browser-comparison.png")


def test_the_reports_comparison_links_each_count_to_its_answers(pair_run, page):
    base, new = pair_run
    changed = _changed(new)
    page.goto((new / artifacts.REPORT).as_uri())
    section = page.locator("h2#comparison")
    assert section.inner_text() == "Compared with browse-base"
    section.scroll_into_view_if_needed()
    _shot(page, "report-comparison.png")
    cell = page.locator("h2#comparison ~ table a[href$='cause=model&change=worsened']")
    n = int(cell.inner_text())
    assert n == sum(it["cause"] == "model" and it["change"] == "worsened" for it in changed) > 0
    cell.click()
    _wait_count(page, n)
    assert page.locator("tr.pair").count() == n
    assert page.eval_on_selector("#f-cause", "e => e.value") == "model"
