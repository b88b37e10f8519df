"""Scrapbook benchmarks (``make bench``): the whole unique_all dataset vs merely rendering and
PNG-encoding its 162 images, questions per second, and peak memory at 1x and 3x the questions.
Both runs encode PNGs the same way (on :class:`BackgroundIO`'s worker threads).

Each measurement runs in a fresh subprocess so its peak RSS is its own. Medians of 3 runs;
ratios are taken within this one run. Writes ``outputs/bench/scrapbook.json``.

``parts`` says where the whole dataset's extra time goes, from one more run of each with the
main thread's time split by what it was doing: rendering scenes (``build_unit``, as the encode-only
run does), handing each scene to the question lines (``QuestionLines``: they make the lines -
programs, answers, paraphrases, JSON - and write and hash them; with the profile's
``question_worker``, as unique_all sets it, in a worker process while the main process renders,
so waiting for it at the end is a part of its own), waiting for the PNG and file-writing threads
(``BackgroundIO``; only the whole dataset also encodes a mask per image), and the rest (preparing,
the summary tables and manifest).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import asdict

import yaml

from benchmarks.records import host_state, record
from lib.core.paths import PARAMS
from lib.stages.scrapbook import ScrapbookConfig

REPEATS = 3
# the whole dataset at most twice the cost of merely rendering and encoding its images, and all of them
TARGETS = {"ratio": "<= 2", "images": "== 162"}

CHILD = r"""
import json, shutil, sys, tempfile, time
from pathlib import Path
from lib.families.scrapbook import ScrapbookParams, generate
from lib.families.scrapbook.generate import BackgroundIO
from lib.families.scrapbook.scenes import build_unit, object_sets, prepare, set_backgrounds, units
from lib.core.paths import cache_dir
from collections import Counter

def peak_rss_mb():
    # VmHWM belongs to this process image (reset by exec), unlike ru_maxrss, which a child
    # forked from a large parent (make bench's) inherits
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

mode, params, worker = sys.argv[1], ScrapbookParams.from_dict(json.loads(sys.argv[2])), sys.argv[3] == "worker"
out = Path(tempfile.mkdtemp())
spent = Counter()
if mode.endswith("_parts"):  # the main thread's seconds by what it is doing (module functions, looked up per call)
    G = sys.modules["lib.families.scrapbook.generate"]  # the module (lib.families.scrapbook's ``generate`` is the function)

    def timed(name, f):
        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t
        return g

    G.build_unit = build_unit = timed("render", G.build_unit)
    G.QuestionLines.add = timed("handing_scenes_to_questions", G.QuestionLines.add)
    G.QuestionLines.__exit__ = timed("waiting_for_questions", G.QuestionLines.__exit__)
    G.BackgroundIO._track = timed("waiting_for_io_threads", G.BackgroundIO._track)
    G.BackgroundIO.__exit__ = timed("waiting_for_io_threads", G.BackgroundIO.__exit__)
    mode = mode.removesuffix("_parts")
start = time.perf_counter()
if mode == "full":
    stats = generate(params, out, progress=False, question_worker=worker)
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
                  "peak_rss_mb": peak_rss_mb(), "parts": {**{k: round(v, 2) for k, v in spent.items()},
                                                          "rest": round(seconds - sum(spent.values()), 2)}}))
shutil.rmtree(out, ignore_errors=True)  # a whole unique_all set per run: none left behind in the temporary folder
"""


def _run(mode: str, params: dict, worker: bool) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, mode, json.dumps(params), "worker" if worker else "plain"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def _median(mode: str, params: dict, worker: bool) -> dict:
    runs = [_run(mode, params, worker) for _ in range(REPEATS)]
    best = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    return {**best, "seconds": statistics.median(r["seconds"] for r in runs)}


def main() -> dict:
    before = host_state()
    # read as stage 04 reads its params file (it also holds the stage's own keys, e.g. compare_to_paper)
    cfg = ScrapbookConfig(**yaml.safe_load((PARAMS / "04_scrapbook.unique_all.yaml").read_text()))
    params, worker = asdict(cfg.params()), cfg.question_worker
    full = _median("full", params, worker)
    encode = _median("encode", params, worker)
    third = _median("full", {**params, "n_questions_per_type": 1}, worker)
    result = {
        "images": full["images"],
        "questions": full["questions"],
        "unique_all_seconds": round(full["seconds"], 2),
        "encode_only_seconds": round(encode["seconds"], 2),
        "ratio": round(full["seconds"] / encode["seconds"], 2),
        "questions_per_second": round(full["questions"] / full["seconds"]),
        "peak_rss_mb": round(full["peak_rss_mb"], 1),
        "peak_rss_mb_third_of_the_questions": round(third["peak_rss_mb"], 1),
        "questions_third": third["questions"],
        "encode_only_peak_rss_mb": round(encode["peak_rss_mb"], 1),
        # one run each, the main thread's seconds by activity (module docstring); not medians
        "question_worker": worker,
        "parts": {
            "unique_all": _run("full_parts", params, worker)["parts"],
            "encode_only": _run("encode_parts", params, worker)["parts"],
        },
    }
    return record("scrapbook", result, before, TARGETS)


if __name__ == "__main__":
    main()
