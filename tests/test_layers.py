"""The package's shape: imports go one way down the layers of docs/architecture.md, and stages stay
apart."""

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from lib.core.paths import ROOT

LIB = ROOT / "lib"
# The stages (docs/architecture.md): lib/stages/<notebook's name>.py, each may use the layers below
# it, never another stage.
STAGES = LIB / "stages"
# Layers from the bottom; a module may import its own layer or any layer below it.
LAYERS = [
    {"core"},  # records, answers read from text, paths, ranks, the papers' numbers
    {"io", "config"},  # files and the run layout; stage configs, profiles and the command line
    {"models"},  # backends and the call store
    {"tasks", "metrics", "items"},  # what every task is; metrics any family may use; item quality
    {"families", "formats", "pages"},  # one folder per paper; other formats in; what people look at
    {"eval", "training", "af"},  # engines: evaluation (06), training (05), AF (03)
    {"stages", "export", "compare", "agreement", "rating"},  # the stages and the tools beside them
    {"pipeline"},  # a profile run: notebooks, preflight, cluster jobs
]


def test_the_architecture_page_states_these_layers():
    """docs/architecture.md's layer block, top first, is :data:`LAYERS` - one list, said twice."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    block = page.split("## Layers", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    stated = [{name.strip() for name in line.split(",")} for line in block.strip().splitlines()]
    assert stated == LAYERS[::-1]
    assert {p.name for p in LIB.iterdir() if (p / "__init__.py").exists()} - {"data"} == {
        name for layer in LAYERS for name in layer
    }, "a package in no layer, or a layer naming no package"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """Every lib module ``path`` imports, at the top or inside a function."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("lib."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            if base.startswith("lib.") or base == "lib":
                for a in node.names:  # `from lib.x import y`: y may itself be a module
                    out.add(
                        f"{base}.{a.name}"
                        if (LIB.parent / f"{base}.{a.name}".replace(".", "/"))
                        .with_suffix(".py")
                        .exists()
                        or (LIB.parent / f"{base}.{a.name}".replace(".", "/")).is_dir()
                        else base
                    )
    return out


def _graph() -> dict[str, set[str]]:
    """module -> the lib modules it imports."""
    return {(name := _module(path)): _imports(path, name) - {name} for path in LIB.rglob("*.py")}


def _edges() -> list[tuple[str, str]]:
    return [(a, b) for a, targets in _graph().items() for b in targets]


def _top(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def test_the_import_graph_of_lib_has_no_cycle():
    # a package's __init__ re-exporting its own submodules is not a cycle between modules
    graph = {
        a: {b for b in targets if not b.startswith(a + ".")} for a, targets in _graph().items()
    }
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as e:
        raise AssertionError(f"import cycle in lib/: {' -> '.join(e.args[1])}") from None


def test_no_stage_imports_another_stage():
    crossings = sorted(
        (a, b)
        for a, b in _edges()
        if a.startswith("lib.stages.") and b.startswith("lib.stages.") and a != b
    )
    assert not crossings, f"stage modules importing other stages: {crossings}"


def test_every_stage_is_named_as_its_notebook():
    """One rule for all eight: notebook ``NN_name.ipynb`` runs ``lib/stages/name.py``, whose config
    class is the stage ``NN_name`` (config + steps + ``run``, and ``python -m lib.stages.name``)."""
    from lib.pipeline.execute import STAGE_CONFIGS

    notebooks = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    modules = {p.stem for p in STAGES.glob("*.py") if p.stem != "__init__"}
    assert {n[3:] for n in notebooks} == modules
    assert set(STAGE_CONFIGS) == notebooks
    for stage, cls in STAGE_CONFIGS.items():
        module = sys.modules[f"lib.stages.{stage[3:]}"]
        assert getattr(module, cls.__name__) is cls and callable(module.run), stage
        assert 'if __name__ == "__main__":' in Path(module.__file__).read_text(), (
            f"{stage}: no command line"
        )


def test_imports_only_go_down_the_layers():
    level = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    upward = []
    for a, b in _edges():
        ta, tb = _top(a), _top(b)
        if ta in level and tb in level and level[tb] > level[ta]:
            upward.append((a, b))
    assert not upward, f"imports reaching up a layer: {sorted(upward)}"
    assert set(level) >= {_top(n) for n in _graph() if n != "lib" and _top(n) != "data"}, (
        "a module in no layer"
    )


def test_every_tiny_model_is_served_by_the_hf_backends_one_subclass():
    """The stand-ins run the real code path: every tiny model kind is the one ``tiny`` class, and
    that class is the hf backend's subclass (no per-model class, no second implementation)."""
    from lib.models import BACKENDS, load_model
    from lib.models.tiny import TINY_KINDS

    served = {type(load_model({"backend": "tiny", "name": kind})) for kind in TINY_KINDS}
    assert served == {BACKENDS["tiny"]} and BACKENDS["tiny"] is not BACKENDS["hf"]
    assert issubclass(BACKENDS["tiny"], BACKENDS["hf"])


def _selects_column(node) -> bool:
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == "task"
    )


def _family(path: Path) -> str | None:
    """The family folder ``path`` is in (``lib/families/<family>/...``), or None."""
    parts = path.relative_to(LIB).parts
    return parts[1] if len(parts) > 2 and parts[0] == "families" else None


def _task_families() -> dict[str, str]:
    """Task name -> the family folder that defines it."""
    from lib.tasks.registry import tasks

    return {name: type(task).__module__.split(".")[2] for name, task in tasks().items()}


def test_no_family_imports_another_family():
    """A family of work is one folder: it uses the shared layers, never another family's code."""
    crossings = sorted(
        (a, b)
        for a, b in _edges()
        if a.startswith("lib.families.")
        and b.startswith("lib.families.")
        and a.split(".")[2] != b.split(".")[2]
    )
    assert not crossings, f"families importing each other: {crossings}"


def test_a_family_is_one_folder_found_by_looking():
    """Every folder of lib/families/ is a family whose tasks are registered, and nothing outside it
    names them: the registry reads the folders."""
    from lib.tasks import registry

    folders = {p.name for p in (LIB / "families").iterdir() if (p / "__init__.py").exists()}
    assert (
        set(_task_families().values()) <= folders
        and {"memeqa", "yesbut", "scrapbook", "lave", "vqa", "verdict"} <= folders
    )
    assert set(registry.discover().families) == folders == set(registry.registry().families)
    assert not (LIB / "families" / "__init__.py").read_text().split('"""')[2].strip()  # no list


def test_no_task_name_is_compared_outside_its_family():
    """Every task-specific rule lives in its task object (its family's folder), so no other module tests
    ``task == "mcq"``-style strings. Selecting a task's rows of a table (``df["task"] == "mcq"``, as
    a paper figure does) is data selection, not dispatch, and is allowed."""
    owner = _task_families()
    offenders = []
    for path in LIB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and not _selects_column(node.left):
                consts = [
                    c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)
                ]
                for c in node.comparators:
                    if isinstance(c, (ast.Tuple, ast.List, ast.Set)):
                        consts += [e.value for e in c.elts if isinstance(e, ast.Constant)]
                if any(
                    v in owner and owner[v] != _family(path) for v in consts if isinstance(v, str)
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"task names compared outside their family's folder: {offenders}"


def _sources():
    """Every module of lib/ (not the data it ships), and every notebook's source."""
    for path in sorted(LIB.rglob("*.py")):
        if not path.is_relative_to(LIB / "data"):
            yield path
    yield from sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_no_task_name_is_written_outside_its_family():
    """A task owns everything about itself: items are made by its ``make_item``, its rows selected by
    its ``rows``, its tables by its ``paper``, its settings set in params. So no module outside
    its family's folder, and no notebook, holds a task's name as a string (docstrings may mention one)."""
    owner = _task_families()
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
        for path in _sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in owner
        and owner[node.value] != (_family(path) if path.is_relative_to(LIB) else None)
    ]
    assert not offenders, f"task names outside their family's folder: {offenders}"


MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500  # both counted in lines as ruff format writes them


def test_no_function_in_lib_is_longer_than_60_lines():
    """Stage functions are composed of named steps a notebook can call one per section."""
    long = [
        f"{path.relative_to(ROOT)}:{node.name} ({n} lines)"
        for path in sorted(LIB.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_module_in_lib_is_longer_than_500_lines():
    """A module is one cohesive piece a newcomer reads in one sitting; an engine grown past this
    splits into a package (lib/eval, lib/training) rather than growing a stage."""
    long = [
        f"{path.relative_to(ROOT)} ({n} lines)"
        for path in sorted(LIB.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_a_function_level_import_of_lib_says_why_it_is_deferred():
    """Imports of lib modules sit at the top of a module, unless deferred on purpose - and then a
    comment above it in its function says so (``deferred on purpose``)."""
    unexplained = []
    for path in sorted(LIB.rglob("*.py")):
        lines = path.read_text().splitlines()
        for func in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                module = (
                    node.module
                    if isinstance(node, ast.ImportFrom)
                    else node.names[0].name
                    if isinstance(node, ast.Import)
                    else None
                )
                if (
                    module
                    and module.startswith("lib")
                    and not any(
                        "deferred on purpose" in line
                        for line in lines[func.lineno - 1 : node.lineno - 1]
                    )
                ):
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno} {module}")
    assert not unexplained, f"function-level lib imports without a reason: {unexplained}"


def _literal_defaults(path: Path):
    """(line, function, parameter, value) of every parameter of ``path`` with a literal default."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, d in pairs:
                if isinstance(d, ast.Constant):
                    yield node.lineno, node.name, arg.arg, d.value


def test_a_stage_default_is_written_once_in_its_config_class():
    """One name and one default per setting: a stage's defaults are its config class's fields, so no
    function of lib/ gives a parameter of a field's name that field's default again (``seed`` aside:
    every generator takes one, 0 unless told), no token limit has a number outside a config class,
    and no module constant (``*NEW_TOKENS``) restates one. (``Request.max_new_tokens`` is the call
    record's own: the limit of a request made without one, in the model layer below every stage.)"""
    import dataclasses

    from lib.pipeline.execute import STAGE_CONFIGS

    defaults: dict[str, set] = {}
    for cls in STAGE_CONFIGS.values():
        for f in dataclasses.fields(cls):
            if (
                isinstance(f.default, (int, float, str))
                and not isinstance(f.default, bool)
                and f.default not in (0, "")
            ):
                defaults.setdefault(f.name, set()).add(f.default)
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        where = path.relative_to(ROOT)
        for line, func, name, value in _literal_defaults(path):
            if name != "seed" and value in defaults.get(name, ()):
                offenders.append(f"{where}:{line} {func}({name}={value!r}) repeats a stage default")
            if "tokens" in name and isinstance(value, int):
                offenders.append(
                    f"{where}:{line} {func}({name}={value!r}) is a token limit outside a config class"
                )
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and any("NEW_TOKENS" in t.id for t in node.targets if isinstance(t, ast.Name))
            ):
                offenders.append(f"{where}:{node.lineno} a module constant holds a token limit")
    assert not offenders, "\n".join(offenders)


ENGINES = ("eval", "training", "af", "metrics", "io", "models", "tasks")


def test_no_engine_imports_a_family():
    """The engines, metrics, stores and backends find what a family brings (tasks, judges, score
    tables, split readers, the AF's question format) through :mod:`lib.tasks.registry`, never by
    importing the family: a new paper is its own folder."""
    named = sorted((a, b) for a, b in _edges() if _top(a) in ENGINES and _top(b) == "families")
    assert not named, f"engines importing a family: {named}"


def test_no_two_lib_modules_share_a_name_outside_the_families():
    """One name per concept: ``lib.io.manifest`` and ``lib.eval.manifest`` would read alike in a
    traceback. A family's files (``task.py``, ``judge.py``) share names by the plug-in convention,
    and every package has its ``__init__`` (and a command's ``__main__``)."""
    seen: dict[str, list[str]] = {}
    for path in LIB.rglob("*.py"):
        if path.relative_to(LIB).parts[0] != "families" and not path.name.startswith("__"):
            seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {n: p for n, p in seen.items() if len(p) > 1}


def test_stage_06_resolves_its_config_without_the_plotting_library():
    """A command-line evaluation draws nothing: importing the stage and resolving the demo's config
    (which loads every task family) leaves matplotlib unloaded - a family imports pyplot in the
    function that draws (the plotting library's import is part of every evaluation's start)."""
    code = (
        "import sys; from lib import config; from lib.stages import evaluate; "
        "config.resolve(evaluate.EvalConfig, 'demo'); "
        "print(sorted(m for m in sys.modules if m.startswith('matplotlib')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout[:500]
