"""Stage 02 · Annotate: the annotation schema, an append-only store, agreement, Label Studio
exchange (:mod:`lib.io.annotation_exchange`), machine pre-annotation, style variants (YesBut's
stages 3-4: :mod:`lib.families.yesbut.variants`) and the YesBut statistics.

**Schema** (:data:`FIELDS`): YesBut's fields (left / right / overall description, text in each
half, halves connected, difficulty), the satirical label, and MemeQA's needs (intents, derivations,
background knowledge, visual cues, targets with sentiment and action); every field is optional.

**Store**: every save appends one row per field to ``annotations.jsonl`` at once (``item``,
``annotator``, ``field``, ``value``, ``source``, ``time``): a kernel crash loses nothing, nothing is
overwritten in place, and the latest row per (item, annotator, field) wins. Machine drafts carry
``source = "machine:<model>"`` and are never mixed with human rows unless asked for.

    run(AnnotateConfig(annotations_file="lib/data/demo/annotations.yaml"), out)   # the batch run
    python -m lib.stages.annotate --profile demo          # -> outputs/demo/02_annotate

Interactive annotation (the widget, :mod:`lib.pages.annotation_widget`) writes to the same store; :func:`run` then processes whatever
the store holds. Notebook 02 calls the steps :func:`run` composes one per section:
:func:`load_annotations`, :func:`machine_drafts`, :func:`annotator_agreement`, :func:`variants`,
:func:`variants_figure`, :func:`panel_cuts_figure`, :func:`label_studio`, then :func:`finish`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import yaml
from PIL import Image

from lib import config
from lib.config import cli
from lib.core.paths import ROOT
from lib.core.schema import (
    CATEGORICAL,
    FIELD_BY_NAME,
    FIELDS,  # noqa: F401 - notebook 02's widget shows annotate.FIELDS
)
from lib.families.yesbut.figures import panel_cuts
from lib.families.yesbut.panels import split
from lib.families.yesbut.task import Understanding
from lib.families.yesbut.variants import apply_labels, style_variants
from lib.io import AnnotationStore, artifacts, load_image, write_json, write_jsonl
from lib.io.annotation_exchange import export_label_studio, label_studio_config
from lib.models import Request, check_spec, generate, load_model
from lib.models.store import CallStore
from lib.pages import plots


def load_annotation_file(
    path: str | Path,
    store: AnnotationStore,
    annotator: str | None = None,
    names: dict[str, str] | None = None,
) -> int:
    """Import a hand-written annotation file (YAML or JSON list of ``{item, annotator, ...fields}``)
    into ``store``; ``item`` is a manifest id or, through ``names`` (file stem -> id), a file name.
    Returns the rows appended. The batch (papermill) run uses this instead of the widget."""
    records = yaml.safe_load(Path(path).read_text())
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(
            f"{path}: an annotation file is a list of records ({{item, annotator, fields...}}), "
            f"got {type(records).__name__}"
        )
    names = names or {}
    n = 0
    for i, r in enumerate(records):
        r = dict(r)
        try:
            item, who = r.pop("item"), r.pop("annotator", annotator)
            if names and item not in names.values() and item not in names:
                raise ValueError(f"item {item!r} is neither a manifest id nor a known file name")
            n += store.save(names.get(item, item), who, r)
        except (KeyError, ValueError) as e:
            raise ValueError(f"{path}: record {i}: {e}") from e
    return n


# --- agreement -------------------------------------------------------------------------------


def agreement(store: AnnotationStore, fields=CATEGORICAL) -> pd.DataFrame:
    """Per categorical field: items annotated by >= 2 annotators, Cohen's kappa (scikit-learn; the
    mean over annotator pairs) and Krippendorff's alpha (krippendorff, nominal)."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    latest = store.latest()
    rows = []
    for name in fields:
        sub = latest[latest["field"] == name]
        wide = sub.pivot(index="item", columns="annotator", values="value")
        wide = wide[wide.notna().sum(axis=1) >= 2]
        if wide.empty:
            rows.append(
                {
                    "field": name,
                    "items": 0,
                    "annotators": 0,
                    "cohen_kappa": np.nan,
                    "krippendorff_alpha": np.nan,
                }
            )
            continue
        codes = {v: i for i, v in enumerate(sorted({str(v) for v in wide.stack()}))}
        kappas = []
        cols = list(wide.columns)
        for i in range(len(cols)):
            for j in range(i + 1, len(cols)):
                both = wide[[cols[i], cols[j]]].dropna()
                if len(both) >= 2:
                    a, b = both[cols[i]].map(str), both[cols[j]].map(str)
                    kappas.append(
                        1.0 if (a == b).all() and a.nunique() == 1 else cohen_kappa_score(a, b)
                    )
        data = np.array(
            [[codes[str(v)] if pd.notna(v) else np.nan for v in wide[c]] for c in cols], dtype=float
        )
        alpha = (
            krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
            if len(codes) > 1
            else 1.0
        )
        rows.append(
            {
                "field": name,
                "items": len(wide),
                "annotators": len(cols),
                "cohen_kappa": float(np.mean(kappas)) if kappas else np.nan,
                "krippendorff_alpha": float(alpha),
            }
        )
    return pd.DataFrame(rows)


# --- machine pre-annotation -------------------------------------------------------------------


def preannotate(
    model,
    records: list[dict],
    store: AnnotationStore,
    max_new_tokens: int,
    call_store=None,
    progress: bool = True,
) -> int:
    """Draft descriptions with any VLM backend: "Describe the image" for each half and the YesBut
    WHYFUNNY prompt for the whole. Saved as ``source="machine:<model>"``, annotator = the model name."""
    p = Understanding.prompts()
    reqs, keys = [], []
    for r in records:
        image = load_image(r["path"])
        left, right = split(image)
        for name, img, text in (
            ("left_description", left, p["describe"]),
            ("right_description", right, p["describe"]),
            ("overall_description", image, p["why_funny"]),
        ):
            reqs.append(Request.simple(text, [img], max_new_tokens=max_new_tokens))
            keys.append((r["id"], name))
    responses = generate(
        model, reqs, store=call_store, progress=progress, desc=f"pre-annotate {model.name}"
    )
    drafts: dict = {}
    for (item, name), resp in zip(keys, responses):
        if resp.error is None and resp.text.strip():
            drafts.setdefault(item, {})[name] = resp.text.strip()
    return sum(
        store.save(item, model.name, values, source=f"machine:{model.name}")
        for item, values in drafts.items()
    )


# --- the stage --------------------------------------------------------------------------------------


@dataclass
class AnnotateConfig(config.StageConfig):
    """Where the annotations come from, which model drafts, how style variants are made."""

    STAGE: ClassVar[str] = artifacts.ANNOTATE
    MODEL_ROLES: ClassVar[dict] = {"preannotate_model": None, "variants_model": None}

    seed: int = 0  # annotation is deterministic; recorded in provenance
    annotations_file: str = (
        ""  # batch runs: load these (YAML/JSON); empty: annotate with the widget
    )
    annotator: str = ""  # the widget's default annotator name
    fields: list[str] = field(default_factory=list)  # the widget's fields (empty: all of FIELDS)
    preannotate_model: dict = field(default_factory=dict)  # VLM drafting descriptions ({}: none)
    preannotate_max_new_tokens: int = 24
    variants_model: dict = field(
        default_factory=dict
    )  # an images API spec ({backend: openai, endpoint: images,
    #   name: dall-e-3, api_key_env: OPENAI_API_KEY, price_per_image: 0.04}); {}: the local stylizer
    variant_labels_file: str = (
        ""  # satirical labels of the variants (empty: label them with the widget)
    )
    stages: list[int] = field(default_factory=lambda: [3, 4])  # which style stages to generate

    def check(self, source: str) -> None:
        check_spec(self.preannotate_model, f"{source}: preannotate_model", allow_empty=True)
        check_spec(self.variants_model, f"{source}: variants_model", allow_empty=True)
        if self.variants_model and self.variants_model.get("endpoint") != "images":
            raise config.ParamsError(
                f"{source}: variants_model must be an images API (backend: openai, endpoint: images)"
            )
        unknown = [f for f in self.fields if f not in FIELD_BY_NAME]
        if unknown:
            raise config.ParamsError(
                f"{source}: fields {unknown} are not annotation fields ({', '.join(FIELD_BY_NAME)})"
            )


def panels_to_annotate(manifest: list[dict]) -> list[dict]:
    """The labelled two-panel originals (YesBut stage 2) of a manifest."""
    return [r for r in manifest if r.get("label") is not None and r.get("stage") == 2]


def _project_path(path: str) -> Path:
    return Path(path) if Path(path).is_absolute() else ROOT / path


def _store(out: str | Path) -> AnnotationStore:
    return AnnotationStore(Path(out) / artifacts.ANNOTATIONS)


def load_annotations(cfg: AnnotateConfig, out: str | Path, panels: list[dict]) -> int:
    """Load ``cfg.annotations_file`` into the store, once (the store is append-only: a store that
    already holds human rows is left alone); returns the rows appended."""
    store = _store(out)
    if cfg.annotations_file and not store.rows()["source"].eq("human").any():
        return load_annotation_file(
            _project_path(cfg.annotations_file), store, names={r["name"]: r["id"] for r in panels}
        )
    return 0


def machine_drafts(
    cfg: AnnotateConfig,
    out: str | Path,
    panels: list[dict],
    call_store=None,
    progress: bool = False,
) -> int:
    """Drafts by ``cfg.preannotate_model`` (:func:`preannotate`), once per model; returns the rows appended."""
    if not (cfg.preannotate_model and panels):
        return 0
    store, model = _store(out), load_model(cfg.preannotate_model)
    if store.rows()["source"].eq(f"machine:{model.name}").any():  # a rerun appends no second copy
        return 0
    return preannotate(
        model,
        panels,
        store,
        call_store=call_store or CallStore.default(),
        max_new_tokens=cfg.preannotate_max_new_tokens,
        progress=progress,
    )


def annotator_agreement(out: str | Path) -> pd.DataFrame:
    """Agreement between annotators per categorical field (:func:`agreement`), written to ``agreement.csv``."""
    table = agreement(_store(out))
    table.to_csv(Path(out) / artifacts.AGREEMENT, index=False)
    return table


def variants(
    cfg: AnnotateConfig,
    out: str | Path,
    panels: list[dict],
    call_store=None,
    progress: bool = False,
) -> dict:
    """Style variants of the satirical panels (:func:`lib.families.yesbut.variants.style_variants`)
    and their labels from ``cfg.variant_labels_file``; the labelled ones are written to
    ``variants.jsonl``. Returns ``variants``, ``labelled``, ``unlabelled`` (ids) and ``source``
    (what drew them)."""
    out = Path(out)
    images_model = load_model(cfg.variants_model) if cfg.variants_model else None
    first = _store(out).table().drop_duplicates("item").set_index("item")
    descriptions = {
        i: {k: first.loc[i].get(k) for k in ("left_description", "right_description")}
        for i in first.index
    }
    satirical = [r for r in panels if r["label"] == "satirical"]
    made = style_variants(
        satirical,
        descriptions,
        out / "variants",
        model=images_model,
        store=call_store or CallStore.default(),
        stages=cfg.stages,
        progress=progress,
    )
    labels = (
        yaml.safe_load(_project_path(cfg.variant_labels_file).read_text())
        if cfg.variant_labels_file
        else {}
    )
    labelled, unlabelled = apply_labels(made, labels)
    write_jsonl(out / artifacts.VARIANTS, labelled)
    return {
        "variants": made,
        "labelled": labelled,
        "unlabelled": unlabelled,
        "source": f"images API {images_model.name}" if images_model else "local stylizer",
    }


def variants_figure(out: str | Path, labelled: list[dict]):
    """The first six labelled variants (``figures/variants``); ``(fig, ax)``, or ``(None, None)`` when none is labelled."""
    if not labelled:
        return None, None
    fig, ax = plots.image_grid(
        [Image.open(v["path"]) for v in labelled[:6]],
        [f"{v['left_style']}|{v['right_style']} {v['label']}" for v in labelled[:6]],
        cols=3,
        grid_lines=False,
    )
    plots.save(fig, Path(out) / artifacts.FIGURES, "variants", close=True)
    return fig, ax


def panel_cuts_figure(cfg: AnnotateConfig, out: str | Path, manifest: list[dict]):
    """01's two-panel cuts to check (``figures/panel_cuts``); ``(fig, ax)``, or ``(None, None)``."""
    if not any(r.get("layout") for r in manifest):
        return None, None
    fig, ax = panel_cuts(manifest, seed=cfg.seed)
    plots.save(fig, Path(out) / artifacts.FIGURES, "panel_cuts", close=True)
    return fig, ax


def label_studio(out: str | Path, panels: list[dict]) -> list[dict]:
    """The Label Studio tasks of the panels with their annotations (``label_studio.json``) and the
    labelling config they fit (``label_studio_config.xml``); returns the tasks."""
    out = Path(out)
    tasks = export_label_studio(_store(out), {r["id"]: r["path"] for r in panels})
    write_json(out / artifacts.LABEL_STUDIO, tasks)
    (out / artifacts.LABEL_STUDIO_CONFIG).write_text(label_studio_config())
    return tasks


def finish(
    cfg: AnnotateConfig,
    out: str | Path,
    manifest: list[dict],
    panels: list[dict],
    loaded: int,
    drafted: int,
    made: dict,
) -> dict:
    """The summary and provenance from what the steps returned (``made``: :func:`variants`)."""
    summary = {
        "panels": len(panels),
        "manifest": len(manifest),
        "loaded_rows": loaded,
        "machine_rows": drafted,
        "annotated_items": int(_store(out).table()["item"].nunique()),
        "variants": len(made["variants"]),
        "labelled_variants": len(made["labelled"]),
        "waiting_for_a_label": len(made["unlabelled"]),
        "variant_source": made["source"],
    }
    return config.finish(Path(out), artifacts.ANNOTATE, cfg, summary)


@config.stage_run
def run(cfg: AnnotateConfig, out: str | Path, call_store=None, progress: bool = False) -> dict:
    """The stage, step by step as notebook 02 runs it: load the annotation file (once: the store is
    append-only), machine drafts (once per model), agreement, style variants and their labels, the
    figures, the Label Studio export, summary and provenance."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = artifacts.read_manifest(out.parent)
    panels = panels_to_annotate(manifest)
    call_store = call_store or CallStore.default()
    loaded = load_annotations(cfg, out, panels)
    drafted = machine_drafts(cfg, out, panels, call_store=call_store, progress=progress)
    annotator_agreement(out)
    made = variants(cfg, out, panels, call_store=call_store, progress=progress)
    variants_figure(out, made["labelled"])
    panel_cuts_figure(cfg, out, manifest)
    label_studio(out, panels)
    return finish(cfg, out, manifest, panels, loaded, drafted, made)


if __name__ == "__main__":
    sys.exit(
        cli.main(
            "python -m lib.stages.annotate", AnnotateConfig, run, description="Stage 02: annotate."
        )
    )
