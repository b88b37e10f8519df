"""The evaluation stage end to end on real tiny models: outputs, resume, rescoring without a model,
and garbage answers from a real OpenAI-compatible server that never abort a run."""

import json

import pandas as pd
import pytest

from lib.config import ParamsError
from lib.core.schema import Item, Prediction
from lib.eval import ask as ask_module
from lib.eval import rescore as rescore_module
from lib.eval.items import load_eval_items, sample_indices
from lib.families.scrapbook import ScrapbookParams
from lib.families.scrapbook import generate as scrapbook
from lib.io import dataset_info, load_items, read_jsonl, save_dataset
from lib.models import load_model
from lib.models.store import CallStore
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from lib.tasks.registry import get_task, task_of

from .support.openai_server import OpenAIStub
from .support.stage06 import rescored

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8, "question_first": True}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval-data")
    folders = {k: str(v) for k, v in demo_datasets(root / "demo").items()}
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
                "types": ["presence", "counting", "recognition"],
                "groups": ["np", "abs"],
            }
        ),
        root / "scrapbook",
        progress=False,
    )
    folders["scrapbook"] = str(root / "scrapbook")
    return folders


def _config(datasets, **kw):
    base = dict(
        datasets=datasets,
        models={"tiny": TINY},
        styles=["zero_shot", "cot"],
        max_new_tokens=6,
        cot_max_new_tokens=8,
        max_items=120,
        n_resamples=100,
        tasks={"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l", "meteor", "cider"]}},
    )
    return evaluate.EvalConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def finished(datasets, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval-out")
    store = CallStore(
        tmp_path_factory.mktemp("calls") / "calls.sqlite"
    )  # beside the stage's folder
    with OpenAIStub() as judge_server:
        import os

        os.environ["VQALAB_JUDGE_KEY"] = "sk-test"
        judge = {
            "backend": "openai",
            "name": "judge",
            "base_url": judge_server.url,
            "api_key_env": "VQALAB_JUDGE_KEY",
        }
        summary = evaluate.run(_config(datasets, judge=judge), out, store=store, progress=False)
    return out, store, summary


@pytest.mark.slow
def test_every_task_style_and_item_is_predicted_and_scored(finished, datasets):
    out, _, summary = finished
    items = {name: asked for name, (_, asked) in load_eval_items(_config(datasets)).items()}
    preds = list(read_jsonl(out / "predictions.jsonl"))
    assert len(preds) == summary["predictions"] == 2 * sum(len(v) for v in items.values())
    assert {p["task"] for p in preds} == {
        "mcq",
        "yesbut.detection",
        "yesbut.understanding",
        "yesbut.completion",
        "scrapbook.qa",
        "vqa.open",
    }
    for p in preds:
        assert p["raw"] is not None and p["method"] and p["style"] in ("zero_shot", "cot")
        assert p["valid"] is (p["parsed"] is not None)
        if p["style"] == "cot":
            assert "reasoning" in p["meta"]
        if p["task"] in ("mcq", "yesbut.detection", "yesbut.completion", "scrapbook.qa"):
            assert isinstance(p["correct"], bool)
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns) == [
        "model",
        "dataset",
        "task",
        "style",
        "subset",
        "metric",
        "value",
        "ci_low",
        "ci_high",
        "n",
        "n_clusters",
        "n_invalid",
        "n_truncated",
    ]
    # an interval resamples images: never more clusters than answers, fewer where images repeat
    assert (metrics["n_clusters"] <= metrics["n"]).all() and (
        metrics["n_clusters"] < metrics["n"]
    ).any()
    # the untrained model's free text runs into the token limit: counted as truncated, raw kept
    cut = [p for p in preds if p["truncated"]]
    assert cut and all(
        p["task"] in ("vqa.open", "yesbut.understanding", "scrapbook.qa") for p in cut
    )
    vqa_rows = metrics[(metrics["task"] == "vqa.open") & (metrics["metric"] == "exact_match")]
    assert vqa_rows["n_truncated"].sum() == sum(p["task"] == "vqa.open" for p in cut)
    inv = metrics[metrics["metric"] == "invalid_rate"]
    assert (
        len(inv) == 6 * 2
    )  # every task, every style, with its invalid count (one dataset per task here)
    for _, row in metrics.dropna(subset=["ci_low"]).iterrows():
        assert row["ci_low"] - 1e-9 <= row["value"] <= row["ci_high"] + 1e-9, row.to_dict()
    got = set(zip(metrics["task"], metrics["metric"]))
    for pair in [
        ("mcq", "exact_macro"),
        ("mcq", "jaccard_micro"),
        ("yesbut.detection", "f1"),
        ("yesbut.detection", "macro_f1"),
        ("yesbut.completion", "accuracy"),
        ("yesbut.understanding", "meteor"),
        ("yesbut.understanding", "cider"),
        ("vqa.open", "anls"),
        ("vqa.open", "vqa_accuracy"),
        ("vqa.open", "exact_match"),
        ("vqa.open", "lave"),
        ("scrapbook.qa", "accuracy_all_forms"),
        ("scrapbook.qa", "consistent_rate"),
    ]:
        assert pair in got, pair
    judgements = list(read_jsonl(out / "judgements.jsonl"))
    assert len(judgements) == 2 * len(items["vqa"]) and all(
        j["raw"].startswith("echo:") for j in judgements
    )


def test_scrapbook_tables(finished):
    out, _, _ = finished
    levels, errors = pd.read_csv(out / "levels.csv"), pd.read_csv(out / "errors.csv")
    assert {
        "level",
        "concept",
        "type",
        "subgroup",
        "form",
        "n",
        "correct",
        "accuracy",
        "passed",
    } <= set(levels.columns)
    assert (levels["level"] == 1).any() and set(levels["form"]) >= {"original", "enumerated", "all"}
    agg = errors[errors["unit"] == "aggregated"]
    assert set(agg["category"]) >= {
        "answer disagreement",
        "error disagreement",
        "wrong answer",
        "total",
    }
    overall = errors[errors["unit"] == "questions"]
    assert set(overall["filter"]) == {"non-absurd", "non-absurd*", "full", "full*"}
    # the aggregated error total + the correct questions = every question, per model, style and filter
    for (style, filt), sub in agg[agg["category"] == "total"].groupby(["style", "filter"]):
        row = overall[
            (overall["style"] == style)
            & (overall["filter"] == ("full*" if filt == "all" else "non-absurd*"))
        ]
        assert int(sub["count"].iloc[0]) + int(row["correct"].iloc[0]) == int(row["count"].iloc[0])


def test_rescore_needs_no_model_and_reproduces_the_tables(finished, monkeypatch):
    out, _, _ = finished
    before = {n: pd.read_csv(out / n) for n in ("metrics.csv", "levels.csv", "errors.csv")}

    def no_model(*a, **k):
        raise AssertionError("rescoring must not load a model")

    monkeypatch.setattr(ask_module, "load_model", no_model)
    monkeypatch.setattr("lib.models.load_model", no_model)
    for n in before:
        (out / n).unlink()
    evaluate.rescore_folder(out)
    for n, df in before.items():
        pd.testing.assert_frame_equal(pd.read_csv(out / n), df)


def test_rescore_cli_on_a_run(finished, monkeypatch, capsys):
    import shutil

    from lib.core.paths import stage_dir

    out, _, _ = finished
    target = stage_dir("rescore-cli", "06_evaluate")
    for f in ("config.json", "predictions.jsonl", "judgements.jsonl", "manifest.json"):
        shutil.copy(out / f, target / f)
    assert evaluate.main(["rescore", "--run", "rescore-cli"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"] > 0
    assert (target / "metrics.csv").exists() and (target / "levels.csv").exists()


def test_a_killed_evaluation_resumes_without_repeating_calls(datasets, tmp_path):
    from lib.models.hf import HFModel

    store = CallStore(tmp_path / "calls.sqlite")
    cfg = _config({"mcq": datasets["mcq"], "vqa": datasets["vqa"]}, styles=["zero_shot"])
    calls = []
    original = HFModel._generate

    def counting(self, requests, on_result):
        calls.append(len(requests))
        return original(self, requests, on_result)

    HFModel._generate = counting
    try:
        model = load_model(TINY)
        items = load_items(datasets["mcq"])
        ask_module.predict(
            "tiny", model, items[:5], datasets["mcq"], "zero_shot", cfg, store, progress=False
        )  # then "killed"
        first = sum(calls)
        evaluate.run(cfg, tmp_path / "out", store=store, progress=False)
        assert first == 5 and sum(calls) - first == len(items) - 5 + len(
            load_items(datasets["vqa"])
        )
        calls.clear()
        evaluate.run(cfg, tmp_path / "out", store=store, progress=False)
        assert sum(calls) == 0  # a finished evaluation reruns from the cache alone
    finally:
        HFModel._generate = original


GARBAGE = {
    "empty": "",
    "spaces": "   ",
    "chinese": "这是正确的答案",
    "two letters": "A, B",
    "json": '{"answer": "B"}',
    "prose": "I would say the second one",
    "good": "B",
    "good, chatty": "The answer is B.",
}


def test_garbage_from_an_api_model_is_counted_never_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test")
    from PIL import Image

    folder = tmp_path / "garbage"
    (folder / "images").mkdir(parents=True)
    Image.new("RGB", (32, 32), "red").save(folder / "images" / "r.png")
    items = [
        Item(
            id=k,
            task="mcq",
            question=f"Which? [[reply:{v}]]",
            images=["images/r.png"],
            options=["x", "y", "z"],
            answer=[1],
            meta={"general_type": "single", "specific_type": "t"},
        )
        for k, v in GARBAGE.items()
    ]
    items.append(
        Item(
            id="open-empty",
            task="vqa.open",
            question="What? [[reply:]]",
            images=["images/r.png"],
            answer=["red"],
        )
    )
    items.append(
        Item(
            id="open-chinese",
            task="vqa.open",
            question="What? [[reply:红色]]",
            images=["images/r.png"],
            answer=["red"],
        )
    )
    save_dataset(folder, items, dataset_info("garbage"))
    with OpenAIStub() as server:
        spec = {
            "backend": "openai",
            "name": "api",
            "base_url": server.url,
            "api_key_env": "VQALAB_TEST_KEY",
        }
        cfg = evaluate.EvalConfig(
            datasets={"g": str(folder)},
            models={"api": spec},
            styles=["zero_shot"],
            constrain=False,
            n_resamples=50,
        )
        evaluate.run(cfg, tmp_path / "out", store=CallStore(tmp_path / "c.sqlite"), progress=False)
    preds = {p["item_id"]: p for p in read_jsonl(tmp_path / "out" / "predictions.jsonl")}
    assert len(preds) == len(items)
    assert {k for k, p in preds.items() if not p["valid"]} == {
        "empty",
        "spaces",
        "chinese",
        "two letters",
        "prose",
        "open-empty",
    }
    # a JSON object naming one option is read as that option (scored), never as a random one
    assert (
        preds["good"]["correct"]
        and preds["good, chatty"]["correct"]
        and preds["json"]["parsed"] == "B"
    )
    assert preds["open-chinese"]["valid"] and preds["open-chinese"]["scores"]["exact_match"] == 0.0
    metrics = pd.read_csv(tmp_path / "out" / "metrics.csv")
    mcq = metrics[(metrics["task"] == "mcq") & (metrics["metric"] == "exact_micro")].iloc[0]
    assert mcq["n"] == 8 and mcq["n_invalid"] == 5 and mcq["value"] == pytest.approx(3 / 8)


def _open_dataset(folder, answers: dict[str, str]):
    items = [
        Item(id=i, task="vqa.open", question=f"question {i}?", images=[], answer=[a])
        for i, a in answers.items()
    ]
    save_dataset(folder, items, dataset_info(folder.name))
    return items


def test_items_are_identified_by_dataset_and_id(tmp_path):
    """Two datasets share ids with different questions: each answer is scored against its own
    dataset's gold (keyed by id alone, one dataset's gold would grade the other's answers)."""
    a = _open_dataset(tmp_path / "a", {"q1": "red", "q2": "two"})
    b = _open_dataset(tmp_path / "b", {"q1": "blue", "q2": "seven"})
    out = tmp_path / "eval"
    out.mkdir()
    cfg = evaluate.EvalConfig(
        datasets={"a": str(tmp_path / "a"), "b": str(tmp_path / "b")},
        models={"m": TINY},
        styles=["zero_shot"],
        n_resamples=20,
    )
    (out / "config.json").write_text(json.dumps(cfg.to_dict()))
    preds = [
        Prediction(
            item_id=it.id,
            model="m",
            task="vqa.open",
            raw=it.answer[0],
            parsed=it.answer[0],
            dataset=name,
        ).to_dict()
        for name, its in (("a", a), ("b", b))
        for it in its
    ]
    (out / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    evaluate.rescore_folder(out, unverified=True)  # written by hand: no manifest
    m = pd.read_csv(out / "metrics.csv")
    exact = m[m["metric"] == "exact_match"].set_index("dataset")["value"]
    assert exact.to_dict() == {"a": 1.0, "b": 1.0}  # every model answer is its own item's gold


def test_a_duplicate_id_within_a_dataset_is_an_error_naming_both_lines(tmp_path):
    _open_dataset(tmp_path / "d", {"q1": "red"})
    with open(tmp_path / "d" / "items.jsonl", "a") as f:
        f.write(
            json.dumps(Item(id="q1", task="vqa.open", question="another?", answer=["x"]).to_dict())
            + "\n"
        )
    cfg = evaluate.EvalConfig(datasets={"d": str(tmp_path / "d")}, models={"m": TINY})
    with pytest.raises(
        ValueError, match=r"dataset 'd': .*items.jsonl has id 'q1' twice \(records 1 and 2\)"
    ):
        load_eval_items(cfg)


def test_a_reply_that_is_no_chat_completion_fails_that_request_only(tmp_path, monkeypatch):
    """An HTML page with status 200, a completion without choices: recorded as errors for those
    items; the run completes and a reply cut off by the token limit is counted as truncated."""
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test")
    folder = tmp_path / "odd"
    items = [
        Item(id=k, task="vqa.open", question=f"What? {marker}", answer=["red"])
        for k, marker in (
            ("html", "[[html]]"),
            ("empty", "[[nochoices]]"),
            ("cut", "[[length]] [[reply:re]]"),
            ("fine", "[[reply:red]]"),
        )
    ]
    save_dataset(folder, items, dataset_info("odd"))
    with OpenAIStub() as server:
        spec = {
            "backend": "openai",
            "name": "api",
            "base_url": server.url,
            "api_key_env": "VQALAB_TEST_KEY",
            "max_retries": 0,
        }
        cfg = evaluate.EvalConfig(
            datasets={"o": str(folder)}, models={"api": spec}, styles=["zero_shot"], n_resamples=20
        )
        evaluate.run(cfg, tmp_path / "out", store=CallStore(tmp_path / "c.sqlite"), progress=False)
    preds = {p["item_id"]: p for p in read_jsonl(tmp_path / "out" / "predictions.jsonl")}
    assert preds["html"]["method"] == preds["empty"]["method"] == "error"
    assert "not a chat completion" in preds["empty"]["meta"]["error"]
    assert preds["fine"]["correct"] and preds["cut"]["truncated"] and not preds["fine"]["truncated"]
    row = pd.read_csv(tmp_path / "out" / "metrics.csv").query("metric == 'exact_match'").iloc[0]
    assert row["n"] == 4 and row["n_invalid"] == 2 and row["n_truncated"] == 1


def test_the_key_never_lands_on_disk(tmp_path, monkeypatch):
    """A server that echoes the key in its 401 or its reply: the key's value is redacted from the
    stored predictions, the call cache and the provenance; a key put in api_key_env is refused."""
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("VQALAB_SECRET_KEY", secret)
    folder = tmp_path / "k"
    save_dataset(
        folder,
        [
            Item(id="a", task="vqa.open", question="What? [[echo401]]", answer=["x"]),
            Item(id="b", task="vqa.open", question="What? [[echokey]]", answer=["x"]),
        ],
        dataset_info("k"),
    )
    with OpenAIStub() as server:
        spec = {
            "backend": "openai",
            "name": "api",
            "base_url": server.url,
            "api_key_env": "VQALAB_SECRET_KEY",
            "max_retries": 0,
        }
        cfg = evaluate.EvalConfig(
            datasets={"k": str(folder)}, models={"api": spec}, styles=["zero_shot"], n_resamples=20
        )
        evaluate.run(cfg, tmp_path / "out", store=CallStore(tmp_path / "c.sqlite"), progress=False)
    preds = {p["item_id"]: p for p in read_jsonl(tmp_path / "out" / "predictions.jsonl")}
    assert preds["a"]["method"] == "error" and "<redacted>" in preds["a"]["meta"]["error"]
    assert "<redacted>" in preds["b"]["raw"]
    for path in [*(tmp_path / "out").iterdir(), tmp_path / "c.sqlite"]:
        assert secret.encode() not in path.read_bytes(), path.name
    with pytest.raises(ParamsError, match="not shown") as e:
        evaluate.EvalConfig.from_params(
            {"models": {"m": {**spec, "api_key_env": secret}}}, source="06.yaml"
        )
    assert secret not in str(e.value)
    from lib.models import load_model

    with pytest.raises(ValueError, match="not shown") as e:
        load_model({**spec, "api_key_env": secret})
    assert secret not in str(e.value)


def test_each_task_can_have_its_own_answer_length():
    cfg = evaluate.EvalConfig.from_params(
        {"max_new_tokens": 32, "tasks": {"yesbut.understanding": {"max_new_tokens": 256}}}
    )
    assert cfg.answer_tokens("yesbut.understanding") == 256 and cfg.answer_tokens("mcq") == 32
    with pytest.raises(ParamsError, match="yesbut.explain"):
        evaluate.EvalConfig.from_params(
            {"tasks": {"yesbut.explain": {"max_new_tokens": 64}}}, source="06.yaml"
        )


def test_a_tasks_options_are_checked_where_they_are_written():
    """Each task's block under ``tasks:`` builds its own options class: an unknown key or a value
    out of range is refused naming the file, the task and the key."""
    cfg = evaluate.EvalConfig.from_params(
        {"tasks": {"scrapbook.qa": {"exact": "words"}, "vqa.open": {"judge": None}}}
    )
    assert cfg.options["scrapbook.qa"].exact == "words" and cfg.options["vqa.open"].judge is None
    assert cfg.scoring().of(get_task("scrapbook.qa")).exact == "words"
    assert cfg.judged_tasks() == {}  # no judge model: nothing is judged
    judged = evaluate.EvalConfig.from_params(
        {"judge": {"backend": "tiny", "name": "smollm2"}}
    ).judged_tasks()
    assert {name: judge.name for name, judge in judged.items()} == {"vqa.open": "lave"}
    with pytest.raises(
        ParamsError,
        match=r"06.yaml: tasks.scrapbook.qa: unknown key 'exactt' \(did you mean 'exact'\?\)",
    ):
        evaluate.EvalConfig.from_params(
            {"tasks": {"scrapbook.qa": {"exactt": "words"}}}, source="06.yaml"
        )
    with pytest.raises(ParamsError, match="06.yaml: tasks.scrapbook.qa: exact='wordz'"):
        evaluate.EvalConfig.from_params(
            {"tasks": {"scrapbook.qa": {"exact": "wordz"}}}, source="06.yaml"
        )
    with pytest.raises(ParamsError, match="tasks.yesbut.understanding.bertscore_model must be"):
        evaluate.EvalConfig.from_params(
            {"tasks": {"yesbut.understanding": {"bertscore_model": 3}}}, source="06.yaml"
        )


@pytest.mark.parametrize("name,max_items", [("scrapbook", 40), ("mcq", 5), ("scrapbook", 0)])
def test_a_streamed_sample_is_the_sample_of_the_whole_file(datasets, name, max_items):
    """load_eval_items streams the file and reads back only the sampled lines: the same items, in
    the same order, as sampling the fully loaded dataset (units kept whole for Scrapbook)."""
    cfg = evaluate.EvalConfig(datasets={name: datasets[name]}, max_items=max_items, seed=3)
    streamed = load_eval_items(cfg)[name][1]
    whole = _whole_file_sample(datasets[name], max_items, 3)
    assert [it.to_dict() for it in streamed] == [it.to_dict() for it in whole]
    assert 0 < len(streamed) <= (max_items or len(load_items(datasets[name])))


def _whole_file_sample(folder, max_items, seed):
    """The sample drawn from the whole file held in memory, each unit coded by its order of appearance."""
    items = load_items(folder)
    tasks = [task_of(it) for it in items]
    codes: dict = {}
    units = [t.unit(it) for t, it in zip(tasks, items)]
    ranks = [0 if u is None else u.order for u in units]
    units = [None if u is None else codes.setdefault(u.key, len(codes)) for u in units]
    return [items[i] for i in sample_indices(units, ranks, max_items, seed)]


def _sample_by_units(units, ranks, max_items, seed):
    """The sampling rule written plainly: units in order of first appearance, ordered by the rank
    of their first item and a uniform draw each, taken whole while they fit."""
    import numpy as np

    if not max_items or len(units) <= max_items:
        return list(range(len(units)))
    groups: dict = {}
    for i, u in enumerate(units):
        groups.setdefault(u, []).append(i)
    keys = list(groups)
    r = np.random.default_rng(seed).random(len(keys))
    keep, n = [], 0
    for k in sorted(range(len(keys)), key=lambda k: (ranks[groups[keys[k]][0]], r[k])):
        if n + len(groups[keys[k]]) <= max_items:
            keep += groups[keys[k]]
            n += len(groups[keys[k]])
    return sorted(keep)


def test_sampling_by_units_follows_the_rule_on_random_cases():
    import random

    rng = random.Random(0)
    for trial in range(300):
        n = rng.randint(1, 60)
        units = [rng.randint(0, 12) for _ in range(n)]
        ranks = [rng.choice([1, 2, 3, 4]) for _ in range(n)]
        max_items = rng.randint(0, n + 3)
        assert sample_indices(units, ranks, max_items, trial) == _sample_by_units(
            units, ranks, max_items, trial
        )


def test_the_id_index_follows_the_file(tmp_path):
    from lib.io import item_index, read_items_at, save_dataset

    items = [
        Item(id=f"q{i}", task="vqa.open", question=f"what is {i}?", images=[], answer=[str(i)])
        for i in range(5)
    ]
    save_dataset(tmp_path, items, {"name": "t"})
    index = item_index(tmp_path)
    assert [it.id for it in read_items_at(tmp_path, [index["q3"], index["q0"]])] == ["q3", "q0"]
    save_dataset(tmp_path, items[::-1][:3], {"name": "t"})  # rewritten: other offsets, fewer ids
    index = item_index(tmp_path)
    assert (
        set(index) == {"q4", "q3", "q2"}
        and read_items_at(tmp_path, [index["q2"]])[0].question == "what is 2?"
    )


def test_the_id_index_finds_wanted_ids_across_its_chunks(tmp_path):
    """Rescoring looks up the answered ids a chunk of the index at a time: every wanted id the
    dataset has is found at its own offset whatever chunk it falls in, and absent ids are left out."""
    from lib.io import item_index, save_dataset
    from lib.io.index import _wanted_offsets

    items = [
        Item(
            id=f"id-{i:03d}{'x' * (i % 7)}", task="vqa.open", question="q?", images=[], answer=["a"]
        )
        for i in range(200)
    ]
    save_dataset(tmp_path, items, {"name": "t"})
    full = item_index(tmp_path)
    wanted = {it.id for it in items[::3]} | {items[-1].id, items[0].id, "not-there"}
    assert item_index(tmp_path, wanted=wanted) == {i: full[i] for i in wanted if i in full}
    blob, offsets = "\n".join(full).encode(), list(full.values())
    for size in (1, 5, 17, 64, 10**6):  # chunk edges inside ids, on newlines, one chunk in all
        chunks = (blob[i : i + size] for i in range(0, len(blob), size))
        assert _wanted_offsets(chunks, offsets, {i.encode() for i in wanted}) == {
            i: full[i] for i in wanted if i in full
        }


def test_asking_in_chunks_writes_the_same_predictions_and_tables(datasets, tmp_path, monkeypatch):
    """A large evaluation asks a chunk of questions at a time and streams predictions to disk;
    the predictions (in order), the manifest's answers and every table equal a single pass."""
    cfg = _config({"mcq": datasets["mcq"], "scrapbook": datasets["scrapbook"]}, max_items=40)
    outs = {}
    for chunk in (ask_module.PREDICT_CHUNK, 7):
        monkeypatch.setattr(ask_module, "PREDICT_CHUNK", chunk)
        outs[chunk] = tmp_path / f"chunk{chunk}"
        evaluate.run(
            cfg, outs[chunk], store=CallStore(tmp_path / f"calls{chunk}.sqlite"), progress=False
        )
    whole, chunked = (
        [
            {k: v for k, v in p.items() if k != "latency_s"}
            for p in read_jsonl(o / "predictions.jsonl")
        ]
        for o in outs.values()
    )
    assert len(whole) > 2 * 7 and chunked == whole
    manifests = [json.loads((o / "manifest.json").read_text()) for o in outs.values()]
    assert manifests[0]["answers"] == manifests[1]["answers"]
    for table in ("metrics.csv", "levels.csv", "errors.csv"):
        pd.testing.assert_frame_equal(*(pd.read_csv(o / table) for o in outs.values()))


def test_a_dataset_rewritten_with_the_same_size_and_time_is_indexed_again_on_rescoring(
    datasets, tmp_path, monkeypatch
):
    """The id index is keyed by the file's size and modification time; a file rewritten in place
    with both unchanged (its lines reordered) is caught by the ids read back, indexed again once,
    and the answers are graded against their own questions: the tables are unchanged."""
    import os
    import shutil

    from lib import io as vio

    folder = tmp_path / "scrapbook"
    shutil.copytree(datasets["scrapbook"], folder)
    cfg = evaluate.EvalConfig(
        datasets={"scrapbook": str(folder)},
        models={"yes": {"backend": "constant", "answer": "yes"}},
        styles=["zero_shot"],
        n_resamples=50,
    )
    out = tmp_path / "06_evaluate"
    evaluate.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    before = {n: pd.read_csv(out / n) for n in ("metrics.csv", "levels.csv", "errors.csv")}
    path = folder / "items.jsonl"
    st = path.stat()
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[::-1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    rebuilds = []
    real = vio.IdLookup
    monkeypatch.setattr(
        rescore_module,
        "IdLookup",
        lambda *a, **k: rebuilds.append(k.get("rebuild")) or real(*a, **k),
    )
    evaluate.rescore_folder(out)
    assert rebuilds == [False, True]
    for n, df in before.items():
        pd.testing.assert_frame_equal(pd.read_csv(out / n), df)


def test_run_is_its_steps_in_order(datasets, tmp_path):
    cfg = _config(
        {k: v for k, v in datasets.items() if k != "scrapbook"}, styles=["zero_shot"], max_items=8
    )
    store = CallStore(tmp_path / "calls.sqlite")
    by_run = evaluate.run(cfg, tmp_path / "a" / "06_evaluate", store=store, progress=False)
    out = tmp_path / "b" / "06_evaluate"
    resolved, data = evaluate.items_to_ask(cfg, out)
    counts = evaluate.ask(resolved, out, data, store=store, progress=False)
    assert counts["predictions"] == by_run["predictions"] and (out / "manifest.json").exists()
    by_steps = evaluate.finish(resolved, out, counts, evaluate.rescore_folder(out))
    timings = ("predict_seconds", "rescore_seconds")
    assert list(by_steps) == list(by_run)
    assert {k: v for k, v in by_steps.items() if k not in timings} == {
        k: v for k, v in by_run.items() if k not in timings
    }
    assert json.loads((out / "summary.json").read_text()) == by_steps
    for name in ("metrics.csv", "config.json"):
        assert (out / name).read_text() == (tmp_path / "a" / "06_evaluate" / name).read_text()


def test_a_profile_lists_the_metrics_stage_06_scores(tmp_path):
    """``metrics:`` in stage 06's params names metrics registered in :mod:`lib.tasks.scoring`: an
    unknown name is refused at the config check with the closest one suggested; the listed ones
    are the metric rows a task writes where it can score them (an open answer any text metric), and
    a task the list names none of keeps its own."""
    with pytest.raises(
        ParamsError, match=r"06.yaml: metrics: unknown metric 'rouge' \(did you mean 'rouge_l'\?\)"
    ):
        evaluate.EvalConfig.from_params({"metrics": ["rouge"]}, source="06.yaml")
    items = [
        Item(id=f"o{i}", task="vqa.open", question="What is it?", answer=["a cat"])
        for i in range(3)
    ] + [
        Item(id=f"m{i}", task="mcq", question="Which?", options=["cat", "dog"], answer=[0])
        for i in range(3)
    ]
    save_dataset(tmp_path / "d", items, dataset_info("d"))
    replies = ["a cat", "a dog", "cat", "A", "B", "A"]
    preds = [
        Prediction(item_id=it.id, model="m", task=it.task, raw=raw, dataset="d")
        for it, raw in zip(items, replies)
    ]

    def written(metrics: list[str]) -> dict[str, set]:
        cfg = evaluate.EvalConfig(
            datasets={"d": str(tmp_path / "d")}, styles=["zero_shot"], metrics=metrics
        )
        scored, table = rescored(cfg, preds, tmp_path / "06" / "_".join(metrics or ["own"]))
        assert set(scored[0].scores) == set(table[table["task"] == "vqa.open"]["metric"]) - {
            "invalid_rate"
        }  # what each answer keeps is what the rows are made of
        return {t: set(table[table["task"] == t]["metric"]) for t in ("vqa.open", "mcq")}

    mcq = {"invalid_rate", *(f"{m}_{k}" for m in ("exact", "jaccard") for k in ("micro", "macro"))}
    mcq |= {"exact", "jaccard"}  # per question type (these items have none: subset "all")
    assert written([]) == {
        "vqa.open": {"invalid_rate", "exact_match", "anls", "vqa_accuracy"},
        "mcq": mcq,
    }
    assert written(["bleu", "exact_match"]) == {
        "vqa.open": {"invalid_rate", "bleu", "exact_match"},
        "mcq": mcq,
    }
    assert written(["exact"]) == {
        "vqa.open": {"invalid_rate", "exact_match", "anls", "vqa_accuracy"},
        "mcq": {"invalid_rate", "exact_micro", "exact_macro", "exact"},
    }
