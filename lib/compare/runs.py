"""Why two numbers differ: the command line of the run comparison (:mod:`lib.compare.explain`).

    python -m lib.compare RUN_A RUN_B [--dataset D] [--task T] [--model M] [--style S] [--json PATH]
                          [--export TASKDIR ...] [--import-to DIR ...]

A run is a run name (its ``outputs/<run>/06_evaluate``), an evaluation folder, or lmms-eval's
``--log_samples`` output for a task ``python -m lib.export lmms-eval`` wrote (its ``--output_path``
folder, a samples file or its results file): that is imported first (:mod:`lib.eval.foreign`),
into a temporary folder or the ``--import-to`` folder given (one per lmms-eval run, in order);
``--export`` names the export folders where lmms-eval's results file no longer points at them. A
filter given one value selects it in both runs; given two, run A's then run B's (``--model
untrained trained`` compares two models of one run). Prints the changed items by first cause, the
metrics with their small-sample paired intervals, tests with Holm's and Benjamini-Hochberg's
adjusted p across the rows (and which rows survive), McNemar tests that count clusters, a verdict
in words per row (:func:`lib.eval.paired.verdict`), and the config diff; ``--json`` writes the
whole result. Both runs are verified first as a rescore verifies one
(:func:`lib.eval.manifest.check_manifest`). Exits 0 on success, 2 when a run or a filter value is
missing, a run did not finish or was edited after it finished, or an import fails; and, before
anything is imported, when A and B are one run (links resolved; unless a filter gives each its own
value), an ``--import-to`` folder is an input or named twice, or an option is given twice
(argparse would keep the last silently).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from lib.compare.explain import CAUSES, DIMENSIONS, CompareError, check_two_runs, compare
from lib.eval.foreign import ForeignError, import_lmms_eval
from lib.eval.foreign_files import is_lmms_eval_output
from lib.io import artifacts, write_json
from lib.metrics.multiple import LEVEL


def evaluation_folder(run: str) -> Path:
    """A run name's ``06_evaluate`` folder, or the folder given (or its ``06_evaluate``)."""
    return artifacts.evaluation_folder(run, CompareError)


def _identity(run: str) -> Path:
    """What a run argument names, links resolved: its evaluation folder, else the path given."""
    try:
        return evaluation_folder(run).resolve()
    except CompareError:
        return Path(run).resolve()


def check_inputs(runs: list[str], import_to: list[str], filters: dict | None = None) -> None:
    """Before anything is imported: the runs are two (:func:`lib.compare.explain.check_two_runs`),
    and each ``--import-to`` folder is named once and is neither an input nor inside or around one
    (an import there would replace what is compared)."""
    given = {run: _identity(run) for run in runs}
    if len(runs) == 2:
        check_two_runs(given[runs[0]], given[runs[1]], filters)
    seen: dict[Path, str] = {}
    for target in import_to:
        at = Path(target).resolve()
        if at in seen:
            raise CompareError(
                f"--import-to names one folder twice ({seen[at]} and {target}, {at}): each "
                f"lmms-eval run is imported into a folder of its own"
            )
        seen[at] = target
        for run, folder in given.items():
            if at == folder or at in folder.parents or folder in at.parents:
                raise CompareError(
                    f"--import-to {target} is, holds or is inside run {run} ({folder}), an input "
                    f"of this comparison: importing there would replace what is compared; choose "
                    f"another folder"
                )


def runs_to_compare(
    runs: list[str],
    exports: list[str],
    import_to: list[str],
    stack: ExitStack,
    filters: dict | None = None,
) -> tuple[list, dict]:
    """Each run's evaluation folder (:func:`evaluation_folder`), and the runs imported: lmms-eval
    output is imported first (:func:`lib.eval.foreign.import_lmms_eval`) into the next
    ``import_to`` folder, else into a temporary one ``stack`` removes (the same output given twice,
    with a two-valued filter, is imported once). The inputs are checked first (:func:`check_inputs`)."""
    check_inputs(runs, import_to, filters)
    folders, imported, targets = [], {}, list(import_to)
    foreign = [r for r in dict.fromkeys(runs) if not _evaluation(r) and is_lmms_eval_output(r)]
    if len(targets) > len(foreign):
        raise CompareError(
            f"--import-to names {len(targets)} folders for {len(foreign)} lmms-eval run(s) to import"
        )
    for run in runs:
        if run in foreign and run not in imported:
            out = (
                Path(targets.pop(0))
                if targets
                else Path(stack.enter_context(tempfile.TemporaryDirectory())) / artifacts.EVALUATE
            )
            import_lmms_eval(run, out, exports)
            imported[run] = out
        folders.append(imported.get(run) or evaluation_folder(run))
    return folders, imported


def shown(result: dict, runs: list[str], imported: dict, import_to: list[str]) -> dict:
    """The result with an imported run named by the lmms-eval output it came from."""
    kept = {str(Path(d)) for d in import_to}
    for side, run in zip("AB", runs):
        if run in imported:
            folder = imported[run]
            result[side] = f"{run} (lmms-eval output, imported " + (
                f"into {folder})"
                if str(folder) in kept
                else "into a temporary folder: --import-to keeps it)"
            )
    return result


def _evaluation(run: str) -> bool:
    try:
        evaluation_folder(run)
        return True
    except CompareError:
        return False


def _num(x) -> str:
    return "-" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)


def _p(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def metric_lines(metrics: list[dict]) -> list[str]:
    """The metric rows as text: A, B, B - A with its small-sample 95% interval over the clusters,
    the smallest difference it detects, its test's p, Holm's and Benjamini-Hochberg's p across the
    rows (``*``: the row survives the correction), McNemar's p (clusters counted), each cause's
    share; under each row its verdict in words, then which rows survive."""
    if not metrics:
        return []
    labels = ["/".join(map(str, m["group"])) for m in metrics]
    w = max([5, *map(len, labels)])
    out = [
        "",
        f"{'group':{w}} {'metric':16} {'n':>5} {'clust':>5} {'A':>7} {'B':>7} {'B-A':>7} "
        f"{'95% CI (t)':>17} {'detects':>7} {'p':>8} {'Holm p':>9} {'BH p':>9} {'McNemar':>8}  "
        + "  ".join(f"{c:>7}" for c in CAUSES),
    ]
    for label, m in zip(labels, metrics):
        ci = f"[{m['ci_low']:+.3f}, {m['ci_high']:+.3f}]" if m["ci_low"] == m["ci_low"] else "-"
        detects = "-" if m["detectable"] is None else f"{m['detectable']:7.3f}"
        holm = _p(m["p_holm"]) + ("*" if m["holm"] else " ")
        bh = _p(m["p_bh"]) + ("*" if m["bh"] else " ")
        out.append(
            f"{label:{w}} {m['metric'][:16]:16} {m['n']:5} {m['n_clusters']:5} {m['A']:7.3f} "
            f"{m['B']:7.3f} {m['difference']:+7.3f} {ci:>17} {detects:>7} {_p(m['p']):>8} "
            f"{holm:>9} {bh:>9} {_p(m['mcnemar_p']):>8}  "
            + "  ".join(f"{m['by_cause'][c]:+7.3f}" for c in CAUSES)
        )
        out.append(f"{'':{w}}   {m['words']}")
    tested = [m for m in metrics if m["p_holm"] is not None]
    for name, key in (
        ("Holm (family-wise)", "holm"),
        ("Benjamini-Hochberg (false discovery)", "bh"),
    ):
        kept = [f"{lb} {m['metric']}" for lb, m in zip(labels, metrics) if m[key]]
        out.append(
            f"after {name} correction at {LEVEL} over {len(tested)} rows: "
            + (f"{len(kept)} survive: {', '.join(kept)}" if kept else "none survives")
        )
    return out


def report(result: dict) -> str:
    """The comparison as text: counts, causes with what explains them, metrics, config diff."""
    out = [
        f"A: {result['A']}",
        f"B: {result['B']}",
        f"paired items: {result['paired']} (grouped by {', '.join(result['group_by'])}); "
        f"only in A: {result['only_A']}; only in B: {result['only_B']}",
        f"changed items: {result['changed']}"
        + (" - the runs agree on every paired item" if not result["changed"] else ""),
    ]
    for cause in CAUSES:
        c = result["causes"][cause]
        if c["items"]:
            named = ", ".join(
                f"{k} ({v})" for k, v in sorted(c["because"].items(), key=lambda kv: -kv[1])
            )
            out.append(
                f"  {cause:8} {c['items']:6} items, {c['outcome_changed']} with another outcome; because: {named}"
            )
    out += metric_lines(result["metrics"])
    out += [f"note: {n}" for n in result.get("notes", [])]
    out += ["", "config diff:" if result["config"] else "config diff: none"]
    out += [
        f"  {r['key']}: {_num(r['A'])} ({r['A_from']}) -> {_num(r['B'])} ({r['B_from']})"
        for r in result["config"]
    ]
    return "\n".join(out)


class _Once(argparse.Action):
    """An option given at most once: a repeat is noted (``namespace.repeated``), for :func:`main` to
    refuse, where argparse would keep the last value silently."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("given", {})
        if self.dest in given:
            namespace.__dict__.setdefault("repeated", []).append((given[self.dest], option_string))
        given[self.dest] = option_string
        setattr(namespace, self.dest, values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lib.compare", description="Compare two evaluation runs item by item."
    )
    ap.add_argument("run_a", help="run name (outputs/<run>/06_evaluate) or evaluation folder")
    ap.add_argument(
        "run_b", help="the run to compare it with (it may be the same run, with two-valued filters)"
    )
    for dim in DIMENSIONS:
        ap.add_argument(
            f"--{dim}",
            f"--{dim}s",
            dest=dim,
            action=_Once,
            nargs="+",
            metavar=dim.upper(),
            help=f"one {dim} (both runs) or two (run A's, run B's)",
        )
    ap.add_argument(
        "--json", action=_Once, help="write the full result (every changed item) to this file"
    )
    ap.add_argument(
        "--export",
        action=_Once,
        nargs="+",
        default=[],
        metavar="TASKDIR",
        help="lmms-eval runs: the folders `python -m lib.export lmms-eval` wrote (default: where its results say)",
    )
    ap.add_argument(
        "--import-to",
        action=_Once,
        nargs="+",
        default=[],
        metavar="DIR",
        help="lmms-eval runs: keep each imported evaluation folder here (default: a temporary folder)",
    )
    args = ap.parse_args(argv)
    for first, again in getattr(args, "repeated", ()):
        print(
            f"error: {again} is given twice (also as {first}); give it once with all its values "
            f"(e.g. --import-to DIR_A DIR_B)",
            file=sys.stderr,
        )
        return 2
    filters = {d: getattr(args, d) for d in DIMENSIONS}
    try:
        with ExitStack() as stack:
            folders, imported = runs_to_compare(
                [args.run_a, args.run_b], args.export, args.import_to, stack, filters
            )
            result = compare(*folders, filters)
            result = shown(result, [args.run_a, args.run_b], imported, args.import_to)
    except (CompareError, ForeignError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(result))
    if args.json:
        write_json(args.json, result)
    return 0
