"""Command line: a dataset generated alone, or in shards for cluster runs, and the shards merged.

    python -m lib.families.scrapbook --params params/04_scrapbook.unique_all.yaml --out DIR --shard i --num-shards k
    python -m lib.families.scrapbook merge --out DIR SHARD_DIR [SHARD_DIR ...]

It writes one shard's dataset folder into ``DIR`` (the whole dataset without ``--shard``); the params
are :class:`ScrapbookParams` fields (a stage params file works as it is; ``run`` is ignored). Stage 04
itself - datasets, figures, summary, provenance - is ``python -m lib.stages.scrapbook``.
"""

from __future__ import annotations

import argparse
import json
import sys

from lib import config
from lib.families.scrapbook.generate import generate
from lib.families.scrapbook.merge import merge
from lib.families.scrapbook.params import ScrapbookParamError, ScrapbookParams


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["merge"]:
        ap = argparse.ArgumentParser(prog="python -m lib.families.scrapbook merge")
        ap.add_argument("--out", required=True)
        ap.add_argument("shards", nargs="+")
        args = ap.parse_args(argv[1:])
        try:
            stats = merge(args.shards, args.out)
        except ScrapbookParamError as e:  # a shard set with gaps, an unfinished shard
            print(f"error: {e}", file=sys.stderr)
            return 2
    else:
        ap = argparse.ArgumentParser(prog="python -m lib.families.scrapbook", description="Generate a Scrapbook dataset.")
        ap.add_argument("--params", required=True, help="flat YAML of ScrapbookParams fields")
        ap.add_argument("--out", required=True)
        ap.add_argument("--shard", type=int, default=0)
        ap.add_argument("--num-shards", type=int, default=1)
        ap.add_argument("--seed", type=int, help="overrides the file's seed")
        args = ap.parse_args(argv)
        data = config.load_layer(args.params)
        for key in ("run", "sets", "n_preview"):  # pipeline and stage keys: no generator parameters
            data.pop(key, None)
        if args.seed is not None:
            data["seed"] = args.seed
        try:
            params = ScrapbookParams.from_dict(data, source=args.params)
            stats = generate(params, args.out, args.shard, args.num_shards)
        except ScrapbookParamError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    print(json.dumps({k: stats[k] for k in ("images", "questions", "by_type", "placement_failures")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
