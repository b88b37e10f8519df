"""Run a list of requests through a model via the call cache, in batches, with a progress bar."""

from __future__ import annotations

from contextlib import nullcontext

from tqdm.auto import tqdm

from lib.core.schema import Request, Response
from lib.models.backend import Model
from lib.models.store import call_key, claim_owner


class Results(list):
    """The responses in request order, plus how many came from the cache and how many were computed."""

    n_cached: int = 0
    n_computed: int = 0


def generate(
    model: Model,
    requests: list[Request],
    store=None,
    batch_size: int | None = None,
    progress: bool = True,
    desc: str | None = None,
) -> Results:
    """Answer ``requests`` in order: cached calls from ``store``, the rest in batches of
    ``batch_size`` (default: the backend's), each result committed to the store as it completes.

    Identical requests in one call are computed once. Calls are claimed in the store before they
    are made, so processes sharing a store make each call once: the others wait for the claimer's
    results, and claim those it could not make (an error, a kill) before making them. Without a store
    nothing is cached.
    """
    fp = model.fingerprint
    keys = [call_key(fp, r) for r in requests]
    done: dict[str, Response] = store.get_many(keys) if store is not None else {}
    todo = list(dict.fromkeys(k for k in keys if k not in done))
    first = {k: requests[i] for i, k in reversed(list(enumerate(keys)))}
    results = Results()
    results.n_cached = sum(k in done for k in keys)
    owner = claim_owner()
    bar = tqdm(
        total=len(todo), desc=desc or f"{model.name}", unit="call", disable=not progress or not todo
    )
    held: list[str] = []
    try:
        with store.holding(owner) if store is not None else nullcontext():
            while todo:  # until every call is stored, made here, or claimed by a live process
                mine, theirs = store.claim(todo, owner) if store is not None else (todo, [])
                held += mine
                results.n_computed += _compute(
                    model, mine, first, done, store, owner, batch_size, bar
                )
                found, _ = store.wait_for(theirs) if theirs else ({}, [])
                done.update(found)
                bar.update(len(found))
                todo = [
                    k for k in theirs if k not in found
                ]  # orphaned, or still another's: claimed again
    finally:
        if store is not None:
            store.release(held, owner)
        bar.close()
    results.extend(done[k] for k in keys)
    return results


def _batch_order(request: Request) -> tuple:
    """Requests of one kind (constraint, settings, images) and similar prompt length next to each
    other, so a batch pads little. Answers are keyed by request, so the order changes no result;
    greedy answers do not depend on the batch (tested), sampled ones are drawn per batch."""
    c = request.constraint
    kind = "free" if c is None else "json" if c.json_schema is not None else str(c.method)
    text = sum(
        len(m["content"])
        if isinstance(m["content"], str)
        else sum(len(p.get("text", "")) for p in m["content"])
        for m in request.messages
    )
    return kind, sorted(request.settings().items()), len(request.images()), text


def _compute(
    model: Model,
    todo: list[str],
    first: dict,
    done: dict,
    store,
    owner: str | None,
    batch_size: int | None,
    bar,
) -> int:
    """Make the calls ``todo`` in batches, storing each result (and releasing its claim) as it completes."""
    fp = model.fingerprint
    size = max(1, batch_size or model.batch_size)
    todo = sorted(
        todo, key=lambda k: _batch_order(first[k])
    )  # similar requests share a batch: less padding
    for start in range(0, len(todo), size):
        chunk = todo[start : start + size]
        batch = [first[k] for k in chunk]

        def record(i: int, resp: Response, chunk=chunk, batch=batch) -> None:
            done[chunk[i]] = resp
            if store is not None:
                store.put(chunk[i], fp, batch[i], resp)
                if owner:
                    store.release([chunk[i]], owner)

        model.generate(batch, on_result=record)
        bar.update(len(chunk))
    return len(todo)
