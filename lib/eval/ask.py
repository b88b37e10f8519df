"""Asking: every model the items of every dataset in every style (the requests of
:mod:`lib.eval.requests`), one process or many, through the call cache (a killed evaluation resumes
without repeating finished calls), then each judged task's judge (:mod:`lib.tasks.judges`) on its
answers. Predictions are written as they are made; the manifest comes last
(:mod:`lib.eval.manifest`), so a stopped run leaves a folder a rescore refuses.

Many processes, two ways, one share of the questions each (:func:`_predictions`): the ranks of one
job (``torchrun``: :func:`ask` merges their parts at a barrier), or shards run as separate jobs with
no barrier between them (a Slurm array: :func:`ask_shard` writes one part with what it was made
from, :func:`ask_merged` checks every part and merges them later). Both merge into the order one
process writes, so the predictions are the same bytes."""

from __future__ import annotations

import hashlib
import heapq
import json
import time
from collections.abc import Iterator
from pathlib import Path

from lib.core.ranks import Ranks, ranks
from lib.core.schema import Item, Judgement, Prediction
from lib.eval.items import item_key
from lib.eval.manifest import answer_digest, manifest
from lib.eval.requests import styled
from lib.eval.score import read_answer
from lib.eval.settings import EvalConfig
from lib.io import (
    Outlived,
    artifacts,
    file_sha256,
    read_jsonl,
    shards,
    share_strings,
    write_json,
    write_jsonl,
    write_jsonl_hashed,
)
from lib.models import generate, load_model
from lib.models.store import CallStore, call_key
from lib.tasks.registry import task_of


def predict(
    label: str,
    model,
    items: list[Item],
    root: Path,
    style: str,
    cfg: EvalConfig,
    store=None,
    progress: bool = True,
    dataset: str = "",
    part: str = "",
) -> list[Prediction]:
    """One Prediction per item (raw output kept, answer read by the item's task, method recorded);
    the requests are :func:`lib.eval.requests.styled`'s."""
    final, reasoning = styled(
        cfg, model, items, root, style, store, progress, f"{label} reasoning{part}"
    )
    responses = generate(
        model, final, store=store, progress=progress, desc=f"{label} {style}{part}"
    )
    fp = model.fingerprint
    return [
        Prediction(
            item_id=it.id,
            model=label,
            task=it.task,
            raw=resp.text,
            dataset=dataset or Path(root).name,
            style=style,
            truncated=resp.finish_reason == "length",
            prompt_tokens=resp.prompt_tokens,
            completion_tokens=resp.completion_tokens,
            latency_s=resp.latency_s,
            cost_usd=resp.cost_usd,
            call_key=call_key(fp, req),
            **read_answer(task_of(it), it, resp, why),
        )
        for it, req, resp, why in zip(items, final, responses, reasoning)
    ]


# questions asked per generate() call: a large evaluation never holds all its requests
PREDICT_CHUNK = 4096
# the models asking loaded and let go: whether one outlived its last reference (a reference cycle)
# says whether handing their memory back needs the collector's pass (lib.io.memory)
LET_GO = Outlived()


def _predictions(
    cfg: EvalConfig, data: dict, store, progress: bool, shard: Ranks = Ranks()
) -> Iterator[tuple]:
    """Every model's predictions on every dataset in every style, a chunk of questions at a time
    (:data:`PREDICT_CHUNK`); each model is let go before the next is loaded. Each rank of a job
    (``shard``) asks every ``world``-th question of each chunk, from its own rank on. Yields
    ``(order, prediction)``: the positions of its model, dataset, style and question, by which the
    ranks' parts merge into the order one process writes."""
    for mi, (label, spec) in enumerate(cfg.models.items()):
        model = load_model(spec)
        LET_GO.watch(model)
        for di, (name, (root, items)) in enumerate(data.items()):
            chunks = _asked(len(items), shard)
            for si, style in enumerate(cfg.styles):
                for k, at in enumerate(chunks, start=1):
                    part = f" {k}/{len(chunks)}" if len(chunks) > 1 else ""
                    asked = items[at.start : at.stop : at.step]
                    preds = (
                        predict(
                            label,
                            model,
                            asked,
                            root,
                            style,
                            cfg,
                            store,
                            progress,
                            dataset=name,
                            part=part,
                        )
                        if len(asked)
                        else []
                    )
                    for q, p in zip(at, preds):
                        yield (mi, di, si, q), p
        del model


def _asked(n: int, shard: Ranks) -> list[range]:
    """The places, among ``n`` questions, of those ``shard`` asks, a chunk (:data:`PREDICT_CHUNK`) at
    a time: every ``world``-th question of each chunk from its own rank on."""
    return [
        range(start + shard.rank, min(start + PREDICT_CHUNK, n), shard.world)
        for start in range(0, n, PREDICT_CHUNK)
    ]


ORDER = "_order"  # a rank's part file: each row's place in the merged predictions
SHARDS = "shards"  # the folder of the shards' parts, inside the stage's
PART_INFO = "part.json"  # beside a shard's part: what it was made from, its rows and digest


class PartRefused(ValueError):
    """A shard's part that is missing, unfinished, or made for another config or shard count."""


def _part(rank: int) -> str:
    return f"predictions.rank{rank}.jsonl"


def shard_folder(out: str | Path, shard: Ranks) -> Path:
    """Where shard ``shard.rank`` of ``shard.world`` writes its part (and holds its lock)."""
    return Path(out) / SHARDS / f"{shard.rank}-of-{shard.world}"


def _ordered(made: Iterator[tuple]) -> Iterator[dict]:
    """Predictions as part rows: each with its place in the merged order."""
    return ({**p.to_dict(), ORDER: list(order)} for order, p in made)


def _merged(parts: list[Path]) -> Iterator[tuple]:
    """The parts (one per rank or shard) as one stream in the single-process order (each part is in
    order: a streaming merge, nothing held)."""
    rows = [read_jsonl(path) for path in parts]
    for d in heapq.merge(*rows, key=lambda d: d[ORDER]):
        order = tuple(d.pop(ORDER))
        yield order, Prediction.from_dict(share_strings(d, Prediction.REPEATED))


def ask(cfg: EvalConfig, out: str | Path, data: dict, store=None, progress: bool = True) -> dict:
    """Ask every model the items of ``data`` (:func:`lib.eval.items.load_eval_items`'s) in every style
    and judge open answers: ``predictions.jsonl``, ``judgements.jsonl``, ``config.json``, then the
    manifest. Predictions are written as they are made (the file appears whole, atomically, at the
    end); only those the judge reads are kept in memory. Returns the counts for the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = store if store is not None else CallStore.default()
    job = ranks()
    # from here until the new manifest is written the folder is "unfinished": rescore refuses it
    if job.main:
        (out / artifacts.EVAL_MANIFEST).unlink(missing_ok=True)
    start = time.perf_counter()
    made = _predictions(cfg, data, store, progress and job.main, job)
    if job.world > 1:  # each rank writes its part; the main rank merges them and goes on alone
        write_jsonl(out / _part(job.rank), _ordered(made))
        job.barrier()
        if not job.main:
            job.barrier()  # until the main rank has merged, judged and written the manifest
            return {}
        made = _merged([out / _part(k) for k in range(job.world)])
    counts = _publish(cfg, out, data, made, store, progress)
    if job.world > 1:
        for k in range(job.world):
            (out / _part(k)).unlink()
        job.barrier()
    return {"predict_seconds": round(time.perf_counter() - start, 2), **counts}


def _publish(
    cfg: EvalConfig, out: Path, data: dict, made: Iterator[tuple], store, progress
) -> dict:
    """The predictions ``made`` (in the single-process order) written, judged, then the config and,
    last, the manifest; the counts for the summary."""
    answers, todo = hashlib.sha256(), []
    n_preds = write_jsonl(
        out / artifacts.PREDICTIONS, _rows((p for _, p in made), answers, todo, cfg.judged_tasks())
    )
    judgements = _judge(cfg, data, todo, store, progress) if todo else []
    write_jsonl(out / artifacts.JUDGEMENTS, (j.to_dict() for j in judgements))
    write_json(out / artifacts.EVAL_CONFIG, cfg.to_dict())
    # last, atomically: the parts belong together
    write_json(out / artifacts.EVAL_MANIFEST, manifest(out, cfg, answers.hexdigest()))
    return {
        "predictions": n_preds,
        "judgements": len(judgements),
        "datasets": {name: len(items) for name, (_, items) in data.items()},
    }


def _made_from(cfg: EvalConfig, shard: Ranks) -> dict:
    """What a shard's part belongs to: the resolved config, every dataset's items as asked, and its
    place among the shards; a part is merged only under the same."""
    config = json.dumps(cfg.to_dict(), sort_keys=True, default=str).encode()
    return {
        "config": hashlib.sha256(config).hexdigest(),
        "datasets": {
            name: file_sha256(Path(folder) / "items.jsonl") for name, folder in cfg.datasets.items()
        },
        "shard": shard.rank,
        "num_shards": shard.world,
    }


def ask_shard(
    cfg: EvalConfig, out: str | Path, data: dict, shard: Ranks, store=None, progress: bool = True
) -> dict:
    """The share of the questions rank ``shard.rank`` of ``shard.world`` asks, through the call
    store, into its part (:func:`shard_folder`): the rows, then ``part.json`` saying what they were
    made from, with their count and digest. The old ``part.json`` goes first, so a shard stopped
    part way leaves a part :func:`ask_merged` refuses. Returns ``part.json``'s contents."""
    folder = shard_folder(out, shard)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PART_INFO).unlink(missing_ok=True)
    store = store if store is not None else CallStore.default()
    start = time.perf_counter()
    made = _predictions(cfg, data, store, progress, shard)
    rows, _, digest = write_jsonl_hashed(folder / artifacts.PREDICTIONS, _ordered(made))
    seconds = round(time.perf_counter() - start, 2)
    info = {**_made_from(cfg, shard), "rows": rows, "sha256": digest, "seconds": seconds}
    write_json(folder / PART_INFO, info)
    return info


def ask_merged(
    cfg: EvalConfig, out: str | Path, data: dict, num_shards: int, store=None, progress: bool = True
) -> dict:
    """The parts of ``num_shards`` shards (:func:`ask_shard`'s) merged into the predictions one
    process writes, then judged, the config and the manifest written as :func:`ask` does; every part
    is checked first (:func:`checked_parts`), nothing written when one is refused. The parts stay:
    the caller holds them (:func:`held_parts`) and removes them (:func:`remove_parts`) once
    everything made from them is written. Returns :func:`ask`'s counts, ``predict_seconds`` being
    the slowest shard's plus the merge's."""
    out = Path(out)
    infos = checked_parts(cfg, out, data, num_shards)
    slowest = max(info["seconds"] for info in infos)
    store = store if store is not None else CallStore.default()
    (out / artifacts.EVAL_MANIFEST).unlink(missing_ok=True)
    start = time.perf_counter()
    parts = [
        shard_folder(out, Ranks(k, num_shards)) / artifacts.PREDICTIONS for k in range(num_shards)
    ]
    counts = _publish(cfg, out, data, _merged(parts), store, progress)
    return {"predict_seconds": round(slowest + time.perf_counter() - start, 2), **counts}


def part_folders(out: str | Path, num_shards: int) -> list[Path]:
    """The part folders of ``num_shards`` shards, in order (:func:`shard_folder`)."""
    return [shard_folder(out, Ranks(k, num_shards)) for k in range(num_shards)]


def held_parts(out: str | Path, num_shards: int):
    """The parts' locks (which their shards hold while they write) held for the length of a merge:
    a part still being written is refused by name (:class:`PartRefused`), neither merged nor
    deleted (:func:`lib.io.shards.held`)."""
    folders = part_folders(out, num_shards)
    return shards.held(Path(out), folders, "parts", "writing this part", PartRefused)


def remove_parts(out: str | Path, num_shards: int) -> None:
    """The merged parts removed, then ``shards/`` unless it is a link (:func:`lib.io.shards.remove`)."""
    shards.remove(part_folders(out, num_shards), Path(out) / SHARDS)


# every field of a part.json, with its type: a part is merged only when all are there
PART_FIELDS = {
    "config": str,
    "datasets": dict,
    "shard": int,
    "num_shards": int,
    "rows": int,
    "sha256": str,
    "seconds": (int, float),
}


def checked_parts(cfg: EvalConfig, out: str | Path, data: dict, num_shards: int) -> list[dict]:
    """Each shard's ``part.json`` (every field, :data:`PART_FIELDS`), the part checked against it,
    against ``cfg`` and against the questions its shard asks of ``data``, in their order; one
    :class:`PartRefused` naming every part that cannot be merged and how to make it."""
    ids = {name: [it.id for it in items] for name, (_, items) in data.items()}
    infos, problems = [], []
    for k in range(num_shards):
        shard = Ranks(k, num_shards)
        part = shard_folder(out, shard) / artifacts.PREDICTIONS
        info, problem = _part_info(part)
        if info is None:
            problems.append(problem)
            continue
        wanted = _made_from(cfg, shard)
        differ = [key for key in wanted if info[key] != wanted[key]]
        if differ:
            problem = f"made for another {' and '.join(differ)} than this merge's"
        elif info["sha256"] != file_sha256(part, remember=False):
            problem = f"not the part its {PART_INFO} describes (changed since)"
        else:
            problem = _rows_problem(part, info["rows"], _shard_rows(cfg, ids, shard))
        if problem is not None:
            problems.append(f"{part}: {problem}")
        infos.append(info)
    if problems:
        raise PartRefused(
            "\n".join(
                [
                    f"{out}: the parts of {num_shards} shards cannot be merged:",
                    *problems,
                    f"make each part named with the merge's --profile/--params/--set: python -m "
                    f"lib.stages.evaluate shard --shard K --num-shards {num_shards}",
                ]
            )
        )
    return infos


def _part_info(part: Path) -> tuple[dict | None, str | None]:
    """The ``part.json`` beside ``part`` and None; else None and the line saying what is wrong: the
    file missing or unreadable (the part is unfinished), not an object, or a field of
    :data:`PART_FIELDS` missing or of another type."""
    path = part.parent / PART_INFO
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, f"{part}: missing or unfinished (no readable {PART_INFO} beside it)"
    if not isinstance(info, dict):
        return None, f"{path}: not a JSON object but {type(info).__name__}"
    for key, kind in PART_FIELDS.items():
        if key not in info:
            return None, f"{path}: field {key!r} missing"
        if isinstance(info[key], bool) or not isinstance(info[key], kind):
            name = (
                " or ".join(t.__name__ for t in kind) if isinstance(kind, tuple) else kind.__name__
            )
            return None, f"{path}: field {key!r}: expected {name}, got {type(info[key]).__name__}"
    return info, None


def _shard_rows(cfg: EvalConfig, ids: dict[str, list[str]], shard: Ranks) -> Iterator[tuple]:
    """``(place, model, dataset, style, item id)`` of each row ``shard``'s part holds, in order:
    the questions :func:`_predictions` asks for that shard."""
    for mi, label in enumerate(cfg.models):
        for di, (name, items) in enumerate(ids.items()):
            for si, style in enumerate(cfg.styles):
                for at in _asked(len(items), shard):
                    for q in at:
                        yield [mi, di, si, q], label, name, style, items[q]


def _rows_problem(part: Path, rows: int, wanted: Iterator[tuple]) -> str | None:
    """What is wrong with the rows of ``part`` (``rows`` of them, its ``part.json`` says), row by row
    against ``wanted`` (:func:`_shard_rows`): a row out of place, missing or extra; None when
    they are those rows in that order (the merge relies on each part's order)."""
    n = 0
    try:
        for n, row in enumerate(read_jsonl(part), 1):
            if not isinstance(row, dict):
                return f"line {n} is not a prediction row but a JSON {type(row).__name__}"
            got = tuple(row.get(key) for key in (ORDER, "model", "dataset", "style", "item_id"))
            want = next(wanted, None)
            if got != want:
                return f"line {n} is {_said(got)}, where its shard asks {_said(want)}"
    except ValueError as e:  # a line that is no JSON
        return f"unreadable: {e}"
    if (want := next(wanted, None)) is not None:
        return f"ends after {n} rows, before {_said(want)}, which its shard asks"
    if n != rows:
        return f"holds {n} rows, not the {rows} its {PART_INFO} says"
    return None


def _said(row: tuple | None) -> str:
    """A part's row as :func:`_rows_problem` names it."""
    if row is None:
        return "no more rows"
    place, model, dataset, style, item = row
    return f"item {item!r} of {dataset} for {model} in style {style} (place {place})"


def _rows(
    preds: Iterator[Prediction], answers, keep: list[Prediction], judged_tasks: dict
) -> Iterator[dict]:
    """Each prediction as a row for the predictions file, its answer folded into ``answers`` (the
    manifest's digest) and those of ``judged_tasks`` kept for the judge."""
    for p in preds:
        answer_digest(answers, p)
        if p.task in judged_tasks:
            keep.append(p)
        yield p.to_dict()


def _judge(
    cfg: EvalConfig, data: dict, todo: list[Prediction], store, progress: bool
) -> list[Judgement]:
    """Judgements of the predictions ``todo``, each by its task's judge, in ``todo``'s order (the
    judge model is let go on return)."""
    judge_model, judges = load_model(cfg.judge), cfg.judged_tasks()
    LET_GO.watch(judge_model)
    wanted = {item_key(p.dataset, p.item_id) for p in todo}
    by_key = {
        k: it
        for name in {name for name, _ in wanted}
        for it in data[name][1]
        if (k := item_key(name, it.id)) in wanted
    }
    judged = [by_key[item_key(p.dataset, p.item_id)] for p in todo]
    judgements: list = [None] * len(todo)
    for judge in dict.fromkeys(judges[p.task] for p in todo):
        at = [i for i, p in enumerate(todo) if judges[p.task] is judge]
        made = judge.judge(
            judge_model,
            [judged[i].question for i in at],
            [task_of(judged[i]).reader.target(judged[i]) for i in at],
            [todo[i].raw for i in at],
            store=store,
            item_ids=[todo[i].item_id for i in at],
            max_new_tokens=cfg.judge_max_new_tokens,
            progress=progress,
        )
        for i, j in zip(at, made):
            judgements[i] = j
    for j, p in zip(judgements, todo):
        j.model = p.model
        j.meta.update(style=p.style, dataset=p.dataset)
    return judgements
