"""A family of work added as a newcomer adds one - a folder (``tests/support/families/toy``: its
task, its prompts, what it brings to stages 01 and 07) and nothing else - is collected, evaluated,
rescored, validated in training and analysed into ``paper.csv`` and a figure: everything
family-specific lives in its folder's declarations, and its settings are one block under
``tasks:`` in the params."""

import sys

import pandas as pd
import pytest
from PIL import Image

from lib import families
from lib.core.paths import ROOT
from lib.core.schema import Response
from lib.io import artifacts, dataset_info, read_jsonl, save_dataset
from lib.models import load_model
from lib.models.store import CallStore
from lib.stages import analyze, collect, evaluate, train
from lib.tasks import registry

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}
FOLDER = (
    ROOT / "tests" / "support" / "families"
)  # where the toy family's folder is, beside lib/families/


@pytest.fixture
def family(monkeypatch):
    """The toy family found as lib/families/ finds its own: its folder on the package's path."""
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(FOLDER)])
    registry.registry.cache_clear()
    assert "toy" in registry.registry().families
    yield sys.modules["lib.families.toy"]
    registry.registry.cache_clear()  # the next lookup finds the families without it
    for name in [
        m for m in sys.modules if m == "lib.families.toy" or m.startswith("lib.families.toy.")
    ]:
        del sys.modules[name]


def test_the_toy_family_is_found_by_its_folder_alone(family):
    assert [t.name for t in family.TASKS] == ["toy.colour"] and registry.get_task(
        "toy.colour"
    ) is family.TASKS[0]
    assert type(family.TASKS[0]).__module__ == "lib.families.toy.task"


@pytest.fixture
def toy(family, tmp_path):
    Colour, colours = family.task.Colour, family.task.COLOURS  # noqa: N806 - a class, named as one
    folder = tmp_path / "toy"
    (folder / "images").mkdir(parents=True)
    items = []
    for i, (name, rgb) in enumerate(list(colours.items()) * 2):
        Image.new("RGB", (56, 56), rgb).save(folder / "images" / f"{i}.png")
        items.append(Colour.make_item(f"toy-{i}", f"images/{i}.png", name))  # noqa: N806 - a class, named as one
    save_dataset(folder, items, dataset_info("toy"))
    return folder, items


def test_a_task_defined_outside_lib_is_evaluated_and_rescored(toy, tmp_path):
    folder, items = toy
    cfg = evaluate.EvalConfig(
        datasets={"toy": str(folder)},
        models={"tiny": TINY},
        styles=["zero_shot", "cot"],
        max_new_tokens=4,
        cot_max_new_tokens=4,
        n_resamples=50,
    )
    out = tmp_path / "eval"
    evaluate.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    preds = list(read_jsonl(out / "predictions.jsonl"))
    assert len(preds) == 2 * len(items) and {p["task"] for p in preds} == {"toy.colour"}
    # constrained to the task's closed set: every answer is one of its colours
    assert all(
        p["valid"]
        and p["parsed"] in ("red", "green", "blue")
        and p["method"].startswith("constrained")
        for p in preds
    )
    metrics = pd.read_csv(out / "metrics.csv")
    rows = metrics[metrics["task"] == "toy.colour"]
    assert set(rows["metric"]) == {"invalid_rate", "accuracy", "warm"} and set(rows["style"]) == {
        "zero_shot",
        "cot",
    }
    warm = rows[(rows["metric"] == "warm") & (rows["style"] == "zero_shot")]["value"].item()
    assert warm == pytest.approx(
        sum(p["parsed"] == "red" for p in preds if p["style"] == "zero_shot") / len(items)
    )
    before = metrics.copy()
    # stage 06 writes its answers as item-bank rows beside its tables, one per answer, recorded
    # with them: a bank written by anything else is refused as stale
    answers = pd.read_parquet(out / artifacts.ITEM_BANK)
    assert len(answers) == len(preds) and set(answers["style"]) == {"zero_shot", "cot"}
    assert answers["correct"].tolist() == [
        p["correct"] for p in sorted(preds, key=lambda p: (p["item_id"], p["style"]))
    ]
    assert artifacts.stale_tables(out) is None
    evaluate.rescore_folder(out)
    pd.testing.assert_frame_equal(pd.read_csv(out / "metrics.csv"), before)
    assert pd.read_parquet(out / artifacts.ITEM_BANK).equals(answers)
    answers.head(1).to_parquet(out / artifacts.ITEM_BANK)
    assert artifacts.ITEM_BANK in artifacts.stale_tables(out)


def test_its_options_are_one_params_block_and_its_tables_reach_the_analysis(toy, tmp_path):
    folder, items = toy
    cfg = evaluate.EvalConfig.from_params(
        {
            "datasets": {"toy": str(folder)},
            "models": {"tiny": TINY},
            "styles": ["zero_shot"],
            "max_new_tokens": 4,
            "n_resamples": 20,
            "tasks": {"toy.colour": {"warm": "blue"}},
        }
    )
    out = tmp_path / "run" / "06_evaluate"
    evaluate.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    preds = list(read_jsonl(out / "predictions.jsonl"))
    metrics = pd.read_csv(out / "metrics.csv")
    warm = metrics[(metrics["task"] == "toy.colour") & (metrics["metric"] == "warm")][
        "value"
    ].item()
    assert warm == pytest.approx(
        sum(p["parsed"] == "blue" for p in preds) / len(items)
    )  # its option, not the default
    assert {p["dataset"] for p in preds} == {"toy"}
    written = analyze.paper_results(out.parent, metrics, tmp_path / "tables", tmp_path / "figures")
    assert written == ["toy_table1"] and (tmp_path / "tables" / "toy_table1.csv").exists()
    with pytest.raises(
        Exception, match=r"tasks.toy.colour: unknown key 'wram' \(did you mean 'warm'\?\)"
    ):
        evaluate.EvalConfig.from_params({"tasks": {"toy.colour": {"wram": "blue"}}})


def test_training_validates_and_trains_with_the_tasks_own_methods(toy):
    folder, items = toy
    backend = load_model(TINY).load()
    examples = [train.Example(it, str(folder)) for it in items]
    accuracies = train.evaluate_examples(
        backend.model, backend.processor, examples, train.TrainConfig.val_max_new_tokens
    )
    hits = train.score_examples(
        examples, [Response(text=c) for c in ("red", "blue", "blue", "red", "green", "Blue.")]
    )
    assert hits == [True, False, True, True, True, True]
    assert set(accuracies) == {
        "accuracy",
        "accuracy_colour",
        "macro",
    }  # target kinds are Scrapbook's only
    tok = backend.processor.tokenizer
    batch = train.collate(examples[:2], backend.processor, tok.eos_token)
    labelled = batch["labels"][0][batch["labels"][0] != -100].tolist()
    assert tok.decode(labelled) == "red" + tok.eos_token  # the task's target text is what is learnt


def _evaluated(folder, out, tmp_path):
    """Stage 06 on the toy dataset at ``folder`` (zero-shot, the tiny LLaVA) into ``out``."""
    cfg = evaluate.EvalConfig(
        datasets={"toy": str(folder)},
        models={"tiny": TINY},
        styles=["zero_shot"],
        max_new_tokens=4,
        n_resamples=20,
    )
    evaluate.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    return out


def test_rescore_refuses_parts_that_do_not_belong_together(toy, tmp_path):
    """A dataset changed after its evaluation, or a rerun stopped before it finished: rescoring would
    grade stored answers against other gold, so it refuses and says why."""
    folder, items = toy
    out = _evaluated(folder, tmp_path / "eval", tmp_path)
    evaluate.rescore_folder(out)  # a finished evaluation rescores
    lines = (folder / "items.jsonl").read_text().splitlines()
    (folder / "items.jsonl").write_text("\n".join(lines[::-1]).replace('"red"', '"blue"') + "\n")
    with pytest.raises(ValueError, match=r"dataset 'toy' .* changed since it was evaluated"):
        evaluate.rescore_folder(out)
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    evaluate.rescore_folder(out)
    kept = (out / "predictions.jsonl").read_text()
    (out / "predictions.jsonl").write_text(
        kept.replace(f'"{items[0].id}"', '"not-in-the-dataset"', 1)
    )
    with pytest.raises(
        ValueError, match="not-in-the-dataset.*the answers changed after the evaluation finished"
    ):
        evaluate.rescore_folder(
            out
        )  # another run's predictions: refused with the manifest's reason, not a traceback
    assert not list(out.glob(".predictions.*"))  # the rescore's pass files are gone
    (out / "predictions.jsonl").write_text(kept)
    evaluate.rescore_folder(out)
    (
        out / "manifest.json"
    ).unlink()  # what a killed rerun leaves: new config beside old predictions
    with pytest.raises(ValueError, match="did not finish"):
        evaluate.rescore_folder(out)
    assert evaluate.main(["rescore", "--run", "no-such-run"]) == 2  # a clear error, exit status 2
    evaluate.rescore_folder(out, unverified=True)  # the user's explicit choice


def test_it_is_collected_evaluated_and_analysed_into_paper_csv_and_a_figure(family, tmp_path):
    """Stage 01 reads its source kind and builds its dataset from the manifest, stage 06 asks and
    scores it, stage 07 draws its figure and writes its paper row: no stage names it."""
    run = tmp_path / "run"
    collect.run(collect.CollectConfig(sources=[{"kind": "toy", "n": 3}]), run / "01_collect")
    folder = run / "01_collect" / "datasets" / "toy"
    assert len(list(read_jsonl(folder / "items.jsonl"))) == 3  # one per colour
    _evaluated(folder, run / "06_evaluate", tmp_path)
    out = run / "07_analyze"
    out.mkdir()
    drawn = analyze.data_figures(analyze.AnalyzeConfig(), out)
    assert "toy_accuracy" in drawn and (out / "figures" / "toy_accuracy.png").exists()
    table = analyze.paper_table(analyze.AnalyzeConfig(), out)
    written = pd.read_csv(out / "paper.csv")
    assert list(written["paper"]) == list(table["paper"]) == ["Toy"]
    accuracy = pd.read_csv(run / "06_evaluate" / "metrics.csv").query("metric == 'accuracy'")
    assert written["ours"].item() == round(accuracy["value"].mean(), 2)
    with pytest.raises(Exception, match=r"sources\[0\] \(toy\) needs n"):
        collect.CollectConfig.from_params({"sources": [{"kind": "toy"}]})
