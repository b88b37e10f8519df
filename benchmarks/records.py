"""Benchmark records: writing one (``outputs/bench/<name>.json``, also printed) and judging it against
its targets. The benchmarks (``benchmarks/``), ``make gpu-check`` (``scripts/gpu_check.py``), the
publisher, the documentation and the tests all use this one module.

Every record says when, on what code and on what machine it was measured - ``date`` (UTC),
``commit`` (the git SHA and whether the tree had uncommitted changes), ``command`` and ``machine``
(``platform``, ``cpu_model``, ``cores``, ``gpu``) - and what else the machine was doing, since a
timing on a shared machine is only as good as its hour: a benchmark takes ``before = host_state()``
as it starts and hands it to ``record``, which adds a ``load`` block (the 1 / 5 / 15 minute load
averages before and after, and ``under_load``; see :func:`under_load`). ``python -m
benchmarks.publish`` copies the records to ``benchmarks/records/``, from which the documentation's
performance page is rendered.

Every record states its ``targets`` beside its figures, as data: figure -> rule, e.g.
``{"two_server_speedup": ">= 1.6", "identical_outputs": "== true"}``. A figure is named by its path
in the record, the keys joined by dots and a list's element by its index
(``structured_output.identical_answers``, ``curves.constant[3].rescore_seconds``: the names the documentation's
tables use); a rule is a comparison, ``>=``, ``<=``, ``>``, ``<`` or ``==``, and a JSON value (a
number, ``true`` or ``false``). ``meets_targets`` is :func:`meets` of the record, and nothing else:
the benchmark hands its targets to :func:`record`, which writes the verdict; the publisher and the
documentation recompute it with the same function, and the tests check every committed record
against it, so a record can fail. A committed record must also *succeed*: a target it misses is an
error unless ``known_misses`` names it with a reason (figure -> why), which the documentation shows;
a reason for a target the record meets is an error too.

A record is *stale* (:func:`stale`) once the code it measures has changed since its commit: the
benchmark module and the project modules it imports, compared as code (their syntax trees without
docstrings), so reformatting or a reworded docstring leaves a record fresh and a changed line does
not. The documentation marks a stale record and names the files; ``python -m benchmarks.run
--stale`` measures the stale ones again.
"""

from __future__ import annotations

import ast
import datetime
import json
import math
import operator
import os
import re
import subprocess
import time
from pathlib import Path

from lib.core.paths import ROOT, outputs_root
from lib.io import write_json
from lib.io.provenance import git_state, machine

# the published records (`python -m benchmarks.publish`), from which the docs' performance page is rendered
RECORDS = ROOT / "benchmarks" / "records"
# the papers' values beside ours (`python -m benchmarks.publish reproduction RUN`), for the reproduction page
REPRODUCTION = ROOT / "docs" / "records" / "reproduction.json"

# others' runnable tasks per core above which a figure counts as measured under load: on 2 cores,
# one busy neighbour (another test run, a notebook) is enough to slow a CPU-bound figure visibly
UNDER_LOAD_PER_CORE = 0.5
# the command that writes each record, where it is not `make bench`
COMMANDS = {"gpu": "make gpu-check", "ci": "python -m benchmarks.ci"}
# a target's rule: a comparison and a JSON value; the longer operators first, so ">=" is not read as ">"
RULE = re.compile(r"^\s*(>=|<=|==|>|<)\s*(\S.*?)\s*$")
COMPARISONS = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
}
# a figure's path: keys joined by dots, each followed by any list indexes ("curves.constant[3].rescore_seconds")
FIGURE_PATH = re.compile(r"^[^.\[\]]+(?:\[\d+\])*(?:\.[^.\[\]]+(?:\[\d+\])*)*$")
PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


# project modules a benchmark imports to write its record, not to measure anything: a change to them
# moves no figure, so it does not make a record stale
RECORD_KEEPING = ("benchmarks/records.py", "lib/core/paths.py", "lib/io/provenance.py")


class TargetError(ValueError):
    """A record's targets cannot be judged: none stated, a rule that does not parse, or a rule
    naming a figure the record does not have (or one of the wrong kind)."""


def _who(record: dict) -> str:
    return f"record {record.get('benchmark', '(unnamed)')!r}"


def parse_rule(rule: str) -> tuple[str, bool | int | float]:
    """A target's rule as (comparison, value): ``">= 1.6"`` -> ``(">=", 1.6)``, ``"== true"`` -> ``("==", True)``."""
    m = RULE.match(rule) if isinstance(rule, str) else None
    value = None
    if m:
        try:
            value = json.loads(m.group(2))
        except json.JSONDecodeError:
            m = None
    if not m or not isinstance(value, (bool, int, float)) or not math.isfinite(value):
        raise TargetError(
            f"target rule {rule!r}: write a comparison ({', '.join(COMPARISONS)}) and a number, true "
            f'or false, e.g. ">= 1.6" or "== true"'
        )
    return m.group(1), value


def figure(record: dict, name: str):
    """The figure a target names: the record's value at the dotted path ``name`` (``[i]``: a list's element)."""
    if not isinstance(name, str) or not FIGURE_PATH.match(name):
        raise TargetError(
            f"{_who(record)}: target {name!r} is not a figure's path (keys joined by dots, [i] for a "
            f"list's element, e.g. curves.constant[3].rescore_seconds)"
        )
    value = record
    for key, index in PATH_PART.findall(name):
        if key and isinstance(value, dict) and key in value:
            value = value[key]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            raise TargetError(
                f"{_who(record)}: target {name!r} names a figure the record does not contain"
            )
    return value


def verdict(record: dict, name: str) -> bool:
    """Does the record's figure ``name`` meet the rule its ``targets`` state for it?"""
    rule = (record.get("targets") or {}).get(name)
    if rule is None:
        raise TargetError(f"{_who(record)}: no target stated for {name!r}")
    op, wanted = parse_rule(rule)
    value = figure(record, name)
    # true == 1 in Python: a number against true/false (or the reverse) is a target on the wrong figure
    if isinstance(value, bool) != isinstance(wanted, bool) or not isinstance(
        value, (bool, int, float)
    ):
        raise TargetError(
            f"{_who(record)}: figure {name!r} is {json.dumps(value)}, which rule {rule!r} cannot judge"
        )
    if isinstance(wanted, bool) and op != "==":
        raise TargetError(
            f"{_who(record)}: rule {rule!r} for {name!r}: true and false are only compared with =="
        )
    return bool(COMPARISONS[op](value, wanted))


def verdicts(record: dict) -> dict[str, bool]:
    """Figure -> whether it meets its target, for every target the record states."""
    return {name: verdict(record, name) for name in record.get("targets") or {}}


def meets(record: dict) -> bool:
    """The record's ``meets_targets``: every target it states met. A record stating none cannot
    fail, so it has no verdict: :class:`TargetError`."""
    if not record.get("targets"):
        raise TargetError(
            f"{_who(record)}: no targets stated; a benchmark states what its figures must meet "
            f"(record(name, result, before, targets))"
        )
    return all(verdicts(record).values())


def known_misses(record: dict) -> dict[str, str]:
    """The targets a record admits it misses, each with its reason (``known_misses``: figure ->
    why); a reason must be a sentence, not an empty string, and is refused on a target the record
    meets (a stale reason, left from a run that missed, would show a miss the figures do not)."""
    misses = record.get("known_misses") or {}
    if not isinstance(misses, dict) or not all(
        isinstance(v, str) and v.strip() for v in misses.values()
    ):
        raise TargetError(
            f"{_who(record)}: known_misses maps a figure to the reason it misses its target (text)"
        )
    unknown = [name for name in misses if name not in (record.get("targets") or {})]
    if unknown:
        raise TargetError(
            f"{_who(record)}: known_misses names {unknown}, which are not among its targets"
        )
    met = [name for name in misses if verdict(record, name)]
    if met:
        raise TargetError(
            f"{_who(record)}: known_misses gives a reason for {met}, which it meets: remove the "
            f"stale reason (a reason is for a target the record misses)"
        )
    return dict(misses)


def unexplained_misses(record: dict) -> list[str]:
    """The targets a record misses without a reason under ``known_misses``: a committed record with
    any fails the tests and is refused by the publisher (a figure that missed is not success)."""
    explained = known_misses(record)
    return [name for name, met in verdicts(record).items() if not met and name not in explained]


def host_state() -> dict:
    """The load averages now, and the CPU seconds this process and its finished children have used."""
    t = os.times()
    return {
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpu_s": t.user + t.system + t.children_user + t.children_system,
        "time_s": time.monotonic(),
    }


def stamp(name: str) -> dict:
    """When, on which commit and by which command a record is written."""
    command = COMMANDS.get(name, "make bench")
    return {
        "benchmark": name,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git_state(),
        "command": command,
    }


def under_load(before: dict, after: dict, cores: int) -> tuple[bool, float]:
    """Was the machine busy with other work while a benchmark measured? Returns the verdict and
    the cores the benchmark itself kept busy on average.

    The rule: the 1-minute load average before the measurement, or the one after it less the
    benchmark's own average use of cores (its CPU seconds, its finished child processes' included,
    over the wall-clock seconds), exceeds ``UNDER_LOAD_PER_CORE`` x ``cores``. The load after a
    measurement counts the benchmark's own threads, so without that subtraction every CPU-bound
    benchmark would mark itself. The estimate errs towards "under load": work the benchmark runs
    in processes it has not yet reaped (a server it still holds) counts as others', and a
    benchmark competing for the cores gets fewer CPU seconds than it has threads waiting to run
    (which only happens when others are running)."""
    seconds = max(after["time_s"] - before["time_s"], 1e-9)
    own = max(after["cpu_s"] - before["cpu_s"], 0.0) / seconds
    limit = UNDER_LOAD_PER_CORE * (cores or 1)
    return before["loadavg"][0] > limit or after["loadavg"][0] - own > limit, own


def record(
    name: str,
    result: dict,
    before: dict,
    targets: dict[str, str],
    reasons: dict[str, str] | None = None,
) -> dict:
    """Write ``result`` with its ``targets`` (figure -> rule), whether it meets them (:func:`meets`),
    the date, the commit, the machine and its load (``before``: :func:`host_state` at the start).
    ``reasons`` (figure -> why it misses its target today) become ``known_misses`` for the figures
    that miss, judged by their rules (a reason on a met figure would be refused as stale).

    A result that says it was ``skipped`` measured nothing: it states its targets and has no verdict.
    Targets that cannot be judged (:class:`TargetError`) are raised once the record is written, so a
    long measurement is not lost to a misnamed target (the publisher refuses such a record)."""
    if {"targets", "meets_targets"} & set(result):
        raise ValueError(
            f"record {name!r}: pass the targets as record()'s argument; meets_targets is computed here"
        )
    after = host_state()
    info = machine()
    busy, own = under_load(before, after, info["cores"])
    minutes = ("1min", "5min", "15min")
    result = {**stamp(name), **result, "targets": dict(targets)}
    problem = None
    if "skipped" not in result:
        try:
            missed = {k: why for k, why in (reasons or {}).items() if not verdict(result, k)}
            result |= {"known_misses": missed} if missed else {}
            result["meets_targets"] = meets(result)
        except TargetError as e:
            problem = e
    result = {
        **result,
        "machine": {**result.get("machine", {}), **info},
        "load": {
            "before": dict(zip(minutes, before["loadavg"])),
            "after": dict(zip(minutes, after["loadavg"])),
            "own_cores": round(own, 2),
            "under_load": busy,
            "rule": f"1-min load before, or after less own_cores, > {UNDER_LOAD_PER_CORE} x cores",
        },
    }
    out = outputs_root() / "bench" / f"{name}.json"
    write_json(out, result)
    print(json.dumps(result, indent=2))
    print(f"-> {out}")
    if problem:
        raise TargetError(
            f"{out}: {problem}; the figures are written, without meets_targets: fix the benchmark's "
            f"targets"
        ) from problem
    return result


def measured_files(module: str | Path, root: Path = ROOT) -> list[str]:
    """The code a benchmark module measures, as paths under ``root``: the module itself and the
    project modules it imports (``lib.x`` / ``from lib.x import y``: ``lib/x.py`` or its
    ``__init__.py``, and ``lib/x/y.py`` where ``y`` is a module), less :data:`RECORD_KEEPING`."""
    module = Path(module)
    found = {module.resolve().relative_to(root.resolve()).as_posix()}
    for node in ast.walk(ast.parse(module.read_text(), str(module))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in ("lib", "benchmarks", "scripts"):
                continue
            base = Path(*name.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if (root / candidate).is_file():
                    found.add(candidate.as_posix())
    return sorted(found - set(RECORD_KEEPING))


def code_of(source: str, where: str = "<source>") -> str:
    """A module's code as :func:`stale` compares it: its syntax tree with every docstring left out
    (layout, comments and wording do not run)."""
    tree = ast.parse(source, where)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def stale(record: dict, module: str | Path, root: Path = ROOT) -> list[str]:
    """The files of :func:`measured_files` whose code (:func:`code_of`) differs between the
    record's commit and the working tree - a file added since counts - empty when the record
    measured the code as it is. A record without a commit, or one whose commit this clone lacks,
    raises :class:`TargetError` naming it (nothing can say what it measured)."""
    sha = (record.get("commit") or {}).get("sha")
    if not sha:
        raise TargetError(
            f"{_who(record)}: no commit recorded, so no code is known to have its figures"
        )

    def at_commit(path: str) -> str | None:
        done = subprocess.run(
            ["git", "show", f"{sha}:{path}"], cwd=root, capture_output=True, text=True
        )
        if done.returncode == 0:
            return done.stdout
        known = subprocess.run(
            ["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=root, capture_output=True
        )
        if known.returncode != 0:
            raise TargetError(
                f"{_who(record)}: its commit {sha[:10]} is not in this clone (a shallow clone?): "
                f"fetch the history to tell whether it is stale"
            )
        return None  # the file did not exist then

    changed = []
    for path in measured_files(module, root):
        then = at_commit(path)
        now = (root / path).read_text()
        if then is None or code_of(then, f"{sha[:10]}:{path}") != code_of(now, path):
            changed.append(path)
    return changed
