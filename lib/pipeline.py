"""Run the stage notebooks with papermill under a parameter profile.

    python -m lib.pipeline --profile demo                 # every numbered notebook, in order
    python -m lib.pipeline --profile demo --stage 04_scrapbook --run my-run

Parameters are layered: the notebook's own defaults, then ``params/common.<profile>.yaml``, then
``params/<stage>.<profile>.yaml`` (later wins). Before anything runs, every key of every file is
checked against the notebook's declared parameters and their annotated types
(``papermill.inspect_notebook``), because papermill itself only warns about unknown names and never
checks types; then the merged values build the stage's config dataclass (:data:`STAGE_CONFIGS`),
which checks nested values too (model specs, Scrapbook and training parameters), naming the file
and key at fault. Executed notebooks go to ``outputs/<run>/executed/``; a failing notebook stops
the run and the error names the executed notebook to open.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from lib import artifacts as A
from lib.af import AFConfig
from lib.analysis import AnalyzeConfig
from lib.annotate import AnnotateConfig
from lib.collect import CollectConfig
from lib.config import ParamsError
from lib.evaluate import EvalConfig
from lib.paths import NOTEBOOKS, PARAMS, run_dir
from lib.scrapbook import ScrapbookConfig
from lib.setup import SetupConfig
from lib.train import TrainConfig

# Each stage notebook's config dataclass: the single source of its defaults and checks.
STAGE_CONFIGS = {A.SETUP: SetupConfig, A.COLLECT: CollectConfig, A.ANNOTATE: AnnotateConfig, A.AF: AFConfig,
                 A.SCRAPBOOK: ScrapbookConfig, A.TRAIN: TrainConfig, A.EVALUATE: EvalConfig, A.ANALYZE: AnalyzeConfig}

_STAGE = re.compile(r"^\d\d_[a-z0-9_]+$")
_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "list": (list,), "dict": (dict,),
          "None": (type(None),), "NoneType": (type(None),)}


class StageFailed(RuntimeError):
    """A notebook raised; ``executed`` is the executed notebook holding the traceback."""

    def __init__(self, stage: str, executed: Path, cause: Exception):
        self.stage, self.executed = stage, executed
        super().__init__(f"stage {stage} failed: {cause.__class__.__name__}. Open {executed} to see the failing "
                         f"cell and its traceback.")


@dataclass
class StagePlan:
    stage: str
    notebook: Path
    params: dict
    sources: list[Path]


def stage_notebooks(notebooks_dir: Path = NOTEBOOKS) -> list[Path]:
    """The numbered stage notebooks (``NN_name.ipynb``), in order."""
    return sorted(p for p in Path(notebooks_dir).glob("*.ipynb") if _STAGE.match(p.stem))


def _type_ok(value, type_name: str) -> bool:
    """Does ``value`` fit an annotation such as ``int``, ``list[str]``, ``str | None``?"""
    names = re.findall(r"[A-Za-z_]+", type_name.split("[")[0] if "|" not in type_name else type_name)
    allowed = [_TYPES[n] for n in names if n in _TYPES]
    if not allowed or any(n in ("Any", "object") for n in names):
        return True  # no annotation we can check
    if isinstance(value, bool) and not any(bool in t for t in allowed):
        return False  # bool is an int subclass; True is not a valid int parameter
    return any(isinstance(value, t) for t in allowed)


def declared_parameters(notebook: Path) -> dict:
    import papermill

    return papermill.inspect_notebook(str(notebook))


def load_layer(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ParamsError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: a params file is a flat mapping of parameter names to values")
    return data


def check_params(notebook: Path, layers: list[tuple[Path, dict]]) -> dict:
    """Merge the layers, checking each key and type against the notebook, then (for a known stage)
    building its config from the notebook's defaults and the merged values; returns the merged dict."""
    declared = declared_parameters(notebook)
    if not declared:
        raise ParamsError(f"{notebook}: no cell tagged 'parameters'; papermill cannot inject params")
    merged = {}
    for path, data in layers:
        for key, value in data.items():
            if key not in declared:
                raise ParamsError(f"{path}: unknown parameter {key!r} for {notebook.name} "
                                  f"(declared: {', '.join(sorted(declared))})")
            type_name = declared[key].get("inferred_type_name") or "None"
            if not _type_ok(value, type_name):
                raise ParamsError(f"{path}: parameter {key!r} of {notebook.name} must be {type_name}, "
                                  f"got {type(value).__name__} {value!r}")
            merged[key] = value
    cls = STAGE_CONFIGS.get(notebook.stem)
    if cls is not None:
        values = {}
        for k in declared.keys() & cls.__dataclass_fields__.keys():
            if k in merged:
                values[k] = merged[k]
                continue
            default = declared[k].get("default")
            try:
                values[k] = ast.literal_eval(default) if isinstance(default, str) else default
            except (ValueError, SyntaxError):
                pass  # not a literal: papermill could not override it either
        origin = " + ".join(str(p) for p, data in layers if data) or f"{notebook.name} defaults"
        cls.from_params(values, source=origin)
    return merged


def plan(profile: str, stages: list[str] | None = None, notebooks_dir: Path = NOTEBOOKS,
         params_dir: Path = PARAMS, run: str | None = None) -> list[StagePlan]:
    """Resolve and check the params of every selected stage before anything runs."""
    notebooks = stage_notebooks(notebooks_dir)
    known = {nb.stem: nb for nb in notebooks}
    if stages:
        unknown = [s for s in stages if s not in known]
        if unknown:
            raise ParamsError(f"unknown stage(s) {unknown}; stages in {notebooks_dir}: {sorted(known)}")
        notebooks = [known[s] for s in stages]
    common = Path(params_dir) / f"common.{profile}.yaml"
    if not common.exists() and not any(Path(params_dir).glob(f"*.{profile}.yaml")):
        profiles = sorted({p.name.split(".")[-2] for p in Path(params_dir).glob("*.yaml")})
        raise ParamsError(f"unknown profile {profile!r}: no params/*.{profile}.yaml (profiles: {profiles})")
    plans = []
    for nb in notebooks:
        files = [p for p in (common, Path(params_dir) / f"{nb.stem}.{profile}.yaml") if p.exists()]
        layers = [(p, load_layer(p)) for p in files]
        if run:
            layers.append((Path("--run"), {"run": run}))
        plans.append(StagePlan(nb.stem, nb, check_params(nb, layers), files))
    return plans


def run(profile: str = "demo", stages: list[str] | None = None, run_name: str | None = None,
        notebooks_dir: Path = NOTEBOOKS, params_dir: Path = PARAMS, progress: bool = True) -> Path:
    """Execute the stages in order; returns the run folder. Raises :class:`StageFailed`."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    plans = plan(profile, stages, notebooks_dir, params_dir, run_name)
    name = run_name or next((p.params["run"] for p in plans if "run" in p.params), profile)
    executed_dir = run_dir(name) / "executed"
    executed_dir.mkdir(parents=True, exist_ok=True)
    for p in plans:
        out = executed_dir / p.notebook.name
        start = time.perf_counter()
        print(f"[{p.stage}] params from {', '.join(str(s) for s in p.sources) or 'notebook defaults'}", flush=True)
        try:
            papermill.execute_notebook(
                str(p.notebook), str(out), parameters=p.params, kernel_name="python3",
                cwd=str(p.notebook.parent), progress_bar=progress, log_output=False,
            )
        except PapermillExecutionError as e:
            raise StageFailed(p.stage, out, e) from None
        print(f"[{p.stage}] done in {time.perf_counter() - start:.1f}s -> {out}", flush=True)
    return run_dir(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.pipeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="demo", help="params profile: params/*.<profile>.yaml")
    ap.add_argument("--stage", action="append", help="run only this stage (repeatable), e.g. 04_scrapbook")
    ap.add_argument("--run", dest="run_name", help="run name: outputs go to outputs/<run>/")
    ap.add_argument("--check", action="store_true", help="only check the params files, run nothing")
    args = ap.parse_args(argv)
    try:
        if args.check:
            for p in plan(args.profile, args.stage, run=args.run_name):
                print(f"{p.stage}: ok ({len(p.params)} params)")
            return 0
        folder = run(args.profile, args.stage, args.run_name)
    except (ParamsError, StageFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"\nRun outputs: {folder}")
    report = folder / "report.html"
    if report.exists():
        print(f"Report: {report}")
    print(f"Executed notebooks: {folder / 'executed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
