"""The command line every stage shares: ``python -m lib.stages.<name> --profile P [--set k=v] [--out DIR]``
or ``--params FILE [--params FILE ...] --out DIR``.

The config is resolved by :func:`lib.config.resolve`, the same function the notebooks and the
pipeline use; this module adds only what a process started from a shell needs: parsing the
arguments, going offline for an offline profile, the output folder claimed as the stage's
(:func:`lib.io.folders.claimed`: never a folder of another kind), and a busy run folder said as an
error. The run folder's lock is held by the stage's ``run()`` itself (:func:`lib.config.stage_run`),
so a notebook or a script calling it is locked out of a run another process writes, as the command
line is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lib.config import OFFLINE_ENV, ParamsError, parse_yaml, resolve
from lib.core.paths import BadName, RunBusy, check_name
from lib.core.ranks import ranks
from lib.io import NotOurFolder
from lib.io.folders import claimed

# errors in what a stage was given (a busy run, a bad value where it is used, an output folder of
# another kind, an input that is not there), said as "error: ..." and exit 2
INPUT_ERRORS = (RunBusy, BadName, ParamsError, NotOurFolder, FileNotFoundError)


def run_name(text: str) -> str:
    """An argparse ``type`` for a run's name: :data:`lib.core.paths.NAME`, else argparse's error."""
    try:
        return check_name(text, "run name")
    except BadName as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def go_offline() -> None:
    """Set the offline variables (kernels and subprocesses started later inherit them)."""
    os.environ.update(OFFLINE_ENV)


def _assignment(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep:
        raise ParamsError(
            f"--set {text!r}: write key=value (a YAML value, e.g. max_steps=50 or models=[vlm])"
        )
    return key.strip(), parse_yaml(value, f"--set {key.strip()}")


def parser(prog: str, description: str = "") -> argparse.ArgumentParser:
    """The arguments that say which config a stage runs with (and where it writes); a stage's own
    commands add theirs (e.g. stage 04's ``shard``)."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument(
        "--profile", help="a profile of params/ (its models, stage file and shared fields)"
    )
    ap.add_argument(
        "--params",
        action="append",
        default=[],
        help="flat YAML of config fields (repeatable; later wins)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one field (YAML value; repeatable)",
    )
    ap.add_argument("--run", help="the run name (default: the profile's)")
    ap.add_argument("--out", help="the stage folder to write (default: outputs/<run>/<stage>/)")
    return ap


def check_shards(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A stage's ``shard`` / ``merge`` command's ``--num-shards`` (at least 1) and ``--shard`` (0 to
    num-shards - 1, where the command has one), a usage error otherwise."""
    if args.num_shards < 1:
        ap.error(f"--num-shards: at least 1, got {args.num_shards}")
    shard = getattr(args, "shard", None)
    if shard is not None and not 0 <= shard < args.num_shards:
        ap.error(f"--shard: 0 to {args.num_shards - 1} for {args.num_shards} shards, got {shard}")


def resolved(cls, args: argparse.Namespace):
    """The stage config the arguments of :func:`parser` name (:func:`lib.config.resolve`), offline
    for an offline profile, described on stderr; None after printing a bad parameter's error."""
    try:
        overrides = dict(_assignment(a) for a in args.set)
        stage = resolve(
            cls,
            args.profile or (None if not args.params else False),
            args.run,
            overrides,
            extra=args.params,
        )
        if stage.profile is not None and stage.profile.offline:
            go_offline()
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    print(stage.describe(), file=sys.stderr)
    return stage


def main(prog: str, cls, run, argv: list[str] | None = None, description: str = "") -> int:
    """The command line every stage shares: a profile and overrides (``--profile P --set k=v``)
    and/or params files (``--params FILE``, repeatable), resolved by :func:`lib.config.resolve`."""
    args = parser(prog, description).parse_args(argv)
    stage = resolved(cls, args)
    if stage is None:
        return 2
    out = Path(args.out) if args.out else stage.out
    try:  # run() holds the run folder's lock (lib.config.stage_run)
        with claimed(out, stage.stage, ranks().main):
            summary = run(stage.cfg, out)
    except INPUT_ERRORS as e:  # what the user gave, said as such: never a traceback
        print("\n".join(f"error: {line}" for line in str(e).splitlines()), file=sys.stderr)
        return 2
    if ranks().main:
        print(json.dumps(summary, indent=1, default=str))
    return 0
