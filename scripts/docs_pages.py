"""The generated parts of the documentation: numbers and defaults are read from the code, the params and
the committed records at build time, never typed into a page.

A page asks for a generated block with a marker on a line of its own, ``<!-- vqalab: NAME ARGS -->``:

- ``params STAGE``      the stage's config fields: type, default (from the dataclass) and the why-comment
                        written beside the field in its source, and which shipped profiles set it
- ``files STAGE``       the files a stage writes, from the run layout (``lib/io/artifacts.py``)
- ``task_options``      each task's options (its ``Options`` dataclass) for stage 06's ``tasks:`` block
- ``profiles``          the shipped profiles: their stages and whether they are offline (``params/``)
- ``performance``       one section per benchmark from ``benchmarks/records/*.json``
- ``slow_tests``        the suite's tests of 20 s or more, with what each proves (``suite`` record)
- ``reproduction``      the papers' numbers beside ours from ``docs/records/reproduction.json``
- ``citations``         the works VQA Lab implements, from ``CITATION.cff``

MkDocs runs this module as a hook (``hooks:`` in ``mkdocs.yml``): :func:`on_page_markdown` replaces
the markers; an unknown marker fails the build. ``python -m scripts.docs_pages performance`` prints
one block, to read a record without building the site.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import io
import json
import re
import sys
import textwrap
import tokenize
import typing
from functools import cache
from pathlib import Path

import yaml

# mkdocs loads this hook by path: the project root, where benchmarks/ lives, is not on sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.records import (  # noqa: E402
    COMMANDS,
    RECORDS,
    REPRODUCTION,
    TargetError,
    figure,
    meets,
    stale,
    verdict,
)
from lib.core.paths import ROOT

MARKER = re.compile(r"^<!-- vqalab: (\w+)\s*([^>]*?)\s*-->$", re.M)
# benchmarks/ modules that measure nothing (the runner, the publisher)
NOT_BENCHMARKS = ("run", "publish")
# the measuring scripts outside benchmarks/ (`make gpu-check`: it needs a CUDA GPU, so `make bench` skips it)
SCRIPTS = {"gpu_check": ROOT / "scripts" / "gpu_check.py"}
# a record's keys that say how it was measured and judged, not what: left out of its table of figures
RECORD_META = (
    "machine",
    "load",
    "targets",
    "meets_targets",
    "known_misses",
    "date",
    "date_from",
    "commit",
    "dirty",
    "benchmark",
    "command",
)
# a target a record misses: red on the page, with the record's reason when it states one (known_misses)
MISSED = (
    "**no**{ .target-missed }"  # attr_list: the class on the bold text (md_cell escapes raw HTML)
)


def _short(value) -> str:
    """A value as text (JSON unless a string), shortened past 90 characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:87] + "..." if len(text) > 90 else text


def _cell(value) -> str:
    """A value as a markdown table cell: code-formatted, pipes escaped, long values shortened."""
    text = _short(value)
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`" if text else ""


def md_cell(value) -> str:
    """``value`` as a markdown table cell: raw HTML escaped (markdown passes it through), ``|`` and
    newlines kept from breaking the row."""
    return html.escape(str(value)).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; a cell is a code span made by :func:`_cell` or text (escaped by
    :func:`md_cell`: a record's or a docstring's ``<`` never becomes markup)."""

    def cell(c) -> str:
        c = str(c)
        return c if len(c) > 1 and c[0] == c[-1] == "`" and "`" not in c[1:-1] else md_cell(c)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- stage configs ----------------------------------------------------------------------------------


@cache
def stage_configs() -> dict:
    """Stage name -> config class, as the pipeline holds them."""
    from lib.pipeline.execute import STAGE_CONFIGS

    return dict(STAGE_CONFIGS)


def field_comments(cls) -> dict[str, str]:
    """Field -> the comment written beside it (same line) or on the lines just above it, from the source
    of the class in its MRO that declares the field."""
    import inspect

    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            lines, start = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        source = "".join(lines)
        comments: dict[int, str] = {}
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
        tree = ast.parse(textwrap.dedent(source))
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        previous_end = 0
        for node in body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                parts = []
                above = (
                    node.lineno - 1
                )  # comment lines directly above the field (not above an earlier field)
                block = []
                while (
                    above > previous_end
                    and above in comments
                    and lines[above - 1].strip().startswith("#")
                    and not lines[above - 1].strip().startswith("#   ")
                ):  # "#   ": the field above's
                    block.insert(0, comments[above])
                    above -= 1
                parts += block
                parts += [
                    comments[n]
                    for n in range(node.lineno, node.end_lineno + 1)
                    if n in comments and not lines[n - 1].strip().startswith("#")
                ]
                # a comment continued on the next lines ("#   ...") belongs to the field above it
                n = node.end_lineno + 1
                while n in comments and lines[n - 1].strip().startswith("#   "):
                    parts.append(comments[n])
                    n += 1
                out[node.target.id] = " ".join(p for p in parts if p)
            previous_end = getattr(node, "end_lineno", previous_end)
    return out


def config_fields(cls) -> list[dict]:
    """Each dataclass field of a config class: name, type (as annotated), default and comment."""
    comments = field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "(required)"
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append(
            {"name": f.name, "type": kind, "default": default, "comment": comments.get(f.name, "")}
        )
    return rows


@cache
def profile_keys() -> dict[str, dict[str, set[str]]]:
    """Stage -> field -> the shipped profiles whose params set it (in the stage's file or the common one)."""
    from lib.config import PROFILE_KEYS, load_layer

    out: dict[str, dict[str, set[str]]] = {}
    params = ROOT / "params"
    commons = {
        p.name.split(".")[1]: set(load_layer(p)) - set(PROFILE_KEYS)
        for p in params.glob("common.*.yaml")
    }
    for stage in stage_configs():
        fields = out.setdefault(stage, {})
        for p in sorted(params.glob(f"{stage}.*.yaml")):
            for key in load_layer(p):
                fields.setdefault(key, set()).add(p.name.split(".")[1])
        names = {f.name for f in dataclasses.fields(stage_configs()[stage])}
        for profile, keys in commons.items():
            for key in keys & names:
                fields.setdefault(key, set()).add(profile)
    return out


def params_markdown(stage: str) -> str:
    cls = stage_configs()[stage]
    setters = profile_keys().get(stage, {})
    rows = [
        [
            f"`{r['name']}`",
            _cell(r["type"]),
            _cell(r["default"]),
            r["comment"],
            ", ".join(sorted(setters.get(r["name"], ()))),
        ]
        for r in config_fields(cls)
    ]
    where = f"{cls.__module__}.{cls.__qualname__}"
    page = (
        "eval.md" if cls.__module__.startswith("lib.eval.") else "stages.md"
    )  # the engine's settings: its own page
    return (
        f"Generated from [`{cls.__qualname__}`](../api/{page}#{where}) (`{cls.__module__}`) when these pages are "
        f"built: the defaults are the dataclass's, the notes the comments beside each field; the last column "
        f"names the shipped profiles whose `params/` files set the field.\n\n"
        + _table(["field", "type", "default", "why", "set by profiles"], rows)
    )


def task_options_markdown() -> str:
    """Every task of ``lib.tasks.registry.tasks()`` with the options its ``tasks: {<name>: {...}}`` block may set."""
    from lib.tasks.registry import tasks

    rows = []
    for name, task in sorted(tasks().items()):
        for r in config_fields(type(task).Options):
            rows.append(
                [
                    f"`{name}`",
                    f"`{r['name']}`",
                    _cell(r["type"]),
                    _cell(r["default"]),
                    r["comment"].replace("|", "\\|"),
                ]
            )
    return (
        "Generated from each task's `Options` dataclass (`lib/families/<family>/`) when these pages are built:\n\n"
        + _table(["task", "option", "type", "default", "why"], rows)
    )


def files_markdown(stage: str) -> str:
    """The run layout's file names for ``stage`` (constants of lib/io/artifacts.py commented with its number)."""
    from lib.io import artifacts

    number = stage[:2]
    source = (ROOT / "lib" / "io" / "artifacts.py").read_text()
    rows = [
        ["`summary.json`", "its headline numbers"],
        [
            "`provenance.json`",
            "date, git SHA, resolved config and where each value came from, seed, versions",
        ],
    ]
    for line in source.splitlines():
        m = re.match(r"^([A-Z_, ]+) = (.+?)\s+# (\d\d)(?::\s*(.*))?$", line)
        if not m or m.group(3) != number:
            continue
        names = [n.strip() for n in m.group(1).split(",")]
        for name in names:
            value = getattr(artifacts, name)
            if isinstance(value, str):
                rows.append([f"`{value}`", m.group(4) or ""])
    return f"Under `outputs/<run>/{stage}/` (names from `lib/io/artifacts.py`):\n\n" + _table(
        ["file", "what"], rows
    )


def profiles_markdown() -> str:
    """The shipped profiles as ``lib.config.load_profile`` reads them (``extends:`` resolved)."""
    from lib.config import load_profile, profiles

    rows = []
    for name in profiles(ROOT / "params"):
        p = load_profile(name, ROOT / "params")
        rows.append(
            [
                f"`{name}`",
                f"`{p.parent.name}`" if p.parent else "",
                ", ".join(s[:2] for s in p.stages),
                "yes" if p.offline else "no",
                ", ".join(f"`{m}`" for m in p.models),
                f"`outputs/{p.run}/`",
            ]
        )
    return _table(["profile", "extends", "stages", "offline", "models", "writes to"], rows)


# --- benchmark records ------------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    found = {
        p.stem: p
        for p in (ROOT / "benchmarks").glob("*.py")
        if not p.stem.startswith("_") and p.stem not in NOT_BENCHMARKS
    }
    return {**found, **SCRIPTS}


def benchmark_names() -> list[str]:
    return sorted(_modules())


@cache
def _module_source(module: str) -> str:
    return _modules()[module].read_text()


def record_name(module: str) -> str:
    """The record a benchmark module writes (``gpu_check`` writes ``gpu.json``)."""
    m = re.search(r"record\(\"(\w+)\"", _module_source(module))
    return m.group(1) if m else module


def module_summary(module: str) -> str:
    """The module docstring's first paragraph (and the next, when the first only names the record)."""
    doc = ast.get_docstring(ast.parse(_module_source(module))) or ""
    paras = [re.sub(r"\s+", " ", p).strip() for p in doc.split("\n\n") if p.strip()]
    text = " ".join(paras[:2]) if paras and len(paras[0]) < 100 else (paras[0] if paras else "")
    text = text[:-1] + "." if text.endswith(":") else text
    return re.sub(r":\w+:`~?([^`]+)`", r"``\1``", text)


def _flatten(value, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key, leaf) for the numbers, booleans and short strings of a record; lists of scalars kept whole."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value) and len(value) <= 12:
            out.append((prefix, value))
        elif all(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                out += _flatten(v, f"{prefix}[{i}]")
    elif (
        value is None
        or isinstance(value, (int, float, bool))
        or (isinstance(value, str) and len(value) <= 200)
    ):
        out.append((prefix, value))
    return out


def target_rows(record: dict) -> list[list[str]]:
    """One row per target the record states: the figure, its rule, its value and whether it is met
    (:func:`benchmarks.records.verdict`, the function that wrote ``meets_targets``)."""
    rows = []
    reasons = record.get("known_misses") if isinstance(record.get("known_misses"), dict) else {}
    for name, rule in (record.get("targets") or {}).items():
        try:
            value = _cell(figure(record, name))
        except TargetError:
            value = "(no figure of that name in the record)"
        try:
            met = (
                "yes"
                if verdict(record, name)
                else MISSED
                + (
                    f" — known miss: {_short(reasons[name])}"  # text: the cell is escaped
                    if name in reasons
                    else " — no reason stated"
                )
            )
        except TargetError:  # no such figure, or a rule it cannot judge: meets() refuses the record
            met = "**cannot tell**"
        rows.append([f"`{name}`", rule, value, met])
    return rows


def _targets_met(record: dict) -> str:
    """The record's verdict as :func:`benchmarks.records.meets` gives it from its figures and targets."""
    if record.get("skipped"):
        return "not measured (skipped)"
    try:
        return {True: "yes", False: "**no**"}[meets(record)]
    except TargetError as e:
        return f"**cannot tell**: {e}"


def _commit(record: dict) -> str:
    c = record.get("commit") or {}
    if not c.get("sha"):
        return "not recorded"
    return f"`{c['sha'][:10]}`" + (" (uncommitted changes)" if c.get("dirty") else "")


def _machine(record: dict) -> str:
    m = record.get("machine") or {}
    gpu = m.get("gpu", "not recorded")
    gpus = (", ".join(gpu) or "none") if isinstance(gpu, list) else gpu
    return (
        f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, GPU: {gpus} ({m.get('platform', '?')})"
        if m
        else "not recorded"
    )


def _stale(record: dict, module: str) -> tuple[str, list[str]]:
    """The meta row's text on whether the code the record measured has changed since, and the files."""
    try:
        changed = stale(record, _modules()[module])
    except TargetError as e:  # a shallow clone lacks the commit: said, not guessed
        return f"unknown: {e}", []
    if not changed:
        return "no", []
    return f"**yes**: {', '.join(f'`{p}`' for p in changed)}", changed


def performance_markdown(records: Path = RECORDS) -> str:
    parts = []
    for module in benchmark_names():
        name = record_name(module)
        command = COMMANDS.get(name, "make bench")
        parts.append(f"## `{name}`\n\n{module_summary(module)} (`benchmarks/{module}.py`)\n")
        path = records / f"{name}.json"
        if not path.exists():
            parts.append(
                f"No record yet for `{name}` — run `{command}`, then `python -m benchmarks.publish` "
                f"(which `make bench` runs) to commit it.\n"
            )
            continue
        rec = json.loads(path.read_text())
        load = rec.get("load") or {}
        date = rec.get("date") or "not recorded"
        if rec.get("date_from"):
            date += f" ({rec['date_from']})"
        meta = [
            ["command", f"`{rec.get('command', command)}`"],
            ["date", date],
            ["commit", _commit(rec)],
            ["machine", _machine(rec)],
            [
                "machine busy with other work",
                {True: "yes", False: "no"}.get(load.get("under_load"), "not recorded")
                + (
                    f" (1-min load {load['before']['1min']} before, {load['after']['1min']} after)"
                    if load.get("before")
                    else ""
                ),
            ],
            ["targets met", _targets_met(rec)],
        ]
        changed_text, changed = _stale(rec, module)
        meta.append(["code changed since measured", changed_text])
        if rec.get("dirty"):  # publish's mark (--allow-dirty) on a record of an uncommitted tree
            parts.append(
                '!!! warning "Measured on a tree with uncommitted changes"\n\n    The tree had edits that '
                "were never committed, so these figures belong to no commit: measure again on a committed "
                f"tree (`{command}`) to replace them.\n"
            )
        elif changed:
            parts.append(
                '!!! warning "Stale: the code it measures changed since"\n\n    '
                f"{len(changed)} of the files this benchmark measures changed (as code, not layout) "
                f"since commit `{rec['commit']['sha'][:10]}`, so these figures may no longer hold: "
                f"`{command if name in COMMANDS else 'make bench STALE=1'}` measures it "
                f"again.\n"
            )
        elif not (rec.get("commit") or {}).get("sha"):
            parts.append(
                '!!! warning "No commit recorded"\n\n    Written before records carried their commit, so no '
                f"commit is known to have these figures: measure again (`{command}`) to replace them.\n"
            )
        parts.append(_table(["record", f"`benchmarks/records/{name}.json`"], meta) + "\n")
        if rec.get("skipped"):
            parts.append(f"Skipped when recorded: {rec['skipped']}\n")
            continue
        targets = target_rows(rec)
        if targets:  # the figures the record is judged on first, every field below, folded
            parts.append(_table(["figure", "target", "value", "met"], targets) + "\n")
        for title, table in (rec.get("tables") or {}).items():  # a record's own tables, as stated
            parts.append(f"**{md_cell(title)}**\n\n{_table(table['columns'], table['rows'])}\n")
        figures = {k: v for k, v in rec.items() if k not in (*RECORD_META, "tables")}
        rows = [[f"`{key}`", _cell(value)] for key, value in _flatten(figures)]
        table = _table(["figure", "value"], rows)
        parts.append(
            (
                '??? note "Every field of the record"\n\n'
                + "\n".join(f"    {line}" for line in table.splitlines())
                if targets
                else table
            )
            + "\n"
        )
    return "\n".join(parts)


# --- the papers beside ours -------------------------------------------------------------------------


def _num(v):
    if isinstance(v, float) and v.is_integer():
        return f"{int(v):,}"
    return f"{v:,}" if isinstance(v, int) else ("" if v is None else str(v))


def reproduction_markdown(path: Path = REPRODUCTION) -> str:
    from lib.core.papers import papers, stated_label

    record = json.loads(path.read_text()) if path.exists() else {"papers": {}}
    stated = papers()
    parts = []
    order = ["Scrapbook"] + [p for p in stated if p != "Scrapbook"]
    for paper in order:
        entry = record["papers"].get(paper)
        parts.append(f"## {paper}\n")
        if entry:
            parts.append(
                f"Produced by `{entry['command']}` (run `{entry['run']}`, stage {entry['stage']}) on "
                f"{entry['date']}, commit {_commit(entry)}, on {entry.get('machine', 'an unrecorded machine')}. "
                f"Published with `python -m benchmarks.publish reproduction {entry['run']}`.\n"
            )
            rows = [
                [
                    r["quantity"],
                    _num(r["paper_value"]),
                    _num(r["ours"]),
                    {True: "yes", False: "**no**"}.get(r["equal"], ""),
                    r.get("note") or "",
                ]
                for r in entry["rows"]
            ]
            parts.append(
                _table(["quantity", "paper", "ours", "equal", "why they differ"], rows) + "\n"
            )
            continue
        spec = stated.get(paper)
        command = spec["command"] if spec else "make run PROFILE=unique_all"
        parts.append(
            f"No record yet for {paper} — run `{command}`, then `python -m benchmarks.publish reproduction "
            f"<run>`. The numbers its text states (from `lib/data/papers.yaml`):\n"
        )
        if spec:
            rows = [
                [stated_label(q), _num(q["value"]), "no record yet"]
                for q in spec.get("stated", {}).values()
            ]
            parts.append(_table(["quantity", "paper", "ours"], rows) + "\n")
    return "\n".join(parts)


# --- citations --------------------------------------------------------------------------------------


def citations_markdown() -> str:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    lines = [
        f"**{cff['title']}** (version {cff['version']}, {cff['license']} licence): cite it as "
        f"[`CITATION.cff`](https://github.com/citation-file-format/citation-file-format) says.\n",
        "It implements:\n",
    ]
    for ref in cff.get("references", []):
        authors = ", ".join(
            a.get("name") or f"{a.get('given-names', '')} {a.get('family-names', '')}".strip()
            for a in ref.get("authors", [])
        )
        venue = (
            (ref.get("conference") or {}).get("name")
            or ref.get("journal")
            or (
                "arXiv preprint"
                if "arxiv.org" in ref.get("url", "")
                else {"blog": "blog post"}.get(ref.get("type"), "")
            )
        )
        year = f", {ref['year']}" if ref.get("year") else ""
        url = f" <{ref['url']}>" if ref.get("url") else ""
        lines.append(
            f"- {authors}. *{ref['title']}*." + (f" {venue}{year}." if venue or year else "") + url
        )
    return "\n".join(lines)


# --- the hook ---------------------------------------------------------------------------------------


def slow_tests_markdown(records: Path = RECORDS) -> str:
    """The ``suite`` record's slow tests (``python -m benchmarks.suite``): when, on what, and the
    table as the record states it; a sentence where there is no record yet."""
    path = records / "suite.json"
    if not path.exists():
        return (
            "No record yet: `python -m benchmarks.suite` runs the suite and lists its slow tests.\n"
        )
    rec = json.loads(path.read_text())
    title, table = next(iter(rec["tables"].items()))
    return (
        f"`make test` took {rec['seconds']:.0f} s ({rec['passed']:,} passed) on {_machine(rec)}, "
        f"commit `{rec['commit']['sha'][:10]}` (`benchmarks/records/suite.json`); its {title}:\n\n"
        + _table(table["columns"], table["rows"])
        + "\n"
    )


BLOCKS: dict[str, typing.Callable[..., str]] = {
    "params": params_markdown,
    "files": files_markdown,
    "task_options": task_options_markdown,
    "profiles": profiles_markdown,
    "performance": performance_markdown,
    "slow_tests": slow_tests_markdown,
    "reproduction": reproduction_markdown,
    "citations": citations_markdown,
}


def render(markdown: str, where: str = "page") -> str:
    """``markdown`` with every ``<!-- vqalab: NAME ARGS -->`` line replaced by its generated block."""

    def block(m: re.Match) -> str:
        name, args = m.group(1), m.group(2).split()
        if name not in BLOCKS:
            raise ValueError(
                f"{where}: unknown generated block {name!r}; known: {', '.join(BLOCKS)}"
            )
        return BLOCKS[name](*args)

    return MARKER.sub(block, markdown)


def on_page_markdown(markdown: str, page=None, **_) -> str:
    """MkDocs hook: render a page's generated blocks."""
    return render(markdown, getattr(getattr(page, "file", None), "src_path", "page"))


RST_ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|exc|obj):(<code>)")


def on_page_content(html: str, **_) -> str:
    """MkDocs hook: the docstrings' reST roles (``:func:`x```) shown as plain code in the API pages."""
    return RST_ROLE.sub(r"\1", html)


if __name__ == "__main__":
    print(BLOCKS[sys.argv[1]](*sys.argv[2:]))
