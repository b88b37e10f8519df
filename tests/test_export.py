"""The lmms-eval export: a task folder whose hooks ask VQA Lab's prompts and score as stage 06 does."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
import yaml
from PIL import Image

from lib.config import resolve
from lib.core.schema import Prediction
from lib.export.harnesses import export_lmms_eval, main
from lib.families.scrapbook import ScrapbookParams
from lib.families.scrapbook import generate as scrapbook
from lib.io import load_items
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from lib.tasks import Scoring
from lib.tasks.registry import get_task
from tests.support.stage06 import rescored

SCORING = Scoring(
    n_resamples=50, tasks={"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}}
)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("export-data")
    folders = dict(demo_datasets(root / "demo"))
    scrapbook(
        ScrapbookParams.from_dict(
            {
                "canvas": [160, 160],
                "size_start": 30,
                "size_step": 10,
                "n_sets": 1,
                "objects_per_set": 3,
                "n_backgrounds": 1,
                "n_arrangements": 1,
                "objects_per_image": 2,
                "n_region_pairs": 1,
                "n_questions_per_type": 1,
                "types": ["presence", "counting"],
                "groups": ["np", "abs"],
            }
        ),
        root / "scrapbook",
        progress=False,
    )
    folders["scrapbook"] = root / "scrapbook"
    return folders


def _hooks(task_dir):
    spec = importlib.util.spec_from_file_location(f"utils_{task_dir.name}", task_dir / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function_tags(task_dir, path):
    """A task YAML read as lmms-eval reads it: ``!function utils.name`` resolved in utils.py."""
    hooks = _hooks(task_dir)
    loader = type("L", (yaml.SafeLoader,), {})
    loader.add_constructor(
        "!function", lambda ld, node: getattr(hooks, ld.construct_scalar(node).split(".", 1)[1])
    )
    return yaml.load(path.read_text(), Loader=loader)


def _replies(items):
    """Scripted replies: right, wrong, unreadable, in turn (what a model run through lmms-eval gives)."""
    out = []
    for i, it in enumerate(items):
        task = get_task(it.task)
        gold = task.reader.target_text(it)
        out.append([gold, "zebra banana" if it.options is None else "Z", "I cannot tell."][i % 3])
    return out


def _aggregations(config, docs, raws) -> dict[str, float]:
    """Every metric of a task YAML as lmms-eval computes it: process_results per doc, then the aggregation."""
    rows = [config["process_results"](d, [r]) for d, r in zip(docs, raws)]
    return {
        m["metric"]: m["aggregation"]([row[m["metric"]] for row in rows])
        for m in config["metric_list"]
    }


def _stage06(name, folder, its, raws, out) -> dict[str, float]:
    """Stage 06's metrics (``metric`` or ``metric[subset]``) of the same replies, unconstrained
    (rescored in ``out``)."""
    preds = [
        Prediction(item_id=it.id, model="m", task=it.task, raw=r, dataset=name)
        for it, r in zip(its, raws)
    ]
    cfg = evaluate.EvalConfig(
        datasets={name: str(folder)},
        constrain=False,
        tasks=SCORING.tasks,
        n_resamples=SCORING.n_resamples,
    )
    _, metrics = rescored(cfg, preds, out)
    return {
        r.metric if r.subset == "all" else f"{r.metric}[{r.subset}]": r.value
        for r in metrics.itertuples()
    }


@pytest.mark.parametrize("name", ["mcq", "vqa", "yesbut", "scrapbook"])
def test_exported_task_asks_vqalab_prompts_and_scores_as_stage_06(datasets, tmp_path, name):
    folder = datasets[name]
    info = export_lmms_eval(folder, tmp_path / name, scoring=SCORING)
    task_dir = tmp_path / name
    _hooks(task_dir)  # the exported hooks import
    items = load_items(folder)
    by_task = {}
    for it in items:
        by_task.setdefault(it.task, []).append(it)
    assert set(info["n_items"]) == set(by_task) and sum(info["n_items"].values()) == len(items)
    for lmms_task in info["tasks"]:
        config = _function_tags(task_dir, task_dir / f"{lmms_task}.yaml")
        assert config["tag"] == f"vqalab_{name}"  # --tasks vqalab_<name> runs them all
        task_name = config["metadata"]["vqalab_task"]
        its = by_task[task_name]
        docs = [
            json.loads(line)
            for line in Path(config["dataset_kwargs"]["data_files"]["test"])
            .read_text()
            .splitlines()
        ]
        assert [d["id"] for d in docs] == [it.id for it in its]
        for d, it in zip(docs[:4], its):
            prompt = get_task(it.task).prompt(it, folder)
            assert config["doc_to_text"](d) == prompt.text
            visuals = config["doc_to_visual"](d)
            assert [v.size for v in visuals] == [Image.open(p).size for p in prompt.images]
            content = config["doc_to_messages"](d)[0]["content"]
            assert [c["type"] for c in content] == ["image"] * len(visuals) + [
                "text"
            ]  # VQA Lab's default order
        raws = _replies(its)
        ours = _aggregations(config, docs, raws)
        stage06 = _stage06(name, folder, its, raws, tmp_path / "06" / name)
        assert set(ours) <= set(stage06) and len(ours) >= 2
        for metric, value in ours.items():
            assert value == pytest.approx(stage06[metric], abs=1e-12), metric
        assert "invalid_rate" in ours  # stage 06's share of unreadable replies, compared above
        if all(
            get_task(it.task).choices(it) for it in its
        ):  # a closed set: the unreadable replies count
            assert 0 < ours["invalid_rate"] < 1


def test_cli_writes_both_formats_and_names_a_missing_dataset(datasets, tmp_path, capsys):
    assert (
        main(
            [
                "lmms-eval",
                "--dataset",
                str(datasets["mcq"]),
                "--out",
                str(tmp_path / "lm"),
                "--name",
                "Demo MCQ",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["tasks"] == ["vqalab_demo_mcq_mcq"]
    assert main(["tsv", "--dataset", str(datasets["mcq"]), "--out", str(tmp_path / "mcq.tsv")]) == 0
    assert (tmp_path / "mcq.tsv").read_text().count("\n") == 1 + len(load_items(datasets["mcq"]))
    assert (
        main(["lmms-eval", "--dataset", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")])
        == 2
    )
    assert "nowhere" in capsys.readouterr().err


def test_an_aggregation_without_rows_of_a_subset_reports_nan(datasets, tmp_path):
    """lmms-eval's --limit keeps the first docs: a subset none of them has gets NaN (not a crash, not
    a 0), every other metric stage 06's value on the docs that were evaluated."""
    folder = datasets["mcq"]
    info = export_lmms_eval(folder, tmp_path / "mcq", scoring=SCORING)
    (lmms_task,) = info["tasks"]
    config = _function_tags(tmp_path / "mcq", tmp_path / "mcq" / f"{lmms_task}.yaml")
    docs = [
        json.loads(line)
        for line in Path(config["dataset_kwargs"]["data_files"]["test"]).read_text().splitlines()
    ]
    items = {it.id: it for it in load_items(folder)}
    subsets = {items[d["id"]].meta["specific_type"] for d in docs}
    absent = sorted(subsets)[0]
    kept = [d for d in docs if items[d["id"]].meta["specific_type"] != absent]
    assert kept and len(subsets) >= 2
    raws = _replies([items[d["id"]] for d in kept])
    ours = _aggregations(config, kept, raws)
    stage06 = _stage06("mcq", folder, [items[d["id"]] for d in kept], raws, tmp_path / "06")
    missing = {m for m in ours if m.endswith(f"[{absent}]")}
    assert missing and not missing & set(stage06)
    for metric, value in ours.items():
        if metric in missing:
            assert math.isnan(value), metric
        else:
            assert value == pytest.approx(stage06[metric], abs=1e-12), metric
    assert all(
        math.isnan(m["aggregation"]([])) for m in config["metric_list"]
    )  # a task with no docs at all


def _settings(task_dir):
    info = json.loads((task_dir / "vqalab.json").read_text())
    config = _function_tags(task_dir, task_dir / f"{info['tasks'][0]}.yaml")
    doc = json.loads(
        Path(config["dataset_kwargs"]["data_files"]["test"]).read_text().splitlines()[0]
    )
    order = [c["type"] for c in config["doc_to_messages"](doc)[0]["content"]]
    return info, config["generation_kwargs"]["max_new_tokens"], order


def test_profile_sets_the_defaults_the_command_line_overrides(datasets, tmp_path, capsys):
    """--profile demo: stage 06's question order (its models ask the question first) and token limit
    (8); explicit flags win; without a profile, today's defaults (32, images first)."""
    demo = resolve(evaluate.EvalConfig, "demo").cfg
    mcq = str(datasets["mcq"])
    assert (
        main(["lmms-eval", "--dataset", mcq, "--out", str(tmp_path / "demo"), "--profile", "demo"])
        == 0
    )
    info, tokens, order = _settings(tmp_path / "demo")
    assert (
        (tokens, order, info["question_first"])
        == (8, ["text", "image"], True)
        == (demo.answer_tokens("mcq"), ["text", "image"], True)
    )
    assert info["settings_from"] == {"profile": "demo", "model": next(iter(demo.models))}
    assert (
        info["scoring"]["n_resamples"] == demo.n_resamples
        and info["scoring"]["tasks"] == demo.tasks
    )
    assert (
        main(
            [
                "lmms-eval",
                "--dataset",
                mcq,
                "--out",
                str(tmp_path / "over"),
                "--profile",
                "demo",
                "--max-new-tokens",
                "5",
                "--no-question-first",
            ]
        )
        == 0
    )
    assert _settings(tmp_path / "over")[1:] == (5, ["image", "text"])
    assert main(["lmms-eval", "--dataset", mcq, "--out", str(tmp_path / "plain")]) == 0
    info, tokens, order = _settings(tmp_path / "plain")
    assert (tokens, order, info["settings_from"]) == (32, ["image", "text"], None)
    assert (
        main(["lmms-eval", "--dataset", mcq, "--out", str(tmp_path / "qf"), "--question-first"])
        == 0
    )
    assert _settings(tmp_path / "qf")[2] == ["text", "image"]
    capsys.readouterr()
    assert (
        main(
            [
                "lmms-eval",
                "--dataset",
                mcq,
                "--out",
                str(tmp_path / "x"),
                "--profile",
                "demo",
                "--model",
                "nope",
            ]
        )
        == 2
    )
    assert "nope" in (err := capsys.readouterr().err) and all(label in err for label in demo.models)
    assert (
        main(["lmms-eval", "--dataset", mcq, "--out", str(tmp_path / "x"), "--model", "trained"])
        == 2
    )


def test_profile_model_and_per_task_token_limits(datasets, tmp_path, monkeypatch):
    """--model picks whose question order; a task's own limit (its options' max_new_tokens) beats the common one."""
    params = tmp_path / "params"
    params.mkdir()
    (params / "common.tp.yaml").write_text(
        "run: tp\nstages: [06_evaluate]\nmodels:\n  a: {backend: tiny, name: llava}\n"
        "  b: {backend: tiny, name: llava, question_first: true}\n"
    )
    (params / "06_evaluate.tp.yaml").write_text(
        "max_new_tokens: 6\ntasks: {vqa.open: {max_new_tokens: 12}}\nmodels: {a: a, b: b}\n"
    )
    monkeypatch.setenv("VQALAB_PARAMS", str(params))
    vqa, mcq = str(datasets["vqa"]), str(datasets["mcq"])
    assert (
        main(["lmms-eval", "--dataset", vqa, "--out", str(tmp_path / "a"), "--profile", "tp"]) == 0
    )
    assert _settings(tmp_path / "a")[1:] == (12, ["image", "text"])
    assert (
        main(
            [
                "lmms-eval",
                "--dataset",
                mcq,
                "--out",
                str(tmp_path / "b"),
                "--profile",
                "tp",
                "--model",
                "b",
            ]
        )
        == 0
    )
    info, tokens, order = _settings(tmp_path / "b")
    assert (tokens, order, info["max_new_tokens"]) == (6, ["text", "image"], {"mcq": 6})


def test_tasks_carry_a_tag_and_no_group_key(datasets, tmp_path):
    """lmms-eval 0.7 reads ``group`` in a task YAML as the deprecated spelling of ``tag`` and keeps
    group YAMLs for aggregating groups; the export aggregates nothing across tasks: a tag, and an
    older export's group YAML in the same folder is removed (it would take the tag's name)."""
    out = tmp_path / "yesbut"
    out.mkdir()
    (out / "vqalab_yesbut.yaml").write_text(
        "group: vqalab_yesbut\ntask: [vqalab_yesbut_yesbut_detection]\n"
    )
    (out / "mine.yaml").write_text("group: mine\ntask: [a]\n")
    info = export_lmms_eval(datasets["yesbut"], out, scoring=SCORING)
    assert info["tag"] == "vqalab_yesbut" and len(info["tasks"]) == 3
    assert not (out / "vqalab_yesbut.yaml").exists() and (out / "mine.yaml").exists()
    for lmms_task in info["tasks"]:
        config = yaml.safe_load((out / f"{lmms_task}.yaml").read_text().replace("!function", ""))
        assert (
            config["tag"] == "vqalab_yesbut"
            and config["task"] == lmms_task
            and "group" not in config
        )
