"""Comparing two evaluation runs item by item (:mod:`lib.eval.compare`, ``python -m lib.compare``):
real runs of stage 06 with rule-based models, each pair differing in exactly one thing (prompt
style, the parser, a metric option, the judge, the model), every changed item put on that cause
and no other; a run against itself changes nothing; the paired interval and the McNemar test
checked against scipy and statsmodels on fixed data."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from lib import compare as C
from lib.eval import compare as X
from lib.families.vqa.task import OpenVQA
from lib.schema import FREE
from lib.stages import evaluate as E
from lib.store import CallStore
from tests.test_rescore_stream import make_datasets

TWO = {"backend": "constant", "answer": "There are 2 red circles, yes."}  # free text: right, wrong, several answers
YES = {"backend": "constant", "answer": "Yes."}  # right under Scrapbook's lenient reading (exact: words) only
JUDGE = {"backend": "constant", "answer": "It names the object. So rating=3"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A base run and one run per difference, all from one call cache (a rerun asks nothing twice)."""
    root = tmp_path_factory.mktemp("compare")
    data = make_datasets(root / "data")
    datasets = {k: data[k] for k in ("mcq", "vqa", "scrapbook")}
    store = CallStore(root / "calls.sqlite")
    base = dict(datasets=datasets, models={"r": {"backend": "random", "seed": 0}, "two": TWO, "yes": YES}, styles=["zero_shot"],
                max_new_tokens=6, cot_max_new_tokens=8, max_items=60, n_resamples=200, judge=JUDGE)
    changes = {"base": {}, "style": {"styles": ["cot"]},
               "metric": {"tasks": {"scrapbook.qa": {"exact": "words"}}},
               "judge": {"judge": {**JUDGE, "answer": "It does not. So rating=1"}},
               "model": {"models": {"r": {"backend": "random", "seed": 1}, "two": TWO, "yes": YES}}}
    out = {}
    for name, change in changes.items():
        out[name] = root / name
        E.run(E.EvalConfig(**{**base, **change}), out[name], store=store, progress=False)
    return out


@pytest.fixture(scope="module")
def reread(runs, tmp_path_factory):
    """The base run rescored with another parser of open answers: the same replies, read differently."""
    folder = tmp_path_factory.mktemp("reread") / "06_evaluate"
    shutil.copytree(runs["base"], folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OpenVQA, "read", lambda self, item, text, constrained_value=None: (text.strip().upper(), FREE))
        E.rescore_folder(folder)
    return folder


def _only(result: dict, cause: str) -> None:
    """Every changed item is put on ``cause`` and no other, and there are some."""
    assert result["changed"] > 0 and result["only_A"] == result["only_B"] == 0
    assert {c for c, v in result["causes"].items() if v["items"]} == {cause}
    assert {it["cause"] for it in result["items"]} == {cause}
    for m in result["metrics"]:  # the causes partition the items: their shares add up to the difference
        assert sum(m["by_cause"].values()) == pytest.approx(m["difference"], abs=1e-12)
        assert all(v == 0 for c, v in m["by_cause"].items() if c != cause)


def test_a_run_compared_with_itself_changes_nothing(runs):
    result = X.compare(runs["base"], runs["base"])
    assert result["paired"] > 0 and result["changed"] == 0 and not result["config"]
    assert all(m["difference"] == 0 and m["mcnemar_p"] in (None, 1.0) for m in result["metrics"])


def test_another_prompt_style_is_a_prompt_change(runs):
    result = X.compare(runs["base"], runs["style"], {"style": ["zero_shot", "cot"]})
    _only(result, "prompt")
    assert result["changed"] == result["paired"]  # every request differs
    assert set(result["causes"]["prompt"]["because"]) == {"style"}
    assert {r["key"] for r in result["config"]} == {"styles"}


def test_a_parser_change_is_a_reading_change(runs, reread):
    result = X.compare(runs["base"], reread)
    _only(result, "reading")
    assert all(it["dataset"] == "vqa" for it in result["items"])
    assert all(b.startswith("parser") for b in result["causes"]["reading"]["because"])


def test_a_metric_option_is_a_scoring_change(runs):
    result = X.compare(runs["base"], runs["metric"])
    _only(result, "scoring")
    assert set(result["causes"]["scoring"]["because"]) == {"metric option tasks.scrapbook.qa exact"}
    assert [(r["key"], r["A"], r["B"], r["A_from"]) for r in result["config"]] == [
        ("tasks.scrapbook.qa.exact", "paper", "words", "default")]


def test_another_judge_is_a_scoring_change(runs):
    result = X.compare(runs["base"], runs["judge"])
    _only(result, "scoring")
    assert set(result["causes"]["scoring"]["because"]) == {"judge answer"}
    assert all(it["dataset"] == "vqa" and it["A"]["lave"] == 1.0 and it["B"]["lave"] == 0.0 for it in result["items"])


def test_another_model_is_a_model_change(runs):
    result = X.compare(runs["base"], runs["model"])
    _only(result, "model")
    assert set(result["causes"]["model"]["because"]) == {"model seed"}
    assert {it["group"][2] for it in result["items"]} == {"r"}  # the constant model's answers are the same


def test_two_models_of_one_run_are_compared_by_their_labels(runs):
    result = X.compare(runs["base"], runs["base"], {"model": ["r", "two"]})
    assert result["group_by"] == ["dataset", "task", "style"] and result["changed"] > 0
    assert set(result["causes"]["model"]["because"]) >= {"model backend", "model answer", "model seed"}


def test_items_only_one_run_has_are_counted_apart(runs):
    a, b = X.open_run(runs["base"]), X.open_run(runs["base"])
    dropped = [r for r in b.rows if r["dataset"] == "mcq"][:3]
    b.rows = [r for r in b.rows if r not in dropped]
    result = X.compare(a, b)
    assert result["only_A"] == 3 and result["only_B"] == 0 and result["changed"] == 0
    assert sorted(result["only_A_items"]) == sorted([r["dataset"], r["item_id"]] for r in dropped)


def test_the_command_line(runs, tmp_path, capsys):
    folder = str(runs["base"])
    assert C.main([folder, folder, "--json", str(tmp_path / "r.json")]) == 0
    assert "changed items: 0" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["changed"] == 0
    assert C.main([folder, str(runs["model"]), "--style", "zero_shot", "--dataset", "mcq"]) == 0
    assert "model" in capsys.readouterr().out
    assert C.main([folder, folder, "--model", "nobody"]) == 2
    assert "has no model 'nobody'; it has: r, two, yes" in capsys.readouterr().err
    assert C.main([folder, str(tmp_path / "nowhere")]) == 2
    assert "predictions.jsonl" in capsys.readouterr().err


# --- the statistics, against the reference implementations --------------------------------------

RNG = np.random.default_rng(7)
A_SCORES = RNG.integers(0, 2, 120).astype(float)
B_SCORES = np.where(RNG.random(120) < 0.25, 1 - A_SCORES, A_SCORES)


def test_the_paired_interval_is_scipys_paired_bootstrap():
    from scipy.stats import bootstrap

    for a, b in ((A_SCORES, B_SCORES), (RNG.random(50), RNG.random(50))):
        value, low, high = X.paired_difference(a, b, n_resamples=500, seed=3)
        ref = bootstrap((a, b), lambda x, y, axis=-1: np.mean(y - x, axis=axis), paired=True, vectorized=True,
                        n_resamples=500, method="percentile", random_state=np.random.default_rng(3))
        assert value == pytest.approx(b.mean() - a.mean())
        assert (low, high) == pytest.approx(tuple(ref.confidence_interval), abs=1e-12)


def test_the_mcnemar_test_is_statsmodels_exact_one():
    from scipy.stats import binomtest
    from statsmodels.stats.contingency_tables import mcnemar

    for a, b in ((A_SCORES, B_SCORES), (A_SCORES, 1 - A_SCORES), (A_SCORES[:10], B_SCORES[:10])):
        table = [[int(((a == 1) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum())],
                 [int(((a == 0) & (b == 1)).sum()), int(((a == 0) & (b == 0)).sum())]]
        p = X.mcnemar_exact(a, b)
        assert p == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
        assert p == pytest.approx(binomtest(table[1][0], table[0][1] + table[1][0]).pvalue, rel=1e-12)
    assert X.mcnemar_exact(A_SCORES, A_SCORES) == 1.0
