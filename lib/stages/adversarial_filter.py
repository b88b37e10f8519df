"""Stage 03, step by step: skeletons, the filtering loop, the blind check, the datasets and exports.

    run(AFConfig(max_iterations=2), out)                     # every step, as notebook 03 calls them
    python -m lib.stages.adversarial_filter --profile demo   # -> outputs/demo/03_adversarial_filter

Writes ``state.json`` (resumable), ``iterations.csv``, ``datasets/adversarial/`` (the filtered
None- questions, a dataset folder 06 evaluates) and ``datasets/adversarial_none_plus/`` (their
None+ twins, as the release derives them), ``memeqa/none-minus.json`` and ``memeqa/none-plus.json``
(MemeQA's format), ``shortcuts.csv``
(the shortcut audit of the output, and of the source when it is a MemeQA file), a figure of the
iterations, ``summary.json`` and ``provenance.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from lib import config
from lib.af import blind_gate
from lib.af.configuration import AFConfig
from lib.af.engine import blind_check, filter_questions, final_items
from lib.af.questions import plus_variant
from lib.af.skeletons import from_annotations, from_split
from lib.config import cli
from lib.core.schema import Item
from lib.families.memeqa.importer import export_memeqa, import_memeqa
from lib.io import (
    AnnotationStore,
    artifacts,
    dataset_info,
    held_images,
    images_roots,
    save_dataset,
)
from lib.metrics import shortcuts
from lib.models import load_model
from lib.models.store import CallStore
from lib.pages import plots


def skeletons_of(cfg: AFConfig, run_folder: str | Path) -> tuple[list, list]:
    """The skeleton questions (from 02's annotations of 01's images, or a MemeQA JSON) and the ids
    skipped for having no correct option to keep."""
    if cfg.skeletons_from == "annotations":
        images = {r["id"]: r["path"] for r in artifacts.read_manifest(run_folder)}
        skeletons, skipped = (
            from_annotations(
                AnnotationStore(artifacts.annotations_path(run_folder)).table(),
                images,
                cfg.completion_blanks,
                cfg.seed,
            ),
            [],
        )
    else:
        skeletons, skipped = from_split(cfg.skeletons_from, cfg.memeqa_images)
    return (skeletons[: cfg.max_skeletons] if cfg.max_skeletons else skeletons), skipped


def filter_skeletons(
    cfg: AFConfig,
    out: str | Path,
    skeletons: list,
    store: CallStore | None = None,
    progress: bool = True,
) -> dict:
    """The filtering loop (:func:`filter_questions`): the generator writes distractors, the
    discriminators answer, until they are fooled or ``max_iterations``; resumable from
    ``state.json``. Returns the loop's state."""
    store = store if store is not None else CallStore.default()
    generator = load_model(cfg.generator) if cfg.generator else None
    return filter_questions(
        skeletons,
        generator,
        [load_model(d) for d in cfg.discriminators],
        cfg,
        Path(out),
        store=store,
        progress=progress,
    )


def iteration_table(out: str | Path, state: dict) -> tuple[pd.DataFrame, tuple]:
    """Discriminator accuracy and fooled questions per iteration (``iterations.csv``, and
    ``figures/iterations`` when there was one); the table and ``(fig, ax)``, or ``(None, None)``."""
    out = Path(out)
    iterations = pd.DataFrame(state["iterations"])
    iterations.to_csv(out / artifacts.ITERATIONS, index=False)
    if not len(iterations):
        return iterations, (None, None)
    fig, ax = plots.af_curves(iterations)
    plots.save(fig, out / artifacts.FIGURES, "iterations", close=True)
    return iterations, (fig, ax)


def questions(cfg: AFConfig, state: dict, store: CallStore | None = None) -> list[Item]:
    """The filtered questions (:func:`final_items`), each marked ``blind_answerable`` by the blind
    check (:func:`blind_check`) when ``cfg.blind_model`` names a model."""
    items = final_items(state)
    if cfg.blind_model and items:
        store = store if store is not None else CallStore.default()
        answerable = blind_check(
            load_model(cfg.blind_model), items, cfg.discriminator_max_new_tokens, store
        )
        for item, blind in zip(items, answerable):
            item.meta["blind_answerable"] = blind
    return items


def datasets(
    cfg: AFConfig, out: str | Path, items: list[Item]
) -> tuple[dict[str, list[Item]], dict[str, Path]]:
    """The release's two forms: the filtered None- questions and their None+ twins (a run filtering
    with an extra NOTA has only its own form), each a dataset folder 06 evaluates and a MemeQA JSON
    (``memeqa/<variant>.json``). Returns variant -> questions and variant -> folder."""
    out = Path(out)
    variants = {"none-minus": items}
    if cfg.nota_position == "release" and cfg.none_of_the_above:
        variants["none-plus"] = [plus_variant(i, cfg.seed) for i in items]
    folders = {}
    for variant, its in variants.items():
        folder = folders[variant] = artifacts.dataset_folder(out, artifacts.AF_DATASETS[variant])
        its = variants[variant] = held_images(its, folder)
        save_dataset(
            folder,
            its,
            dataset_info(
                "adversarial-filter",
                provenance={"skeletons": cfg.skeletons_from, "variant": variant},
                images_roots=images_roots(its, folder),
            ),
        )
        export_memeqa(its, out / artifacts.MEMEQA_EXPORT / f"{variant}.json")
    return variants, folders


def shortcut_audit(
    cfg: AFConfig, out: str | Path, variants: dict[str, list[Item]]
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """How often a text-only tell picks the answer (:func:`lib.metrics.shortcuts.audit`), for each
    form of the output and, when the skeletons came from a MemeQA file, for its released questions.
    Returns each audited dataset's table and all of them in one (``shortcuts.csv``)."""
    audits = {f"output {v}": shortcuts.audit(its) for v, its in variants.items()}
    if cfg.skeletons_from != "annotations":  # the released questions the skeletons came from
        audits["source"] = shortcuts.audit(import_memeqa(cfg.skeletons_from))
    table = pd.concat([t.assign(dataset=k) for k, t in audits.items()], ignore_index=True)
    table.to_csv(Path(out) / artifacts.SHORTCUTS, index=False)
    return audits, table


def state_blind(out: str | Path) -> dict:
    """The blind gate's record in the loop's ``state.json`` (:func:`lib.af.blind_gate.final_pass`);
    empty when the gate was off."""
    path = Path(out) / "state.json"
    return json.loads(path.read_text()).get("blind", {}) if path.exists() else {}


def finish(
    cfg: AFConfig,
    out: str | Path,
    skeletons: list,
    skipped: list,
    iterations: pd.DataFrame,
    items: list[Item],
    folders: dict[str, Path],
    audits: dict[str, pd.DataFrame],
) -> dict:
    """The summary from what the steps returned (:func:`skeletons_of`, :func:`iteration_table`,
    :func:`questions`, :func:`datasets`, :func:`shortcut_audit`) and provenance; with the blind
    gate on, its counts and a sentence saying them (``blind_gate``)."""
    summary = {
        "skeletons": len(skeletons),
        "skipped_skeletons": len(skipped),
        "questions": len(items),
        "fooled": sum(bool(i.meta["fooled"]) for i in items),
        "blind_answerable": sum(bool(i.meta.get("blind_answerable")) for i in items),
        "shortcuts": {k: shortcuts.macro_blind(t) for k, t in audits.items()},
        "iterations": len(iterations),
        "datasets": {v: str(f) for v, f in folders.items()},
    }
    blind = state_blind(out)
    if blind:  # the blind gate was on (AFConfig.blind_threshold): its counts and a sentence
        summary["blind_gate"] = {**blind, "note": blind_gate.sentence(blind)}
    return config.finish(Path(out), artifacts.AF, cfg, summary)


@config.stage_run
def run(
    cfg: AFConfig, out: str | Path, store: CallStore | None = None, progress: bool = True
) -> dict:
    """The stage, step by step as notebook 03 runs it: skeletons, the filtering loop, the iterations'
    table and figure, the blind check, the two forms' datasets and MemeQA exports, the shortcut
    audit, summary and provenance."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = store if store is not None else CallStore.default()
    skeletons, skipped = skeletons_of(cfg, out.parent)
    state = filter_skeletons(cfg, out, skeletons, store, progress)
    iterations, _ = iteration_table(out, state)
    items = questions(cfg, state, store)
    variants, folders = datasets(cfg, out, items)
    audits, _ = shortcut_audit(cfg, out, variants)
    return finish(cfg, out, skeletons, skipped, iterations, items, folders, audits)


if __name__ == "__main__":
    sys.exit(
        cli.main(
            "python -m lib.stages.adversarial_filter",
            AFConfig,
            run,
            description="Stage 03: adversarial filtering.",
        )
    )
