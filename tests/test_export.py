"""The lmms-eval export: a task folder whose hooks ask VQA Lab's prompts and score as stage 06 does."""

import importlib.util
import json

import pytest
import yaml
from PIL import Image

from lib import evaluate as E
from lib.export import export_lmms_eval, main
from lib.io import load_items
from lib.schema import Prediction
from lib.scrapbook import ScrapbookParams, generate as scrapbook
from lib.setup import demo_datasets
from lib.tasks import Scoring, get_task

SCORING = Scoring(text_metrics=("bleu", "rouge_l"), n_resamples=50)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("export-data")
    folders = dict(demo_datasets(root / "demo"))
    scrapbook(ScrapbookParams.from_dict({"canvas": [160, 160], "size_start": 30, "size_step": 10, "n_sets": 1,
                                         "objects_per_set": 3, "n_backgrounds": 1, "n_arrangements": 1,
                                         "objects_per_image": 2, "n_region_pairs": 1, "n_questions_per_type": 1,
                                         "types": ["presence", "counting"], "groups": ["np", "abs"]}),
              root / "scrapbook", progress=False)
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
    loader.add_constructor("!function", lambda l, node: getattr(hooks, l.construct_scalar(node).split(".", 1)[1]))
    return yaml.load(path.read_text(), Loader=loader)


def _replies(items):
    """Scripted replies: right, wrong, unreadable, in turn (what a model run through lmms-eval gives)."""
    out = []
    for i, it in enumerate(items):
        task = get_task(it.task)
        gold = task.target_text(it)
        out.append([gold, "zebra banana" if it.options is None else "Z", "I cannot tell."][i % 3])
    return out


@pytest.mark.parametrize("name", ["mcq", "vqa", "yesbut", "scrapbook"])
def test_exported_task_asks_vqalab_prompts_and_scores_as_stage_06(datasets, tmp_path, name):
    folder = datasets[name]
    info = export_lmms_eval(folder, tmp_path / name, scoring=SCORING)
    task_dir = tmp_path / name
    hooks = _hooks(task_dir)
    items = load_items(folder)
    by_task = {}
    for it in items:
        by_task.setdefault(it.task, []).append(it)
    assert set(info["n_items"]) == set(by_task) and sum(info["n_items"].values()) == len(items)
    group = yaml.safe_load((task_dir / f"vqalab_{name}.yaml").read_text())
    assert sorted(group["task"]) == sorted(info["tasks"])
    for lmms_task in info["tasks"]:
        config = _function_tags(task_dir, task_dir / f"{lmms_task}.yaml")
        task_name = config["metadata"]["vqalab_task"]
        its = by_task[task_name]
        docs = [json.loads(line) for line in open(config["dataset_kwargs"]["data_files"]["test"])]
        assert [d["id"] for d in docs] == [it.id for it in its]
        for d, it in zip(docs[:4], its):
            prompt = get_task(it.task).prompt(it, folder)
            assert config["doc_to_text"](d) == prompt.text
            visuals = config["doc_to_visual"](d)
            assert [v.size for v in visuals] == [Image.open(p).size for p in prompt.images]
            content = config["doc_to_messages"](d)[0]["content"]
            assert [c["type"] for c in content] == ["image"] * len(visuals) + ["text"]  # VQA Lab's default order
        raws = _replies(its)
        rows = [config["process_results"](d, [r]) for d, r in zip(docs, raws)]
        ours = {m["metric"]: m["aggregation"]([row[m["metric"]] for row in rows]) for m in config["metric_list"]}
        # stage 06 on the same replies, unconstrained
        preds = [Prediction(item_id=it.id, model="m", task=it.task, raw=r, meta={"dataset": name})
                 for it, r in zip(its, raws)]
        cfg = E.EvalConfig(datasets={name: str(folder)}, constrain=False, text_metrics=list(SCORING.text_metrics),
                           n_resamples=SCORING.n_resamples)
        keyed = {E.item_key(name, it.id): it for it in its}
        states = {}
        E.score_predictions(keyed, preds, cfg, states)
        metrics, _, _ = E.metrics_table(keyed, preds, [], cfg, states)
        stage06 = {r.metric if r.subset == "all" else f"{r.metric}[{r.subset}]": r.value for r in metrics.itertuples()}
        assert set(ours) <= set(stage06) and len(ours) >= 2
        for metric, value in ours.items():
            assert value == pytest.approx(stage06[metric], abs=1e-12), metric
        assert ours["invalid_rate"] == pytest.approx(sum(not p.valid for p in preds) / len(preds))
        if all(get_task(it.task).choices(it) for it in its):  # a closed set: the unreadable replies count
            assert 0 < ours["invalid_rate"] < 1


def test_cli_writes_both_formats_and_names_a_missing_dataset(datasets, tmp_path, capsys):
    assert main(["lmms-eval", "--dataset", str(datasets["mcq"]), "--out", str(tmp_path / "lm"), "--name", "Demo MCQ"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == ["vqalab_demo_mcq_mcq"]
    assert main(["tsv", "--dataset", str(datasets["mcq"]), "--out", str(tmp_path / "mcq.tsv")]) == 0
    assert (tmp_path / "mcq.tsv").read_text().count("\n") == 1 + len(load_items(datasets["mcq"]))
    assert main(["lmms-eval", "--dataset", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
    assert "nowhere" in capsys.readouterr().err
