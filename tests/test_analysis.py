"""Analysis: deterministic maps and topics, the papers' figures, the real-data reproductions on
../shared/data/yesbut (skipped when absent), and a report that survives missing stages."""

import numpy as np
import pandas as pd
import pytest

from lib.core.paths import ROOT
from lib.families.yesbut import figures
from lib.families.yesbut.collect import collect_yesbut
from lib.families.yesbut.paper import human_eval
from lib.families.yesbut.release import read_yesbut_annotations
from lib.families.yesbut.task import Understanding
from lib.io import artifacts
from lib.pages import embeddings, maps, plots, topics
from lib.pages.report import build_report
from lib.stages import analyze, annotate
from lib.tasks import Results

from .support.data import SHARED_DATA

YESBUT = SHARED_DATA / "yesbut"
needs_yesbut = pytest.mark.needs_data("yesbut")


def test_descriptor_embeddings_separate_what_they_see(images, tmp_path):
    from PIL import Image

    paths = []
    for i, colour in enumerate(["red", "red", "red", "blue", "blue", "blue"]):
        p = tmp_path / f"{i}.png"
        im = Image.new("RGB", (64, 64), colour)
        im.paste(Image.new("RGB", (10 + 5 * i, 10), "white"), (5, 5))
        im.save(p)
        paths.append(p)
    x, name = embeddings.image_embeddings(paths)
    assert name == embeddings.DESCRIPTOR and np.allclose(np.linalg.norm(x, axis=1), 1)
    assert embeddings.separation(x, ["r"] * 3 + ["b"] * 3) > 0.5
    a, b = maps.umap_2d(x, seed=3), maps.umap_2d(x, seed=3)
    assert np.array_equal(a, b)  # a fixed seed gives the same map


def test_a_process_reading_umaps_cached_kernels_draws_the_same_map(tmp_path):
    """lib.pages.maps caches umap-learn's numba kernels on disk: a process started after this one drew a
    map reads them from the cache (compiling none of them) and draws the same map to the bit."""
    import subprocess
    import sys

    from lib.pages.maps import umap_2d

    x = np.random.default_rng(0).normal(size=(12, 8)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    here = umap_2d(x)  # compiled here, or read from the cache an earlier process wrote
    code = (
        "import sys, numpy as np; from lib.pages.maps import umap_2d, umap_module; "
        "np.save(sys.argv[1], umap_2d(np.load(sys.argv[2]))); "
        "s = umap_module().umap_.smooth_knn_dist.stats; print(sum(s.cache_hits.values()), sum(s.cache_misses.values()))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "map.npy"), str(tmp_path / "x.npy")],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.stdout.split() == ["1", "0"], (
        f"smooth_knn_dist not read from the cache (hits, misses): {r.stdout}"
    )
    assert np.array_equal(np.load(tmp_path / "map.npy"), here)


def test_clip_embeddings_from_a_local_checkpoint(tmp_path, images):
    from transformers import CLIPConfig, CLIPModel
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    cfg = CLIPConfig(
        text_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "vocab_size": 99,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    CLIPModel(cfg).save_pretrained(tmp_path / "clip")
    CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(tmp_path / "clip")
    x, name = embeddings.image_embeddings(images, clip_model=str(tmp_path / "clip"))
    assert (
        x.shape == (len(images), 16)
        and "CLIP" in name
        and np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-5)
    )


def test_report_survives_missing_stages(tmp_path, monkeypatch):
    from lib.core.paths import stage_dir

    folder = stage_dir("report-partial", "02_annotate")
    store = annotate.AnnotationStore(folder / "annotations.jsonl")
    store.save("a", "ana", {"difficulty": "EASY"})
    store.save("a", "ben", {"difficulty": "EASY"})
    annotate.agreement(store).to_csv(folder / "agreement.csv", index=False)
    fig, _ = figures.yesbut_fig3({"difficulty": pd.Series({"EASY": 1, "MEDIUM": 0, "HARD": 0})})
    plots.save(fig, folder / "figures", "fig3")
    report = build_report("report-partial")
    page = report.read_text()
    assert "data:image/png;base64," in page  # self-contained
    assert (
        page.count("Absent") == 7 and "03_adversarial_filter" in page
    )  # every other stage says why
    assert "Agreement per categorical field" in page


@needs_yesbut
def test_human_eval_tidy_table_and_figure14():
    tidy = human_eval(YESBUT / "Human_Eval_Results.csv")
    assert len(tidy) == 30 * 6 * 4
    assert set(tidy["source"]) == {
        "humanannotation",
        "gpt4vision",
        "gemini",
        "llava",
        "kosmos",
        "minigpt",
    }
    assert tidy.groupby(["source", "criterion"]).size().eq(30).all()
    raw = pd.read_csv(YESBUT / "Human_Eval_Results.csv")
    first = raw.iloc[0]
    order = eval(first["order_of_overall_img_descriptions"])  # noqa: S307 - the file's own list literal
    i = order.index("humanannotation") + 1
    row = tidy[
        (tidy["image"] == first["image_filename"])
        & (tidy["source"] == "humanannotation")
        & (tidy["criterion"] == "correctness")
    ]
    assert bool(row["yes"].iloc[0]) == isinstance(first[f"correctness_{i}"], str)
    fig, ax = figures.human_eval_bars(tidy)
    assert len(ax.patches) == 6 * 4


@needs_yesbut
def test_topics_of_the_half_descriptions_are_deterministic():
    halves = read_yesbut_annotations(YESBUT / "YesBut_Stage2_Annotation.csv").values()
    docs = [h[k] for h in list(halves)[:120] for k in ("left_description", "right_description")]
    info, ids = topics.topics(docs, seed=0, min_topic_size=8)
    again, ids2 = topics.topics(docs, seed=0, min_topic_size=8)
    assert ids == ids2 and info.equals(again)
    assert (info["Topic"] >= 0).sum() >= 2 and info["Count"].sum() == len(docs)
    assert (
        all(w.strip() for words in info["Words"] for w in words.split(","))
        and not info["Name"].str.contains("__").any()
    )


@needs_yesbut
def test_umap_of_the_sample_images_by_half_style():
    recs, _ = collect_yesbut(YESBUT, progress=False)
    gen = [r for r in recs if r.stage in (3, 4)]
    meta = pd.DataFrame([r.to_dict() for r in gen])
    meta["style"] = meta["left_style"] + "|" + meta["right_style"]
    x, name = embeddings.image_embeddings(meta["path"])
    coords = maps.umap_2d(x, seed=0)
    assert coords.shape == (len(gen), 2) and np.array_equal(coords, maps.umap_2d(x, seed=0))
    score = embeddings.separation(x, meta["left_style"])
    assert -1 <= score <= 1
    fig, ax = plots.embedding_map(
        embeddings.embedding_frame(coords, meta[["style"]]),
        "style",
        "YesBut stages 3-4",
        name,
        score,
    )
    assert embeddings.DESCRIPTOR in ax.get_title()


def test_report_escapes_every_value_it_embeds(tmp_path):
    """Names and values from a run's outputs are text, never markup (a dataset called <script>...)."""
    import json

    from lib.core.paths import stage_dir

    evil = "<script>alert(1)</script>"
    folder = stage_dir("report-escape", "04_scrapbook")
    (folder / "summary.json").write_text(
        json.dumps({"datasets": {evil: {"images": 1, "questions": 2}}})
    )
    (folder / "provenance.json").write_text(
        json.dumps({"created": evil, "git": {"sha": evil}, "params": {"x": evil}})
    )
    setup = stage_dir("report-escape", "00_setup")
    (setup / "summary.json").write_text(
        json.dumps(
            {"probe_answers": 1, "models": 1, "constrained_invalid": 0, "datasets": {evil: "x"}}
        )
    )
    pd.DataFrame([{"model": evil, "raw": evil}]).to_csv(setup / "probe.csv", index=False)
    page = build_report("report-escape").read_text()
    assert evil not in page and "&lt;script&gt;" in page


def test_report_tables_have_readable_headers_and_no_coordinate_dumps(tmp_path):
    from lib.core.paths import stage_dir

    metrics = pd.DataFrame(
        {
            "model": ["trained", "trained", "untrained"],
            "style": ["cot", "zero_shot", "cot"],
            "dataset": ["sb"] * 3,
            "filter": ["full"] * 3,
            "accuracy": [0.4, 0.36, 0.0],
        }
    )
    pivot = metrics.pivot_table(
        index=["dataset", "filter"], columns=["model", "style"], values="accuracy"
    )
    flat = analyze.tidy_table(pivot)
    assert list(flat.columns) == [
        "dataset",
        "filter",
        "trained / cot",
        "trained / zero_shot",
        "untrained / cot",
    ]
    tables = stage_dir("report-tables", "07_analyze") / "tables"
    tables.mkdir(parents=True)
    flat.to_csv(tables / "table8_overall.csv", index=False)
    pd.DataFrame({"x": [1.25], "y": [2.5], "id": ["img-1"]}).to_csv(
        tables / "umap_images.csv", index=False
    )
    page = build_report("report-tables").read_text()
    assert "trained / zero_shot" in page and "table8 overall" in page
    assert "Unnamed" not in page and "trained.1" not in page
    assert "umap images" not in page and "img-1" not in page


def test_yesbut_understanding_tables_and_figure5_as_the_paper_draws_them():
    rows = []
    for model, base in (("a", 0.2), ("b", 0.4)):
        for subset, bump in (
            ("whole", 0.0),
            ("whole/stage 2", 0.1),
            ("whole/stage 3", 0.0),
            ("left/stage 2", 0.05),
            ("right/stage 2", 0.05),
            ("whole/difficulty HARD", -0.1),
            ("whole/text Y", 0.05),
        ):
            for metric in (
                "bleu_corpus",
                "rouge_l",
                "meteor",
                "bertscore (all-MiniLM-L6-v2)",
                "cider",
                "bleu",
            ):
                rows.append(
                    {
                        "model": model,
                        "task": "yesbut.understanding",
                        "style": "zero_shot",
                        "subset": subset,
                        "metric": metric,
                        "value": 5.0 if metric == "cider" else base + bump,
                    }
                )
    metrics = pd.DataFrame(rows)
    frame = Understanding().frame(metrics)
    assert set(frame["metric"]) == {
        "bleu_corpus",
        "rouge_l",
        "meteor",
        "bertscore",
        "mean of 4",
    }  # CIDEr (0-10) left out
    mean = frame[(frame["metric"] == "mean of 4") & (frame["subset"] == "whole/stage 2")].set_index(
        "model"
    )["value"]
    assert mean.to_dict() == pytest.approx({"a": 0.3, "b": 0.5})
    tables = Understanding().paper(Results(metrics))
    assert set(tables) == {
        "table6_understanding_by_stage",
        "table7_understanding_by_difficulty",
        "table8_understanding_by_text",
        "yesbut_fig5_understanding",  # its figure beside its tables
    }
    t6 = analyze.tidy_table(tables["table6_understanding_by_stage"])
    assert {"model", "prompt", "group", "mean of 4"} <= set(t6.columns) and set(t6["group"]) == {
        "all",
        "stage 2",
        "stage 3",
    }
    assert analyze.tidy_table(tables["table7_understanding_by_difficulty"])[
        "difficulty"
    ].tolist() == ["HARD", "HARD"]
    fig, ax = figures.understanding_metrics(frame)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["stage 2", "stage 3", "all"]
    assert ax.get_ylim() == (0, 1)


def test_the_stage_steps_on_a_run_without_earlier_stages_return_nothing_to_draw():
    import json

    from lib.core.paths import stage_dir

    out = stage_dir("steps-bare", "07_analyze")
    cfg = analyze.AnalyzeConfig()
    assert analyze.image_map(cfg, out) == (None, {})
    answers, drawn = analyze.answer_map(cfg, out)
    assert answers == [] and drawn == (None, None)
    found, drawn = analyze.topic_model(cfg, out, answers)
    assert found["table"] is None and found["topics"].startswith("none: ") and drawn == (None, None)
    assert analyze.data_figures(cfg, out) == {} and analyze.result_tables(cfg, out) == ({}, {})
    summary = analyze.finish(cfg, out, None, answers, found, {})
    assert json.loads((out / "summary.json").read_text()) == {
        k: v for k, v in summary.items() if k != "report"
    }
    assert summary["tables"] == [] and (out.parent / "report.html").exists()


def test_a_figure_step_saves_and_returns_each_figure_and_its_axes():
    from lib.core.paths import stage_dir

    af = stage_dir("steps-af", "03_adversarial_filter")
    pd.DataFrame(
        {"iteration": [1, 2], "discriminator_accuracy": [0.8, 0.5], "fooled": [3, 6]}
    ).to_csv(af / "iterations.csv", index=False)
    out = stage_dir("steps-af", "07_analyze")
    drawn = analyze.data_figures(analyze.AnalyzeConfig(), out)
    assert list(drawn) == ["af_iterations"]
    fig, ax = drawn["af_iterations"]
    assert ax.figure is fig and ax.get_xlabel() == "iteration"
    assert (out / "figures" / "af_iterations.png").exists() and (
        out / "figures" / "af_iterations.pdf"
    ).exists()


def test_topics_are_named_by_words_of_readable_texts_only():
    """A tiny model's garbled answers are left out and counted; a topic's name is made of words
    that occur in the texts it summarises."""
    words = [
        "cat sits on a red mat",
        "a black cat sleeping",
        "the cat chases a mouse",
        "a kitten and a cat play",
        "a dog runs in the park",
        "the dog barks loudly",
        "a brown dog fetches a stick",
        "two dogs in the grass",
        "a ship sails at sea",
        "the boat crosses the ocean",
        "a sailing ship in a storm",
        "boats in the harbour",
    ]
    garbled = ["rddddddddddddhow", "14ionale hexagon0hinddescri", "xqzv wpt krrr"]
    readable, dropped = topics.readable_texts(words * 2 + garbled)
    assert dropped == len(garbled) and readable == words * 2
    info, ids = topics.topics(readable, seed=0, min_topic_size=4)
    for topic, name in zip(info["Topic"], info["Name"]):
        docs = " ".join(t for t, i in zip(readable, ids) if i == topic).lower()
        assert all(w in docs for w in name.split("_")[1:]), (name, docs)


def test_the_training_bars_have_labels_that_do_not_overlap():
    """Stage 05's figure: trained vs base vs majority per question type and target kind."""
    kinds = [
        "accuracy",
        "accuracy_counting",
        "accuracy_counting_color",
        "accuracy_counting_shape",
        "accuracy_presence",
        "accuracy_presence_color",
        "accuracy_presence_shape",
        "macro",
    ]
    table = pd.DataFrame({k: [0.6, 0.0, 0.7] for k in kinds}, index=["majority", "base", "trained"])
    fig, ax = plots.accuracy_bars(table)
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.get_xticklabels()]
    assert [t.get_text() for t in ax.get_xticklabels()][:3] == [
        "all",
        "counting",
        "counting\ncolor",
    ]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


# --- stage 07 compares the run with another (compare_with) --------------------------------------


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """Stage 06 of two runs differing in a model, a prompt and a scoring rule
    (:mod:`tests.support.pairs`), and 07's comparison step and finish on the second."""
    from tests.support.pairs import evaluate_pair

    base, new = evaluate_pair(tmp_path_factory.mktemp("pair"), "cmp-base", "cmp-new")
    out = new / "07_analyze"
    cfg = analyze.AnalyzeConfig(compare_with="cmp-base")
    result = analyze.comparison(cfg, out)
    summary = analyze.finish(cfg, out, None, [], {"topics": "none"}, {}, result)
    return base, new, result, summary


def test_compare_with_defaults_to_none_and_is_a_params_field():
    assert analyze.AnalyzeConfig().compare_with is None
    assert (
        analyze.AnalyzeConfig.from_params({"compare_with": "baseline"}).compare_with == "baseline"
    )


def test_stage_07_writes_the_comparison_tables_of_the_two_runs(compared):
    from lib.compare.explain import compare
    from tests.support.pairs import CAUSE_OF_MODEL, CHANGED_KEYS, direction

    base, new, result, summary = compared
    expected = compare(base / "06_evaluate", new / "06_evaluate")  # the engine itself, no prompts
    folder = new / "07_analyze" / "comparison"
    causes = pd.read_csv(folder / "causes.csv").set_index("cause")
    for cause in ("prompt", "model", "reading", "scoring"):
        items = [it for it in expected["items"] if it["cause"] == cause]
        assert causes.loc[cause, "items"] == len(items) == expected["causes"][cause]["items"]
        for change in ("improved", "worsened", "mixed", "same scores"):
            assert causes.loc[cause, change] == sum(
                direction(it["A"], it["B"]) == change for it in items
            ), (cause, change)
    assert causes.loc["model", "improved"] > 0 and causes.loc["model", "worsened"] > 0
    assert causes.loc["prompt", "because"] == f"image order ({causes.loc['prompt', 'items']})"
    assert {
        it["group"][2]: it["cause"] for it in expected["items"]
    } == CAUSE_OF_MODEL  # one cause per model
    metrics = pd.read_csv(folder / "metrics.csv")
    assert len(metrics) == len(expected["metrics"])
    head = metrics[metrics["headline"]]
    assert dict(zip(head["task"], head["metric"])) == {
        "mcq": "exact",
        "scrapbook.qa": "correct",
        "vqa.open": "vqa_accuracy",
    }
    assert len(head) == 9  # one per dataset x model
    for m, (_, row) in zip(expected["metrics"], metrics.iterrows()):
        assert [row[d] for d in ("dataset", "task", "model", "style")] == m["group"] and row[
            "metric"
        ] == m["metric"]
        assert (row["A"], row["B"], row["difference"]) == pytest.approx(
            (m["A"], m["B"], m["difference"])
        )
        # one image (chain) has no interval over images: NaN in both
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            (m["ci_low"], m["ci_high"]), nan_ok=True
        )
        assert row["n_clusters"] == m["n_clusters"] <= row["n"]
        assert (pd.isna(row["mcnemar_p"]) and m["mcnemar_p"] is None) or row[
            "mcnemar_p"
        ] == pytest.approx(m["mcnemar_p"])
    config = pd.read_csv(folder / "config.csv")
    assert set(config["key"]) == CHANGED_KEYS
    assert config.set_index("key").loc["models.r.seed", ["A", "B"]].tolist() == ["0", "1"]
    assert summary["comparison"]["changed"] == expected["changed"] == result["changed"] > 0


def test_the_changed_items_carry_both_prompts(compared):
    import json

    _, new, result, _ = compared
    items = [
        json.loads(line)
        for line in (new / "07_analyze" / "comparison" / "items.jsonl").read_text().splitlines()
    ]
    assert len(items) == result["changed"] and all(
        it["prompt"]["A"] and it["prompt"]["B"] for it in items
    )
    for it in items:
        a, b = it["prompt"]["A"].splitlines(), it["prompt"]["B"].splitlines()
        if (
            it["cause"] == "prompt"
        ):  # model q got its question first in run B: the same lines, the image moved
            assert a[0] == "[image 1]" and b[0] != "[image 1]" and sorted(a) == sorted(b)
        else:
            assert a == b


def test_the_report_has_a_comparison_section_linked_to_the_browser(compared):
    base, new, result, _ = compared
    page = (new / "report.html").read_text()
    assert "<h2 id='comparison'>Compared with cmp-base</h2>" in page
    assert f"{result['paired']} answers paired, {result['changed']} changed" in page
    assert 'href="browser/index.html#cause=model&amp;change=worsened"' in page
    assert "models.q.question_first" in page and "p (Holm; BH)" in page and "verdict" in page
    assert (
        page.index("id='results'") < page.index("id='comparison'") < page.index("id='reproduction'")
    )
    index = (new / "browser" / "index.html").read_text()
    assert "Compared with <b>cmp-base</b>" in index and '"change"' in index and '"cause"' in index


def test_a_comparison_opens_only_in_the_browser_of_its_run_b(compared):
    from lib.pages.browser import write_browser

    base, _, result, _ = compared
    with pytest.raises(
        ValueError, match="the comparison's run B is .*cmp-new.*not this run's .*cmp-base"
    ):
        write_browser(base, result)


def test_without_compare_with_stage_07_compares_nothing_and_drops_an_earlier_comparison(compared):
    _, new, _, _ = compared
    out = new / "07_analyze"
    cfg = analyze.AnalyzeConfig()
    assert analyze.comparison(cfg, out) is None and not (out / "comparison").exists()
    summary = analyze.finish(cfg, out, None, [], {"topics": "none"}, {})
    assert summary["comparison"] is None
    assert "id='comparison'" not in (new / "report.html").read_text()
    assert "Compared with" not in (new / "browser" / "index.html").read_text()
    again = analyze.AnalyzeConfig(compare_with="cmp-base")  # as the other tests found it
    analyze.finish(again, out, None, [], {"topics": "none"}, {}, analyze.comparison(again, out))


def test_a_run_to_compare_with_that_is_not_there_is_named():
    from lib.compare.explain import CompareError
    from lib.core.paths import stage_dir

    with pytest.raises(CompareError, match="run 'nobody'.*run stage 06"):
        analyze.comparison(
            analyze.AnalyzeConfig(compare_with="nobody"), stage_dir("cmp-lonely", "07_analyze")
        )


def test_the_report_shows_the_trained_models_margins_over_both_baselines():
    from lib.core.paths import stage_dir
    from lib.io import write_json

    accuracy = {"accuracy": 0.7, "accuracy_presence": 0.8}
    margins = [
        {"type": "presence", "over": over, "margin": 0.2694, "ci_low": 0.2184, "ci_high": 0.318}
        for over in ("majority", "blank")
    ]
    write_json(
        stage_dir("report-margins", artifacts.TRAIN) / artifacts.SUMMARY,
        {**{k: accuracy for k in artifacts.TRAIN_SYSTEMS}, "n_test": 1000, "margins": margins},
    )
    page = build_report("report-margins").read_text()
    section = page.split("margin over the majority answer and over itself asked about blank")[1]
    assert section.count("<td>presence</td>") == 2 and "<td>0.218</td>" in section
    assert "<td>blank</td>" in section and "<td>majority</td>" in section
