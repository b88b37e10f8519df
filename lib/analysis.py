"""Stage 07 · Analyze: image and text embeddings, UMAP maps with a separation score, BERTopic
topics, and the tidy tables the papers' figures are drawn from.

**Image embeddings**: CLIP image features through transformers (any CLIP hub id or local path).
Where no CLIP weights exist (offline, as on the project's own machines) :func:`descriptor_embeddings`
stands in - a colour histogram (HSV) and a gradient-orientation histogram (HOG, scikit-image) per
image - and every map says which embedding it shows. **Text embeddings**: all-MiniLM-L6-v2
(sentence-transformers). **UMAP** (umap-learn) and BERTopic run with fixed seeds, so the same inputs
give the same coordinates and topics.

    run(AnalyzeConfig(), out)                              # what notebook 07 does, report.html included
    python -m lib.analysis --profile demo          # -> outputs/demo/07_analyze

It reads every earlier stage's outputs through :mod:`lib.artifacts` (a stage that did not run is
skipped, and the report says so) and writes ``tables/``, ``figures/``, ``summary.json``,
``provenance.json`` and the run's ``report.html``.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from lib import artifacts as A
from lib import config, plots
from lib.io import AnnotationStore, load_image, load_items, read_yesbut_annotations
from lib.metrics import shortcuts
from lib.models import load_model
from lib.report import build_report
from lib.schema import DIFFICULTY
from lib.tasks import TASKS

DESCRIPTOR = "colour + HOG descriptor (no CLIP weights)"


# --- embeddings ------------------------------------------------------------------------------------

def descriptor_embeddings(paths, size: int = 96) -> np.ndarray:
    """Hand-made image descriptor (L2-normalised): an 8x4x4 HSV colour histogram and a 9-bin HOG
    orientation histogram pooled over the image. It sees colour and texture, not meaning: a stand-in
    so maps can be drawn without CLIP weights."""
    from skimage.feature import hog

    rows = []
    for p in paths:
        image = load_image(p).resize((size, size))
        hsv = np.asarray(image.convert("HSV"), dtype=float) / 256
        colour, _ = np.histogramdd(hsv.reshape(-1, 3), bins=(8, 4, 4), range=((0, 1),) * 3)
        gray = np.asarray(image.convert("L"), dtype=float) / 255
        grad = hog(gray, orientations=9, pixels_per_cell=(16, 16), cells_per_block=(1, 1), feature_vector=True)
        grad = grad.reshape(-1, 9).mean(axis=0)
        v = np.concatenate([colour.ravel() / colour.sum(), grad / (grad.sum() or 1)])
        rows.append(v / (np.linalg.norm(v) or 1))
    return np.asarray(rows)


def clip_embeddings(paths, model: str, batch_size: int = 32) -> np.ndarray:
    """CLIP image features (L2-normalised) from any CLIP checkpoint (hub id or local folder)."""
    import torch
    from transformers import CLIPModel
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    try:
        clip = CLIPModel.from_pretrained(model).eval()
        processor = CLIPImageProcessorPil.from_pretrained(model)
    except OSError as e:
        raise OSError(f"cannot load the CLIP model {model!r}: {e}. A hub id needs the network (or a prior "
                      f"download); leave clip_model empty to use the {DESCRIPTOR}.") from e
    out = []
    with torch.no_grad():
        for i in range(0, len(paths), batch_size):
            images = [load_image(p) for p in paths[i:i + batch_size]]
            pixels = processor(images=images, return_tensors="pt")["pixel_values"]
            feats = clip.get_image_features(pixel_values=pixels)
            feats = getattr(feats, "pooler_output", feats)
            out.append(torch.nn.functional.normalize(feats, dim=-1).numpy())
    return np.concatenate(out)


def image_embeddings(paths, clip_model: str = "") -> tuple[np.ndarray, str]:
    """(embeddings, name of the embedding): CLIP when ``clip_model`` is given, else the descriptor."""
    if clip_model:
        return clip_embeddings(list(paths), clip_model), f"CLIP image features ({clip_model})"
    return descriptor_embeddings(list(paths)), DESCRIPTOR


def text_embeddings(texts, model: str | None = None) -> np.ndarray:
    """Sentence embeddings (normalised); default all-MiniLM-L6-v2 from its PyPI package."""
    from lib.models.tiny import sentence_encoder

    return sentence_encoder(model).encode(list(texts), normalize_embeddings=True, show_progress_bar=False)


# --- maps ----------------------------------------------------------------------------------------

def umap_2d(x: np.ndarray, seed: int = 0, n_neighbors: int = 15, metric: str = "cosine") -> np.ndarray:
    """2-D UMAP coordinates with a fixed random state (deterministic: umap-learn then runs single-threaded)."""
    import umap

    if len(x) < 4:
        raise ValueError(f"a UMAP map needs at least 4 points, got {len(x)}")
    reducer = umap.UMAP(n_components=2, n_neighbors=max(2, min(n_neighbors, len(x) - 1)), metric=metric,
                        random_state=seed, init="random" if len(x) < 10 else "spectral")
    return reducer.fit_transform(x)


def tsne_2d(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D t-SNE (scikit-learn), as in the Docmatix post's Figure 1."""
    from sklearn.manifold import TSNE

    return TSNE(n_components=2, perplexity=max(2.0, min(30.0, (len(x) - 1) / 3)), random_state=seed,
                init="random").fit_transform(x)


def separation(x: np.ndarray, labels) -> float:
    """Silhouette score (scikit-learn, cosine) of ``labels`` in the embedding space: 1 = well separated
    groups, 0 = overlapping, < 0 = mixed. NaN with fewer than two groups."""
    from sklearn.metrics import silhouette_score

    labels = np.asarray([str(v) for v in labels])
    if len(set(labels)) < 2 or len(set(labels)) >= len(labels):
        return float("nan")
    return float(silhouette_score(x, labels, metric="cosine"))


def embedding_frame(coords: np.ndarray, meta: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([pd.DataFrame(coords, columns=["x", "y"]), meta.reset_index(drop=True)], axis=1)


# --- topics --------------------------------------------------------------------------------------

def topics(texts, seed: int = 0, min_topic_size: int = 5, embeddings: np.ndarray | None = None):
    """BERTopic with MiniLM embeddings, a seeded UMAP and HDBSCAN: ``(topic_info, per-text topic ids)``.
    ``topic_info`` has Topic, Count, Name and the representative words; topic -1 is BERTopic's outliers."""
    from bertopic import BERTopic
    from hdbscan import HDBSCAN
    from sklearn.feature_extraction.text import CountVectorizer
    from umap import UMAP

    from lib.models.tiny import sentence_encoder

    texts = [str(t) for t in texts]
    if len(texts) < 2 * min_topic_size:
        raise ValueError(f"BERTopic needs at least {2 * min_topic_size} texts for topics of >= {min_topic_size}, "
                         f"got {len(texts)}")
    encoder = sentence_encoder()
    if embeddings is None:
        embeddings = encoder.encode(texts, normalize_embeddings=True, show_progress_bar=False)
    model = BERTopic(embedding_model=encoder,
                     umap_model=UMAP(n_neighbors=max(2, min(15, len(texts) - 1)), n_components=5, min_dist=0.0,
                                     metric="cosine", random_state=seed),
                     hdbscan_model=HDBSCAN(min_cluster_size=min_topic_size, metric="euclidean",
                                           cluster_selection_method="eom", prediction_data=True),
                     vectorizer_model=CountVectorizer(stop_words="english", min_df=1),
                     min_topic_size=min_topic_size, calculate_probabilities=False)
    ids, _ = model.fit_transform(texts, embeddings)
    info = model.get_topic_info()
    words = [[w for w, _ in (model.get_topic(t) or []) if w.strip()][:8] for t in info["Topic"]]
    info["Words"] = [", ".join(w) for w in words]  # BERTopic pads short topics with empty words: dropped
    info["Name"] = [f"{t}_" + "_".join(w[:3]) for t, w in zip(info["Topic"], words)]
    return info[["Topic", "Count", "Name", "Words"]], list(ids)


def tidy_table(df: pd.DataFrame) -> pd.DataFrame:
    """A pivoted table as flat columns a reader (and a CSV) keeps: the index as columns, and
    column levels joined ("trained / zero_shot") instead of stacked header rows."""
    out = df.copy()
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = [" / ".join(str(x) for x in col if str(x) != "") for col in out.columns]
    else:
        out.columns = [str(c) for c in out.columns]
    out.columns.name = None
    return out.reset_index() if not isinstance(out.index, pd.RangeIndex) else out


def label_topics(model, info: pd.DataFrame, store=None, max_new_tokens: int = 12) -> list[str]:
    """A short label per topic written by any LLM backend from its representative words."""
    from lib.models import Request, generate

    reqs = [Request.simple(f"Give a short label (at most five words) for a topic described by these words: {w}.",
                           max_new_tokens=max_new_tokens) for w in info["Words"]]
    return [r.text.strip().splitlines()[0] if r.text.strip() else "" for r in generate(model, reqs, store=store, progress=False)]


# --- tidy tables for the papers' figures -------------------------------------------------------------

HUMAN_CRITERIA = ("correctness", "appropriate_length", "visual_completeness", "faithfulness")


def human_eval(csv_path: str | Path) -> pd.DataFrame:
    """YesBut's Human_Eval_Results.csv as tidy rows (image, source, criterion, yes): description i of an
    image was written by the i-th entry of ``order_of_overall_img_descriptions``; a non-empty cell = yes."""
    raw = pd.read_csv(csv_path)
    rows = []
    for _, r in raw.iterrows():
        order = ast.literal_eval(r["order_of_overall_img_descriptions"])
        for i, source in enumerate(order, start=1):
            for c in HUMAN_CRITERIA:
                v = r[f"{c}_{i}"]
                rows.append({"image": r["image_filename"], "source": source, "criterion": c,
                             "yes": bool(isinstance(v, str) and v.strip())})
    return pd.DataFrame(rows)


def yesbut_tables(metrics: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """YesBut Tables 3 (detection accuracy / F1) and 4 (completion accuracy), zero-shot vs CoT, from
    06's metrics.csv; values with their 95% intervals."""
    out = {}
    for name, task, keep in (("table3_detection", "yesbut.detection", ["accuracy", "f1"]),
                             ("table4_completion", "yesbut.completion", ["accuracy"])):
        m = metrics[(metrics["task"] == task) & (metrics["metric"].isin(keep)) & (metrics["subset"] == "all")].copy()
        if m.empty:
            continue
        m["cell"] = [f"{v:.3f} [{lo:.2f}, {hi:.2f}]" for v, lo, hi in zip(m["value"], m["ci_low"], m["ci_high"])]
        out[name] = m.pivot_table(index="model", columns=["metric", "style"], values="cell", aggfunc="first")
    return out


UNDERSTANDING_METRICS = ("bleu_corpus", "rouge_l", "meteor", "bertscore")  # the paper's four (5.3)


def understanding_frame(metrics: pd.DataFrame, style: str = "zero_shot") -> pd.DataFrame:
    """YesBut understanding rows as the paper reads them (zero-shot, its four metrics): model,
    subset, part (whole = the WHYFUNNY prompt, left/right = "Describe the image"), group (stage 2, 3,
    4, all; or difficulty / text), metric, value - plus ``mean of 4`` per model and subset."""
    m = metrics[(metrics["task"] == "yesbut.understanding") & (metrics["style"] == style)].copy()
    m["metric"] = m["metric"].str.replace(r"^bertscore.*", "bertscore", regex=True)  # its row names the model
    m = m[m["metric"].isin(UNDERSTANDING_METRICS) & (m["subset"] != "all")]
    if m.empty:
        return m
    m["part"] = m["subset"].str.split("/").str[0]
    m["group"] = m["subset"].str.split("/").str[1].fillna("all")
    mean = m.groupby(["model", "subset", "part", "group"], as_index=False)["value"].mean().assign(metric="mean of 4")
    return pd.concat([m[["model", "subset", "part", "group", "metric", "value"]], mean], ignore_index=True)


def yesbut_understanding_tables(metrics: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """YesBut Tables 6 (by annotation stage, both prompts), 7 (WHYFUNNY by difficulty) and 8 (WHYFUNNY
    by text in the image): one row per model and group, one column per metric and their mean."""
    f = understanding_frame(metrics)
    if f.empty:
        return {}
    out = {}
    stages = f[f["group"].str.startswith("stage") | (f["group"] == "all")]
    stages = stages.assign(prompt=stages["part"].map({"whole": "WHYFUNNY", "left": "describe (left)",
                                                      "right": "describe (right)"}))
    out["table6_understanding_by_stage"] = stages.pivot_table(index=["model", "prompt", "group"], columns="metric",
                                                              values="value").round(4)
    for name, key in (("table7_understanding_by_difficulty", "difficulty"), ("table8_understanding_by_text", "text")):
        sub = f[(f["part"] == "whole") & f["group"].str.startswith(key)]
        if len(sub):
            out[name] = sub.assign(group=sub["group"].str.removeprefix(f"{key} ")).rename(columns={"group": key}) \
                .pivot_table(index=["model", key], columns="metric", values="value").round(4)
    return out


def scrapbook_tables(errors: pd.DataFrame, levels: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Scrapbook Table 8 (overall), Tables 9/10/15 (aggregated error types) and Tables 11-14 (level 2
    by position, type and subgroup) from 06's errors.csv and levels.csv."""
    out = {}
    if len(errors):
        q = errors[errors["unit"] == "questions"]
        out["table8_overall"] = q.pivot_table(index=["dataset", "filter"], columns=["model", "style"],
                                              values="accuracy").round(4)
        agg = errors[errors["unit"] == "aggregated"]
        out["tables9_10_15_errors"] = agg.pivot_table(index=["dataset", "category"],
                                                      columns=["model", "style", "filter"], values="count")
    if len(levels):
        two = levels[(levels["level"] == 2) & (levels["form"] == "all")].copy()
        if len(two):
            two["cell"] = [f"{c} / {n}" for c, n in zip(two["correct"], two["n"])]
            out["tables11_14_level2"] = two.pivot_table(index=["dataset", "model", "style", "concepts", "type"],
                                                        columns="subgroup", values="cell", aggfunc="first")
    return out


def figure3_counts(annotations: pd.DataFrame) -> dict[str, pd.Series]:
    """YesBut Figure 3: text in images (none / left only / right only / both), connected halves,
    difficulty - from a table with the fields text_in_left, text_in_right, connected, difficulty."""
    a = annotations
    left, right = a["text_in_left"].astype(bool), a["text_in_right"].astype(bool)
    text = pd.Series(np.select([left & right, left, right], ["both halves", "left only", "right only"], "no text"))
    return {"text_in_image": text.value_counts().reindex(["no text", "left only", "right only", "both halves"], fill_value=0),
            "connected": a["connected"].astype(bool).map({True: "connected", False: "not connected"}).value_counts()
            .reindex(["connected", "not connected"], fill_value=0),
            "difficulty": a["difficulty"].value_counts().reindex(list(DIFFICULTY), fill_value=0)}


# --- the stage --------------------------------------------------------------------------------------

@dataclass
class AnalyzeConfig(config.StageConfig):
    """Which embeddings, which external data for the paper reproductions, BERTopic's settings."""

    STAGE: ClassVar[str] = A.ANALYZE
    MODEL_ROLES: ClassVar[dict] = {"topic_labeler": None}
    HUB_FIELDS: ClassVar[tuple] = ("clip_model",)  # hub ids the preflight checks

    seed: int = 0  # UMAP, t-SNE and BERTopic seeds
    clip_model: str = ""  # a CLIP hub id or local path; empty: the colour + HOG descriptor stands in
    yesbut_data: str = ""  # a YesBut repository folder for the real-data reproductions (Fig. 3, 14, topics)
    min_topic_size: int = 10  # BERTopic (its default)
    topic_labeler: dict = field(default_factory=dict)  # any LLM spec to write topic labels ({}: none)

    def check(self, source: str) -> None:
        config.check_model_spec(self.topic_labeler, f"{source}: topic_labeler", allow_empty=True)


def image_map(run_folder: Path, cfg: AnalyzeConfig, tables: Path, figures: Path) -> dict | None:
    """YesBut Figure 4: 01's images and 02's style variants on a UMAP, coloured by style, label, stage."""
    images = A.read_records(run_folder, A.COLLECT, A.MANIFEST) + A.read_variants(run_folder)
    if len(images) < 4:
        return None
    meta = pd.DataFrame(images)
    meta["style"] = meta["left_style"].fillna("photo") + "|" + meta["right_style"].fillna("photo")
    meta["label"] = meta["label"].fillna("unlabelled")
    meta["stage"] = meta["stage"].fillna(0).astype(int).astype(str)
    x, embedding = image_embeddings(meta["path"], cfg.clip_model)
    frame = embedding_frame(umap_2d(x, seed=cfg.seed), meta[["id", "style", "label", "stage"]])
    frame.to_csv(tables / "umap_images.csv", index=False)
    scores = {c: separation(x, meta[c]) for c in ("style", "label", "stage")}
    for c in ("style", "label", "stage"):
        fig, _ = plots.embedding_map(frame, c, f"images by {c}", embedding, scores[c])
        plots.save(fig, figures, f"umap_images_by_{c}", close=True)
    pd.Series(scores, name="silhouette").rename_axis("grouped by").reset_index().to_csv(
        tables / "image_separation.csv", index=False)
    return {"embedding": embedding, "silhouette": scores}


def open_answers(run_folder: Path) -> list[dict]:
    """06's valid answers to open-answer tasks and their references, for the answer map and topics."""
    config_06 = A.read_json(run_folder, A.EVALUATE, A.EVAL_CONFIG)
    if config_06 is None:
        return []
    open_task = lambda name: name in TASKS and TASKS[name].open_answer  # noqa: E731
    predictions = [p for p in A.read_records(run_folder, A.EVALUATE, A.PREDICTIONS) if open_task(p["task"]) and p["valid"]]
    refs = {(name, it.id): it.answer for name, folder in config_06["datasets"].items() for it in load_items(folder)
            if open_task(it.task)}  # keyed by (dataset, id): datasets may share ids
    answers = [{"text": p["raw"], "kind": f"generated ({p['model']})", "task": p["task"]} for p in predictions]
    return answers + [{"text": r, "kind": "reference", "task": "reference"} for rs in refs.values() for r in dict.fromkeys(rs)]


def memeqa_type_tables(metrics: pd.DataFrame, metric: str = "exact") -> dict[tuple, pd.DataFrame]:
    """MemeQA's per-type table (the paper's main results), per multiple-choice dataset: one row per
    model and prompt style, a column per question type, then the micro and macro averages."""
    out = {}
    mcq = metrics[metrics["task"] == "mcq"]
    for dataset, m in mcq.groupby("dataset"):
        types = m[m["metric"] == metric].pivot_table(index=["model", "style"], columns="subset", values="value")
        avg = m[m["metric"].isin([f"{metric}_micro", f"{metric}_macro"])].pivot_table(
            index=["model", "style"], columns="metric", values="value")
        out[(dataset,)] = types.join(avg.rename(columns=lambda c: c.split("_")[-1])).reset_index()
    return out


def shortcut_summary(audit: pd.DataFrame) -> pd.DataFrame:
    """Stage 03's shortcut audit (:func:`lib.metrics.shortcuts.audit`, per dataset) as one row per
    dataset and question type: the share of questions each text-only tell answers correctly where
    it fires, the blind baseline's exact-match score and chance beside it; a macro row per dataset."""
    rates = audit.pivot_table(index=["dataset", "type"], columns="tell", values="rate", aggfunc="first")
    blind = audit[audit["tell"] == "blind baseline"].set_index(["dataset", "type"])
    tells = [t for t in shortcuts.TELLS if t in rates.columns]
    table = rates[tells].join(blind[["rate", "chance", "fired"]].rename(
        columns={"rate": "blind baseline", "fired": "single-answer questions"}))
    macro = table.groupby(level="dataset").mean(numeric_only=True)
    macro["single-answer questions"] = table.groupby(level="dataset")["single-answer questions"].sum()
    macro.index = pd.MultiIndex.from_tuples([(d, "macro") for d in macro.index], names=["dataset", "type"])
    out = pd.concat([table, macro]).sort_index(level="dataset", sort_remaining=False).reset_index()
    out["single-answer questions"] = out["single-answer questions"].astype("Int64")  # a count, blank where none
    return out


def run(cfg: AnalyzeConfig, out: str | Path, progress: bool = False) -> dict:
    """Maps, topics, the papers' figures and tables from whatever earlier stages wrote; the report."""
    out = Path(out)
    run_folder = out.parent
    figures, tables = out / A.FIGURES, out / A.TABLES
    tables.mkdir(parents=True, exist_ok=True)
    summary: dict = {"image_map": image_map(run_folder, cfg, tables, figures)}
    answers = open_answers(run_folder)
    if len(answers) >= 6:
        texts = pd.DataFrame(answers)
        xt = text_embeddings(texts["text"])
        frame = embedding_frame(tsne_2d(xt, seed=cfg.seed), texts[["kind", "task"]])
        fig, _ = plots.embedding_map(frame, "kind", "answers: generated vs reference (t-SNE)", "all-MiniLM-L6-v2",
                                     separation(xt, texts["kind"].str.startswith("generated")))
        plots.save(fig, figures, "tsne_answers", close=True)
    summary["answers"] = len(answers)
    # topics on descriptions, answers and LAVE rationales
    annotations = AnnotationStore(A.annotations_path(run_folder))
    latest = annotations.latest()
    docs = [v for f, v in zip(latest["field"], latest["value"]) if f.endswith("description")]
    release = read_yesbut_annotations(Path(cfg.yesbut_data) / "YesBut_Stage2_Annotation.csv") if cfg.yesbut_data else {}
    docs += [h[k] for h in release.values() for k in ("left_description", "right_description")]
    docs += [a["text"] for a in answers]
    docs += [j["rationale"] for j in A.read_records(run_folder, A.EVALUATE, A.JUDGEMENTS) if j["rationale"]]
    docs = [d for d in docs if isinstance(d, str) and d.strip()]
    try:
        info, _ = topics(docs, seed=cfg.seed, min_topic_size=cfg.min_topic_size)
        if cfg.topic_labeler:
            info["Label"] = label_topics(load_model(cfg.topic_labeler), info)
        info.to_csv(tables / "topics.csv", index=False)
        fig, _ = plots.topic_sizes(info)
        plots.save(fig, figures, "topic_sizes", close=True)
        summary["topics"] = int((info["Topic"] != -1).sum())
    except ValueError as e:
        summary["topics"] = f"none: {e}"
    # the papers' figures and tables
    human = annotations.table().drop_duplicates("item")
    needed = ["text_in_left", "text_in_right", "connected", "difficulty"]
    if set(needed) <= set(human.columns):
        fig, _ = plots.yesbut_fig3(figure3_counts(human.dropna(subset=needed)))
        plots.save(fig, figures, "yesbut_fig3_demo_annotations", close=True)
    if release:
        fig, _ = plots.yesbut_fig3(figure3_counts(pd.DataFrame(release.values())))
        plots.save(fig, figures, "yesbut_fig3", close=True)
        if (Path(cfg.yesbut_data) / "Human_Eval_Results.csv").exists():
            fig, _ = plots.human_eval_bars(human_eval(Path(cfg.yesbut_data) / "Human_Eval_Results.csv"))
            plots.save(fig, figures, "yesbut_fig14_human_eval", close=True)
    iterations = A.read_table(run_folder, A.AF, A.ITERATIONS)
    if iterations is not None and len(iterations):
        fig, _ = plots.af_curves(iterations)
        plots.save(fig, figures, "af_iterations", close=True)
    metrics = A.read_table(run_folder, A.EVALUATE, A.METRICS)
    written = []
    audit = A.read_table(run_folder, A.AF, A.SHORTCUTS)
    if audit is not None and len(audit):
        tidy_table(shortcut_summary(audit)).to_csv(tables / "memeqa_shortcuts.csv", index=False)
        written.append("memeqa_shortcuts")
    if metrics is not None:
        for name, df in {**yesbut_tables(metrics), **yesbut_understanding_tables(metrics)}.items():
            tidy_table(df).to_csv(tables / f"{name}.csv", index=False)
            written.append(name)
        frame = understanding_frame(metrics)
        if len(frame):
            fig, _ = plots.understanding_metrics(frame)
            plots.save(fig, figures, "yesbut_fig5_understanding", close=True)
        if (metrics["task"] == "mcq").any():
            for (dataset,), table in memeqa_type_tables(metrics).items():
                name = f"memeqa_types_{dataset}"
                tidy_table(table).to_csv(tables / f"{name}.csv", index=False)
                written.append(name)
            fig, _ = plots.accuracy_by_type(metrics)
            plots.save(fig, figures, "memeqa_accuracy_by_type", close=True)
        errors = A.read_table(run_folder, A.EVALUATE, A.ERRORS)
        levels = A.read_table(run_folder, A.EVALUATE, A.LEVELS)
        for name, df in scrapbook_tables(errors, levels).items():
            tidy_table(df).to_csv(tables / f"{name}.csv", index=False)
            written.append(name)
        for (dataset, model, style), lv in levels.groupby(["dataset", "model", "style"]):
            if style == "zero_shot" and (lv["level"] == 1).any():
                fig, _ = plots.scrapbook_level1(lv)
                plots.save(fig, figures, f"scrapbook_level1_{dataset}_{model}", close=True)
    summary["tables"] = written
    config.finish(out, A.ANALYZE, cfg, summary)
    summary["report"] = str(build_report(run_folder))
    return summary


if __name__ == "__main__":
    sys.exit(config.main("python -m lib.analysis", AnalyzeConfig, run, description="Stage 07: analyze and report."))
