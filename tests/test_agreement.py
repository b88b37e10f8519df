"""python -m lib.agreement: human labels read with checks, every metric and judge of a profile held
to them with intervals over images, written all or nothing into a folder of its own."""

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lib import config
from lib.agreement import scorers as agreement_scorers
from lib.core.papers import agreement_claims
from lib.families.yesbut.paper import HUMAN_CRITERIA
from lib.io import artifacts, kind_of
from lib.metrics import ppi
from lib.pages import agreement_view
from lib.stages import analyze

from .support.data import SHARED_DATA

# two images, three answers each: the right ones repeat the reference, the wrong ones do not
ROWS = [
    {
        "answer_id": f"{img}:{k}",
        "cluster": img,
        "question": "Why is this image funny?",
        "references": ["a dog wears a hat at the beach"],
        "answer": text,
        "criterion": "correctness",
        "label": label,
    }
    for img in ("i1.png", "i2.png")
    for k, text, label in (
        ("m1", "a dog wears a hat at the beach", "yes"),
        ("m2", "a cat sleeps", "no"),
        ("m3", "the dog wears a hat", 1),
    )
]


def _labels(tmp_path, rows=ROWS, name="labels.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def profile(tmp_path, monkeypatch):
    """A profile whose stage 06 scores with two text metrics and judges with a constant rating."""
    params = tmp_path / "params"
    params.mkdir()
    (params / "common.t.yaml").write_text(
        "run: t\noffline: true\nstages: [06_evaluate]\nmodels:\n  vlm: {backend: constant, answer: x}\n"
        "  sure: {backend: constant, answer: 'So rating=3'}\n  mute: {backend: constant, answer: 'no idea'}\n"
    )
    (params / "06_evaluate.t.yaml").write_text(
        "judge: sure\ntasks:\n  yesbut.understanding: {text_metrics: [bleu, rouge_l]}\n"
    )
    monkeypatch.setenv("VQALAB_PARAMS", str(params))
    return "t"


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda r: r.pop("cluster"), r"labels.jsonl:1: missing cluster"),
        (
            lambda r: r.update(label="maybe"),
            r"labels.jsonl:1: field label: expected 1/0, yes/no or true/false, got 'maybe'",
        ),
        (
            lambda r: r.update(references=[]),
            r"labels.jsonl:1: field references: expected a non-empty string or list",
        ),
        (lambda r: r.update(answer=3), r"labels.jsonl:1: field answer: expected text, got 3"),
        (
            lambda r: r.update(question="why \ud800"),
            r"labels.jsonl:1: field question: expected text, got 'why \\ud800'",
        ),
    ],
)
def test_a_bad_label_row_is_an_error_naming_file_line_and_field(tmp_path, edit, match):
    rows = [dict(r) for r in ROWS]
    edit(rows[0])
    with pytest.raises(agreement_scorers.AgreementError, match=match):
        agreement_scorers.read_labels(_labels(tmp_path, rows))


def test_one_answer_judged_on_two_criteria_must_be_the_same_answer(tmp_path):
    rows = ROWS + [{**ROWS[0], "criterion": "faithfulness", "answer": "something else"}]
    with pytest.raises(
        agreement_scorers.AgreementError,
        match=r"labels.jsonl:7: answer 'i1.png:m1' has another.*labels.jsonl:1",
    ):
        agreement_scorers.read_labels(_labels(tmp_path, rows))


def test_metrics_and_judges_are_held_to_the_labels_with_intervals_over_images(tmp_path, profile):
    out = tmp_path / "agreement"
    summary = agreement_scorers.run(
        _labels(tmp_path),
        out,
        profile,
        task="yesbut.understanding",
        judges=["mute"],
        n_resamples=50,
    )
    assert summary["answers"] == 6 and summary["clusters"] == 2
    assert summary["scorers"] == [  # every judge the families declare, on every judge model
        "bleu",
        "rouge_l",
        "lave[judge]",
        "verdict[judge]",
        "lave[mute]",
        "verdict[mute]",
    ]
    table = pd.read_csv(out / "agreement.csv")
    rouge = table[(table["scorer"] == "rouge_l") & (table["statistic"] == "roc_auc")].iloc[0]
    assert rouge["value"] == 1.0 and rouge["n"] == 6 and rouge["n_clusters"] == 2
    sure = table[table["scorer"] == "lave[judge]"]
    assert set(sure["statistic"]) == {
        "roc_auc",
        "kendall_tau_b",
        "cohen_kappa",
        "krippendorff_alpha",
    }
    assert (
        sure.set_index("statistic").loc["roc_auc", "value"] == 0.5
    )  # one rating for all: no better than chance
    mute = table[table["scorer"] == "lave[mute]"]
    assert (mute["n"] == 0).all() and mute[
        "value"
    ].isna().all()  # unreadable: left out, never a middle score
    checks = pd.read_csv(out / "judge_checks.csv").set_index("judge")
    assert checks.loc["lave[mute]", "unreadable_share"] == 1.0
    assert checks.loc["verdict[mute]", "unreadable_share"] == 1.0  # "no idea" says neither word
    assert checks.loc["lave[judge]", "unreadable"] == 0
    assert checks.loc["lave[judge]", "padded"] == 4  # the answers people judged right
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 6 and scores["lave[mute]"].isna().all()
    assert kind_of(out) == agreement_scorers.KIND


def test_the_command_refuses_a_folder_of_another_kind_and_leaves_it(tmp_path, profile):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.agreement",
            "--labels",
            str(_labels(tmp_path)),
            "--out",
            str(notes),
            "--profile",
            profile,
            "--task",
            "yesbut.understanding",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.startswith("error:") and "todo.txt" in done.stderr
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]


@pytest.mark.needs_data("yesbut/Human_Eval_Results.csv")
def test_yesbuts_human_evaluation_is_150_model_answers_about_30_images():
    labels = agreement_scorers.read_labels(SHARED_DATA / "yesbut" / "Human_Eval_Results.csv")
    answers = agreement_scorers.answers_of(labels)
    assert len(answers) == 150 and answers["cluster"].nunique() == 30
    correct = labels[labels["criterion"] == "correctness"]
    assert correct["label"].sum() == 40  # judged correct by people (majority of three)
    assert set(labels["criterion"]) == {
        "correctness",
        "appropriate_length",
        "visual_completeness",
        "faithfulness",
    }
    assert (
        not answers["answer_id"].str.contains("humanannotation").any()
    )  # the person's text is the reference


def _analyze(tmp_path, profile, rows=ROWS, judges=("mute",), stage_06=None):
    """Stage 07 of a run with no earlier stage, holding the profile's scorers (``stage_06``: its
    stage 06 settings instead of the constant judges') and ``judges`` to ``rows``."""
    params = tmp_path / "params"
    common = params / "common.t.yaml"
    common.write_text(common.read_text().replace("[06_evaluate]", "[06_evaluate, 07_analyze]"))
    if stage_06 is not None:
        (params / "06_evaluate.t.yaml").write_text(stage_06)
    with open(params / "06_evaluate.t.yaml", "a") as f:
        f.write("n_resamples: 50\n")  # the run's stage 06 bootstrap, which 07's agreement takes
    resolved = config.resolve(
        analyze.AnalyzeConfig,
        profile,
        overrides={
            "human_labels": str(_labels(tmp_path, rows)),
            "human_labels_task": "yesbut.understanding",
            "human_labels_judges": list(judges),  # judge models beside stage 06's
        },
    )
    cfg = resolved.cfg
    out = tmp_path / "runs" / "t" / artifacts.ANALYZE
    summary = analyze.run(cfg, out)
    return cfg, out, summary


@pytest.fixture
def analyzed(tmp_path, profile):
    """Stage 07 of a run with no earlier stage, holding the constant judges' profile to the labels."""
    return _analyze(tmp_path, profile)


def _section(report) -> str:
    """The report's agreement section as text (tags dropped, cells apart)."""
    page = report.read_text()
    start = page.index(f"<h2 id='{agreement_view.ANCHOR}'>")
    body = page[start : page.index("<nav>", start)]
    return html.unescape(re.sub(r"\s*\n\s*", "\n", re.sub(r"<[^>]+>", "\n", body)).strip())


def test_stage_07_holds_the_runs_judges_to_the_labels_and_the_report_shows_it(analyzed):
    cfg, out, summary = analyzed
    folder = out / artifacts.AGREED
    assert sorted(p.name for p in folder.glob("*.csv")) == sorted(
        f"{n}.csv" for n in (*artifacts.AGREED_TABLES, ppi.TABLE)
    )
    assert kind_of(folder) == agreement_scorers.KIND
    table = pd.read_csv(folder / "agreement.csv")
    scorers = {"bleu", "rouge_l", "lave[judge]", "verdict[judge]", "lave[mute]", "verdict[mute]"}
    assert set(table["scorer"]) == scorers
    section = _section(Path(summary["report"]))
    assert section.startswith(agreement_view.HEADING) and "6 answers about 2 images" in section
    for scorer in scorers:
        assert f"\n{scorer}\n" in section
    assert "Judge checks" in section and "What the papers say" in section
    for quote in agreement_claims()["the text says"]:  # from papers.yaml, never typed in the report
        assert " ".join(quote.split()) in " ".join(section.split())
    # two images: below lib.agreement.scorers.MIN_CLUSTERS, so no interval is shown as if it held
    assert "1.000 (too few images for an interval: 2)" in section and " [" not in section
    assert (
        f'href="#{agreement_view.ANCHOR}"' in Path(summary["report"]).read_text()
    )  # in the contents


def test_without_human_labels_stage_07_drops_the_folder_and_the_section(analyzed):
    cfg, out, _ = analyzed
    cfg.human_labels = ""
    summary = analyze.run(cfg, out)
    assert not (out / artifacts.AGREED).exists()
    assert agreement_view.HEADING not in Path(summary["report"]).read_text()


# ten answers, five judged right and five wrong (MIN_PER_CLASS of each: only the images may be few)
TEN = [
    {**ROWS[0], "answer_id": f"a{i}", "answer": f"answer {i}", "label": int(i < 5)}
    for i in range(10)
]


@pytest.mark.parametrize(
    "images, few",
    [(agreement_scorers.MIN_CLUSTERS - 1, True), (agreement_scorers.MIN_CLUSTERS, False)],
)
def test_an_interval_over_too_few_images_is_flagged_not_shown_as_if_it_held(tmp_path, images, few):
    assert agreement_scorers.MIN_PER_CLASS == 5
    rows = [{**r, "cluster": f"img{i % images}"} for i, r in enumerate(TEN)]
    labels = agreement_scorers.read_labels(_labels(tmp_path, rows))
    answers = agreement_scorers.answers_of(labels)
    scores = {"a": np.linspace(1, 0, 10), "b": np.array([0.2, 0.3, 0.1, 0.6, 0.4] * 2)}
    table = agreement_scorers.agreement_table(scores, answers, labels, n_resamples=50)
    assert (table["n_clusters"] == images).all() and (table["few_clusters"] == few).all()
    assert not table["few_labels"].any()
    paired = agreement_scorers.paired_table(scores, answers, labels, table, n_resamples=50)
    assert len(paired) == 1 and (paired["few_clusters"] == few).all()
    shown = agreement_view.agreement_rows(table).set_index("scorer")["roc_auc"]
    if few:
        assert shown["a"] == f"1.000 (too few images for an interval: {images})"
    else:
        assert re.fullmatch(r"1\.000 \[\d\.\d{3}, \d\.\d{3}\]", shown["a"])
    assert ("too few images" in agreement_view.paired_rows(paired).iloc[0, 3]) == few


@pytest.mark.usefixtures("chromium")
def test_the_browsers_disagree_filter_shows_exactly_where_a_judge_and_people_part(analyzed):
    """In headless Chromium, as a reader picks a judge and a criterion: exactly the answers whose
    judge verdict (its top rating or not) differs from people's, computed here from scores.csv and
    labels.csv; an unreadable rating (the verdict judge here) disagrees with nothing."""
    from playwright.sync_api import expect

    from tests.support.chromium import chromium_page

    _, out, _ = analyzed
    scores = pd.read_csv(out / artifacts.AGREED / "scores.csv").set_index("answer_id")
    labels = pd.read_csv(out / artifacts.AGREED / "labels.csv")

    def parting(judge):
        return {
            a
            for a, label in zip(labels["answer_id"], labels["label"])
            if not np.isnan(scores.at[a, judge]) and (scores.at[a, judge] == 1) != bool(label)
        }

    assert parting("lave[judge]") == {"i1.png:m2", "i2.png:m2"}  # rates every answer 3
    assert parting("verdict[judge]") == set()  # "So rating=3" says neither yes nor no
    with chromium_page() as page:
        page.goto((out.parent / "browser" / "index.html").as_uri())
        expect(page.locator("#count")).to_have_text(re.compile(r"^6 answers"), timeout=30_000)
        assert "6 answers people labelled" in page.inner_text("#agreed")
        for judge in ("lave[judge]", "verdict[judge]"):
            page.select_option("#f-disagree", f"{judge} · correctness")
            want = parting(judge)
            count = page.locator("#count")
            expect(count).to_have_text(re.compile(rf"^{len(want)} answers"), timeout=30_000)
            cells = page.locator("tr.item td:nth-child(2)")
            shown = {cells.nth(i).text_content().split("\n")[-1] for i in range(cells.count())}
            assert shown == want, judge


# --- several raters, limits, and a section that always builds -------------------------------------

NO_POSITIVE = "no positive label: people judged every answer no"
NO_SCORER_06 = "tasks:\n  yesbut.understanding: {text_metrics: []}\n"  # no metric, no judge


def test_several_rows_for_one_answer_and_criterion_are_its_raters_majority_and_ties_counted(
    tmp_path, profile
):
    """A CSV with a row per rater: each answer's label is the raters' majority (as a rating
    export's), a tie is left out and counted, never broken - and scoring runs on."""
    votes = {"i1.png:m1": (1, 1, 0), "i2.png:m3": (1, 0)}  # two to one; a tie
    rows = [
        {**r, "references": json.dumps(r["references"]), "label": v}
        for r in ROWS
        for v in votes.get(r["answer_id"], (r["label"],) * 3)
    ]
    path = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    labels = agreement_scorers.read_labels(path)
    assert len(labels) == 5 and "i2.png:m3" not in set(labels["answer_id"])
    assert labels.set_index("answer_id").loc["i1.png:m1", "label"] == 1
    assert labels.attrs["left_out"] == {"rated_by_several": 6, "tied": 1}
    summary = agreement_scorers.run(
        path, tmp_path / "out", profile, "yesbut.understanding", n_resamples=20
    )
    assert summary["answers"] == 5 and summary["left_out"] == labels.attrs["left_out"]


@pytest.mark.parametrize(
    "name", ["labels.jsonl", "labels.csv", "export.json", "Human_Eval_Results.csv"]
)
def test_a_labels_file_past_the_cap_or_not_a_regular_file_is_refused_before_it_is_read(
    tmp_path, monkeypatch, name
):
    from lib.io import annotations

    path = tmp_path / name
    path.write_text("x" * 200)
    monkeypatch.setattr(annotations, "MAX_LABELS_BYTES", 100)
    with pytest.raises(agreement_scorers.AgreementError, match=rf"{name}: larger than 100 bytes"):
        agreement_scorers.read_labels(path)
    path.unlink()
    path.mkdir()
    with pytest.raises(agreement_scorers.AgreementError, match=rf"{name}: not a regular file"):
        agreement_scorers.read_labels(path)


def test_without_a_positive_label_each_statistic_says_why_and_the_report_builds(tmp_path, profile):
    _, out, summary = _analyze(tmp_path, profile, [{**r, "label": "no"} for r in ROWS])
    table = pd.read_csv(out / artifacts.AGREED / "agreement.csv")
    auc = table[table["statistic"] == "roc_auc"].set_index("scorer")
    assert auc["value"].isna().all() and (auc["n_positive"] == 0).all()
    assert (auc.loc[["bleu", "rouge_l", "lave[judge]"], "note"] == NO_POSITIVE).all()
    assert auc.loc["lave[mute]", "note"] == "no answer both scored and labelled"  # unreadable
    assert len(pd.read_csv(out / artifacts.AGREED / "paired.csv")) == 0  # no AUC to rank scorers by
    section = _section(Path(summary["report"]))
    assert f"n/a ({NO_POSITIVE})" in section


@pytest.mark.parametrize("positives, few", [(1, True), (4, True), (5, False)])
def test_an_interval_resting_on_too_few_positives_is_flagged_like_too_few_images(
    tmp_path, positives, few
):
    """Thirty images, one answer each: with one right answer the resamples that miss it have no
    AUC and are dropped, so the interval would describe only those that drew it."""
    assert agreement_scorers.MIN_PER_CLASS == 5
    rows = [
        {**ROWS[0], "answer_id": f"a{i}", "cluster": f"img{i}", "label": int(i < positives)}
        for i in range(30)
    ]
    labels = agreement_scorers.read_labels(_labels(tmp_path, rows))
    answers = agreement_scorers.answers_of(labels)
    rng = np.random.default_rng(0)
    scores = {"a": labels["label"].to_numpy() * 0.3 + rng.random(30), "b": rng.random(30)}
    table = agreement_scorers.agreement_table(scores, answers, labels, n_resamples=50)
    assert (table["few_labels"] == few).all() and not table["few_clusters"].any()
    assert (table["n_positive"] == positives).all() and (
        table["n_negative"] == 30 - positives
    ).all()
    shown = agreement_view.agreement_rows(table).set_index("scorer").loc["a", "roc_auc"]
    flag = f"(too few answers labelled yes or no for an interval: {positives} yes, {30 - positives} no)"
    assert (
        shown.endswith(flag) if few else re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", shown)
    )
    paired = agreement_scorers.paired_table(scores, answers, labels, table, n_resamples=50)
    assert (paired["few_labels"] == few).all()
    assert agreement_view.paired_rows(paired).iloc[0, 3].endswith(flag) == few


def test_labels_no_scorer_covers_give_a_sentence_not_a_key_error(tmp_path, profile):
    (tmp_path / "params" / "06_evaluate.t.yaml").write_text(NO_SCORER_06)
    out = tmp_path / "agreement"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.agreement",
            "--labels",
            str(_labels(tmp_path)),
            "--out",
            str(out),
        ]
        + ["--profile", profile, "--task", "yesbut.understanding", "--no-profile-judge"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (
        done.stdout.startswith(agreement_scorers.NO_SCORER)
        and json.loads(done.stdout[len(agreement_scorers.NO_SCORER) :])["note"]
        == agreement_scorers.NO_SCORER
    )
    assert len(pd.read_csv(out / "agreement.csv")) == 0


def test_stage_07_with_no_scorer_shows_a_sentence_instead_of_the_tables(tmp_path, profile):
    _, out, summary = _analyze(tmp_path, profile, judges=(), stage_06=NO_SCORER_06)
    section = _section(Path(summary["report"]))
    assert "6 answers about 2 images" in section and " ".join(
        agreement_view.NO_SCORER.split()
    ) in " ".join(section.split())


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda r: r.pop("image_filename"), "image_filename"),
        (
            lambda r: r.update(order_of_overall_img_descriptions="7"),
            "order_of_overall_img_descriptions",
        ),
        (lambda r: r.pop("correctness_2"), "correctness_2"),
    ],
)
def test_a_release_file_that_is_not_the_releases_is_an_error_naming_line_and_field(
    tmp_path, edit, field
):
    row = {
        "image_filename": "a.jpg",
        "order_of_overall_img_descriptions": "['humanannotation', 'm']",
    }
    for i in (1, 2):
        row |= {f"description_{i}": f"text {i}"} | {f"{c}_{i}": "" for c in HUMAN_CRITERIA}
    edit(row)
    path = tmp_path / "Human_Eval_Results.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    with pytest.raises(
        agreement_scorers.AgreementError,
        match=rf"Human_Eval_Results.csv:2: field {field}: expected",
    ):
        agreement_scorers.read_labels(path)


# --- a judge's accuracy corrected by people ------------------------------------------------------


@pytest.mark.needs_data("yesbut/Human_Eval_Results.csv")
def test_stage_07_on_the_yesbut_profile_corrects_each_judges_accuracy_by_the_shipped_labels(
    tmp_path, monkeypatch
):
    """The yesbut profile's stage 07 on the release's 150 verdicts: per judge and model (five VLMs
    and all), the judge's raw accuracy beside the one corrected by a third of the verdicts kept at
    random and people's mean on that third; the corrected interval covers people's mean on all 150.
    The judge is a stand-in (yes where ROUGE-L against the person's description is in the top 70%:
    lenient, weakly right) and only BLEU and ROUGE-L score, as SmolLM2 and BERTScore take minutes
    on two cores (the agreement benchmark runs them)."""
    from lib.metrics import text as text_metrics

    found = agreement_scorers.scorers

    def cheap(*args, **kwargs):
        _, model, judges, tokens, _ = found(*args, **kwargs)
        return ["bleu", "rouge_l"], model, judges, tokens, 200

    def lenient(judge, model, answers, *args, candidates=None, **kwargs):
        said = candidates if candidates is not None else answers["answer"].tolist()
        rouge = np.asarray(text_metrics.rouge_l(said, answers["references"].tolist()))
        return (rouge >= np.quantile(rouge, 0.3)).astype(float)

    monkeypatch.setattr(agreement_scorers, "scorers", cheap)
    monkeypatch.setattr(agreement_scorers, "load_model", lambda spec: spec)
    monkeypatch.setattr(agreement_scorers, "judge_scores", lenient)
    labels = SHARED_DATA / "yesbut" / "Human_Eval_Results.csv"
    overrides = {"human_labels": str(labels), "paper_data": {}}
    cfg = config.resolve(analyze.AnalyzeConfig, "yesbut", overrides=overrides).cfg
    summary = analyze.run(cfg, tmp_path / "runs" / "yesbut" / artifacts.ANALYZE)
    table = pd.read_csv(
        Path(summary["report"]).parent / artifacts.ANALYZE / artifacts.AGREED / f"{ppi.TABLE}.csv"
    )
    writers = {"gpt4vision", "gemini", "llava", "minigpt", "kosmos"}  # the release's VLMs
    assert set(table["scorer"]) == {"lave[judge]", "verdict[judge]"}
    assert set(table["model"]) - {ppi.ALL} == writers and len(table) == 12, set(table["model"])
    pooled = table[table["model"] == ppi.ALL]
    assert (pooled[["n", "n_labelled", "n_clusters"]] == [150, 50, 30]).all().all()
    assert (pooled["human_all"] == 40 / 150).all()
    assert (pooled["judge_raw_low"] > pooled["human_all"]).all()  # lenient: its raw mean misses
    assert pooled["corrected_covers"].all()  # the check: corrected covers people's mean
    for estimate in ("corrected", "human_only"):
        low, high = pooled[f"{estimate}_low"], pooled[f"{estimate}_high"]
        assert ((low <= pooled[estimate]) & (pooled[estimate] <= high)).all()
    section = _section(Path(summary["report"]))
    assert "What the labels buy" in section and "corrected by people (95% CI)" in section
