"""The Scrapbook protocol through the evaluation stage, with the baseline backends as models."""

import pandas as pd
import pytest

from lib.config import ParamsError
from lib.families.scrapbook import ScrapbookParams, generate
from lib.io import load_items, read_jsonl
from lib.models import Constraint, Request, load_model
from lib.models.store import CallStore
from lib.stages import evaluate


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("protocol")
    generate(
        ScrapbookParams.from_dict(
            {
                "canvas": [480, 288],
                "size_start": 40,
                "size_step": 20,
                "n_sets": 1,
                "n_backgrounds": 1,
                "n_arrangements": 2,
                "n_region_pairs": 2,
                "n_questions_per_type": 2,
                "types": ["presence", "counting"],
                "groups": ["np", "abs"],
            }
        ),
        root / "sb",
        progress=False,
    )
    cfg = evaluate.EvalConfig(
        datasets={"sb": str(root / "sb")},
        styles=["zero_shot"],
        n_resamples=50,
        models={
            "no": {"backend": "constant", "answer": "no"},
            "random": {"backend": "random", "seed": 3},
        },
    )
    evaluate.run(cfg, root / "out", store=CallStore(root / "calls.sqlite"), progress=False)
    return root / "out"


def test_a_model_that_always_says_no_passes_no_concept(evaluated):
    levels = pd.read_csv(evaluated / "levels.csv")
    no = levels[levels["model"].str.startswith("no")]
    assert len(no) and not no["passed"].any()
    one = no[(no["level"] == 1) & (no["form"] == "enumerated") & (no["type"] == "presence")]
    absent, present = one[one["subgroup"] == 2], one[one["subgroup"] == 1]
    assert absent["correct"].sum() == absent["n"].sum() > 0 and present["correct"].sum() == 0
    assert not (levels["level"] > 1).any()  # nothing passed level 1, so nothing is asked at level 2


def test_random_baseline_draws_from_the_closed_set_and_is_invalid_elsewhere(evaluated):
    preds = [p for p in read_jsonl(evaluated / "predictions.jsonl") if p["model"] == "random"]
    items = {it.id: it for it in load_items(evaluated.parent / "sb")}
    enumerated = [p for p in preds if items[p["item_id"]].meta["form"] == "enumerated"]
    others = [p for p in preds if items[p["item_id"]].meta["form"] != "enumerated"]
    assert enumerated and all(
        p["valid"] and p["raw"] in items[p["item_id"]].meta["alternatives"] for p in enumerated
    )
    assert others and not any(p["valid"] for p in others)
    metrics = pd.read_csv(evaluated / "metrics.csv")
    row = metrics[(metrics["model"] == "random") & (metrics["subset"] == "form=original")].iloc[0]
    assert row["n_invalid"] == row["n"] and row["value"] == 0.0


def test_corrects_minus_corrects_star_equals_invalidated_in_errors_csv(evaluated):
    errors = pd.read_csv(evaluated / "errors.csv")
    for _model, e in errors.groupby("model"):
        q = e[e["unit"] == "questions"].set_index("filter")
        agg = e[(e["unit"] == "aggregated") & (e["filter"] == "all")].set_index("category")["count"]
        assert (
            q.loc["full", "correct"] - q.loc["full*", "correct"]
            == agg["invalidated by simpler image"]
        )
        assert agg["total"] == q.loc["full", "count"] - q.loc["full*", "correct"]


def test_random_baseline_is_a_function_of_the_request_not_of_the_order():
    model = load_model({"backend": "random", "seed": 1})
    reqs = [
        Request.simple(f"question {i}?", constraint=Constraint(choices=("a", "b", "c", "d")))
        for i in range(40)
    ]
    forward = [r.text for r in model.generate(reqs)]
    backward = [r.text for r in model.generate(reqs[::-1])][::-1]
    assert forward == backward and len(set(forward)) == 4
    assert [r.text for r in load_model({"backend": "random", "seed": 2}).generate(reqs)] != forward


@pytest.mark.parametrize(
    "spec, key", [({"backend": "constant"}, "answer"), ({"backend": "random", "seed": "x"}, "seed")]
)
def test_baseline_specs_are_checked(spec, key):
    with pytest.raises(ParamsError, match=key):
        evaluate.EvalConfig.from_params({"models": {"floor": spec}}, source="06.yaml")
