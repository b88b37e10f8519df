"""Stage 07 · Analyze: image and text embeddings, UMAP maps with a separation score, BERTopic
topics, and the papers' figures and tables, each computed by its family (YesBut's Figures 3 and 14:
:mod:`lib.families.yesbut.paper`; MemeQA's release statistics and shortcut audit:
:mod:`lib.families.memeqa.paper`; the stated numbers beside ours: :mod:`lib.core.papers`).

**Embeddings** (:mod:`lib.pages.embeddings`): CLIP image features, or where no CLIP weights exist
a colour + HOG descriptor, and every map says which it shows; all-MiniLM-L6-v2 for texts. **Maps**
(:mod:`lib.pages.maps`): UMAP and t-SNE. **Topics** (:mod:`lib.pages.topics`): BERTopic over the
readable texts. All run with fixed seeds, so the same inputs give the same coordinates and topics.

    run(AnalyzeConfig(), out)                              # every step in order, report.html included
    python -m lib.stages.analyze --profile demo          # -> outputs/demo/07_analyze

Notebook 07 calls the steps :func:`run` composes one per section: :func:`image_map`,
:func:`answer_map`, :func:`topic_model`, :func:`data_figures`, :func:`result_tables`,
:func:`paper_table`, :func:`comparison` (this run against ``compare_with``'s, item by item),
:func:`human_agreement` (every metric and judge against ``human_labels``), :func:`item_quality`
(which items are good: :mod:`lib.items.quality`), then
:func:`finish` (summary, provenance, the item browser and the report).

It reads every earlier stage's outputs through :mod:`lib.io.artifacts` (a stage that did not run is
skipped, and the report says so) and writes ``tables/``, ``figures/``, ``paper.csv`` (the papers' stated
numbers, typed once in ``lib/data/papers.yaml``, beside ours), ``summary.json``, ``provenance.json`` and
the run's ``report.html``; with ``compare_with``, ``comparison/`` (:func:`lib.compare.changes.write_comparison`);
with stage 06's answers, ``items/`` (item statistics, flags, the 2PL fit, dataset cards).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pandas as pd

from lib import config
from lib.agreement import scorers as agreement
from lib.compare import changes
from lib.compare.explain import CompareError
from lib.compare.runs import evaluation_folder
from lib.config import cli
from lib.io import AnnotationStore, artifacts, load_items, write_csv
from lib.io.folders import check_ours, remove_ours
from lib.items import cards, quality
from lib.items.bank import BankError, dataset_digests
from lib.models import check_spec, load_model
from lib.pages import plots
from lib.pages.browser import write_browser
from lib.pages.embeddings import embedding_frame, image_embeddings, separation, text_embeddings
from lib.pages.maps import tsne_2d, umap_2d
from lib.pages.report import build_report
from lib.pages.topics import label_topics, readable_texts, topics
from lib.tasks import Results
from lib.tasks.registry import registry, tasks

# --- tables ---------------------------------------------------------------------------------------


def tidy_table(df: pd.DataFrame) -> pd.DataFrame:
    """A pivoted table as flat columns a reader (and a CSV) keeps: the index as columns, and
    column levels joined ("trained / zero_shot") instead of stacked header rows."""
    out = df.copy()
    levels = out.columns if isinstance(out.columns, pd.MultiIndex) else [(c,) for c in out.columns]
    out.columns = [" / ".join(str(x) for x in col if str(x) != "") for col in levels]
    return out.reset_index() if not isinstance(out.index, pd.RangeIndex) else out


# --- the stage ------------------------------------------------------------------------------------


@dataclass
class AnalyzeConfig(config.StageConfig):
    """Which embeddings, which external data for the paper reproductions, BERTopic's settings."""

    STAGE: ClassVar[str] = artifacts.ANALYZE
    MODEL_ROLES: ClassVar[dict] = {"topic_labeler": None}
    HUB_FIELDS: ClassVar[tuple] = ("clip_model",)  # hub ids the preflight checks

    seed: int = 0  # UMAP, t-SNE, BERTopic and the agreement intervals' seeds
    # a CLIP hub id or local path; empty: the colour + HOG descriptor stands in
    clip_model: str = ""
    # a family's public release by family name, for its paper reproductions (yesbut: a clone of
    # the YesBut repository, for Figures 3 and 14 and the topics); {}: this run's outputs only
    paper_data: dict[str, str] = field(default_factory=dict)
    min_topic_size: int = 10  # BERTopic (its default)
    topic_labeler: dict = field(default_factory=dict)  # any LLM spec for topic labels ({}: none)
    topic_label_max_new_tokens: int = 12  # a label of a few words
    # another run (its name, or an evaluation folder) whose answers this run's are paired with item
    # by item, each change put on its first cause (lib.compare.explain); None: no comparison
    compare_with: str | None = None
    # human labels (lib.agreement.scorers's CSV/JSONL, or a release file a family reads: YesBut's
    # Human_Eval_Results.csv) that every metric and judge of the run's stage 06 is held to; "": none
    human_labels: str = ""
    human_labels_task: str = ""  # the task they answer (its metrics); "": the release's family says
    # more of the profile's models (names) judging them beside stage 06's judge, side by side
    human_labels_judges: list[str] = field(default_factory=list)

    def check(self, source: str) -> None:
        check_spec(self.topic_labeler, f"{source}: topic_labeler", allow_empty=True)
        known = registry().families
        for name in self.paper_data:
            if name not in known or known[name].analysis is None:
                with_data = [f for f, fam in known.items() if fam.analysis is not None]
                raise config.ParamsError(
                    f"{source}: paper_data: {name!r} is no family with a stage-07 analysis "
                    f"({', '.join(with_data)})"
                )

    def analyses(self) -> list[tuple]:
        """Each family's stage-07 analysis with its release folder ("" when none is given)."""
        return [
            (family.analysis, self.paper_data.get(name, ""))
            for name, family in registry().families.items()
            if family.analysis is not None
        ]


def image_map(cfg: AnalyzeConfig, out: str | Path) -> tuple[dict | None, dict[str, tuple]]:
    """YesBut Figure 4: 01's images and 02's style variants on a UMAP, coloured by style, label and
    stage (``tables/umap_images.csv``, ``image_separation.csv``, ``figures/umap_images_by_<c>``).
    Returns the embedding's name and the groups' silhouettes (None with fewer than 4 images) and
    each colouring's ``(fig, ax)``."""
    out = Path(out)
    tables, figures = out / artifacts.TABLES, out / artifacts.FIGURES
    images = artifacts.read_records(
        out.parent, artifacts.COLLECT, artifacts.MANIFEST
    ) + artifacts.read_variants(out.parent)
    if len(images) < 4:
        return None, {}
    meta = pd.DataFrame(images)
    meta["style"] = meta["left_style"].fillna("photo") + "|" + meta["right_style"].fillna("photo")
    meta["label"] = meta["label"].fillna("unlabelled")
    meta["stage"] = meta["stage"].fillna(0).astype(int).astype(str)
    x, embedding = image_embeddings(meta["path"], cfg.clip_model)
    frame = embedding_frame(umap_2d(x, seed=cfg.seed), meta[["id", "style", "label", "stage"]])
    tables.mkdir(parents=True, exist_ok=True)
    frame.to_csv(tables / "umap_images.csv", index=False)
    scores = {c: separation(x, meta[c]) for c in ("style", "label", "stage")}
    maps = {}
    for c in ("style", "label", "stage"):
        maps[c] = plots.embedding_map(frame, c, f"images by {c}", embedding, scores[c])
        plots.save(maps[c][0], figures, f"umap_images_by_{c}", close=True)
    pd.Series(scores, name="silhouette").rename_axis("grouped by").reset_index().to_csv(
        tables / "image_separation.csv", index=False
    )
    return {"embedding": embedding, "silhouette": scores}, maps


def open_answers(run_folder: Path) -> list[dict]:
    """06's valid, whole answers to open-answer tasks (invalid and truncated ones left out) and
    their references, for the answer map and topics."""
    config_06 = artifacts.read_json(run_folder, artifacts.EVALUATE, artifacts.EVAL_CONFIG)
    if config_06 is None:
        return []
    open_task = lambda name: name in tasks() and tasks()[name].open_answer
    predictions = [
        p
        for p in artifacts.read_records(run_folder, artifacts.EVALUATE, artifacts.PREDICTIONS)
        if open_task(p["task"]) and p["valid"] and not p.get("truncated")
    ]  # what was read whole
    refs = {
        (name, it.id): it.answer
        for name, folder in config_06["datasets"].items()
        for it in load_items(folder)
        if open_task(it.task)
    }  # keyed by (dataset, id): datasets may share ids
    answers = [
        {"text": p["raw"], "kind": f"generated ({p['model']})", "task": p["task"]}
        for p in predictions
    ]
    return answers + [
        {"text": r, "kind": "reference", "task": "reference"}
        for rs in refs.values()
        for r in dict.fromkeys(rs)
    ]


def answer_map(cfg: AnalyzeConfig, out: str | Path) -> tuple[list[dict], tuple]:
    """The Docmatix post's Figure 1: 06's open answers beside their references on a t-SNE map of
    their MiniLM embeddings (``figures/tsne_answers``, drawn from 6 texts on). Returns the texts
    (:func:`open_answers`) and ``(fig, ax)``, or ``(None, None)`` when there are too few."""
    answers = open_answers(Path(out).parent)
    if len(answers) < 6:
        return answers, (None, None)
    texts = pd.DataFrame(answers)
    xt = text_embeddings(texts["text"])
    frame = embedding_frame(tsne_2d(xt, seed=cfg.seed), texts[["kind", "task"]])
    fig, ax = plots.embedding_map(
        frame,
        "kind",
        "answers: generated vs reference (t-SNE)",
        "all-MiniLM-L6-v2",
        separation(xt, texts["kind"].str.startswith("generated")),
    )
    plots.save(fig, Path(out) / artifacts.FIGURES, "tsne_answers", close=True)
    return answers, (fig, ax)


def topic_documents(cfg: AnalyzeConfig, out: str | Path, answers: list[dict]) -> list[str]:
    """The texts topics are found in: 02's descriptions, the families' own (the YesBut release's
    half descriptions), 06's open answers and references (``answers``) and the judge's rationales."""
    run_folder = Path(out).parent
    latest = AnnotationStore(artifacts.annotations_path(run_folder)).latest()
    docs = [v for f, v in zip(latest["field"], latest["value"]) if f.endswith("description")]
    docs += [d for analysis, data in cfg.analyses() for d in analysis.documents(run_folder, data)]
    docs += [a["text"] for a in answers]
    docs += [
        j["rationale"]
        for j in artifacts.read_records(run_folder, artifacts.EVALUATE, artifacts.JUDGEMENTS)
        if j["rationale"]
    ]
    return [d for d in docs if isinstance(d, str) and d.strip()]


def topic_model(cfg: AnalyzeConfig, out: str | Path, answers: list[dict]) -> tuple[dict, tuple]:
    """BERTopic topics of :func:`topic_documents` (labelled by ``cfg.topic_labeler`` when set):
    ``tables/topics.csv`` and ``figures/topic_sizes``, from the readable texts only
    (:func:`readable_texts`; too few of them - a tiny model's answers - give no topics and say so).
    Returns ``{"topics": how many (outliers aside) or why none, "table": the topic table or None,
    "unreadable": texts left out}`` and ``(fig, ax)`` (``(None, None)`` without topics)."""
    out = Path(out)
    docs, unreadable = readable_texts(topic_documents(cfg, out, answers))
    if len(docs) < 2 * cfg.min_topic_size:
        return {
            "topics": f"none: {len(docs)} readable texts ({unreadable} garbled ones left out), too few for "
            f"topics of at least {cfg.min_topic_size}",
            "table": None,
            "unreadable": unreadable,
        }, (None, None)
    try:
        info, _ = topics(docs, seed=cfg.seed, min_topic_size=cfg.min_topic_size)
        if cfg.topic_labeler:
            info["Label"] = label_topics(
                load_model(cfg.topic_labeler), info, cfg.topic_label_max_new_tokens
            )
        (out / artifacts.TABLES).mkdir(parents=True, exist_ok=True)
        info.to_csv(out / artifacts.TABLES / "topics.csv", index=False)
        fig, ax = plots.topic_sizes(info)
        plots.save(fig, out / artifacts.FIGURES, "topic_sizes", close=True)
    except ValueError as e:
        return {"topics": f"none: {e}", "table": None, "unreadable": unreadable}, (None, None)
    found = {"topics": int((info["Topic"] != -1).sum()), "table": info, "unreadable": unreadable}
    return found, (fig, ax)


def data_figures(cfg: AnalyzeConfig, out: str | Path) -> dict[str, tuple]:
    """The families' figures (:meth:`lib.tasks.analysis.Analysis.figures`: YesBut's Figures 3 and
    14) and 03's iterations, each drawn where its data exists, under ``figures/``; name -> fig, ax."""
    run_folder, figures = Path(out).parent, Path(out) / artifacts.FIGURES
    drawn = {}
    for analysis, data in cfg.analyses():
        drawn.update(analysis.figures(run_folder, data))
    iterations = artifacts.read_table(run_folder, artifacts.AF, artifacts.ITERATIONS)
    if iterations is not None and len(iterations):
        drawn["af_iterations"] = plots.af_curves(iterations)
    for name, (fig, _) in drawn.items():
        plots.save(fig, figures, name, close=True)
    return drawn


def task_results(
    run_folder: Path, metrics: pd.DataFrame
) -> tuple[dict[str, pd.DataFrame], dict[str, object]]:
    """Every task's paper tables (tidy) and figures (:meth:`~lib.tasks.Task.paper`) from stage
    06's results: ``metrics`` and the score tables the families declare beside it
    (:mod:`lib.tasks.registry`). Nothing is written."""
    read = {
        n: artifacts.read_table(run_folder, artifacts.EVALUATE, f"{n}.csv")
        for n in registry().score_tables
    }
    results = Results(metrics, {name: df for name, df in read.items() if df is not None})
    tables, figures = {}, {}
    for task in tasks().values():
        for name, made in task.paper(results).items():
            if isinstance(made, pd.DataFrame):
                tables[name] = tidy_table(made)
            else:
                figures[name] = made
    return tables, figures


def save_results(
    tables_dir: Path, figures_dir: Path, tables: dict[str, pd.DataFrame], figures: dict[str, object]
) -> None:
    """Each table as ``<name>.csv`` under ``tables_dir``, each figure under ``figures_dir`` (then closed)."""
    Path(tables_dir).mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(Path(tables_dir) / f"{name}.csv", index=False)
    for name, fig in figures.items():
        plots.save(fig, figures_dir, name, close=True)


def paper_results(
    run_folder: Path, metrics: pd.DataFrame, tables: Path, figures: Path
) -> list[str]:
    """Every task's paper tables (CSV under ``tables``) and figures (under ``figures``) from stage
    06's results (:func:`task_results`); returns the tables' names."""
    made, drawn = task_results(run_folder, metrics)
    save_results(tables, figures, made, drawn)
    return list(made)


def result_tables(
    cfg: AnalyzeConfig, out: str | Path
) -> tuple[dict[str, pd.DataFrame], dict[str, object]]:
    """The families' tables (:meth:`lib.tasks.analysis.Analysis.tables`: MemeQA's shortcut audit)
    and every task's tables and figures from stage 06's results (:func:`task_results`), written
    under ``tables/`` and ``figures/``; returns (name -> table as written, name -> figure)."""
    run_folder = Path(out).parent
    tables, figures = {}, {}
    for analysis, data in cfg.analyses():
        tables.update({n: tidy_table(df) for n, df in analysis.tables(run_folder, data).items()})
    metrics = artifacts.read_table(run_folder, artifacts.EVALUATE, artifacts.METRICS)
    if metrics is not None:
        made, figures = task_results(run_folder, metrics)
        tables.update(made)
    save_results(Path(out) / artifacts.TABLES, Path(out) / artifacts.FIGURES, tables, figures)
    return tables, figures


def paper_table(cfg: AnalyzeConfig, out: str | Path) -> pd.DataFrame | None:
    """The papers' stated numbers beside ours, every family's in one ``paper.csv`` (the report's
    Reproduction section; :meth:`lib.tasks.analysis.Analysis.paper`: MemeQA's release statistics
    when stage 01 collected MemeQA splits, YesBut's Figures 3 and 14 when its release is given).
    None, and no ``paper.csv``, when none applies."""
    out = Path(out)
    found = (analysis.paper(out.parent, data) for analysis, data in cfg.analyses())
    frames = [f for f in found if f is not None]
    if not frames:
        # a rerun without the data must not show an earlier run's rows
        return (out / artifacts.PAPER).unlink(missing_ok=True)
    table = pd.concat(frames, ignore_index=True)
    write_csv(out / artifacts.PAPER, table)
    return table


def comparison(cfg: AnalyzeConfig, out: str | Path) -> dict | None:
    """This run's answers (B) against ``cfg.compare_with``'s (A), item by item, both prompts kept
    (:func:`lib.compare.changes.side_by_side`), written under ``comparison/``: per-cause counts of
    improved and worsened items, every metric's A, B and B - A with its paired interval and McNemar
    p, the config diff, the changed items. None, and no folder, without ``compare_with``. A run that
    did not finish or was edited since is refused (:class:`lib.compare.explain.CompareError`, naming it)."""
    folder = Path(out) / artifacts.COMPARISON
    remove_ours(folder, changes.KIND, changes.LEGACY)  # a rerun shows no earlier comparison
    if cfg.compare_with is None:
        return None
    try:  # both runs verified as a rescore verifies them (lib.compare.explain.open_run)
        result = changes.side_by_side(
            evaluation_folder(cfg.compare_with),
            artifacts.stage_folder(Path(out).parent, artifacts.EVALUATE),
        )
    except CompareError as e:
        raise CompareError(f"compare_with {cfg.compare_with!r}: {e}") from None
    changes.write_comparison(out, result)
    return result


def human_agreement(cfg: AnalyzeConfig, out: str | Path) -> dict | None:
    """Every text metric and judge of this run's profile (its stage 06 config, and the models
    ``human_labels_judges`` adds) held to ``cfg.human_labels`` (:func:`lib.agreement.scorers.run`), under
    ``agreement/``. None, and no folder (a rerun must not show an earlier table), without labels."""
    folder = Path(out) / artifacts.AGREED
    if not cfg.human_labels:
        remove_ours(folder, agreement.KIND)
        return None
    profile = getattr(cfg, "origin", {}).get("profile")  # the profile that resolved this config
    task, judges = cfg.human_labels_task or None, cfg.human_labels_judges
    return agreement.run(cfg.human_labels, folder, profile, task, judges, seed=cfg.seed)


def item_quality(cfg: AnalyzeConfig, out: str | Path) -> quality.Quality | None:
    """Which items are good (:mod:`lib.items.quality`): the item bank of this run's stage 06 and
    of ``compare_with``'s, every audit of :data:`lib.items.quality.AUDITS` over it, written under
    ``items/`` (``item_stats.csv``, ``flags.csv``, ``datasets.csv``, ``irt.csv`` where a 2PL was
    fitted, ``summary.json``, ``figures/``) with a card per dataset of this run (``cards/``).
    None, and no folder, without stage 06; a bank that cannot be read (stale answers) leaves only
    the reason, which the report shows."""
    folder = Path(out) / artifacts.ITEMS
    shutil.rmtree(folder, ignore_errors=True)  # a rerun shows no earlier run's items
    ours = artifacts.stage_folder(Path(out).parent, artifacts.EVALUATE)
    if not (ours / artifacts.PREDICTIONS).exists():
        return None
    others = [] if cfg.compare_with is None else [_other_run(cfg.compare_with)]
    try:
        bank = quality.gather([ours, *others])
    except (BankError, artifacts.StaleTables) as e:
        quality.withheld(folder, str(e))
        return None
    found = quality.assess(bank)
    summary = quality.write(found, folder, dataset_digests(ours).items())
    for name, (fig, _) in found.figures.items():
        plots.save(fig, folder / artifacts.FIGURES, name, close=True)
    cards.write_cards(
        found.datasets(), summary, list(found.figures), Path(out) / artifacts.ITEM_CARDS
    )
    return found


def _other_run(name: str) -> Path:
    try:
        return evaluation_folder(name)
    except CompareError as e:
        raise CompareError(f"compare_with {name!r}: {e}") from None


def finish(
    cfg: AnalyzeConfig,
    out: str | Path,
    images: dict | None,
    answers: list[dict],
    found: dict,
    tables: dict,
    compared: dict | None = None,
    items: quality.Quality | None = None,
) -> dict:
    """The summary from what the steps returned (:func:`image_map`, :func:`answer_map`,
    :func:`topic_model`, :func:`result_tables`, :func:`comparison`, :func:`item_quality`: the runs
    pooled and how many items carry each flag), provenance, then the run's item browser
    (:mod:`lib.pages.browser`, with the comparison's and the flags' filters) and ``report.html``
    (its path added to the summary returned)."""
    out = Path(out)
    summary = {
        "image_map": images,
        "answers": len(answers),
        "topics": found["topics"],
        "unreadable_texts": found.get("unreadable", 0),
        "tables": list(tables),
        "comparison": compared
        and {k: compared[k] for k in ("A", "paired", "changed", "only_A", "only_B")},
        "items": items and {"runs": items.runs, "flagged": quality.flagged_counts(items)},
    }
    config.finish(out, artifacts.ANALYZE, cfg, summary)
    write_browser(out.parent, compared)  # before the report, which links its headline numbers to it
    summary["report"] = str(build_report(out.parent))
    return summary


@config.stage_run
def run(cfg: AnalyzeConfig, out: str | Path, progress: bool = False) -> dict:
    """The stage, step by step as notebook 07 runs it: maps, topics, the papers' figures and tables
    from whatever earlier stages wrote, the papers' numbers beside ours, the comparison with another
    run, the scorers against human labels, summary and provenance, the report; its ``comparison/``
    and ``agreement/`` are checked first to be its own kinds (nothing else is replaced)."""
    out = Path(out)
    check_ours(out / artifacts.COMPARISON, changes.KIND, changes.LEGACY)
    check_ours(out / artifacts.AGREED, agreement.KIND)
    (out / artifacts.TABLES).mkdir(parents=True, exist_ok=True)
    images, _ = image_map(cfg, out)
    answers, _ = answer_map(cfg, out)
    found, _ = topic_model(cfg, out, answers)
    data_figures(cfg, out)
    tables, _ = result_tables(cfg, out)
    paper_table(cfg, out)
    human_agreement(cfg, out)
    items = item_quality(cfg, out)
    return finish(cfg, out, images, answers, found, tables, comparison(cfg, out), items)


if __name__ == "__main__":
    sys.exit(
        cli.main(
            "python -m lib.stages.analyze",
            AnalyzeConfig,
            run,
            description="Stage 07: analyze and report.",
        )
    )
