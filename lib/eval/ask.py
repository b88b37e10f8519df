"""Asking: every model the items of every dataset in every style (the requests of
:mod:`lib.eval.requests`), one process or many, through the call cache (a killed evaluation resumes
without repeating finished calls), then each judged task's judge (:mod:`lib.tasks.judges`) on its
answers. Predictions are written as they are made; the manifest comes last
(:mod:`lib.eval.manifest`), so a stopped run leaves a folder a rescore refuses."""

from __future__ import annotations

import hashlib
import heapq
import time
from collections.abc import Iterator
from pathlib import Path

from lib import artifacts as A
from lib.eval.items import item_key
from lib.eval.manifest import answer_digest, manifest
from lib.eval.requests import styled
from lib.eval.score import read_answer
from lib.eval.settings import EvalConfig
from lib.io import read_jsonl, share_strings, write_json, write_jsonl
from lib.models import generate, load_model
from lib.ranks import Ranks, ranks
from lib.schema import Item, Judgement, Prediction
from lib.store import CallStore, call_key
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
        for di, (name, (root, items)) in enumerate(data.items()):
            chunks = range(0, len(items), PREDICT_CHUNK)
            for si, style in enumerate(cfg.styles):
                for k, start in enumerate(chunks, start=1):
                    part = f" {k}/{len(chunks)}" if len(chunks) > 1 else ""
                    first = start + shard.rank
                    asked = items[first : min(start + PREDICT_CHUNK, len(items)) : shard.world]
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
        (out / A.EVAL_MANIFEST).unlink(missing_ok=True)
    start = time.perf_counter()
    made = _predictions(cfg, data, store, progress and job.main, job)
    if job.world > 1:  # each rank writes its part; the main rank merges them and goes on alone
        write_jsonl(
            out / _part(job.rank), ({**p.to_dict(), ORDER: list(order)} for order, p in made)
        )
        job.barrier()
        if not job.main:
            job.barrier()  # until the main rank has merged, judged and written the manifest
            return {}
        made = _merged(out, job.world)
    answers, todo = hashlib.sha256(), []
    n_preds = write_jsonl(
        out / A.PREDICTIONS, _rows((p for _, p in made), answers, todo, cfg.judged_tasks())
    )
    judgements = _judge(cfg, data, todo, store, progress) if todo else []
    write_jsonl(out / A.JUDGEMENTS, (j.to_dict() for j in judgements))
    write_json(out / A.EVAL_CONFIG, cfg.to_dict())
    # last, atomically: the parts belong together
    write_json(out / A.EVAL_MANIFEST, manifest(out, cfg, answers.hexdigest()))
    if job.world > 1:
        for k in range(job.world):
            (out / _part(k)).unlink()
        job.barrier()
    seconds = time.perf_counter() - start
    return {
        "predict_seconds": round(seconds, 2),
        "predictions": n_preds,
        "judgements": len(judgements),
        "datasets": {name: len(items) for name, (_, items) in data.items()},
    }


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
            [task_of(judged[i]).target(judged[i]) for i in at],
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
