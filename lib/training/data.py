"""The questions training learns from: examples (an item and its dataset folder), the train /
validation / test splits (a dataset's own, or drawn by image), the filters on what the items' tasks
say of them (:meth:`Task.facets`: question type, group, form, level, target), batches collated
with labels on the answer tokens only, and answer-balanced drawing probabilities.

Prompts and targets are the items' tasks' (:mod:`lib.families`): training learns
:meth:`Reader.target_text` after :meth:`Task.prompt`, in the image/question order and chat template
evaluation uses."""

from __future__ import annotations

import weakref
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from lib.core.schema import Item
from lib.io import ImageError, load_image, load_items
from lib.models.hf_images import ImageTensors
from lib.models.hf_processors import chat_prompt
from lib.tasks import user_content
from lib.tasks.registry import split_reader, task_of
from lib.training.plan import TrainSettings


@dataclass
class Example:
    """One training or validation question: the item and the dataset folder its images are in."""

    item: Item
    root: str

    @cached_property
    def image(self) -> str:
        """The image's path (made once: every batch that draws the example asks for it)."""
        return str(Path(self.root) / self.item.images[0])

    @property
    def answer(self) -> str:
        """The text the model is trained to produce (the task's target text)."""
        return task_of(self.item).reader.target_text(self.item)

    @cached_property
    def facets(self) -> dict:
        """What the item's task says it is (:meth:`Task.facets`)."""
        return task_of(self.item).facets(self.item)

    @property
    def question_type(self) -> str:
        """The question type per-type accuracies run over (``all`` for an item without one)."""
        return self.facets.get("type") or "all"

    def describes_only(self, targets: list[str]) -> bool:
        """Does the question describe only attributes among ``targets`` (its ``target`` facet:
        ``color``, ``shape`` or ``color+shape``)? False for a question without one."""
        return "target" in self.facets and not set(self.facets["target"].split("+")) - set(targets)


def split_by_image(
    image_ids: list[str], val_fraction: float, test_fraction: float, seed: int
) -> dict[str, str]:
    """Assign every image to train / val / test (disjoint by image, deterministic for a seed)."""
    unique = sorted(set(image_ids))
    order = np.random.default_rng(seed).permutation(len(unique))
    n_test = round(len(unique) * test_fraction)
    n_val = round(len(unique) * val_fraction)
    split = {}
    for rank, i in enumerate(order):
        split[unique[i]] = "test" if rank < n_test else "val" if rank < n_test + n_val else "train"
    return split


def _read_split(source: str, cfg: TrainSettings) -> tuple[list[Item], Path]:
    """Items and the folder their image paths are relative to: a dataset folder, or a released
    split a family reads (:func:`lib.tasks.registry.split_reader`: MemeQA's JSON)."""
    path = Path(source)
    if (read := split_reader(path)) is not None:
        if not cfg.memeqa_images:
            raise ValueError(
                f"{path}: a released {path.suffix} split needs memeqa_images (the folder of its "
                f"images)"
            )
        return read(path, str(Path(cfg.memeqa_images).resolve())), path.parent
    return load_items(path), path


def _kept(cfg: TrainSettings, facets: dict) -> bool:
    """An item passes the ``types`` / ``groups`` / ``forms`` filters on the facets it has (an empty
    filter, or a facet the item lacks, lets it through), and is no absurd question."""
    return not facets.get("absurd") and all(
        not allowed or name not in facets or facets[name] in allowed
        for name, allowed in (("type", cfg.types), ("group", cfg.groups), ("form", cfg.forms))
    )


def load_examples(cfg: TrainSettings) -> tuple[dict[str, list[Example]], dict]:
    """Examples per split; unreadable images are skipped and counted. The splits are the dataset's
    own when ``val_dataset`` / ``test_dataset`` name them (an image in two of them is an error:
    it would leak), else drawn by image from ``dataset``."""
    sources = (
        {"train": cfg.dataset, "val": cfg.val_dataset, "test": cfg.test_dataset}
        if cfg.val_dataset
        else {"all": cfg.dataset}
    )
    assigned = _assign(_read_parts(cfg, sources), cfg, sources)
    bad = _unreadable_images(assigned)
    out: dict[str, list[Example]] = {"train": [], "val": [], "test": []}
    for part, e in assigned:
        if _image_name(e) not in bad and _wanted(cfg, part, e):
            out[part].append(e)
    report = {
        "items": len(assigned),
        "splits": "the dataset's own" if cfg.val_dataset else "by image",
        "skipped_images": bad,
        "skipped_items": sum(_image_name(e) in bad for _, e in assigned),
        **{f"{k}_examples": len(v) for k, v in out.items()},
        **{f"{k}_images": len({e.image for e in v}) for k, v in out.items()},
    }
    return out, report


def _image_name(e: Example) -> str:
    """The example's image as its item names it."""
    return e.item.images[0]


def _read_parts(cfg: TrainSettings, sources: dict[str, str]) -> dict[str, list[Example]]:
    """The filtered examples of each source (:func:`_kept`); a source left with none is an error."""
    parts: dict[str, list[Example]] = {}
    for part, source in sources.items():
        items, root = _read_split(source, cfg)
        parts[part] = [e for e in (Example(it, str(root)) for it in items) if _kept(cfg, e.facets)]
        if not parts[part]:
            raise ValueError(
                f"{source}: no items match types={cfg.types} groups={cfg.groups} forms={cfg.forms}"
            )
    return parts


def _assign(
    parts: dict[str, list[Example]], cfg: TrainSettings, sources: dict[str, str]
) -> list[tuple[str, Example]]:
    """``(split, example)`` for every example: drawn by image from ``all``, or the dataset's own
    splits, checked to share no image."""
    if "all" in parts:
        split = split_by_image(
            [_image_name(e) for e in parts["all"]], cfg.val_fraction, cfg.test_fraction, cfg.seed
        )
        return [(split[_image_name(e)], e) for e in parts["all"]]
    seen: dict[str, str] = {}
    for part, examples in parts.items():
        for e in examples:
            other = seen.setdefault(str(Path(e.image).resolve()), part)
            if other != part:
                raise ValueError(
                    f"image {_image_name(e)} is in both the {other} and the {part} split "
                    f"({sources[other]}, {sources[part]}): the splits must not share images"
                )
    return [(part, e) for part, examples in parts.items() for e in examples]


def _unreadable_images(assigned: list[tuple[str, Example]]) -> dict[str, str]:
    """Image (as the items name it) -> why it cannot be read, for every image that cannot."""
    bad: dict[str, str] = {}
    for root, image in sorted({(e.root, _image_name(e)) for _, e in assigned}):
        try:
            load_image(Path(root) / image)
        except ImageError as err:
            bad[image] = str(err)
    return bad


def _wanted(cfg: TrainSettings, part: str, e: Example) -> bool:
    """Does the split keep the example: validation and test only the ``eval_levels``, training only
    the ``train_targets`` and ``train_types`` (each where the item has that facet)?"""
    if part != "train":
        return not (
            cfg.eval_levels and "level" in e.facets and e.facets["level"] not in cfg.eval_levels
        )
    return not (
        (cfg.train_targets and "target" in e.facets and not e.describes_only(cfg.train_targets))
        or (cfg.train_types and "type" in e.facets and e.facets["type"] not in cfg.train_types)
    )


def collate(
    examples: list[Example],
    processor,
    eos: str,
    question_first: bool = False,
    encoder_decoder: bool = False,
    spec: dict | None = None,
    images=load_image,
    image_tensors: ImageTensors | None = None,
):
    """Right-padded inputs with labels on the answer tokens (+ end of turn) only. The prompt is the
    task's own (:meth:`Task.prompt`), in the same image/question order and chat template as at
    evaluation (:class:`lib.models.hf.HFModel`'s). An encoder-decoder model reads the prompt with
    its encoder and is trained to decode the answer: ``labels`` are the answer tokens alone."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap

    tok = processor.tokenizer
    tok.padding_side = "left"
    texts = _prompts(
        examples, processor, question_first, (spec or {}).get("prompt_format", "{text}")
    )
    pictures = [images(e.image) for e in examples]  # ``images``: a loader, e.g. an ImageCache
    nested = processor.__class__.__name__.startswith(("Idefics", "SmolVLM"))
    with image_tensors.around(processor) if image_tensors is not None else nullcontext():
        enc = processor(
            text=texts,
            images=[[im] for im in pictures] if nested else pictures,
            return_tensors="pt",
            padding=True,
        )
    memo = _made(processor)
    answers = []
    for e in examples:
        key = ("answer", e.answer + eos)
        if key not in memo:
            memo[key] = tuple(tok.encode(key[1], add_special_tokens=False))
        answers.append(list(memo[key]))
    if encoder_decoder:
        width = max(map(len, answers))
        enc["labels"] = torch.tensor([a + [-100] * (width - len(a)) for a in answers])
        return dict(enc)
    return _answers_appended(enc, answers, tok.pad_token_id)


def _prompts(examples: list[Example], processor, question_first: bool, fmt: str) -> list[str]:
    """Each example's task prompt in the chat template, its image where evaluation puts it."""
    memo = _made(processor)
    texts = []
    for e in examples:
        key = (task_of(e.item).prompt(e.item, e.root).text, question_first, fmt)
        if key not in memo:
            content = user_content(key[0], [None], question_first)
            memo[key] = chat_prompt(processor, [{"role": "user", "content": content}], fmt)
        texts.append(memo[key])
    return texts


# per processor: the chat prompts and answer tokens :func:`collate` has made, by their text (a demo
# training draws 40,000 questions of about 2,200 texts and four answers; rendering the chat template
# and tokenising each anew was a quarter of drawing a batch); forgotten with the processor
_MADE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _made(processor) -> dict:
    """The memo of :func:`collate`'s texts for ``processor`` (its chat template is part of it)."""
    templates = (
        getattr(processor, "chat_template", None),
        getattr(getattr(processor, "tokenizer", None), "chat_template", None),
    )
    return _MADE.setdefault(processor, {}).setdefault(templates, {})


def _answers_appended(enc, answers: list[list[int]], pad: int) -> dict:
    """A decoder's batch: each left-padded prompt of ``enc`` unpadded, its answer tokens appended,
    then right-padded; ``labels`` on the answer tokens only (-100 elsewhere). Inputs that are not
    per token (pixel values) are passed on as they are."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap

    mask = enc["attention_mask"].bool()
    per_token = [
        k
        for k, v in enc.items()
        if k != "attention_mask" and v.dim() == 2 and v.shape == mask.shape
    ]
    lengths = mask.sum(1).tolist()
    width = max(n + len(a) for n, a in zip(lengths, answers))
    # filled row by row in tensors (lists of Python ints cost as much again as the rest of the batch)
    batch = {
        k: torch.full(
            (len(answers), width),
            pad if k == "input_ids" else 0,
            dtype=torch.get_default_dtype() if enc[k].is_floating_point() else torch.long,
        )
        for k in per_token
    }
    batch["attention_mask"] = torch.zeros((len(answers), width), dtype=torch.long)
    batch["labels"] = torch.full((len(answers), width), -100, dtype=torch.long)
    for i, (n, ans) in enumerate(zip(lengths, answers)):
        ids, end = torch.tensor(ans, dtype=torch.long), n + len(ans)
        for k in per_token:
            batch[k][i, :n] = enc[k][i][mask[i]]
            batch[k][i, n:end] = ids if k == "input_ids" else 0
        batch["attention_mask"][i, :end] = 1
        batch["labels"][i, n:end] = ids
    for k, v in enc.items():
        if k not in batch and k not in per_token:
            batch[k] = v
    return batch


def answer_balance(examples: list[Example]) -> np.ndarray:
    """Drawing probabilities under which each answer of a question type (task and ``type`` facet) is
    equally likely and each type keeps its share of the questions."""
    keys = [(e.item.task, e.facets.get("type"), e.answer) for e in examples]
    per_answer = Counter(keys)
    per_type = Counter(k[:2] for k in keys)
    answers = Counter(k[:2] for k in per_answer)
    p = np.array([per_type[k[:2]] / (answers[k[:2]] * per_answer[k]) for k in keys])
    return p / p.sum()
