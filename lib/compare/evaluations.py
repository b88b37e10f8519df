"""An evaluation folder as the run comparison (:mod:`lib.compare.explain`) reads it: verified as a
rescore verifies one (:func:`lib.eval.manifest.check_manifest`), its answers, judgements and the
datasets rewritten since; the request each answer was sent rebuilt from the run's config and dataset
(:func:`request_parts`), and an imported run's requests as its harness logged them
(:class:`ForeignRun`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path

from lib.config import ParamsError
from lib.core.schema import Item, Prediction, image_sha256
from lib.eval.foreign import FOREIGN
from lib.eval.foreign_samples import logged_request
from lib.eval.manifest import PARTS, Unverified, answer_digest, changed_datasets, check_manifest
from lib.eval.requests import zero_shot
from lib.eval.rescore import saved_config
from lib.eval.settings import EvalConfig
from lib.io import artifacts, load_items, read_jsonl
from lib.tasks import style_prompts, wants_question_first

# what is verified before a folder is compared: all a manifest ties together but the datasets, as a
# dataset rewritten in place need not stop a comparison: the items it changes are put on it
VERIFIED = tuple(p for p in PARTS if p != "datasets")


class CompareError(ParamsError):
    """A run or a filter the comparison cannot find or trust: a bad input, which every command line
    (``python -m lib.compare``, stage 07's ``compare_with``) says as an error and exits 2 with."""


@dataclass
class Run:
    """One evaluation folder as the comparison reads it: config, provenance, answers, judgements."""

    folder: Path
    cfg: EvalConfig
    provenance: dict
    rows: list[dict]
    judgements: dict = field(
        default_factory=dict
    )  # (model, dataset, item id, style) -> judgement row
    asked: dict = field(
        default_factory=dict
    )  # dataset -> digest of the items.jsonl it asked (empty: not recorded)
    stale: dict = field(default_factory=dict)  # the datasets rewritten since (changed_datasets)
    _items: dict = field(default_factory=dict)
    _requests: dict = field(default_factory=dict)

    @cached_property
    def sha(self) -> str | None:
        return (self.provenance.get("git") or {}).get("sha")

    def item(self, dataset: str, item_id: str) -> Item:
        """An evaluated item, its dataset read once."""
        if dataset not in self._items:
            folder = self.cfg.datasets.get(dataset)
            if folder is None or not (Path(folder) / "items.jsonl").exists():
                raise CompareError(
                    f"{self.folder}: dataset {dataset!r} ({folder}) is gone: the requests cannot be "
                    f"rebuilt; rerun stage 06 or restore the dataset"
                )
            self._items[dataset] = {it.id: it for it in load_items(folder)}
        try:
            return self._items[dataset][item_id]
        except KeyError:
            raise CompareError(
                f"{self.folder}: item {item_id!r} is no longer in dataset {dataset!r}"
            ) from None

    def request(self, row: dict) -> dict:
        """What the model was sent for ``row``, in parts a difference can be named by."""
        spec = self.cfg.models.get(row["model"], {})
        key = (row["dataset"], row["item_id"], wants_question_first(spec), row["style"])
        if key not in self._requests:
            self._requests[key] = request_parts(
                self.cfg,
                self.item(row["dataset"], row["item_id"]),
                row["dataset"],
                spec,
                row["style"],
            )
        return self._requests[key]


def _verified(folder: Path, cfg: EvalConfig) -> tuple[list[dict], dict]:
    """The folder's predictions and manifest, once :func:`lib.eval.manifest.check_manifest` finds it
    finished and unedited (:data:`VERIFIED`; an lmms-eval import has no manifest: its scores alone)."""
    rows, answers = [], hashlib.sha256()
    for d in read_jsonl(folder / artifacts.PREDICTIONS):
        rows.append(d)
        answer_digest(answers, Prediction.from_dict(d))
    imported = (folder / FOREIGN).exists() and not (folder / artifacts.EVAL_MANIFEST).exists()
    try:
        saved = check_manifest(
            folder, cfg, answers.hexdigest(), parts=("scores",) if imported else VERIFIED
        )
    except Unverified as e:
        raise CompareError(f"cannot compare {e}") from None
    return rows, saved


def open_run(folder: str | Path) -> Run:
    """An evaluation folder (``outputs/<run>/06_evaluate``) read for comparing, verified first
    (:func:`_verified`); the datasets rewritten since it asked them are noted (``Run.stale``)."""
    folder = Path(folder)
    if not (folder / artifacts.PREDICTIONS).exists():
        raise CompareError(
            f"{folder / artifacts.PREDICTIONS} not found: {folder} holds no finished evaluation (run stage 06)"
        )
    try:
        cfg = saved_config(folder)
    except (FileNotFoundError, ValueError) as e:
        raise CompareError(str(e)) from None
    rows, saved = _verified(folder, cfg)
    prov = folder / artifacts.PROVENANCE
    judgements = {}
    if (folder / artifacts.JUDGEMENTS).exists():
        judgements = {
            (
                j["model"],
                j["meta"].get("dataset", ""),
                j["item_id"],
                j["meta"].get("style", "zero_shot"),
            ): j
            for j in read_jsonl(folder / artifacts.JUDGEMENTS)
        }
    return foreign_run(
        Run(
            folder,
            cfg,
            json.loads(prov.read_text()) if prov.exists() else {},
            rows,
            judgements,
            asked=saved.get("datasets") or {},
            stale=changed_datasets(cfg, saved) if saved else {},
        )
    )


# --- the request ------------------------------------------------------------------------------------


def request_parts(cfg: EvalConfig, item: Item, dataset: str, spec: dict, style: str) -> dict:
    """The request an item was sent in ``style`` by a model of ``spec``, in parts: the zero-shot
    request stage 06 built (:func:`lib.eval.requests.zero_shot`) described - its texts, images
    (content hashes), the order of the parts, token limit, constraint and seed - and the style's
    own texts (chain of thought's triggers) and reasoning limit."""
    req = zero_shot(cfg, item, cfg.datasets[dataset], spec)
    parts = [p for m in req.messages if not isinstance(m["content"], str) for p in m["content"]]
    return {
        "style": style,
        "texts": [p["text"] for p in parts if p.get("type") == "text"],
        "images": [image_sha256(p["image"]) for p in parts if p.get("type") == "image"],
        "layout": [p.get("type") for p in parts],
        "token limit": req.max_new_tokens,
        "constraint": req.constraint.to_dict() if req.constraint else None,
        "seed": req.seed,
        "style texts": style_prompts().get(style),
        "reasoning limit": cfg.cot_max_new_tokens if style != "zero_shot" else None,
    }


def prompt_difference(a: dict, b: dict) -> list[str]:
    """The names of what differs between two requests (:func:`request_parts`); empty when equal."""
    named = []
    if a["style"] != b["style"]:  # its own texts and reasoning limit come with the style
        named.append("style")
    elif a["style texts"] != b["style texts"]:
        named.append("template")
    if a["texts"] != b["texts"]:
        lines = lambda r: sorted(line for t in r["texts"] for line in t.splitlines())
        named.append(
            "option order" if a["texts"] != b["texts"] and lines(a) == lines(b) else "template"
        )
    if a["images"] != b["images"] or a["layout"] != b["layout"]:
        named.append("image order" if sorted(a["images"]) == sorted(b["images"]) else "images")
    named += [
        k
        for k in ("token limit", "reasoning limit", "constraint", "seed")
        if a[k] != b[k] and (k != "reasoning limit" or a["style"] == b["style"])
    ]
    return list(dict.fromkeys(n if n != "reasoning limit" else "token limit" for n in named))


# --- foreign runs: another harness's answers, imported (lib.eval.foreign) ---------------------------


@dataclass
class ForeignRun(Run):
    """An imported evaluation folder (:func:`lib.eval.foreign.import_lmms_eval`): each answer's
    request is what the harness logged of it (:func:`lib.eval.foreign.logged_request`)."""

    record: dict = field(default_factory=dict)  # its foreign.json

    def request(self, row: dict) -> dict:
        return logged_request(super().request(row), row, self.record)


def foreign_run(run: Run) -> Run:
    """``run`` as a :class:`ForeignRun` when its folder was imported (it holds ``foreign.json``)."""
    path = run.folder / FOREIGN
    if not path.exists():
        return run
    return ForeignRun(
        **{f.name: getattr(run, f.name) for f in fields(Run)}, record=json.loads(path.read_text())
    )


def unsplit(cause: str | None, ra: dict, rb: dict) -> tuple[str | None, list[str] | None]:
    """A changed reply whose request a foreign run did not log in full cannot be put on the model
    alone: it goes on ``prompt`` (the first step that may differ), named as unsplit and why."""
    why = ra.get("unsplit") or rb.get("unsplit")
    if cause == "model" and why:
        return "prompt", [f"prompt or model, not split: {why}"]
    return cause, None


def foreign_notes(run_a: Run, run_b: Run) -> list[str]:
    """What the comparison knows of each imported run's requests, in words (the report prints them)."""
    notes = []
    for side, run in (("A", run_a), ("B", run_b)):
        if not isinstance(run, ForeignRun):
            continue
        r = run.record
        n = sum(r.get("n_samples", {}).values())
        path = {
            "chat": "the chat path: VQA Lab's own message, images and text in its order",
            "simple": "the simple path: the model wraps the text and places the images itself (a prompt change)",
            None: "an unknown path (no results.json)",
        }[r.get("path")]
        version = (
            r.get("version") if "unknown" not in str(r.get("version")) else "of unrecorded version"
        )
        notes.append(
            f"{side} is {r.get('harness')} {version} ({r.get('model')}), {n} answers imported from "
            f"{r.get('source')}: asked by {path}; prompt text logged for {r.get('logged_input')}/{n}"
            + (
                ""
                if r.get("logged_input") == n and r.get("path")
                else " - where a request is not known, a changed reply is put on prompt, not split from model"
            )
        )
    return notes
