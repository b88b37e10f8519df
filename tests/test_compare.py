"""Comparing two evaluation runs item by item (:mod:`lib.compare.explain`, ``python -m lib.compare``):
real runs of stage 06 with rule-based models, each pair differing in exactly one thing (prompt
style, the parser, a metric option, the judge, the model), every changed item put on that cause
and no other; a run against a copy of itself changes nothing, against itself is refused; the paired interval by hand and
against statsmodels' paired t, the McNemar test against statsmodels on fixed data; the command
line's words and adjusted p-values on the demo's sets against themselves with one model perturbed. A real lmms-eval run's samples
(tests/fixtures/lmms_eval_0.7.3) imported as a foreign run: its replies kept as the model gave
them and scored by VQA Lab, paired with ours, its prompt known from what it logged."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t

from lib.compare import explain as compare
from lib.compare import runs as compare_runs
from lib.core.schema import FREE
from lib.eval import foreign as foreign_runs
from lib.eval.paired import difference_stats, mcnemar_exact, paired_difference
from lib.export.harnesses import main as export
from lib.families.vqa.task import OpenVQA
from lib.io import read_jsonl
from lib.models.store import CallStore
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from lib.tasks.task import Reader
from tests.test_rescore_stream import make_datasets

TWO = {
    "backend": "constant",
    "answer": "There are 2 red circles, yes.",
}  # free text: right, wrong, several answers
YES = {
    "backend": "constant",
    "answer": "Yes.",
}  # right under Scrapbook's lenient reading (exact: words) only
JUDGE = {"backend": "constant", "answer": "It names the object. So rating=3"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A base run and one run per difference, all from one call cache (a rerun asks nothing twice)."""
    root = tmp_path_factory.mktemp("compare")
    data = make_datasets(root / "data")
    datasets = {k: data[k] for k in ("mcq", "vqa", "scrapbook")}
    store = CallStore(root / "calls.sqlite")
    base = dict(
        datasets=datasets,
        models={"r": {"backend": "random", "seed": 0}, "two": TWO, "yes": YES},
        styles=["zero_shot"],
        max_new_tokens=6,
        cot_max_new_tokens=8,
        max_items=60,
        n_resamples=200,
        judge=JUDGE,
    )
    changes = {
        "base": {},
        "style": {"styles": ["cot"]},
        "metric": {"tasks": {"scrapbook.qa": {"exact": "words"}}},
        "judge": {"judge": {**JUDGE, "answer": "It does not. So rating=1"}},
        "model": {"models": {"r": {"backend": "random", "seed": 1}, "two": TWO, "yes": YES}},
    }
    out = {}
    for name, change in changes.items():
        out[name] = root / name
        evaluate.run(
            evaluate.EvalConfig(**{**base, **change}), out[name], store=store, progress=False
        )
    return out


@pytest.fixture(scope="module")
def reread(runs, tmp_path_factory):
    """The base run rescored with another parser of open answers: the same replies, read differently."""
    folder = tmp_path_factory.mktemp("reread") / "06_evaluate"
    shutil.copytree(runs["base"], folder)

    class Shouting(Reader):  # another parser: the same replies, read in capitals
        def read(self, item, text, choices, constrained_value=None):
            return text.strip().upper(), FREE

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OpenVQA, "reader", Shouting())
        evaluate.rescore_folder(folder)
    return folder


def _only(result: dict, cause: str) -> None:
    """Every changed item is put on ``cause`` and no other, and there are some."""
    assert result["changed"] > 0 and result["only_A"] == result["only_B"] == 0
    assert {c for c, v in result["causes"].items() if v["items"]} == {cause}
    assert {it["cause"] for it in result["items"]} == {cause}
    for m in result[
        "metrics"
    ]:  # the causes partition the items: their shares add up to the difference
        assert sum(m["by_cause"].values()) == pytest.approx(m["difference"], abs=1e-12)
        assert all(v == 0 for c, v in m["by_cause"].items() if c != cause)


def test_a_run_compared_with_a_copy_of_itself_changes_nothing(runs, tmp_path):
    copy = shutil.copytree(runs["base"], tmp_path / "copy")
    result = compare.compare(runs["base"], copy)
    assert result["paired"] > 0 and result["changed"] == 0 and not result["config"]
    assert all(m["difference"] == 0 and m["mcnemar_p"] in (None, 1.0) for m in result["metrics"])


def test_one_folder_as_both_runs_is_refused_unless_a_filter_splits_it(runs, tmp_path):
    """A run compared with itself always agrees: the same folder twice, or through a link, is an
    error; two models of one run (a two-valued filter) are two runs."""
    link = tmp_path / "link"
    link.symlink_to(runs["base"])
    for b in (runs["base"], link):
        with pytest.raises(compare.CompareError, match="runs A and B are one folder"):
            compare.compare(runs["base"], b)
    assert compare.compare(runs["base"], link, {"model": ["r", "two"]})["paired"] > 0


def test_another_prompt_style_is_a_prompt_change(runs):
    result = compare.compare(runs["base"], runs["style"], {"style": ["zero_shot", "cot"]})
    _only(result, "prompt")
    assert result["changed"] == result["paired"]  # every request differs
    assert set(result["causes"]["prompt"]["because"]) == {"style"}
    assert {r["key"] for r in result["config"]} == {"styles"}


def test_a_parser_change_is_a_reading_change(runs, reread):
    result = compare.compare(runs["base"], reread)
    _only(result, "reading")
    assert all(it["dataset"] == "vqa" for it in result["items"])
    assert all(b.startswith("parser") for b in result["causes"]["reading"]["because"])


def test_a_metric_option_is_a_scoring_change(runs):
    result = compare.compare(runs["base"], runs["metric"])
    _only(result, "scoring")
    assert set(result["causes"]["scoring"]["because"]) == {"metric option tasks.scrapbook.qa exact"}
    assert [(r["key"], r["A"], r["B"], r["A_from"]) for r in result["config"]] == [
        ("tasks.scrapbook.qa.exact", "paper", "words", "default")
    ]


def test_another_judge_is_a_scoring_change(runs):
    result = compare.compare(runs["base"], runs["judge"])
    _only(result, "scoring")
    assert set(result["causes"]["scoring"]["because"]) == {"judge answer"}
    assert all(
        it["dataset"] == "vqa" and it["A"]["lave"] == 1.0 and it["B"]["lave"] == 0.0
        for it in result["items"]
    )


def test_another_model_is_a_model_change(runs):
    result = compare.compare(runs["base"], runs["model"])
    _only(result, "model")
    assert set(result["causes"]["model"]["because"]) == {"model seed"}
    assert {it["group"][2] for it in result["items"]} == {
        "r"
    }  # the constant model's answers are the same


def test_two_models_of_one_run_are_compared_by_their_labels(runs):
    result = compare.compare(runs["base"], runs["base"], {"model": ["r", "two"]})
    assert result["group_by"] == ["dataset", "task", "style"] and result["changed"] > 0
    assert set(result["causes"]["model"]["because"]) >= {
        "model backend",
        "model answer",
        "model seed",
    }


def test_items_only_one_run_has_are_counted_apart(runs):
    a, b = compare.open_run(runs["base"]), compare.open_run(runs["base"])
    dropped = [r for r in b.rows if r["dataset"] == "mcq"][:3]
    b.rows = [r for r in b.rows if r not in dropped]
    result = compare.compare(a, b)
    assert result["only_A"] == 3 and result["only_B"] == 0 and result["changed"] == 0
    assert sorted(result["only_A_items"]) == sorted([r["dataset"], r["item_id"]] for r in dropped)


def test_the_command_line(runs, tmp_path, capsys):
    folder = str(runs["base"])
    copy = str(shutil.copytree(folder, tmp_path / "copy"))
    assert compare_runs.main([folder, copy, "--json", str(tmp_path / "r.json")]) == 0
    assert "changed items: 0" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["changed"] == 0
    assert (
        compare_runs.main([folder, str(runs["model"]), "--style", "zero_shot", "--dataset", "mcq"])
        == 0
    )
    assert "model" in capsys.readouterr().out
    assert compare_runs.main([folder, folder, "--model", "nobody", "r"]) == 2
    assert "has no model 'nobody'; it has: r, two, yes" in capsys.readouterr().err
    assert compare_runs.main([folder, folder]) == 2
    assert capsys.readouterr().err.startswith("error: runs A and B are one folder")
    assert compare_runs.main([folder, copy, "--model", "r", "--model", "two"]) == 2
    assert capsys.readouterr().err.startswith("error: --model is given twice (also as --model)")
    assert compare_runs.main([folder, str(tmp_path / "nowhere")]) == 2
    assert "predictions.jsonl" in capsys.readouterr().err


WORDINGS = re.compile(
    r"^ +(B is (better|worse): |no difference detected, and one of \d\.\d{3} or more would have "
    r"been seen |too few clusters to tell \()"
)


def test_the_command_line_words_and_adjusted_p_values(runs, capsys):
    """The base run against itself with one model's answers perturbed (model r's seed): every metric
    row has its verdict in one of the three wordings, the rows' Holm and BH p are printed, and the
    rows that survive are named; a Scrapbook set's clusters are called what they are."""
    assert compare_runs.main([str(runs["base"]), str(runs["model"])]) == 0
    out = capsys.readouterr().out
    result = compare.compare(runs["base"], runs["model"])
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("group "))
    assert "Holm p" in lines[header] and "BH p" in lines[header]
    words = lines[header + 2 : header + 2 + 2 * len(result["metrics"]) : 2]
    assert len(words) == len(result["metrics"]) and all(WORDINGS.match(w) for w in words)
    assert {m["verdict"] for m in result["metrics"]} >= {"none detected"}
    for m, w in zip(result["metrics"], words):
        assert m["words"] == w.strip()
        tested = m["verdict"] != "too few clusters"
        assert (m["p_holm"] is not None) == tested and (m["p_bh"] is not None) == tested
        if tested:
            assert m["p"] <= m["p_bh"] <= m["p_holm"] <= 1
    assert any(
        line.startswith("after Holm (family-wise) correction at 0.05 over ") for line in lines
    )
    assert any(line.startswith("after Benjamini-Hochberg (false discovery)") for line in lines)
    nouns = {m["group"][0]: m["clusters_are"] for m in result["metrics"]}
    assert nouns["mcq"] == "images"


# --- the statistics, against the reference implementations --------------------------------------

RNG = np.random.default_rng(7)
A_SCORES = RNG.integers(0, 2, 120).astype(float)
B_SCORES = np.where(RNG.random(120) < 0.25, 1 - A_SCORES, A_SCORES)


def test_the_paired_interval_by_hand_over_equal_chains():
    """Four chains of three questions; B - A per question 1,0,0 | 1,1,0 | 0,0,0 | 1,1,1: chain means
    1/3, 2/3, 0, 1, their mean 1/2, sd sqrt(5/27), SE sqrt(5/27)/2; t(3)'s 0.975 quantile
    3.182446 (table value). The rows' interval is that t interval, its p the t test."""
    a = np.zeros(12)
    b = np.array([1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1], float)
    chains = np.repeat(["w", "x", "y", "z"], 3)
    se = (5 / 27) ** 0.5 / 2
    row = difference_stats(a, b, list(chains))
    assert (row["difference"], row["df"]) == (0.5, 3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        (0.5 - 3.182446 * se, 0.5 + 3.182446 * se), abs=1e-6
    )
    from scipy.stats import ttest_1samp  # the t test of the four chain means

    assert row["p"] == pytest.approx(ttest_1samp([1 / 3, 2 / 3, 0, 1], 0).pvalue)


def test_the_paired_interval_agrees_with_an_independent_paired_t_interval():
    """One question per cluster: the interval is statsmodels' paired t interval of the per-item
    differences, and the percentile bootstrap (training's margins) agrees with it at 400 items."""
    from statsmodels.stats.weightstats import DescrStatsW

    rng = np.random.default_rng(11)
    for a, b in (
        (rng.integers(0, 2, 400).astype(float), rng.integers(0, 2, 400).astype(float)),
        (rng.random(400), rng.random(400) + 0.05),
    ):
        row = difference_stats(a, b, None)
        t_low, t_high = DescrStatsW(b - a).tconfint_mean(alpha=0.05)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((t_low, t_high), abs=1e-12)
        value, low, high = paired_difference(a, b, n_resamples=4000, seed=1)
        width = t_high - t_low
        assert value == pytest.approx((b - a).mean(), abs=1e-12)
        assert low == pytest.approx(t_low, abs=0.05 * width)
        assert high == pytest.approx(t_high, abs=0.05 * width)


def test_the_smallest_detectable_difference_uses_the_intervals_t_quantiles():
    """Over G clusters, (t_{G-1, 0.975} + t_{G-1, 0.8}) x SE; at many clusters statsmodels' normal
    power solver's multiplier (1.96 + 0.84), at 8 clusters t(7)'s (2.364624 + 0.896030, table)."""
    from statsmodels.stats.power import NormalIndPower

    rng = np.random.default_rng(4)
    for g, multiplier in (
        (8, 2.364624 + 0.896030),
        (4000, NormalIndPower().solve_power(nobs1=1, ratio=0, alpha=0.05, power=0.8)),
    ):
        clusters = list(np.repeat(np.arange(g), 3))
        a, b = rng.integers(0, 2, 3 * g), rng.integers(0, 2, 3 * g)
        row = difference_stats(a, b, clusters)
        se = (row["ci_high"] - row["ci_low"]) / 2 / t.ppf(0.975, g - 1)
        assert row["detectable"] == pytest.approx(multiplier * se, rel=2e-3)


def test_the_mcnemar_test_is_statsmodels_exact_one():
    from scipy.stats import binomtest
    from statsmodels.stats.contingency_tables import mcnemar

    for a, b in ((A_SCORES, B_SCORES), (A_SCORES, 1 - A_SCORES), (A_SCORES[:10], B_SCORES[:10])):
        table = [
            [int(((a == 1) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum())],
            [int(((a == 0) & (b == 1)).sum()), int(((a == 0) & (b == 0)).sum())],
        ]
        p = mcnemar_exact(a, b)
        assert p == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
        assert p == pytest.approx(
            binomtest(table[1][0], table[0][1] + table[1][0]).pvalue, rel=1e-12
        )
    assert mcnemar_exact(A_SCORES, A_SCORES) == 1.0


# --- foreign runs: a real lmms-eval run's samples imported (issue #46) ---------------------------

LMMS_EVAL = (
    Path(__file__).parent / "fixtures" / "lmms_eval_0.7.3"
)  # a real run's files: see its README.md
SAMPLES = sorted(LMMS_EVAL.rglob("*_samples_*.jsonl"))


def _samples() -> list[dict]:
    return [json.loads(line) for f in SAMPLES for line in f.open()]


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    """The demo's mcq and vqa sets exported as the fixture's run had them (demo profile, its untrained
    model), the fixture imported, and a stage 06 run of ours on the same items asked the same way
    (zero-shot, free generation, question first, 8 new tokens) by a constant model given the
    export's label: every request equal, every reply another."""
    root = tmp_path_factory.mktemp("foreign")
    folders = demo_datasets(root / "data")
    exports = [str(root / "tasks" / name) for name in ("mcq", "vqa")]
    for name, out in zip(("mcq", "vqa"), exports):
        assert (
            export(
                [
                    "lmms-eval",
                    "--dataset",
                    str(folders[name]),
                    "--out",
                    out,
                    "--profile",
                    "demo",
                    "--model",
                    "untrained",
                ]
            )
            == 0
        )
    record = foreign_runs.import_lmms_eval(LMMS_EVAL, root / "imported", exports=exports)
    cfg = evaluate.EvalConfig(
        datasets={n: str(folders[n]) for n in ("mcq", "vqa")},
        styles=["zero_shot"],
        constrain=False,
        models={"untrained": {"backend": "constant", "answer": "A cat", "question_first": True}},
        max_new_tokens=8,
        seed=1,
        n_resamples=200,
    )
    evaluate.run(cfg, root / "ours", store=CallStore(root / "calls.sqlite"), progress=False)
    return {
        "root": root,
        "exports": exports,
        "record": record,
        "imported": root / "imported",
        "ours": root / "ours",
    }


def _import_changed(foreign: dict, name: str, change) -> tuple[compare.Run, dict]:
    """The fixture with ``change(sample)`` applied to every real sample row (results file kept),
    imported as ``name``; returns the imported run and its record."""
    src = foreign["root"] / f"{name}-src"
    shutil.copytree(LMMS_EVAL, src)
    for f in src.rglob("*_samples_*.jsonl"):
        f.write_text("".join(json.dumps(change(json.loads(line))) + "\n" for line in f.open()))
    record = foreign_runs.import_lmms_eval(src, foreign["root"] / name, exports=foreign["exports"])
    return compare.open_run(foreign["root"] / name), record


def test_lmms_eval_samples_are_imported_as_the_model_replied_read_and_scored_by_vqa_lab(foreign):
    samples, rows = _samples(), list(read_jsonl(foreign["imported"] / "predictions.jsonl"))
    assert len(rows) == len(samples) == 16 and foreign["record"]["n_samples"] == {
        "vqalab_mcq_mcq": 8,
        "vqalab_vqa_vqa_open": 8,
    }
    by_id = {r["item_id"]: r for r in rows}
    for s in samples:
        row = by_id[s["invalid_rate"]["id"]]
        assert row["raw"] == s.get(
            "resps", s["filtered_resps"]
        )  # as the model replied, not as lmms-eval stripped it
        assert (
            row["raw"].strip() == s["invalid_rate"]["raw"]
            and row["meta"]["lmms_eval"]["input"] == s["input"]
        )
    assert (
        sum(r["raw"] != r["raw"].strip() for r in rows) == 7
    )  # the fixture has replies lmms-eval stripped
    invalid = [
        r for r in rows if not r["valid"]
    ]  # the untrained model's mcq replies name no option: kept, counted
    assert len(invalid) == foreign["record"]["invalid"] == 8 and {r["task"] for r in invalid} == {
        "mcq"
    }
    assert all(r["method"] == "invalid" and r["raw"] for r in invalid)
    # VQA Lab's scoring of the imported replies gives the numbers lmms-eval reported (its export scores with VQA Lab's code)
    metrics = pd.read_csv(foreign["imported"] / "metrics.csv")
    ours = {
        (r.dataset, r.metric if r.subset == "all" else f"{r.metric}[{r.subset}]"): r.value
        for r in metrics.itertuples()
    }
    reported = {
        ("mcq" if "mcq" in t else "vqa", m): v
        for t, ms in foreign["record"]["reported"].items()
        for m, v in ms.items()
    }
    assert reported and ours == pytest.approx(reported, abs=1e-12)


def test_an_lmms_eval_run_pairs_with_ours_and_each_change_is_put_on_the_model(foreign):
    result = compare.compare(foreign["ours"], foreign["imported"])
    assert result["paired"] == 16 and result["only_A"] == result["only_B"] == 0
    assert result["changed"] == 16 and {it["cause"] for it in result["items"]} == {
        "model"
    }  # its logged prompts are ours
    assert set(result["causes"]["model"]["because"]) >= {
        "model backend",
        "model harness",
        "model generation.until",
    }
    assert sum(c["items"] for c in result["causes"].values()) == result["changed"]
    for m in result["metrics"]:
        assert sum(m["by_cause"].values()) == pytest.approx(m["difference"], abs=1e-12)
    assert any(
        "B is lmms-eval" in n and "chat path" in n and "logged for 16/16" in n
        for n in result["notes"]
    )
    sources = {r["key"]: r["B_from"] for r in result["config"]}
    assert (
        sources["models.untrained.backend"] == "lmms-eval 20261205_163315_results.json"
    )  # where each value came from
    assert sources["n_resamples"] == "the export's vqalab.json"


def test_a_prompt_lmms_eval_logged_differently_is_a_prompt_change(foreign):
    edited, _ = _import_changed(
        foreign,
        "edited",
        lambda s: (
            {**s, "input": s["input"] + "\nThink first."}
            if s["invalid_rate"]["task"] == "mcq"
            else s
        ),
    )
    result = compare.compare(compare.open_run(foreign["imported"]), edited)
    assert result["changed"] == 8 and {(it["dataset"], it["cause"]) for it in result["items"]} == {
        ("mcq", "prompt")
    }
    assert result["causes"]["prompt"]["because"] == {"template": 8}


def test_the_simple_path_is_a_prompt_change(foreign, tmp_path):
    src = tmp_path / "simple"
    shutil.copytree(LMMS_EVAL, src)
    (results,) = src.rglob("*_results.json")
    results.write_text(results.read_text().replace("LlavaHf (chat)", "LlavaHf (simple)"))
    foreign_runs.import_lmms_eval(src, tmp_path / "imported", exports=foreign["exports"])
    result = compare.compare(foreign["ours"], tmp_path / "imported")
    assert result["changed"] == 16 and result["causes"]["prompt"]["because"] == {"template": 16}
    assert any("simple path" in n for n in result["notes"])


def test_without_the_logged_prompt_prompt_and_model_are_not_split(foreign):
    unlogged, record = _import_changed(
        foreign, "unlogged", lambda s: {k: v for k, v in s.items() if k != "input"}
    )
    assert record["logged_input"] == 0
    result = compare.compare(compare.open_run(foreign["ours"]), unlogged)
    assert result["changed"] == 16 and {it["cause"] for it in result["items"]} == {"prompt"}
    (why,) = result["causes"]["prompt"]["because"]
    assert why.startswith("prompt or model, not split: lmms-eval logged no prompt text")
    assert any("not split from model" in n for n in result["notes"])
    same = compare.compare(
        compare.open_run(foreign["imported"]), unlogged
    )  # the same replies: nothing to split
    assert same["paired"] == 16 and same["changed"] == 0


def test_tasks_vqa_lab_did_not_export_are_left_out_and_listed(foreign, tmp_path):
    src = tmp_path / "mixed"
    shutil.copytree(LMMS_EVAL, src)
    (results,) = src.rglob(
        "*_results.json"
    )  # as if the vqa task were another benchmark's: no vqalab_task
    results.write_text(results.read_text().replace('"vqalab_task": "vqa.open"', '"other": 1'))
    record = foreign_runs.import_lmms_eval(
        src, tmp_path / "imported", exports=foreign["exports"][:1]
    )
    assert record["n_samples"] == {"vqalab_mcq_mcq": 8} and record["not_vqalab"] == [
        "vqalab_vqa_vqa_open"
    ]
    results.write_text(results.read_text().replace('"vqalab_task": "mcq"', '"other": 1'))
    with pytest.raises(foreign_runs.ForeignError, match="no task here was exported by VQA Lab"):
        foreign_runs.import_lmms_eval(src, tmp_path / "imported", exports=foreign["exports"])


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda lines: lines[:2] + [lines[2][:40] + "\n"] + lines[3:], ":3: not a JSON line"),
        (
            lambda lines: (
                lines[:1]
                + [
                    json.dumps({k: v for k, v in json.loads(lines[1]).items() if k == "doc_id"})
                    + "\n"
                ]
            ),
            ":2: no VQA Lab row under 'invalid_rate'",
        ),
        (lambda lines: lines + lines[:1], ":9: item 'demo-mcq-01' (mcq) again (first at "),
        (
            lambda lines: [lines[0].replace("demo-mcq-01", "demo-mcq-99")],
            ":1: item 'demo-mcq-99' (mcq) is not among the docs",
        ),
    ],
)
def test_a_bad_samples_file_is_refused_naming_the_file_and_line(foreign, tmp_path, damage, message):
    src = tmp_path / "bad"
    shutil.copytree(LMMS_EVAL, src)
    (f,) = src.rglob("*_samples_vqalab_mcq_mcq.jsonl")
    f.write_text("".join(damage(f.read_text().splitlines(keepends=True))))
    with pytest.raises(foreign_runs.ForeignError, match=re.escape(f"{f}{message}")):
        foreign_runs.import_lmms_eval(src, tmp_path / "imported", exports=foreign["exports"])


def _moved(foreign: dict, folder: Path, tasks: Path) -> Path:
    """The fixture copied to ``folder`` with its results file pointing at the export folders under ``tasks``."""
    shutil.copytree(LMMS_EVAL, folder)
    (results,) = folder.rglob("*_results.json")
    results.write_text(results.read_text().replace(FIXTURE_TASKS, str(tasks)))
    return folder


FIXTURE_TASKS = "/tmp/h5run/bt/lmms-eval0/tasks"  # where the fixture's run had its exports (its results file says)


def test_an_import_never_goes_over_an_input_nor_two_into_one_folder(foreign, tmp_path, capsys):
    """``--import-to X X`` for two lmms-eval runs, ``--import-to`` the earlier import that is run A,
    or ``--import-to`` given twice: an error before anything is imported."""
    other = _moved(foreign, tmp_path / "other", foreign["root"] / "tasks")
    lmms, exports, x = str(LMMS_EVAL), ["--export", *foreign["exports"]], tmp_path / "x"
    assert compare_runs.main([lmms, str(other), *exports, "--import-to", str(x), str(x)]) == 2
    assert capsys.readouterr().err.startswith("error: --import-to names one folder twice")
    assert not x.exists()
    earlier = foreign["imported"]
    before = {p.name: p.read_bytes() for p in earlier.iterdir()}
    assert compare_runs.main([str(earlier), str(other), *exports, "--import-to", str(earlier)]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: --import-to {earlier} is, holds or is inside"
    )
    assert {p.name: p.read_bytes() for p in earlier.iterdir()} == before
    y = tmp_path / "y"
    assert (
        compare_runs.main(
            [lmms, str(other), *exports, "--import-to", str(x), "--import-to", str(y)]
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("error: --import-to is given twice")
    assert not x.exists() and not y.exists()
    assert (
        compare_runs.main([lmms, lmms, *exports, "--import-to", str(x)]) == 2
    )  # one run, named twice
    assert capsys.readouterr().err.startswith("error: runs A and B are one folder")
    assert not x.exists()


def test_the_command_line_imports_lmms_eval_output(foreign, tmp_path, capsys):
    ours, kept = str(foreign["ours"]), tmp_path / "kept"
    assert (
        compare_runs.main(
            [ours, str(LMMS_EVAL), "--export", *foreign["exports"], "--import-to", str(kept)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "paired items: 16" in out
        and "note: B is lmms-eval" in out
        and (kept / "foreign.json").exists()
    )
    found = _moved(
        foreign, tmp_path / "found", foreign["root"] / "tasks"
    )  # the exports found where lmms-eval read them
    assert (
        compare_runs.main([ours, str(found), "--dataset", "vqa"]) == 0
    )  # imported into a temporary folder
    assert "paired items: 8" in capsys.readouterr().out
    gone = _moved(foreign, tmp_path / "gone", tmp_path / "nowhere")
    assert compare_runs.main([ours, str(gone)]) == 2
    assert "no VQA Lab export of them found" in capsys.readouterr().err
