# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Analyze
# > Maps of image and text embeddings (UMAP / t-SNE, with a separation score), BERTopic topics, the
# > papers' figures and tables from the earlier stages' outputs, and the run's HTML report.
#
# **Inputs:** whatever `outputs/<run>/0N_*` holds (absent stages are reported, not fatal) · **Outputs:**
# `outputs/<run>/07_analyze/` (figures/, tables/) and `outputs/<run>/report.html`

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # UMAP, t-SNE and BERTopic seeds
clip_model: str = ""  # a CLIP hub id or local path; empty: the colour + HOG descriptor stands in
yesbut_data: str = ""  # a YesBut repository folder for the real-data reproductions (Fig. 3, 4, 14, topics)
min_topic_size: int = 5  # BERTopic
topic_labeler: dict = {}  # any LLM spec to write topic labels ({} for none)

# %%
import json
from pathlib import Path

import pandas as pd
from IPython.display import display

from lib import analysis, annotate, collect, plots
from lib.io import read_jsonl
from lib.paths import run_dir, stage_dir
from lib.provenance import write_provenance
from lib.report import build_report

out = stage_dir(run, "07_analyze")
figures, tables = out / "figures", out / "tables"
tables.mkdir(parents=True, exist_ok=True)
root = run_dir(run)
have = {s: (root / s).is_dir() for s in ("01_collect", "02_annotate", "03_adversarial_filter", "04_scrapbook",
                                          "05_train", "06_evaluate")}
have

# %% [markdown]
# ## Image map (YesBut Figure 4): collected images and style variants

# %%
images = []
if have["01_collect"]:
    images += list(read_jsonl(root / "01_collect" / "manifest.jsonl"))
if have["02_annotate"] and (root / "02_annotate" / "variants.jsonl").exists():
    images += list(read_jsonl(root / "02_annotate" / "variants.jsonl"))
if yesbut_data:
    images += [r.to_dict() for r in collect.collect_yesbut(yesbut_data, progress=False)[0]]
if len(images) >= 4:
    meta = pd.DataFrame(images)
    meta["style"] = meta["left_style"].fillna("photo") + "|" + meta["right_style"].fillna("photo")
    meta["label"] = meta["label"].fillna("unlabelled")
    meta["stage"] = meta["stage"].fillna(0).astype(int).astype(str)
    x, embedding = analysis.image_embeddings(meta["path"], clip_model)
    frame = analysis.embedding_frame(analysis.umap_2d(x, seed=seed), meta[["id", "style", "label", "stage"]])
    frame.to_csv(tables / "umap_images.csv", index=False)
    scores = {c: analysis.separation(x, meta[c]) for c in ("style", "label", "stage")}
    for c in ("style", "label", "stage"):
        fig, _ = plots.embedding_map(frame, c, f"images by {c}", embedding, scores[c])
        plots.save(fig, figures, f"umap_images_by_{c}")
    pd.Series(scores, name="silhouette").to_frame().to_csv(tables / "image_separation.csv")
    display(pd.Series(scores, name=f"silhouette ({embedding})"))

# %% [markdown]
# ## Generated vs reference answers (the Docmatix post's Figure 1)

# %%
answers = []
if have["06_evaluate"] and (root / "06_evaluate" / "predictions.jsonl").exists():
    predictions = [p for p in read_jsonl(root / "06_evaluate" / "predictions.jsonl")
                   if p["task"] in ("vqa.open", "yesbut.understanding") and p["valid"]]
    config = json.loads((root / "06_evaluate" / "config.json").read_text())
    from lib.io import load_items  # noqa: E402

    refs = {it.id: it.answer for folder in config["datasets"].values() for it in load_items(folder)
            if it.task in ("vqa.open", "yesbut.understanding")}
    answers = [{"text": p["raw"], "kind": f"generated ({p['model']})", "task": p["task"]} for p in predictions]
    answers += [{"text": r, "kind": "reference", "task": "reference"} for rs in refs.values() for r in dict.fromkeys(rs)]
if len(answers) >= 6:
    texts = pd.DataFrame(answers)
    xt = analysis.text_embeddings(texts["text"])
    tframe = analysis.embedding_frame(analysis.tsne_2d(xt, seed=seed), texts[["kind", "task"]])
    fig, _ = plots.embedding_map(tframe, "kind", "answers: generated vs reference (t-SNE)", "all-MiniLM-L6-v2",
                                 analysis.separation(xt, texts["kind"].str.startswith("generated")))
    plots.save(fig, figures, "tsne_answers")

# %% [markdown]
# ## Topics (BERTopic on descriptions, answers and LAVE rationales)

# %%
docs = []
if have["02_annotate"]:
    ann = annotate.AnnotationStore(root / "02_annotate" / "annotations.jsonl").latest()
    docs += [v for f, v in zip(ann["field"], ann["value"]) if f.endswith("description")]
if yesbut_data:
    halves = collect.read_yesbut_annotations(Path(yesbut_data) / "YesBut_Stage2_Annotation.csv").values()
    docs += [h[k] for h in halves for k in ("left_description", "right_description")]
docs += [a["text"] for a in answers]
if have["06_evaluate"] and (root / "06_evaluate" / "judgements.jsonl").exists():
    docs += [j["rationale"] for j in read_jsonl(root / "06_evaluate" / "judgements.jsonl") if j["rationale"]]
docs = [d for d in docs if isinstance(d, str) and d.strip()]
try:
    info, assigned = analysis.topics(docs, seed=seed, min_topic_size=min_topic_size)
    if topic_labeler:
        from lib.models import load_model  # noqa: E402

        info["Label"] = analysis.label_topics(load_model(topic_labeler), info)
    info.to_csv(tables / "topics.csv", index=False)
    fig, _ = plots.topic_sizes(info)
    plots.save(fig, figures, "topic_sizes")
    display(info)
except ValueError as e:
    print(f"no topics: {e}")

# %% [markdown]
# ## The papers' figures and tables

# %%
if have["02_annotate"]:
    human = annotate.AnnotationStore(root / "02_annotate" / "annotations.jsonl").table().drop_duplicates("item")
    needed = ["text_in_left", "text_in_right", "connected", "difficulty"]
    if set(needed) <= set(human.columns):
        fig, _ = plots.yesbut_fig3(annotate.figure3_counts(human.dropna(subset=needed)))
        plots.save(fig, figures, "yesbut_fig3_demo_annotations")
if yesbut_data:
    table = pd.DataFrame(collect.read_yesbut_annotations(Path(yesbut_data) / "YesBut_Stage2_Annotation.csv").values())
    fig, _ = plots.yesbut_fig3(annotate.figure3_counts(table))
    plots.save(fig, figures, "yesbut_fig3")
    if (Path(yesbut_data) / "Human_Eval_Results.csv").exists():
        fig, _ = plots.human_eval_bars(analysis.human_eval(Path(yesbut_data) / "Human_Eval_Results.csv"))
        plots.save(fig, figures, "yesbut_fig14_human_eval")
if have["03_adversarial_filter"] and (root / "03_adversarial_filter" / "iterations.csv").exists():
    fig, _ = plots.af_curves(pd.read_csv(root / "03_adversarial_filter" / "iterations.csv"))
    plots.save(fig, figures, "af_iterations")
if have["06_evaluate"] and (root / "06_evaluate" / "metrics.csv").exists():
    metrics = pd.read_csv(root / "06_evaluate" / "metrics.csv")
    for name, df in analysis.yesbut_tables(metrics).items():
        df.to_csv(tables / f"{name}.csv")
        display(df)
    if (metrics["task"] == "yesbut.understanding").any():
        fig, _ = plots.understanding_metrics(metrics)
        plots.save(fig, figures, "yesbut_fig5_understanding")
    if (metrics["task"] == "mcq").any():
        fig, _ = plots.accuracy_by_type(metrics)
        plots.save(fig, figures, "memeqa_accuracy_by_type")
    errors = pd.read_csv(root / "06_evaluate" / "errors.csv")
    levels = pd.read_csv(root / "06_evaluate" / "levels.csv")
    for name, df in analysis.scrapbook_tables(errors, levels).items():
        df.to_csv(tables / f"{name}.csv")
        display(df)
    for (dataset, model, style), lv in levels.groupby(["dataset", "model", "style"]):
        if style == "zero_shot" and (lv["level"] == 1).any():
            fig, _ = plots.scrapbook_level1(lv)
            plots.save(fig, figures, f"scrapbook_level1_{dataset}_{model}")

# %% [markdown]
# ## Report

# %%
write_provenance(out, "07_analyze", {"run": run, "clip_model": clip_model, "yesbut_data": yesbut_data,
                                     "min_topic_size": min_topic_size}, seed)
report = build_report(run)
print(f"report: {report}")
