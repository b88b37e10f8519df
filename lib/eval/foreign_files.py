"""Finding an lmms-eval run's files for an import (:mod:`lib.eval.foreign`): is a path lmms-eval
output, has every exported task its samples file, which tasks are VQA Lab's, and the VQA Lab export
(``vqalab.json``, its docs) each task was run on."""

from __future__ import annotations

from pathlib import Path

from lib.eval.foreign_schema import EXPORT, SAMPLES, ForeignError, clean, printable, read_json
from lib.io import artifacts, read_jsonl


def is_lmms_eval_output(path: str | Path) -> bool:
    """Does ``path`` look like lmms-eval output (a samples or results file, a folder holding them)
    rather than an evaluation folder? (Results without samples fail the import, saying why.)"""
    path = Path(path)
    if path.is_file():
        return bool(SAMPLES.match(path.name)) or path.name.endswith("_results.json")
    return (
        path.is_dir()
        and not (path / artifacts.PREDICTIONS).exists()
        and any(
            f for pattern in ("*_samples_*.jsonl", "*_results.json") for f in path.rglob(pattern)
        )
    )


def check_sampled(files: dict, results: dict, results_path: Path | None, given: Path) -> None:
    """Refuse a run whose results file names a VQA Lab task without its samples file (unless one
    samples file was given: that task alone is imported)."""
    if results_path is None or SAMPLES.match(given.name):
        return
    date = results_path.name.removesuffix("_results.json")
    missing = [
        t
        for t, c in (results.get("configs") or {}).items()
        if "vqalab_task" in ((c or {}).get("metadata") or {}) and t not in files
    ]
    if missing:
        raise ForeignError(
            "; ".join(
                f"{results_path}: task {t} has no samples file (looked for "
                f"{results_path.parent}/{date}_samples_{t}.jsonl)"
                for t in missing
            )
            + ": rerun lmms-eval with --log_samples, or import one samples file alone"
        )


def _read_export(folder: Path) -> dict:
    """An export's ``vqalab.json`` (:data:`lib.eval.foreign_schema.EXPORT`), its labels made printable."""
    info = read_json(folder / "vqalab.json", "the export's vqalab.json", EXPORT)
    return {
        **info,
        "name": printable(info["name"]),
        "settings_from": clean(info.get("settings_from")),
    }


def find_exports(tasks, results: dict, folders=()) -> dict[str, tuple[Path, dict]]:
    """Each lmms-eval task's VQA Lab export (its folder and ``vqalab.json``): from ``folders``
    given, else the folder ``results.json`` says the task's docs came from."""
    given = [Path(f) for f in folders]
    recorded = [
        Path(t).parent
        for c in (results.get("configs") or {}).values()
        if isinstance(c, dict)
        for t in [((c.get("dataset_kwargs") or {}).get("data_files") or {}).get("test")]
        if isinstance(t, str)
    ]
    found = {}
    for folder in [*given, *recorded]:
        if not (folder / "vqalab.json").exists():
            if folder in given:
                raise ForeignError(
                    f"{folder}: no vqalab.json: not a folder `python -m lib.export lmms-eval --out` "
                    f"wrote"
                )
            continue
        info = _read_export(folder)
        for task in info.get("tasks", []):
            found.setdefault(task, (folder, info))
    missing = sorted(set(tasks) - set(found))
    if missing:
        looked = (
            ", ".join(map(str, dict.fromkeys([*given, *recorded])))
            or "nowhere: no results.json names one"
        )
        raise ForeignError(
            f"lmms-eval task(s) {missing}: no VQA Lab export of them found (looked in {looked}); give "
            f"the folder `python -m lib.export lmms-eval --out` wrote (--export TASKDIR)"
        )
    return {t: found[t] for t in tasks}


def ours(files: dict, results: dict) -> tuple[dict, list[str]]:
    """The samples files of VQA Lab's exported tasks, and the other tasks of the run (its results
    file says which: an exported task's config carries ``metadata.vqalab_task``); without a
    results file every task is taken for VQA Lab's."""
    configs = results.get("configs") or {}
    others = [
        t
        for t in files
        if isinstance(configs.get(t), dict)
        and "vqalab_task" not in (configs[t].get("metadata") or {})
    ]
    if len(others) == len(files):
        raise ForeignError(
            f"{', '.join(map(str, files.values()))}: no task here was exported by VQA Lab "
            f"(`python -m lib.export lmms-eval`): nothing to import"
        )
    return {t: f for t, f in files.items() if t not in others}, others


def doc_ids(folder: Path) -> set[tuple[str, str]]:
    """(VQA Lab task, item id) of every doc the export wrote (``docs_<task>.jsonl``)."""
    try:
        return {
            (d["task"], d["id"]) for f in sorted(folder.glob("docs_*.jsonl")) for d in read_jsonl(f)
        }
    except (OSError, ValueError, KeyError, TypeError) as e:  # an export edited by hand
        raise ForeignError(
            f"{folder}: the export's docs cannot be read ({e}): export the dataset again"
        ) from None
