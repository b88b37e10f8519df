"""Stage 06 · Evaluate: ask models the tasks' questions, read the answers honestly, score them.

    run(EvalConfig(datasets=..., models=...), out)       # every step in order
    python -m lib.evaluate --profile demo          # -> outputs/demo/06_evaluate
    python -m lib.evaluate rescore --run RUN   # recompute every table from stored outputs, no model

Notebook 06 calls the steps :func:`run` composes one per section: :func:`items_to_ask`,
:func:`ask`, :func:`rescore_folder`, then :func:`finish` (summary and provenance).

Every model call goes through the call cache, so a killed evaluation resumes without repeating
finished calls, and rescoring needs no model at all. Neither holds the predictions: they are
written as they are made, and scoring streams them back a chunk at a time into each group's
compact state (:class:`lib.tasks.Scorer`; Scrapbook's keeps a few codes per answer), so an
evaluation of a paper-scale Scrapbook set, with any number of models, stays near the memory of
its imports and its model. Answers are read as :mod:`lib.tasks` defines:
constrained decoding over the closed answer set where the task has one (and ``constrain`` is on),
robust parsing otherwise. What cannot be read stays in ``raw`` with ``valid=False`` and counts
as wrong in every denominator; ``n_invalid`` sits beside every metric.

Prompt styles are :mod:`lib.tasks.styles` objects: zero-shot, and zero-shot chain of thought
(``cot``) in two calls as Kojima et al. ask it (the reasoning is kept in ``meta.reasoning``). Each
task's settings (token limit, LAVE, its own options) are its block under ``tasks:``.

Outputs under ``outputs/<run>/06_evaluate/``: ``predictions.jsonl``, ``judgements.jsonl`` (LAVE),
``metrics.csv`` (model, dataset, task, style, subset, metric, value, ci_low, ci_high, n, n_invalid),
``levels.csv`` and ``errors.csv`` (Scrapbook, shaped like the paper's Tables 8-15), ``config.json``
(the resolved config rescoring reads), ``summary.json``, ``provenance.json``. The tables are written
atomically, then ``metrics.meta.json`` records the predictions and manifest they came from: a
rerun or rescore stopped before that (a kill, a full disk) leaves tables every reader refuses
(:func:`lib.artifacts.stale_tables`) rather than old numbers beside new predictions.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import itertools
import json
import os
import re
import secrets
import sys
import time
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from lib import artifacts as A
from lib import config
from lib.io import IdLookup, ItemsAt, ItemsChanged, file_sha256, item_index, jsonl_line, outside_images, read_jsonl, \
    release_memory, save_item_index, scan_items, write_csv, write_json, write_jsonl, write_lines_hashed
from lib.metrics.lave import judge as lave_judge
from lib.models import generate, load_model
from lib.schema import ERROR, Item, Judgement, Prediction, Response, is_constrained
from lib.store import CallStore, call_key
from lib.paths import stage_dir
from lib.ranks import Ranks, ranks
from lib.tasks import (PROMPT_STYLES, STYLES, TASKS, Scoring, get_task, metric_row, task_of, task_options,
                       wants_question_first)

METRIC_COLUMNS = ["model", "dataset", "task", "style", "subset", "metric", "value", "ci_low", "ci_high", "n", "n_invalid",
                  "n_truncated"]
LEVEL_COLUMNS = ["dataset", "style", "model", "level", "concepts", "concept", "type", "subgroup", "form", "n", "correct",
                 "accuracy", "passed"]
ERROR_COLUMNS = ["dataset", "style", "model", "filter", "unit", "category", "count", "share", "correct", "accuracy"]


@dataclass
class EvalConfig(config.StageConfig):
    """What to evaluate: dataset folders by name, model specs by label, prompt styles, settings."""

    STAGE: ClassVar[str] = A.EVALUATE
    MODEL_ROLES: ClassVar[dict] = {"models": "vlm", "judge": None}

    datasets: dict[str, str] = field(default_factory=dict)  # name -> folder, or stage:NN_stage/datasets/<name>
    models: dict[str, dict] = field(default_factory=lambda: {"base": {"backend": "tiny", "name": "llava"}})  # label -> spec
    demo_data: bool = False  # also evaluate the embedded demo datasets stage 00 wrote (mcq, yesbut, vqa)
    styles: list[str] = field(default_factory=lambda: ["zero_shot", "cot"])
    only_tasks: list[str] = field(default_factory=list)  # the tasks asked; empty: every task found in the datasets
    # each task's options: {name: {max_new_tokens, judge, and its own (lib.tasks: its Options)}}
    tasks: dict[str, dict] = field(default_factory=dict)
    constrain: bool = True  # constrained decoding over closed answer sets where the backend allows it
    max_new_tokens: int = 32  # an answer's token limit where its task's options set none
    cot_max_new_tokens: int = 128
    judge: dict | None = None  # LAVE judge model spec (None: no LAVE); it rates the tasks whose options say judge
    judge_max_new_tokens: int = 96
    max_items: int = 0  # per dataset (0: all); Scrapbook samples whole images so versions stay together
    n_resamples: int = 1000
    seed: int = 0

    def check(self, source: str) -> None:
        bad = [s for s in self.styles if s not in PROMPT_STYLES]
        if bad:
            raise config.ParamsError(f"{source}: styles: unknown style(s) {bad}; choose from {PROMPT_STYLES}")
        if not self.models:
            raise config.ParamsError(f"{source}: models needs at least one label: model spec")
        for kind, names in (("datasets", self.datasets), ("models", self.models)):
            bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", n) or ".." in n]
            if bad:  # they name rows, files and figures: plain names only
                raise config.ParamsError(f"{source}: {kind}: {bad[0]!r} is not a plain name (letters, digits, _ . -)")
        for label, spec in self.models.items():
            config.check_model_spec(spec, f"{source}: models.{label}")
        config.check_model_spec(self.judge, f"{source}: judge", allow_empty=True)
        unknown = [t for t in self.only_tasks if t not in TASKS]
        if unknown:
            raise config.ParamsError(f"{source}: only_tasks: unknown task(s) {unknown}; known: {', '.join(TASKS)}")
        task_options(self.tasks, f"{source}: tasks")

    @cached_property
    def options(self) -> dict:
        """Every task's options: its block of ``tasks`` over its defaults."""
        return {name: task.options(self.tasks.get(name)) for name, task in TASKS.items()}

    def answer_tokens(self, task: str) -> int:
        """The token limit of a task's answer: its options' ``max_new_tokens``, else the stage's."""
        limit = self.options[task].max_new_tokens
        return self.max_new_tokens if limit is None else limit

    def judged_tasks(self) -> set[str]:
        """The tasks whose answers the LAVE judge rates (none without a judge)."""
        return {name for name, opts in self.options.items() if opts.judge} if self.judge else set()

    def hub_ids(self) -> dict[str, str]:
        """Hub ids in the tasks' options (``tasks.<task>.<field>``: id), for the preflight."""
        return {**super().hub_ids(), **{f"tasks.{name}.{f}": getattr(opts, f) for name, opts in self.options.items()
                                        for f in opts.HUB_FIELDS if getattr(opts, f)}}

    def scoring(self) -> Scoring:
        return Scoring(self.n_resamples, self.seed, dict(self.tasks))


# --- items ----------------------------------------------------------------------------------------

UNIT_HASH_BITS = 2**63 - 1  # a sampling unit's code: its hash, non-negative


def load_eval_items(cfg: EvalConfig) -> dict[str, tuple[Path, ItemsAt]]:
    """Each dataset's folder and the items to ask (filtered by task, sampled to ``max_items``),
    read when asked for (:class:`lib.io.ItemsAt`). The file is streamed once: a sample keeps only
    each candidate's offset, unit and rank (a 2,000-question sample of an 827,004-question
    Scrapbook set never holds the rest), and no evaluation holds its questions while it asks them."""
    out = {}
    for name, folder in cfg.datasets.items():
        folder = Path(folder)
        if not (folder / "items.jsonl").exists():
            raise FileNotFoundError(f"dataset {name!r}: {folder}/items.jsonl not found (check the `datasets` parameter)")
        items, uses = _select_items(name, folder, cfg)
        release_memory()  # the pass's garbage, before a model is loaded beside it
        _check_images(name, folder, uses if uses is not None else _image_uses(items))
        out[name] = (folder, items)
    return out


def _image_uses(items: Iterable[Item], uses: dict[str, str] | None = None) -> dict[str, str]:
    """Each distinct image path of ``items`` -> the id of the first item that uses it (added to ``uses``)."""
    uses = {} if uses is None else uses
    for it in items:
        for im in it.images:
            uses.setdefault(im, it.id)
    return uses


def _check_images(name: str, folder: Path, uses: dict[str, str]) -> None:
    """Refuse, before any model is called (not as a bare error an hour into the run), image paths
    that leave the dataset folder undeclared and images that are not files, each named with the
    first item that uses it (``uses``: :func:`_image_uses`). Each distinct path is checked once
    (Scrapbook's 827,004 questions use 162 images)."""
    outside = outside_images(folder, ((i, im) for im, i in uses.items()))
    if outside:
        listed = "; ".join(f"{i}: {im}" for i, im in outside[:5])
        raise ValueError(f"dataset {name!r} ({folder}): {len(outside)} image path(s) leave the dataset folder and "
                         f"no images_roots in its dataset.json covers them: {listed}"
                         f"{' ...' if len(outside) > 5 else ''}")
    bad = [(i, im, "missing" if not (folder / im).exists() else "not a file")
           for im, i in uses.items() if not (folder / im).is_file()]
    if bad:
        listed = "; ".join(f"{i}: {im} ({why})" for i, im, why in bad[:5])
        raise ValueError(f"dataset {name!r} ({folder}): {len(bad)} image(s) of its items cannot be read: {listed}"
                         f"{' ...' if len(bad) > 5 else ''}")


def _select_items(name: str, folder: Path, cfg: EvalConfig) -> tuple[ItemsAt, dict[str, str] | None]:
    """One streaming pass: unique ids checked, the task filter applied, the offset of every item
    kept and its images' uses (:func:`_image_uses`) when there is no ``max_items``, else what
    :func:`sample_indices` needs (uses None: the sample is read for them); the id index is
    saved for rescoring (:func:`items_for`). Per line it keeps flat bytes and numbers, not
    Python objects, so a paper-scale pass costs bytes per question, not an object each. A
    sampling unit is coded by its hash (:data:`UNIT_HASH_BITS`) rather than kept as a Python key
    (tens of thousands of them stayed resident after the pass); two units whose 63-bit hashes
    collide (odds ~1e-10 at that size) would only be drawn together."""
    from array import array

    ids = bytearray()  # newline-joined, as the index stores them
    hashes, offsets, cand_offsets, units, ranks = array("q"), array("q"), array("q"), array("q"), array("d")
    uses: dict[str, str] = {}
    for off, it in scan_items(folder, share=False):
        ids += it.id.encode() + b"\n"
        hashes.append(hash(it.id))
        offsets.append(off)
        if cfg.only_tasks and it.task not in cfg.only_tasks:
            continue
        cand_offsets.append(off)
        if not cfg.max_items:
            _image_uses((it,), uses)
        else:
            task = task_of(it)
            unit = task.sample_unit(it)
            units.append(-1 if unit is None else hash(unit) & UNIT_HASH_BITS)
            ranks.append(task.sample_rank(it))
    if len(np.unique(np.frombuffer(hashes, dtype=np.int64))) < len(hashes):  # a repeated id, or a hash collision
        _refuse_duplicate_ids(name, folder, ids.decode().split("\n")[:-1])
    save_item_index(folder, bytes(ids[:-1]), offsets)
    del ids, hashes, offsets
    if not cfg.max_items:
        return ItemsAt(folder, cand_offsets, share=False), uses
    picked = sample_indices(units, ranks, cfg.max_items, cfg.seed)
    return ItemsAt(folder, [cand_offsets[i] for i in picked], share=False), None


def _refuse_duplicate_ids(name: str, folder: Path, ids: list[str]) -> None:
    """Ids must be unique within a dataset: the first repeated one is named with both its records."""
    seen: dict[str, int] = {}
    for record, i in enumerate(ids, start=1):
        if i in seen:
            raise ValueError(f"dataset {name!r}: {folder}/items.jsonl has id {i!r} twice (records {seen[i]} "
                             f"and {record}); ids must be unique within a dataset")
        seen[i] = record


class AskedItems(Mapping):
    """The evaluated items by (dataset, id), located by the id index and read from their files
    when a group is scored (:meth:`of`, a chunk at a time), not held: a 20,000-answer Scrapbook
    rescore no longer keeps 20,000 questions' Python objects beside their answers and its frame."""

    def __init__(self, folders: dict[str, Path], offsets: dict[tuple[str, str], int]):
        self.folders, self.offsets = folders, offsets

    def of(self, keys: list[tuple[str, str]]) -> ItemsAt:
        """The items of ``keys`` (all of one dataset), in that order, checked against their ids."""
        names = {name for name, _ in keys}
        if len(names) > 1:
            raise ValueError(f"AskedItems.of: keys of several datasets {sorted(names)}")
        name = names.pop() if names else ""
        return ItemsAt(self.folders.get(name, "."), [self.offsets[k] for k in keys], ids=[i for _, i in keys],
                       share=False)

    def __getitem__(self, key: tuple[str, str]) -> Item:
        return self.of([key])[0]

    def __contains__(self, key) -> bool:
        return key in self.offsets

    def __iter__(self):
        return iter(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets)


def items_for(cfg: EvalConfig, wanted: dict[str, set[str]], rebuild: bool = False) -> AskedItems:
    """The items of each dataset whose ids are ``wanted`` (dataset -> ids), located by the cached
    id index (``rebuild``: index the files again) and read only when scored: rescoring touches
    only the evaluated questions' lines. An id the dataset does not have is left out (the caller
    names it)."""
    folders, offsets = {}, {}
    for name, ids in wanted.items():
        if name not in cfg.datasets:
            continue
        folders[name] = Path(cfg.datasets[name])
        index = item_index(folders[name], rebuild=rebuild, wanted=ids)
        offsets.update({item_key(name, i): off for i, off in index.items()})
    return AskedItems(folders, offsets)


def _items_of(items, group: list[Prediction]):
    """The items of a group's predictions, in order: read lazily from :class:`AskedItems`, looked
    up in a plain mapping."""
    keys = [_key(p) for p in group]
    return items.of(keys) if isinstance(items, AskedItems) else [items[k] for k in keys]


def item_key(dataset: str, item_id: str) -> tuple[str, str]:
    """An item's identity: (dataset, id). Two datasets may share ids, never a dataset."""
    return dataset, item_id


def _key(p: Prediction) -> tuple[str, str]:
    return item_key(p.dataset, p.item_id)


def sample_items(items: list[Item], max_items: int, seed: int) -> list[Item]:
    """At most ``max_items`` items, drawn with ``seed`` (see :func:`sample_indices`)."""
    tasks = [task_of(it) for it in items]
    codes: dict = {}
    units = [None if (u := t.sample_unit(it)) is None else codes.setdefault(u, len(codes)) for t, it in zip(tasks, items)]
    ranks = [t.sample_rank(it) for t, it in zip(tasks, items)]
    return [items[i] for i in sample_indices(units, ranks, max_items, seed)]


def sample_indices(units, ranks, max_items: int, seed: int) -> list[int]:
    """Which of n candidates (in file order) a sample of at most ``max_items`` keeps, drawn with
    ``seed``. Candidates whose task groups them (:meth:`Task.sample_unit`: here a non-negative
    integer per unit, or None / -1 for none) are drawn by unit, lowest :meth:`Task.sample_rank`
    first, randomly within a rank: Scrapbook's units are one query on one image chain with every
    version, so the protocol's consistency and precedence checks stay whole and level gating
    starts from level 1. Units are grouped with numpy (an 827,004-question pass is 69,000 units)."""
    n_items = len(units)
    if not max_items or n_items <= max_items:
        return list(range(n_items))
    rng = np.random.default_rng(seed)
    codes = np.fromiter((-1 if u is None else u for u in units), dtype=np.int64, count=n_items)
    if (codes >= 0).all():
        _, first, inverse, sizes = np.unique(codes, return_index=True, return_inverse=True, return_counts=True)
        by_appearance = np.argsort(first, kind="stable")  # units in the order they first appear
        r = rng.random(len(first))
        rank = np.asarray(ranks, dtype=float)[first[by_appearance]]
        order = by_appearance[np.lexsort((r, rank))]  # lowest rank first, randomly within a rank
        keep, n = np.zeros(len(first), dtype=bool), 0
        for g in order.tolist():
            if n + sizes[g] <= max_items:
                keep[g] = True
                n += sizes[g]
        return np.flatnonzero(keep[inverse]).tolist()
    return sorted(int(i) for i in rng.choice(n_items, size=max_items, replace=False))


# --- asking ---------------------------------------------------------------------------------------

def predict(label: str, model, items: list[Item], root: Path, style: str, cfg: EvalConfig, store=None,
            progress: bool = True, dataset: str = "", part: str = "") -> list[Prediction]:
    """One Prediction per item (raw output kept, answer read by the item's task, method recorded)."""
    qf = wants_question_first(model.spec)
    constrain = cfg.constrain and getattr(model, "supports_choices", True) is not False
    tasks = [task_of(it) for it in items]
    first = [t.request(it, root, question_first=qf, constrain=constrain, max_new_tokens=cfg.answer_tokens(it.task),
                       seed=cfg.seed) for t, it in zip(tasks, items)]
    final, reasoning = STYLES[style].final(model, first, lambda: [t.prompt(it, root) for t, it in zip(tasks, items)], qf,
                                           cfg.cot_max_new_tokens, cfg.seed, store, progress, f"{label} reasoning{part}")
    responses = generate(model, final, store=store, progress=progress, desc=f"{label} {style}{part}")
    fp = model.fingerprint
    preds = []
    for task, it, req, resp, why in zip(tasks, items, final, responses, reasoning):
        meta = {}
        if why is not None:
            meta["reasoning"] = why.text
        error = (why.error if why is not None else None) or resp.error  # a failed reasoning call fails the answer
        if error:
            parsed, method, valid = None, ERROR, False
            meta["error"] = error
        else:
            parsed, method, valid = task.read_response(it, resp)
        if resp.problem:  # why a reply was unreadable or cut (lib.answers), kept beside the raw text
            meta["problem"] = resp.problem
        preds.append(Prediction(item_id=it.id, model=label, task=it.task, raw=resp.text, dataset=dataset or Path(root).name,
                                parsed=task.jsonable(parsed),
                                style=style, method=method, valid=valid, truncated=resp.finish_reason == "length",
                                prompt_tokens=resp.prompt_tokens,
                                completion_tokens=resp.completion_tokens, latency_s=resp.latency_s,
                                cost_usd=resp.cost_usd, call_key=call_key(fp, req), meta=meta))
    return preds


# --- scoring (no model) ---------------------------------------------------------------------------

def _groups(preds: list[Prediction]) -> dict[tuple, list[Prediction]]:
    """Predictions by (model, dataset, task, style): the unit every score and table is made for."""
    groups = defaultdict(list)
    for p in preds:
        groups[(p.model, p.dataset, p.task, p.style)].append(p)
    return groups


def _reread(task, group: list[Prediction], items) -> None:
    """Read every stored free-text answer of a group again (a parser fix applies on rescoring)."""
    for p, it in zip(group, items):
        if p.method != ERROR and not is_constrained(p.method):
            parsed, p.method, p.valid = task.read_response(it, Response(text=p.raw, method="free"))
            p.parsed = task.jsonable(parsed)


def score_predictions(items: Mapping[tuple[str, str], Item], preds: list[Prediction], cfg: EvalConfig,
                      states: dict | None = None) -> list[Prediction]:
    """Fill ``correct`` and ``scores`` of every prediction from its stored output (re-read, so a
    parser fix applies on rescoring), all held in memory: the path :func:`rescore_folder` streams.
    Invalid answers score 0 / wrong. Each group's :class:`lib.tasks.Scorer` (what its tables are
    made from) is put in ``states``, keyed like the groups."""
    for p in preds:
        if _key(p) not in items:
            raise KeyError(f"prediction for item {p.item_id!r} of dataset {p.dataset!r} ({p.task}) has no "
                           f"item in the evaluated datasets")
    states = states if states is not None else {}
    scoring = cfg.scoring()
    for key, group in _groups(preds).items():
        task, its = get_task(key[2]), _items_of(items, group)
        _reread(task, group, its)
        scorer = states[key] = task.scorer(scoring)
        scorer.add(group, its)
        group[:] = [scorer.score(p) for p in group]
        for i, scores in scorer.corrections().items():
            group[i].scores = scores
    return preds


def _judged(p: Prediction, j: Judgement) -> tuple:
    """What a LAVE row needs of one judged answer: its score (an unread rating counts as 0, so the
    judge's failures stay visible), whether it was read, the reference reading, truncation."""
    return (j.score if j.valid else 0.0), bool(j.valid), j.meta.get("score_reference"), bool(p.truncated)


def _lave(judgements: list[Judgement]) -> dict:
    return {(j.model, j.meta.get("dataset", ""), j.item_id, j.meta.get("style", "zero_shot")): j for j in judgements}


def _group_tables(key: tuple, scorer, judged: list[tuple], scoring) -> tuple[list[dict], list, list]:
    """A scored group's metric rows (``invalid_rate``, its task's, LAVE where answers were judged:
    :func:`_judged` of each) and its level and error frames (a list of none or one each)."""
    model, dataset, _, style = key
    head = dict(zip(("model", "dataset", "task", "style"), key))
    invalid = 1.0 - np.frombuffer(scorer.valid, dtype=bool).astype(float)
    n, n_inv, n_cut = len(invalid), int(invalid.sum()), int(np.frombuffer(scorer.truncated, dtype=bool).sum())
    rows = [{**head, **metric_row("all", "invalid_rate", invalid, n, n_inv, n_truncated=n_cut, scoring=scoring)}]
    tables = scorer.tables()
    rows.extend({**head, **r} for r in tables.rows)
    if judged:
        cut = sum(t for *_, t in judged)
        rows.append({**head, **metric_row("all", "lave", [s for s, *_ in judged], len(judged),
                                          sum(not v for _, v, *_ in judged), scoring=scoring, n_truncated=cut)})
        ref = [r for _, _, r, _ in judged]
        if all(x is not None for x in ref):  # the reference implementation's reading: unread ratings are 2
            rows.append({**head, **metric_row("all", "lave_reference", ref, len(judged), 0, scoring=scoring,
                                              n_truncated=cut)})
    frames = []
    for df in (tables.levels, tables.errors):
        if df is not None:
            df = df.copy()
            df.insert(0, "style", style)
            df.insert(0, "dataset", dataset)
            df["model"] = model
        frames.append(df)
    return rows, frames[:1] if frames[0] is not None else [], frames[1:] if frames[1] is not None else []


def _tables(parts: list[tuple]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """metrics, levels and errors from every group's :func:`_group_tables`, groups in key order."""
    rows = [r for part in parts for r in part[0]]
    level_frames = [f for part in parts for f in part[1]]
    error_frames = [f for part in parts for f in part[2]]
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    levels = pd.concat(level_frames, ignore_index=True) if level_frames else pd.DataFrame(columns=LEVEL_COLUMNS)
    errors = pd.concat(error_frames, ignore_index=True) if error_frames else pd.DataFrame(columns=ERROR_COLUMNS)
    return metrics, levels, errors


def metrics_table(items: Mapping[tuple[str, str], Item], preds: list[Prediction], judgements: list[Judgement],
                  cfg: EvalConfig, states: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(metrics, levels, errors) from scored predictions and LAVE judgements: every group's
    ``invalid_rate``, its task's own rows and tables, and the LAVE row where answers were judged
    (``states``: the scorers :func:`score_predictions` left; a group without one is scored here)."""
    states = states if states is not None else {}
    scoring, lave = cfg.scoring(), _lave(judgements)
    parts = []
    for key, group in sorted(_groups(preds).items()):
        if key not in states:
            score_predictions(items, group, cfg, states)
        model, dataset, _, style = key
        judged = [_judged(p, j) for p in group if (j := lave.get((model, dataset, p.item_id, style))) is not None]
        parts.append(_group_tables(key, states[key], judged, scoring))
    return _tables(parts)


# --- the stage ------------------------------------------------------------------------------------

def resolved(cfg: EvalConfig, run_folder: str | Path) -> EvalConfig:
    """The config with ``stage:`` paths made paths of this run and the demo datasets (stage 00's)
    added when ``demo_data`` asks for them."""
    datasets = {name: A.resolve(folder, run_folder) for name, folder in cfg.datasets.items()}
    if cfg.demo_data:
        demo = A.datasets_of(run_folder, A.SETUP)
        if not demo:
            raise FileNotFoundError(f"demo_data: no datasets in {A.stage_folder(run_folder, A.SETUP) / A.DATASETS}; "
                                    f"run stage 00_setup first (demo_datasets: true)")
        datasets.update({name: str(folder) for name, folder in demo.items()})
    models = {label: A.resolve_spec(spec, run_folder) for label, spec in cfg.models.items()}
    return config.replaced(cfg, datasets=datasets, models=models, demo_data=False)


PREDICT_CHUNK = 4096  # questions asked per generate() call: a large evaluation never holds all its requests


def _predictions(cfg: EvalConfig, data: dict, store, progress: bool, shard: Ranks = Ranks()) -> Iterator[tuple]:
    """Every model's predictions on every dataset in every style, a chunk of questions at a time
    (:data:`PREDICT_CHUNK`); each model is let go before the next is loaded. Each rank of a job
    (``shard``) asks every ``world``-th question of each chunk, from its own rank on. Yields
    ``(order, prediction)``: the positions of its model, dataset, style and question, by which the
    ranks' parts merge into the order one process writes."""
    for mi, (label, spec) in enumerate(cfg.models.items()):
        model = load_model(spec)
        for di, (name, (root, items)) in enumerate(data.items()):
            chunks = range(0, len(items), PREDICT_CHUNK)
            for si, style in enumerate(cfg.styles):
                for k, start in enumerate(chunks, start=1):
                    part = f" {k}/{len(chunks)}" if len(chunks) > 1 else ""
                    first = start + shard.rank
                    asked = items[first:min(start + PREDICT_CHUNK, len(items)):shard.world]
                    preds = predict(label, model, asked, root, style, cfg, store, progress, dataset=name,
                                    part=part) if len(asked) else []
                    for j, p in enumerate(preds):
                        yield (mi, di, si, first + j * shard.world), p
        del model


ORDER = "_order"  # a rank's part file: each row's place in the merged predictions


def _part(rank: int) -> str:
    return f"predictions.rank{rank}.jsonl"


def _merged(out: Path, world: int) -> Iterator[tuple]:
    """The ranks' parts as one stream in the single-process order (each part is in order: a
    streaming merge, nothing held)."""
    parts = [read_jsonl(out / _part(k)) for k in range(world)]
    for d in heapq.merge(*parts, key=lambda d: d[ORDER]):
        order = tuple(d.pop(ORDER))
        yield order, Prediction.from_dict(d)


def items_to_ask(cfg: EvalConfig, out: str | Path) -> tuple[EvalConfig, dict[str, tuple[Path, ItemsAt]]]:
    """The config with this run's paths (:func:`resolved`; the later steps take it) and each
    dataset's folder and items to ask (:func:`load_eval_items`)."""
    cfg = resolved(cfg, Path(out).parent)
    return cfg, load_eval_items(cfg)


def ask(cfg: EvalConfig, out: str | Path, data: dict, store=None, progress: bool = True) -> dict:
    """Ask every model the items of ``data`` (:func:`items_to_ask`, with its ``cfg``) in every style
    and judge open answers: ``predictions.jsonl``, ``judgements.jsonl``, ``config.json``, then the
    manifest. Predictions are written as they are made (the file appears whole, atomically, at the
    end); only those the judge reads are kept in memory. Returns the counts for the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = store if store is not None else CallStore.default()
    job = ranks()
    if job.main:  # from here until the new manifest is written the folder is "unfinished": rescore refuses it
        (out / A.EVAL_MANIFEST).unlink(missing_ok=True)
    start = time.perf_counter()
    made = _predictions(cfg, data, store, progress and job.main, job)
    if job.world > 1:  # each rank writes its part; the main rank merges them and goes on alone
        write_jsonl(out / _part(job.rank), ({**p.to_dict(), ORDER: list(order)} for order, p in made))
        job.barrier()
        if not job.main:
            job.barrier()  # until the main rank has merged, judged and written the manifest
            return {}
        made = _merged(out, job.world)
    answers, todo = hashlib.sha256(), []
    n_preds = write_jsonl(out / A.PREDICTIONS, _rows((p for _, p in made), answers, todo, cfg.judged_tasks()))
    judgements = _judge(cfg, data, todo, store, progress) if todo else []
    write_jsonl(out / A.JUDGEMENTS, (j.to_dict() for j in judgements))
    write_json(out / A.EVAL_CONFIG, cfg.to_dict())
    write_json(out / A.EVAL_MANIFEST, manifest(out, cfg, answers.hexdigest()))  # last, atomically: the parts belong together
    if job.world > 1:
        for k in range(job.world):
            (out / _part(k)).unlink()
        job.barrier()
    seconds = time.perf_counter() - start
    return {"predict_seconds": round(seconds, 2), "predictions": n_preds, "judgements": len(judgements),
            "datasets": {name: len(items) for name, (_, items) in data.items()}}


def finish(cfg: EvalConfig, out: str | Path, counts: dict, scores: dict) -> dict:
    """The summary - ``scores`` (:func:`rescore_folder`'s) then ``counts`` (:func:`ask`'s) - and the
    provenance of ``cfg`` (:func:`items_to_ask`'s, with this run's paths)."""
    return config.finish(Path(out), A.EVALUATE, cfg, {**scores, **counts})


def run(cfg: EvalConfig, out: str | Path, store=None, progress: bool = True) -> dict:
    """The stage, step by step as notebook 06 runs it: the items to ask, every model on every dataset
    in every style with open answers judged (:func:`ask`), the tables scored from what was stored
    (:func:`rescore_folder`), summary and provenance."""
    cfg, data = items_to_ask(cfg, out)
    counts = ask(cfg, out, data, store, progress)
    if not ranks().main:
        return {}  # the main rank scores and writes the summary
    del data  # rescoring reads what it needs back
    release_memory()  # what the models used, before rescoring adds its own
    return finish(cfg, out, counts, rescore_folder(out))


def _rows(preds: Iterator[Prediction], answers, keep: list[Prediction], judged_tasks: set[str]) -> Iterator[dict]:
    """Each prediction as a row for the predictions file, its answer folded into ``answers`` (the
    manifest's digest) and those of ``judged_tasks`` kept for the judge."""
    for p in preds:
        _answer_digest(answers, p)
        if p.task in judged_tasks:
            keep.append(p)
        yield p.to_dict()


def _judge(cfg: EvalConfig, data: dict, todo: list[Prediction], store, progress: bool) -> list[Judgement]:
    """LAVE judgements of the predictions ``todo`` (the judge model is let go on return)."""
    judge_model = load_model(cfg.judge)
    wanted = {_key(p) for p in todo}
    by_key = {k: it for name in {name for name, _ in wanted} for it in data[name][1]
              if (k := item_key(name, it.id)) in wanted}
    judged = [by_key[_key(p)] for p in todo]
    judgements = lave_judge(judge_model, [it.question for it in judged], [task_of(it).target(it) for it in judged],
                            [p.raw for p in todo], store=store, item_ids=[p.item_id for p in todo],
                            max_new_tokens=cfg.judge_max_new_tokens, progress=progress)
    for j, p in zip(judgements, todo):
        j.model = p.model
        j.meta.update(style=p.style, dataset=p.dataset)
    return judgements


def _answer_digest(h, p: Prediction) -> None:
    """Add what identifies a stored answer to ``h``: its item, model, style and raw output (not
    its scores, which rescoring rewrites). Made from the predictions as they are written:
    reading a large predictions file again only to hash it doubled the check."""
    h.update(json.dumps([p.dataset, p.item_id, p.model, p.style, p.raw, p.call_key]).encode())


def manifest(out: Path, cfg: EvalConfig, answers: str) -> dict:
    """The fingerprints that tie a finished evaluation's parts together: its config, its answers
    (:func:`_answer_digest` of every prediction written), its judgements and every dataset's items as
    they were evaluated."""
    return {"config": file_sha256(out / A.EVAL_CONFIG, remember=False), "answers": answers,
            "judgements": file_sha256(out / A.JUDGEMENTS, remember=False),
            "datasets": {name: file_sha256(Path(folder) / "items.jsonl") for name, folder in cfg.datasets.items()}}


def check_manifest(out: Path, cfg: EvalConfig, answers: str | None = None) -> None:
    """Refuse a folder whose parts do not belong together (an unfinished rerun, a dataset changed
    since the evaluation), saying which part and what to do. ``answers``: the digest of its
    predictions file (:func:`_answer_digest`'s, made while a rescore streams it) - checked alone;
    without it, everything else is."""
    path = out / A.EVAL_MANIFEST
    if not path.exists():
        raise ValueError(f"{path} not found: the evaluation in {out} did not finish (a rerun was stopped, or the "
                         f"folder predates manifests), so its config and predictions may belong to different runs; "
                         f"rerun the stage (the call cache keeps it cheap), or rescore with --unverified")
    saved, now = json.loads(path.read_text()), manifest(out, cfg, answers)
    for part in ("config", "judgements") if answers is None else ("answers",):
        if saved.get(part) != now[part]:
            raise ValueError(f"{out}: the {part} changed after the evaluation finished; rerun the stage")
    for name, digest in now["datasets"].items() if answers is None else ():
        if saved.get("datasets", {}).get(name) != digest:
            raise ValueError(f"{out}: dataset {name!r} ({cfg.datasets[name]}/items.jsonl) changed since it was evaluated: "
                             f"rescoring would grade the stored answers against other questions; rerun the stage")


RESCORE_CHUNK = 8192  # predictions read, located and re-read at a time: a rescore holds one chunk, not its file
PASSES = ("scoring", "scored")  # a rescore's pass files (.predictions.<run>.<pass>.jsonl), removed after


def _saved_config(out: Path) -> EvalConfig:
    cfg_path = out / A.EVAL_CONFIG
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path} not found: {out} holds no finished evaluation to rescore")
    try:
        return EvalConfig(**json.loads(cfg_path.read_text()))
    except TypeError as e:  # a field renamed or moved since (e.g. into a task's options)
        raise ValueError(f"{cfg_path}: {e}: it was written by an older version of stage 06; rerun the stage (the call "
                         f"cache keeps it cheap)") from None


def _located(cfg: EvalConfig, lookups: dict, dataset: str, group: list[Prediction], rebuild: bool) -> list[Item]:
    """The items of a chunk's predictions of one dataset, in order, located by the dataset's
    :class:`lib.io.IdLookup` and read back with their ids checked."""
    offsets = None
    if dataset in cfg.datasets:
        if dataset not in lookups:
            lookups[dataset] = IdLookup(cfg.datasets[dataset], rebuild=rebuild)
        offsets = lookups[dataset].find([p.item_id for p in group])
    if offsets is None or (offsets < 0).any():
        p = group[0 if offsets is None else int(np.argmax(offsets < 0))]
        raise KeyError(f"prediction for item {p.item_id!r} of dataset {dataset!r} ({p.task}) has no item in the "
                       f"evaluated datasets")
    return ItemsAt(cfg.datasets[dataset], offsets.tolist(), ids=[p.item_id for p in group], share=False)[:]


def _read_pass(out: Path, cfg: EvalConfig, scorers: dict, judged: dict, answers, rebuild: bool) -> Iterator[dict]:
    """Pass 1 of a rescore: the stored predictions a chunk at a time (:data:`RESCORE_CHUNK`), their
    answers folded into ``answers`` (the manifest's digest), their items located and read, their
    answers read again and handed to their group's scorer (``scorers``; judged ones noted in
    ``judged``); yields each as it now is."""
    scoring, lave, lookups = cfg.scoring(), _lave(_judgements(out)), {}
    rows = read_jsonl(out / A.PREDICTIONS)
    while chunk := [Prediction.from_dict(d, share=False) for d in itertools.islice(rows, RESCORE_CHUNK)]:
        for p in chunk:
            _answer_digest(answers, p)
        for key, group in _groups(chunk).items():
            task = get_task(key[2])
            its = _located(cfg, lookups, key[1], group, rebuild)
            _reread(task, group, its)
            scorers.setdefault(key, task.scorer(scoring)).add(group, its)
            model, dataset, _, style = key
            judged[key].extend(_judged(p, j) for p in group
                               if (j := lave.get((model, dataset, p.item_id, style))) is not None)
        yield from (p.to_dict() for p in chunk)


def _score_pass(path: Path, scorers: dict, group_of: array) -> Iterator[dict]:
    """Pass 2: every prediction as pass 1 left it, scored by its group's scorer in order (each
    row's group number noted in ``group_of`` for pass 3)."""
    number = {key: k for k, key in enumerate(scorers)}
    for d in read_jsonl(path):
        p = Prediction.from_dict(d, share=False)
        key = (p.model, p.dataset, p.task, p.style)
        group_of.append(number[key])
        yield scorers[key].score(p).to_dict()


def _corrected(path: Path, scorers: dict, group_of: array) -> Iterator[bytes]:
    """Pass 3: the scored lines as they are, but those whose scores only the whole group decides
    (:meth:`lib.tasks.Scorer.corrections`), which are decoded and written again."""
    fixes = [scorer.corrections() for scorer in scorers.values()]
    seen = [0] * len(fixes)
    with path.open("rb") as f:
        for g, line in zip(group_of, f):
            i, seen[g] = seen[g], seen[g] + 1
            if i in fixes[g]:
                d = json.loads(line)
                d["scores"] = fixes[g][i]
                line = jsonl_line(d)
            yield line


def _judgements(out: Path) -> list[Judgement]:
    path = out / A.JUDGEMENTS
    return [Judgement.from_dict(d) for d in read_jsonl(path)] if path.exists() else []


def _rescore(out: Path, cfg: EvalConfig, unverified: bool, rebuild: bool) -> tuple:
    """The three passes of :func:`rescore_folder`: (metrics, levels, errors), the rewritten
    predictions file's digest, the count of invalid answers."""
    scorers, judged, answers, group_of = {}, defaultdict(list), hashlib.sha256(), array("i")
    # names of this rescore's own: two rescores of one folder (a notebook and the command) never share them
    scoring_file, scored_file = (out / f".predictions.{os.getpid()}-{secrets.token_hex(4)}.{p}.jsonl" for p in PASSES)
    try:
        try:
            write_jsonl(scoring_file, _read_pass(out, cfg, scorers, judged, answers, rebuild))
        except KeyError as e:  # the datasets were checked: predictions that name other items are not this run's
            if unverified:
                raise
            raise ValueError(f"{out}: {e.args[0]}: the answers changed after the evaluation finished; rerun the "
                             f"stage") from None
        if not unverified:
            check_manifest(out, cfg, answers.hexdigest())
        write_jsonl(scored_file, _score_pass(scoring_file, scorers, group_of))
        scoring_file.unlink()
        scoring = cfg.scoring()
        tables = _tables([_group_tables(key, scorers[key], judged[key], scoring) for key in sorted(scorers)])
        # the tables' record goes first and comes back last: a stop in between leaves tables readers refuse
        A.forget_table_sources(out)
        _, _, predictions = write_lines_hashed(out / A.PREDICTIONS, _corrected(scored_file, scorers, group_of))
    finally:
        for path in (scoring_file, scored_file):
            path.unlink(missing_ok=True)
    invalid = sum(len(s.valid) - sum(s.valid) for s in scorers.values())
    return tables, predictions, invalid


def rescore_folder(out: str | Path, unverified: bool = False) -> dict:
    """Recompute predictions' scores, metrics.csv, levels.csv and errors.csv from the stored
    predictions, judgements and datasets of an evaluation folder - no model is loaded or called.
    The folder's manifest must match its parts (``unverified`` skips that check). The predictions
    stream through three passes over files (read and located, scored, corrected where only a
    whole group decides), so memory holds a chunk and each group's compact state
    (:class:`lib.tasks.Scorer`), not the predictions. The tables are written atomically and
    recorded with their sources last (:func:`lib.artifacts.record_table_sources`)."""
    out = Path(out)
    cfg = _saved_config(out)
    start = time.perf_counter()
    if not unverified:
        check_manifest(out, cfg)
    for rebuild in (False, True):
        try:
            (metrics, levels, errors), predictions, invalid = _rescore(out, cfg, unverified, rebuild)
            break
        except ItemsChanged:  # rewritten in place with the same size and time: index it again, once
            if rebuild:
                raise
    tables = {name: write_csv(out / name, df) for name, df in zip(A.EVAL_TABLES, (metrics, levels, errors))}
    A.record_table_sources(out, tables, predictions)
    return {"rescore_seconds": round(time.perf_counter() - start, 3), "metrics": len(metrics), "invalid": int(invalid)}


def invalid_summary(out: str | Path) -> pd.DataFrame:
    """Invalid and truncated answers per model, task and style: counts, total, rate and the methods
    that read the rest."""
    rows = defaultdict(lambda: defaultdict(int))
    for d in read_jsonl(Path(out) / A.PREDICTIONS):
        key = (d["model"], d.get("dataset", d["meta"].get("dataset", "")), d["task"], d["style"])
        rows[key]["n"] += 1
        rows[key]["invalid"] += not d["valid"]
        rows[key]["truncated"] += bool(d.get("truncated"))
        rows[key][f"method {d['method']}"] += 1
    df = pd.DataFrame([{"model": k[0], "dataset": k[1], "task": k[2], "style": k[3], **v} for k, v in rows.items()]).fillna(0)
    df["invalid_rate"] = df["invalid"] / df["n"]
    return df


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["rescore"]:
        return config.main("python -m lib.evaluate", EvalConfig, run, argv, description="Stage 06: evaluate.")
    ap = argparse.ArgumentParser(prog="python -m lib.evaluate", description="Evaluation tools.")
    sub = ap.add_subparsers(dest="command", required=True)
    rs = sub.add_parser("rescore", help="recompute metrics.csv, levels.csv, errors.csv from stored outputs")
    rs.add_argument("--run", required=True, help="the run whose 06_evaluate folder to rescore")
    rs.add_argument("--unverified", action="store_true", help="rescore a folder without a matching manifest.json")
    args = ap.parse_args(argv)
    folder = stage_dir(args.run, A.EVALUATE, create=False)
    stale = A.stale_tables(folder) if folder.is_dir() else None
    try:
        summary = rescore_folder(folder, unverified=args.unverified)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        if stale:
            print(f"the tables in {folder} are stale and stay refused: {stale}", file=sys.stderr)
        return 2
    if stale:
        print(f"replaced stale tables: {stale}", file=sys.stderr)
    print(json.dumps({"folder": str(folder), **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
