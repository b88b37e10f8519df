"""The report and the item browser as a reader sees them, in headless Chromium (Debian's `chromium`,
through playwright) from ``file://``: the first screen is the results summary, its numbers are
metrics.csv's, every headline links to the answers behind it, and the browser's filters show
exactly the predictions of predictions.jsonl. Screenshots of both are saved for the docs
(``outputs/screenshots/``)."""

import io
import json

import pandas as pd
import pytest

from lib import artifacts as A
from lib.browser import outcome, write_browser
from lib.paths import ROOT
from lib.report import build_report, headline_rows
from lib.schema import Prediction
from lib.stages import evaluate as E
from lib.stages.setup import demo_datasets
from lib.store import CallStore
from tests.support.chromium import chromium_page

pytestmark = pytest.mark.usefixtures("chromium")
TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A run with stage 06 only: the tiny VLM on the demo's mcq, vqa and yesbut sets."""
    root = tmp_path_factory.mktemp("report-run")
    folders = {k: str(v) for k, v in demo_datasets(root / "data").items()}
    cfg = E.EvalConfig(datasets=folders, models={"tiny": TINY}, styles=["zero_shot"], max_new_tokens=6, n_resamples=50,
                       tasks={"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}})
    run = root / "run"
    E.run(cfg, run / A.EVALUATE, store=CallStore(root / "calls.sqlite"), progress=False)
    write_browser(run)
    build_report(run)
    return run


@pytest.fixture(scope="module")
def page(chromium):
    with chromium_page() as page:
        yield page


def _shot(page, name):
    folder = ROOT / "outputs" / "screenshots"  # the project's, not the tests' temporary outputs root
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name))


def test_the_report_opens_with_the_results_and_they_are_metrics_csv(run_folder, page):
    page.goto((run_folder / A.REPORT).as_uri())
    table = page.locator("h2#results + h4 + table")
    assert table.is_visible() and table.bounding_box()["y"] < 900  # on the first screen
    _shot(page, "report-summary.png")
    shown = pd.read_html(io.StringIO(table.inner_html().join(("<table>", "</table>"))))[0]
    metrics = pd.read_csv(run_folder / A.EVALUATE / A.METRICS)
    expected = headline_rows(metrics)
    assert len(shown) == len(expected)
    for (_, s), (_, e) in zip(shown.iterrows(), expected.iterrows()):
        assert (s["dataset"], s["task"], s["model"], s["metric"]) == (e["dataset"], e["task"], e["model"], e["metric"])
        assert s["value (95% CI)"].startswith(f"{e['value']:.3f} [")
    assert page.locator("nav a[href='#stage-06_evaluate']").count() == 1  # contents after the results


def test_a_headline_links_to_exactly_its_answers_and_filters_narrow_them(run_folder, page):
    preds = [Prediction.from_dict(json.loads(line)) for line in open(run_folder / A.EVALUATE / A.PREDICTIONS)]
    page.goto((run_folder / A.REPORT).as_uri())
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
        page.wait_for_function(f"document.querySelector('#f-outcome').value === '{want}' && "
                               f"location.hash.includes('outcome={want}')")
        n = sum(outcome(p) == want for p in group)
        page.wait_for_function(f"document.querySelector('#count').textContent.startsWith('{n} answers')")
        rows = page.locator("tr.item")
        assert rows.count() == min(n, 50) and all(rows.nth(i).get_attribute("data-outcome") == want
                                                  for i in range(rows.count()))
    page.select_option("#f-outcome", "")
    page.select_option("#f-dataset", "")
    others = [p for p in preds if all(str(getattr(p, k)) == v for k, v in filters.items() if k != "dataset")]
    page.wait_for_function(f"document.querySelector('#count').textContent.startsWith('{len(others)} answers')")
    assert page.locator("img").count() > 0  # thumbnails are files next to the page
    assert all(src.startswith("thumbs/") for src in page.eval_on_selector_all("tr.item img", "els => els.map(e => e.getAttribute('src'))"))
