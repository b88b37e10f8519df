"""Rescoring: every table of an evaluation folder recomputed from its stored predictions,
judgements and datasets, no model loaded. The predictions stream through three passes over files
(read and located, scored, corrected where only a whole group decides), so memory holds a chunk
and each group's compact :class:`lib.tasks.Scorer`, not the predictions."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import secrets
import time
from array import array
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from lib.core.schema import Item, Prediction
from lib.eval.manifest import Unverified, answer_digest, check_manifest
from lib.eval.score import (
    group_tables,
    groups,
    judgements_by_answer,
    read_judgements,
    reread,
    tables,
)
from lib.eval.settings import EvalConfig
from lib.io import (
    IdLookup,
    ItemsAt,
    ItemsChanged,
    artifacts,
    file_sha256,
    jsonl_line,
    read_jsonl,
    write_csv,
    write_jsonl,
    write_lines_hashed,
)
from lib.items import bank
from lib.tasks.registry import get_task

# predictions read, located and re-read at a time: a rescore holds one chunk, not its file. Small:
# a chunk's objects (predictions, their items) are what the allocator's memory grows to, and what
# a group's long-lived values (Scrapbook's queries, concepts) pin in place while it lasts
RESCORE_CHUNK = 2048
PASSES = (
    "scoring",
    "scored",
)  # a rescore's pass files (.predictions.<run>.<pass>.jsonl), removed after


def saved_config(out: Path) -> EvalConfig:
    """The config an evaluation folder was made with (its ``config.json``)."""
    cfg_path = out / artifacts.EVAL_CONFIG
    if not cfg_path.exists():
        raise FileNotFoundError(
            f"{cfg_path} not found: {out} holds no finished evaluation to rescore"
        )
    try:
        return EvalConfig(**json.loads(cfg_path.read_text()))
    except TypeError as e:  # a field renamed or moved since (e.g. into a task's options)
        raise ValueError(
            f"{cfg_path}: {e}: it was written by an older version of stage 06; rerun the stage (the call "
            f"cache keeps it cheap)"
        ) from None


def _located(
    cfg: EvalConfig, lookups: dict, dataset: str, group: list[Prediction], rebuild: bool
) -> list[Item]:
    """The items of a chunk's predictions of one dataset, in order, located by the dataset's
    :class:`lib.io.IdLookup` and read back with their ids checked."""
    offsets = None
    if dataset in cfg.datasets:
        if dataset not in lookups:
            lookups[dataset] = IdLookup(cfg.datasets[dataset], rebuild=rebuild)
        offsets = lookups[dataset].find([p.item_id for p in group])
    if offsets is None or (offsets < 0).any():
        p = group[0 if offsets is None else int(np.argmax(offsets < 0))]
        raise KeyError(
            f"prediction for item {p.item_id!r} of dataset {dataset!r} ({p.task}) has no item in the "
            f"evaluated datasets"
        )
    return ItemsAt(
        cfg.datasets[dataset], offsets.tolist(), ids=[p.item_id for p in group], share=False
    )[:]


def _read_pass(
    out: Path, cfg: EvalConfig, scorers: dict, rated: dict, answers, rebuild: bool
) -> Iterator[dict]:
    """Pass 1 of a rescore: the stored predictions a chunk at a time (:data:`RESCORE_CHUNK`), their
    answers folded into ``answers`` (the manifest's digest), their items located and read, their
    answers read again and handed to their group's scorer (``scorers``; judged ones noted in
    ``rated``); yields each as it now is."""
    scoring, judged, lookups = cfg.scoring(), judgements_by_answer(read_judgements(out)), {}
    rows = read_jsonl(out / artifacts.PREDICTIONS)
    while chunk := [Prediction.from_dict(d) for d in itertools.islice(rows, RESCORE_CHUNK)]:
        for p in chunk:
            answer_digest(answers, p)
        for key, group in groups(chunk).items():
            task = get_task(key[2])
            its = _located(cfg, lookups, key[1], group, rebuild)
            reread(task, group, its)
            scorer = scorers.setdefault(key, task.scorer(scoring))
            start = len(
                scorer.valid
            )  # the group's answers before this chunk: a judged one's position
            scorer.add(group, its)
            model, dataset, _, style = key
            rated[key].extend(
                (j, bool(p.truncated), start + i)
                for i, p in enumerate(group)
                if (j := judged.get((model, dataset, p.item_id, style))) is not None
            )
        yield from (p.to_dict() for p in chunk)


def _score_pass(path: Path, scorers: dict, group_of: array) -> Iterator[dict]:
    """Pass 2: every prediction as pass 1 left it, scored by its group's scorer in order (each
    row's group number noted in ``group_of`` for pass 3)."""
    number = {key: k for k, key in enumerate(scorers)}
    for d in read_jsonl(path):
        p = Prediction.from_dict(d)
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


def _rescore(out: Path, cfg: EvalConfig, unverified: bool, rebuild: bool) -> tuple:
    """The three passes of :func:`rescore_folder`: (metrics, score tables by name), the rewritten
    predictions file's digest, the count of invalid answers."""
    scorers, rated, answers, group_of = {}, defaultdict(list), hashlib.sha256(), array("i")
    # names of this rescore's own: two rescores of one folder (a notebook and the command) never share them
    scoring_file, scored_file = (
        out / f".predictions.{os.getpid()}-{secrets.token_hex(4)}.{p}.jsonl" for p in PASSES
    )
    try:
        try:
            write_jsonl(scoring_file, _read_pass(out, cfg, scorers, rated, answers, rebuild))
        except (
            KeyError
        ) as e:  # the datasets were checked: predictions that name other items are not this run's
            if unverified:
                raise
            raise ValueError(
                f"{out}: {e.args[0]}: the answers changed after the evaluation finished; rerun the "
                f"stage"
            ) from None
        if not unverified:
            check_manifest(out, cfg, answers.hexdigest(), parts=("answers",))
        write_jsonl(scored_file, _score_pass(scoring_file, scorers, group_of))
        scoring_file.unlink()
        scoring = cfg.scoring()
        made = tables(
            [group_tables(key, scorers[key], rated[key], scoring) for key in sorted(scorers)]
        )
        # the tables' record goes first and comes back last: a stop in between leaves tables readers refuse
        artifacts.forget_table_sources(out)
        _, _, predictions = write_lines_hashed(
            out / artifacts.PREDICTIONS, _corrected(scored_file, scorers, group_of)
        )
    finally:
        for path in (scoring_file, scored_file):
            path.unlink(missing_ok=True)
    invalid = sum(len(s.valid) - sum(s.valid) for s in scorers.values())
    return made, predictions, invalid


def _write_bank(out: Path) -> dict[str, str]:
    """The folder's answers as item-bank rows (:func:`lib.items.bank.run_answers`, no people's
    verdicts: those are a later stage's) in :data:`~lib.io.artifacts.ITEM_BANK`, and its digest
    for the tables' record; nothing (and no old file) where the manifest names no datasets (an
    unverified rescore of a folder without one)."""
    path = out / artifacts.ITEM_BANK
    try:
        rows = bank.run_answers(out, verdicts=False)
    except bank.BankError:
        path.unlink(missing_ok=True)
        return {}
    bank.write(rows, path)
    return {artifacts.ITEM_BANK: file_sha256(path, remember=False)}


def rescore_folder(out: str | Path, unverified: bool = False) -> dict:
    """Recompute predictions' scores, metrics.csv and the score tables from the stored
    predictions, judgements and datasets of an evaluation folder - no model is loaded or called.
    The folder's manifest must match its parts (``unverified`` skips that check). The predictions
    stream through three passes over files (read and located, scored, corrected where only a
    whole group decides), so memory holds a chunk and each group's compact state
    (:class:`lib.tasks.Scorer`), not the predictions. The tables are written atomically and
    recorded with their sources last (:func:`lib.io.artifacts.record_table_sources`)."""
    out = Path(out)
    cfg = saved_config(out)
    start = time.perf_counter()
    if not unverified:
        try:
            check_manifest(out, cfg)
        except Unverified as e:
            raise Unverified(f"{e}, or rescore with --unverified") from None
    for rebuild in (False, True):
        try:
            (metrics, extra), predictions, invalid = _rescore(out, cfg, unverified, rebuild)
            break
        except ItemsChanged:  # rewritten in place with the same size and time: index it again, once
            if rebuild:
                raise
    made = {artifacts.METRICS: metrics, **{f"{name}.csv": df for name, df in extra.items()}}
    digests = {name: write_csv(out / name, df) for name, df in made.items()}
    digests.update(_write_bank(out))
    artifacts.record_table_sources(out, digests, predictions)
    return {
        "rescore_seconds": round(time.perf_counter() - start, 3),
        "metrics": len(metrics),
        "invalid": int(invalid),
    }
