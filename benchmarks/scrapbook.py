"""Scrapbook benchmarks (``make bench``): the whole unique_all dataset vs merely rendering and
PNG-encoding its 162 images, questions per second, and peak memory at 1x and 3x the questions.
Both runs encode PNGs the same way (on :class:`BackgroundIO`'s worker threads).

Each measurement runs in a fresh subprocess so its peak RSS is its own. Medians of 3 runs;
ratios are taken within this one run. Writes ``outputs/bench/scrapbook.json``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import yaml

from benchmarks._record import host_state, record
from lib.paths import PARAMS

REPEATS = 3

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from lib.scrapbook import ScrapbookParams, generate
from lib.scrapbook.generate import BackgroundIO, build_unit, object_sets, prepare, set_backgrounds, units
from lib.paths import cache_dir
from collections import Counter

def peak_rss_mb():
    # VmHWM belongs to this process image (reset by exec), unlike ru_maxrss, which a child
    # forked from a large parent (make bench's) inherits
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

mode, params = sys.argv[1], ScrapbookParams.from_dict(json.loads(sys.argv[2]))
out = Path(tempfile.mkdtemp())
start = time.perf_counter()
if mode == "full":
    stats = generate(params, out, progress=False)
    n_images, n_questions = stats["images"], stats["questions"]
else:  # render + PNG-encode the same images, nothing else (encoding on the same worker threads)
    res = prepare(params, cache_dir("scrapbook"))
    sets = object_sets(params, res)
    bgs = [set_backgrounds(params, res, objs, s) for s, objs in enumerate(sets)]
    n_images, n_questions, failures = 0, 0, Counter()
    with BackgroundIO() as io:
        for unit in units(params):
            for step in build_unit(params, unit, sets[unit[0]], bgs[unit[0]][unit[1]], failures):
                io.save(step.image, out / f"{step.scene['id']}.png")
                n_images += 1
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "images": n_images, "questions": n_questions,
                  "peak_rss_mb": peak_rss_mb()}))
"""


def _run(mode: str, params: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, mode, json.dumps(params)], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _median(mode: str, params: dict) -> dict:
    runs = [_run(mode, params) for _ in range(REPEATS)]
    best = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    return {**best, "seconds": statistics.median(r["seconds"] for r in runs)}


def main() -> dict:
    before = host_state()
    params = yaml.safe_load((PARAMS / "04_scrapbook.unique_all.yaml").read_text())
    full = _median("full", params)
    encode = _median("encode", params)
    third = _median("full", {**params, "n_questions_per_type": 1})
    result = {
        "images": full["images"], "questions": full["questions"],
        "unique_all_seconds": round(full["seconds"], 2), "encode_only_seconds": round(encode["seconds"], 2),
        "ratio": round(full["seconds"] / encode["seconds"], 2),
        "questions_per_second": round(full["questions"] / full["seconds"]),
        "peak_rss_mb": round(full["peak_rss_mb"], 1),
        "peak_rss_mb_third_of_the_questions": round(third["peak_rss_mb"], 1),
        "questions_third": third["questions"],
        "encode_only_peak_rss_mb": round(encode["peak_rss_mb"], 1),
        "targets": {"ratio_at_most": 2},
    }
    result["meets_targets"] = result["ratio"] <= 2 and full["images"] == 162
    return record("scrapbook", result, before)


if __name__ == "__main__":
    main()
