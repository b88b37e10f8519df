"""The run layout: what each stage writes where, and readers for what later stages consume.

One run is one folder, ``outputs/<run>/``, with one subfolder per stage. The file names below are
each stage's published contract: the stage writes them, and later stages, notebooks and the report
read them only through these readers (a stage module never imports another stage). Dataset folders
always sit at ``<stage>/datasets/<name>/`` (items.jsonl + images/ + dataset.json).

A params value ``stage:NN_stage/sub/path`` names a path inside the run folder (e.g.
``stage:04_scrapbook/datasets/scrapbook``), so params files never hold absolute output paths.

06's derived tables (metrics.csv, levels.csv, errors.csv, and its answers as item-bank rows,
items.parquet) are written with a record of what they
were computed from (``metrics.meta.json``: the SHA-256 of each table, of the predictions file and of
the evaluation's manifest, written after the tables). :func:`read_table` refuses a table whose
record is missing or no longer matches (:class:`StaleTables`: a rerun or a rescore that stopped
part way, e.g. on a full disk, must not show the previous run's numbers as new ones).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from lib.core.paths import check_name, outputs_root, stage_dir
from lib.io import file_sha256, read_jsonl, write_json

# pandas is imported by the two readers of tables, not here: every stage imports this module
if TYPE_CHECKING:
    import pandas as pd

SETUP, COLLECT, ANNOTATE, AF, SCRAPBOOK, TRAIN, EVALUATE, ANALYZE = (
    "00_setup",
    "01_collect",
    "02_annotate",
    "03_adversarial_filter",
    "04_scrapbook",
    "05_train",
    "06_evaluate",
    "07_analyze",
)
STAGES = (SETUP, COLLECT, ANNOTATE, AF, SCRAPBOOK, TRAIN, EVALUATE, ANALYZE)

SUMMARY = "summary.json"  # every stage: its headline numbers
PROVENANCE = "provenance.json"  # every stage: date, git SHA, resolved config, seed, versions
DATASETS = "datasets"  # every stage that makes datasets: datasets/<name>/
FIGURES = "figures"
TABLES = "tables"

# file names per stage (the writer uses them too)
PROBE = "probe.csv"  # 00
SAMPLE_IMAGES = "images"  # 00
MANIFEST = "manifest.jsonl"  # 01
COLLECT_REPORT = "report.json"  # 01
ANNOTATIONS = "annotations.jsonl"  # 02
AGREEMENT = "agreement.csv"  # 02
VARIANTS = "variants.jsonl"  # 02
LABEL_STUDIO = "label_studio.json"  # 02
LABEL_STUDIO_CONFIG = "label_studio_config.xml"  # 02: the labelling config those tasks fit
ITERATIONS = "iterations.csv"  # 03
AF_STATE = "state.json"  # 03
MEMEQA_EXPORT = "memeqa"  # 03: none-minus.json and none-plus.json, as the release names its folders
SHORTCUTS = "shortcuts.csv"  # 03: the shortcut audit (lib.metrics.shortcuts)
AF_DATASET = "adversarial"  # 03's dataset name (the None- questions)
AF_DATASETS = {"none-minus": AF_DATASET, "none-plus": "adversarial_none_plus"}  # 03's two forms
SCRAPBOOK_DATASET = "scrapbook"  # 04's main dataset name
CURVE = "curve.csv"  # 05
# 05: the systems summary.json compares on held-out questions, as tables and bars show them: the lines
# a trained model must rise above (the answer prior; itself asked about blank pictures), base, trained
TRAIN_SYSTEMS = ("majority", "blank", "base", "trained")
BEST, LAST, CHECKPOINT = "best", "last", "checkpoint"  # 05
PREDICTIONS = "predictions.jsonl"  # 06
JUDGEMENTS = "judgements.jsonl"  # 06
METRICS = "metrics.csv"  # 06; beside it each score table a family declares, <name>.csv
EVAL_CONFIG = "config.json"  # 06
EVAL_MANIFEST = (
    "manifest.json"  # 06: written last; ties config, predictions, judgements and datasets together
)
ITEM_BANK = (
    "items.parquet"  # 06: its answers as item-bank rows (lib.items.bank), made with its tables
)
EVAL_TABLES = "*.csv"  # 06: every table is derived from the predictions (rescore remakes them)
TABLES_META = "metrics.meta.json"  # 06: written after the tables; what they were computed from
PAPER = "paper.csv"  # any stage: the paper numbers it reproduced (paper, quantity, paper_value, ours, equal, note)
REPORT = "report.html"  # 07, at the run folder's root
AGREED = "agreement"  # 07 (human_labels; and python -m lib.agreement): scorers against people
AGREED_TABLES = ("agreement", "paired", "judge_checks", "scores", "labels")  # AGREED's <name>.csv
ITEMS = "items"  # 07: item quality (lib.items.quality): the tables below, figures/, cards/
ITEM_STATS = "items/item_stats.csv"  # 07: per item: respondents, share right, discrimination, flags
ITEM_FLAGS = (
    "items/flags.csv"  # 07: per item: its key and one 0/1 column per flag (the browser's filter)
)
ITEM_IRT = "items/irt.csv"  # 07: per item of a fitted dataset: 2PL a, b and their standard errors
ITEM_DATASETS = "items/datasets.csv"  # 07: per dataset version: items, respondents, flags, statuses
ITEM_CARDS = "items/cards"  # 07: <dataset>.json and <dataset>.md, the dataset cards
COMPARISON = "comparison"  # 07: this run's answers against another run's (compare_with), item by item; the files below
COMPARED = "comparison/comparison.json"  # 07: the two runs, paired and changed items, causes, metric rows, config diff
COMPARED_CAUSES = "comparison/causes.csv"  # 07: per cause, the changed items, how many improved or worsened, and why
COMPARED_METRICS = "comparison/metrics.csv"  # 07: per group and metric A, B, B - A, paired interval, McNemar p (headline marked)
COMPARED_CONFIG = (
    "comparison/config.csv"  # 07: every resolved value that differs and where each came from
)
COMPARED_ITEMS = "comparison/items.jsonl"  # 07: every changed item: cause, why, which way, both runs' scores and prompts


def stage_folder(run_folder: str | Path, stage: str) -> Path:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
    return Path(run_folder) / stage


def dataset_folder(stage_out: str | Path, name: str) -> Path:
    """Where a stage puts its dataset ``name``: ``<stage folder>/datasets/<name>``."""
    return Path(stage_out) / DATASETS / name


def datasets_of(run_folder: str | Path, stage: str) -> dict[str, Path]:
    """Every dataset folder a stage of this run wrote, by name (not the hidden folders datasets are
    built in before they are swapped into place: :func:`lib.io.aside_folder`)."""
    root = stage_folder(run_folder, stage) / DATASETS
    return (
        {
            p.name: p
            for p in sorted(root.iterdir())
            if not p.name.startswith(".") and (p / "items.jsonl").exists()
        }
        if root.is_dir()
        else {}
    )


def is_run_output(ref) -> bool:
    """Does ``ref`` name something a run makes (``stage:`` of this run, ``run:`` of another)?"""
    return isinstance(ref, str) and ref.startswith(("stage:", "run:"))


def resolve(ref: str, run_folder: str | Path) -> str:
    """``stage:04_scrapbook/datasets/scrapbook`` -> that path in the run folder;
    ``run:<run>/05_train/best`` -> that path in another run of the same outputs root (a profile
    that evaluates what several training runs made); other paths unchanged."""
    if isinstance(ref, str) and ref.startswith("run:"):
        run, _, rest = ref[len("run:") :].partition("/")
        stage, _, sub = rest.partition("/")
        return str(stage_folder(outputs_root() / run, stage) / sub)
    if not isinstance(ref, str) or not ref.startswith("stage:"):
        return ref
    stage, _, sub = ref[len("stage:") :].partition("/")
    return str(stage_folder(run_folder, stage) / sub)


def resolve_spec(spec: dict, run_folder: str | Path) -> dict:
    """A model spec whose ``name`` may be a ``stage:`` path of this run (e.g. 05's weights)."""
    return {**spec, "name": resolve(spec["name"], run_folder)} if "name" in spec else dict(spec)


class MissingOutputs(FileNotFoundError):
    """What a stage reads from a run (a model it trained, the datasets it wrote) is not there; one
    line per problem, said before the stage starts."""


def evaluation_folder(run: str | Path, error: type[ValueError] = ValueError) -> Path:
    """The ``06_evaluate`` folder a run argument names: a folder holding predictions, a run folder
    whose ``06_evaluate`` holds them, or a plain run name (``outputs/<run>/06_evaluate``); ``error``
    (the caller's own kind) naming what was looked at otherwise."""
    path, text = Path(run), str(run)
    for folder in (path / EVALUATE, path) if path.is_dir() else ():
        if (folder / PREDICTIONS).is_file():
            return folder
    if "/" in text or text.startswith("."):
        raise error(f"{text}: no {PREDICTIONS} there nor in its {EVALUATE}/ (run stage 06 first)")
    folder = stage_dir(check_name(text, "run name", error), EVALUATE, create=False)
    if not (folder / PREDICTIONS).is_file():
        raise error(f"run {text!r}: {folder / PREDICTIONS} not found (run stage 06 for it first)")
    return folder


def model_folder_problem(path: Path, hint: str) -> str | None:
    """Why the model folder ``path`` cannot be loaded (missing, or no ``config.json`` nor adapter), or None."""
    if not path.is_dir():
        return f"folder {path} does not exist ({hint})"
    if not (path / "config.json").exists() and not (path / "adapter_config.json").exists():
        return f"folder {path} holds no config.json (save it with save_pretrained)"
    return None


def missing_models(models: dict[str, dict], run_folder: str | Path) -> list[str]:
    """One line per model whose ``name`` is an output of a run (``stage:`` of ``run_folder``, ``run:``
    of another) that is not a model folder there: the model, its spec value, the path looked at."""
    lines = []
    for label, spec in models.items():
        name = spec.get("name") if isinstance(spec, dict) else None
        if not is_run_output(name):
            continue
        kind, _, ref = name.partition(":")
        run, stage = (Path(run_folder).name, ref) if kind == "stage" else ref.partition("/")[::2]
        why = model_folder_problem(
            Path(resolve(name, run_folder)),
            f"stage {stage.partition('/')[0]} of run {run} "
            f"makes it: run that first, name the run that did with --run, or name another model",
        )
        if why:
            lines.append(f"model {label!r} (name: {name}): {why}")
    return lines


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: {what}")
    return path


# --- 06's derived tables and their sources --------------------------------------------------------


class StaleTables(ValueError):
    """06's tables do not come from the predictions now in the folder (or nothing says they do)."""


def forget_table_sources(folder: str | Path) -> None:
    """Drop the record of 06's tables before they or the predictions are rewritten: until
    :func:`record_table_sources` runs again, readers refuse the tables."""
    (Path(folder) / TABLES_META).unlink(missing_ok=True)


def record_table_sources(folder: str | Path, tables: dict[str, str], predictions: str) -> None:
    """Record, after the tables are written, what they were computed from: each table's SHA-256
    (``tables``: name -> digest), the predictions file's (``predictions``) and the manifest's."""
    folder = Path(folder)
    write_json(
        folder / TABLES_META,
        {
            "tables": tables,
            "predictions": predictions,
            "manifest": file_sha256(folder / EVAL_MANIFEST, remember=False),
        },
    )


def item_bank_file(folder: str | Path) -> Path | None:
    """06's answers as item-bank rows (:data:`ITEM_BANK`) in the evaluation folder ``folder``; None
    where it wrote none (a run of older code: the bank is then made from its predictions). Refused
    (:class:`StaleTables`) when they do not come from its current predictions."""
    path = Path(folder) / ITEM_BANK
    if not path.exists():
        return None
    if why := stale_tables(folder):
        raise StaleTables(why)
    return path


def stale_tables(folder: str | Path) -> str | None:
    """Why 06's tables in ``folder`` cannot be shown as its results, or None when they can (or
    when there are none). They must have a record (:data:`TABLES_META`) whose digests match the
    tables, the current predictions and the current manifest."""
    folder = Path(folder)
    present = sorted(p.name for p in folder.glob(EVAL_TABLES))
    present += [ITEM_BANK] if present and (folder / ITEM_BANK).exists() else []
    if not present:
        return None
    fix = f"recompute them (no model is called): python -m lib.stages.evaluate rescore --run {folder.parent.name}"
    meta = folder / TABLES_META
    try:
        rec = json.loads(meta.read_text())
    except FileNotFoundError:
        return (
            f"{folder}: {', '.join(present)} carry no record of the predictions they were computed from "
            f"({TABLES_META} is missing: an evaluation or rescore stopped before finishing its tables, or they "
            f"predate such records), so they may be another run's numbers; {fix}"
        )
    except ValueError:
        return f"{meta} is not readable JSON; {fix}"
    tables = rec.get("tables", {}) if isinstance(rec, dict) else {}
    for name in present:
        if name not in tables or tables[name] != file_sha256(folder / name, remember=False):
            return (
                f"{folder}: {name} is not the table recorded in {TABLES_META} (a rescore or rerun stopped part "
                f"way through writing the tables); {fix}"
            )
    if rec.get("predictions") != file_sha256(folder / PREDICTIONS):
        return (
            f"{folder}: the tables were computed from other predictions than the current {PREDICTIONS} (a rerun "
            f"stopped after writing new predictions, before its tables); {fix}"
        )
    if rec.get("manifest") != file_sha256(folder / EVAL_MANIFEST, remember=False):
        return f"{folder}: the tables were computed under another {EVAL_MANIFEST} than the current one; {fix}"
    return None


# --- readers ----------------------------------------------------------------------------------------


def read_manifest(run_folder: str | Path) -> list[dict]:
    """01's manifest: one record per collected image."""
    return list(
        read_jsonl(
            _need(stage_folder(run_folder, COLLECT) / MANIFEST, "run stage 01_collect first")
        )
    )


def annotations_path(run_folder: str | Path) -> Path:
    """02's append-only annotation file (open it with :class:`lib.io.AnnotationStore`)."""
    return stage_folder(run_folder, ANNOTATE) / ANNOTATIONS


def read_variants(run_folder: str | Path) -> list[dict]:
    """02's style variants (empty when the stage made none)."""
    return read_records(run_folder, ANNOTATE, VARIANTS)


def read_summary(run_folder: str | Path, stage: str) -> dict | None:
    """A stage's ``summary.json`` (None when the stage has not run)."""
    return read_json(run_folder, stage, SUMMARY)


def read_table(run_folder: str | Path, stage: str, name: str) -> pd.DataFrame | None:
    """A CSV table a stage wrote (``METRICS``, ``ITERATIONS``, ``CURVE``...); None when absent.
    06's tables are refused (:class:`StaleTables`) when they do not come from its current
    predictions (:func:`stale_tables`)."""
    path = stage_folder(run_folder, stage) / name
    if not path.exists():
        return None
    if stage == EVALUATE and path.match(EVAL_TABLES) and (why := stale_tables(path.parent)):
        raise StaleTables(why)
    import pandas as pd

    return pd.read_csv(path)


def read_records(run_folder: str | Path, stage: str, name: str) -> list[dict]:
    """A JSONL file a stage wrote (``PREDICTIONS``, ``JUDGEMENTS``...); empty when absent."""
    path = stage_folder(run_folder, stage) / name
    return list(read_jsonl(path)) if path.exists() else []


def read_json(run_folder: str | Path, stage: str, name: str) -> dict | None:
    path = stage_folder(run_folder, stage) / name
    return json.loads(path.read_text()) if path.exists() else None


def read_comparison(run_folder: str | Path) -> dict | None:
    """07's comparison with another run (``compare_with``): :data:`COMPARED` with its tables as
    DataFrames under ``tables`` (``causes``, ``metrics``, ``config``); None when 07 compared nothing."""
    result = read_json(run_folder, ANALYZE, COMPARED)
    if result is None:
        return None
    import pandas as pd

    tables = {"causes": COMPARED_CAUSES, "metrics": COMPARED_METRICS, "config": COMPARED_CONFIG}
    folder = stage_folder(run_folder, ANALYZE)
    return {
        **result,
        "tables": {
            k: pd.read_csv(folder / name, keep_default_na=False, na_values=[""])
            for k, name in tables.items()
        },
    }
