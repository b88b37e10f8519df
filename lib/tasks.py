"""How an Item becomes a prompt (text + images), a closed answer set when it has one, and a target.

Tasks (``Item.task``):

- ``mcq`` - MemeQA-style multiple choice, 3 or 4 options lettered A-D. Single answer: one letter.
  Multi-answer (``meta.general_type == "multi"``): letters separated by commas, ``N`` when no option
  is correct (unless the options hold a "None of the above", which is then an ordinary option).
- ``yesbut.detection`` (Y/N, the paper's prompt), ``yesbut.understanding`` (``meta.part``: ``left``
  / ``right`` halves get "Describe the image", ``whole`` gets "Why is this image funny/satirical?"),
  ``yesbut.completion`` (the 2x2 grid image; A/B).
- ``scrapbook.qa`` - the Scrapbook question as generated (its form is in the text); the enumerated
  form's alternatives are its closed answer set.
- ``vqa.open`` - a free answer scored against the references (VQAv2 / DocVQA style).

Prompts are data (``lib/data/prompts/tasks.yaml``). Zero-shot chain of thought adds the reasoning
trigger, then asks for the answer with the task's answer trigger (see :mod:`lib.evaluate`).
"""

from __future__ import annotations

import itertools
import re
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from lib.paths import DATA
from lib.schema import Item

TASKS = ("mcq", "yesbut.detection", "yesbut.understanding", "yesbut.completion", "scrapbook.qa", "vqa.open")
STYLES = ("zero_shot", "cot")
LETTERS = string.ascii_uppercase
NONE_LETTER = "N"
_NONE_OPTION = re.compile(r"^\s*none of the (above|options)\s*\.?\s*$", re.IGNORECASE)


@lru_cache(maxsize=1)
def prompts() -> dict:
    return yaml.safe_load((DATA / "prompts" / "tasks.yaml").read_text())


@dataclass(frozen=True)
class Prompt:
    """What a model is asked: text, images (absolute paths), the closed answer set if any, and the
    answer trigger used after chain-of-thought reasoning."""

    text: str
    images: tuple[str, ...]
    choices: tuple[str, ...] | None
    answer_trigger: str


def is_multi(item: Item) -> bool:
    return item.meta.get("general_type") == "multi"


def has_none_option(item: Item) -> bool:
    return any(_NONE_OPTION.match(o) for o in item.options or ())


def letters(n: int) -> tuple[str, ...]:
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"a multiple-choice item needs 2-26 options, got {n}")
    return tuple(LETTERS[:n])


def letter_sets(n: int, with_none: bool) -> tuple[str, ...]:
    """Every answer of a multi-answer item as text: "A", "A, B", ... and "N" (none) when allowed."""
    ls = letters(n)
    sets = [", ".join(c) for k in range(1, n + 1) for c in itertools.combinations(ls, k)]
    return tuple(sets + ([NONE_LETTER] if with_none else []))


_MULTI = re.compile(r"^\s*(?:(?:the\s+)?(?:correct\s+)?(?:answers?|options?)\s*(?:are|is)?\s*[:\-]?\s*)?"
                    r"\(?([A-Z])\)?((?:\s*(?:,|and|&|;)?\s*\(?[A-Z]\)?)*)\s*\.?\s*$", re.IGNORECASE)


def parse_letter_set(text: str, n: int, with_none: bool) -> frozenset[int] | None:
    """Option indices named by a multi-answer reply ("A, C", "B and D", "N"), or None when the text
    is anything else (prose, letters beyond the options, "N" mixed with letters)."""
    t = text.strip().rstrip(".").strip()
    if with_none and t.upper() in (NONE_LETTER, "NONE"):
        return frozenset()
    m = _MULTI.match(t)
    if not m:
        return None
    found = [m.group(1)] + re.findall(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])", m.group(2))
    idx = {LETTERS.index(x.upper()) for x in found}
    if any(i >= n for i in idx) or NONE_LETTER in {x.upper() for x in found} and n <= LETTERS.index(NONE_LETTER):
        return None
    return frozenset(idx)


def format_options(options: list[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


def answer_choices(item: Item) -> tuple[str, ...] | None:
    """The item's closed answer set (what constrained decoding is restricted to), or None for free text."""
    if item.task == "mcq":
        if not item.options:
            raise ValueError(f"item {item.id!r}: an mcq item needs options")
        n = len(item.options)
        return letter_sets(n, not has_none_option(item)) if is_multi(item) else letters(n)
    if item.task == "yesbut.detection":
        return ("Y", "N")
    if item.task == "yesbut.completion":
        return ("A", "B")
    if item.task == "scrapbook.qa" and item.meta.get("form") == "enumerated" and item.meta.get("alternatives"):
        return tuple(item.meta["alternatives"])
    return None


def build_prompt(item: Item, root: str | Path) -> Prompt:
    """The prompt of ``item``; image paths are resolved against the dataset folder ``root``."""
    p = prompts()
    images = tuple(str(Path(root) / im) for im in item.images)
    task = item.task
    choices = answer_choices(item)
    if task == "mcq":
        opts = format_options(item.options)
        if is_multi(item):
            none = "" if has_none_option(item) else p["mcq"]["none_clause"]
            text = p["mcq"]["multi"].format(question=item.question, options=opts, none_clause=none)
            return Prompt(text, images, choices, p["mcq"]["answer_trigger"]["multi"].format(none_clause=none))
        text = p["mcq"]["single"].format(question=item.question, options=opts)
        return Prompt(text, images, choices, p["mcq"]["answer_trigger"]["single"].format(last=choices[-1]))
    if task == "yesbut.detection":
        return Prompt(p["yesbut"]["detection"], images, choices, p["yesbut"]["answer_trigger"]["detection"])
    if task == "yesbut.completion":
        return Prompt(p["yesbut"]["completion"], images, choices, p["yesbut"]["answer_trigger"]["completion"])
    if task == "yesbut.understanding":
        part = item.meta.get("part")
        if part not in ("left", "right", "whole"):
            raise ValueError(f"item {item.id!r}: yesbut.understanding needs meta.part left/right/whole, got {part!r}")
        text = p["yesbut"]["why_funny"] if part == "whole" else p["yesbut"]["describe"]
        return Prompt(text, images, None, p["cot"]["answer_trigger"])
    if task == "scrapbook.qa":
        return Prompt(p["scrapbook"]["question"].format(question=item.question), images, choices,
                      p["scrapbook"]["answer_trigger"])
    if task == "vqa.open":
        return Prompt(p["vqa"]["open"].format(question=item.question), images, None, p["cot"]["answer_trigger"])
    raise ValueError(f"item {item.id!r}: unknown task {task!r}; known tasks: {', '.join(TASKS)}")


def target(item: Item):
    """The gold answer in the form :func:`read_answer` returns: a letter, a frozenset of option
    indices (multi-answer mcq), or the list of reference texts."""
    if item.task == "mcq":
        return frozenset(item.answer) if is_multi(item) else LETTERS[item.answer[0]]
    if item.task in ("yesbut.detection", "yesbut.completion"):
        return item.answer[0]
    return list(item.answer)


def read_answer(item: Item, text: str, constrained_value=None):
    """``(answer, method)`` from a reply: a constrained value is taken as it is; otherwise parsed.
    Closed answer sets give None (invalid) when the reply names no single allowed answer."""
    from lib.models.base import INVALID, parse_choice

    prompt_choices = answer_choices(item)
    if item.task == "mcq" and is_multi(item):
        with_none = not has_none_option(item)
        value = parse_letter_set(constrained_value if constrained_value is not None else text,
                                 len(item.options), with_none)
        return (value, "parse:letters") if value is not None else (None, INVALID)
    if prompt_choices is None:
        return text.strip(), "free"
    if constrained_value is not None:
        return constrained_value, "constrained"
    value, method = parse_choice(text, prompt_choices)
    return value, method


def is_constrained(method: str) -> bool:
    """Was a response produced under a constraint (trie, log-likelihood, JSON schema)? Such answers
    are taken as decoded; everything else is (re-)parsed from the raw text."""
    from lib.models.base import JSON_SCHEMA

    return method.startswith("constrained") or method == JSON_SCHEMA


def read_response(item: Item, resp) -> tuple:
    """``(answer, method, valid)`` of a model response to ``item``: a constrained answer is taken as
    decoded (its method kept), free text is parsed; an unreadable or empty answer is invalid."""
    from lib.models.base import INVALID

    constrained = is_constrained(resp.method) and resp.valid
    value, method = read_answer(item, resp.text, resp.parsed if constrained else None)
    if constrained and value is not None:
        method = resp.method
    if method == INVALID or value is None:
        return None, INVALID, False
    if method == "free" and not str(value).strip():
        return None, INVALID, False  # an empty answer to an open question: counted, never scored as text
    return value, method, True


# --- the embedded demo's datasets -----------------------------------------------------------------

def demo_datasets(out: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write the demo's ``mcq``, ``yesbut`` and ``vqa`` dataset folders under ``out`` from
    ``lib/data/demo/evaluation.yaml`` and scikit-image's sample photographs; returns name -> folder.
    Completion options are placed A/B by a seeded shuffle."""
    import random

    from lib.io import dataset_info, load_image, save_dataset
    from lib.panels import completion_grid, compose
    from lib.io import write_sample_images

    spec = yaml.safe_load((DATA / "demo" / "evaluation.yaml").read_text())
    out = Path(out)
    info = lambda name: dataset_info(name, license="demo (scikit-image sample images)",  # noqa: E731
                                     provenance={"source": "lib/data/demo/evaluation.yaml"})
    folders = {}
    for name in ("mcq", "vqa", "yesbut"):
        folders[name] = out / name
        write_sample_images(folders[name] / "images")
    img = lambda name: f"images/{name}.png"  # noqa: E731
    save_dataset(folders["mcq"], [
        Item(id=r["id"], task="mcq", question=r["question"], images=[img(r["image"])], options=r["options"],
             answer=r["answer"], meta={"general_type": r["general_type"], "specific_type": r["specific_type"]})
        for r in spec["mcq"]], info("demo-mcq"))
    save_dataset(folders["vqa"], [
        Item(id=r["id"], task="vqa.open", question=r["question"], images=[img(r["image"])], answer=r["answers"])
        for r in spec["vqa"]], info("demo-vqa"))
    root = folders["yesbut"]
    photo = lambda name: load_image(root / img(name))  # noqa: E731
    items, pairs = [], {r["id"]: r for r in spec["yesbut"]}
    for r in spec["yesbut"]:
        path = f"images/{r['id']}.png"
        compose(photo(r["left"]), photo(r["right"]), height=256).save(root / path)
        label = "Y" if r["satirical"] else "N"
        meta = {"left": r["left"], "right": r["right"], "satirical": r["satirical"]}
        items.append(Item(id=f"{r['id']}-detection", task="yesbut.detection", question="", images=[path],
                          answer=[label], meta=meta))
        if r["satirical"]:
            for part, ref, image in (("left", r["left_description"], img(r["left"])),
                                     ("right", r["right_description"], img(r["right"])),
                                     ("whole", r["overall_description"], path)):
                items.append(Item(id=f"{r['id']}-{part}", task="yesbut.understanding", question="", images=[image],
                                  answer=[ref], meta={**meta, "part": part}))
    rng = random.Random(seed)
    for c in spec["completion"]:
        pair = pairs[c["pair"]]
        correct = pair["right"] if c["missing"] == "but" else pair["left"]
        options = [correct, c["distractor"]]
        rng.shuffle(options)
        path = f"images/{c['id']}.png"
        completion_grid(photo(pair["left"]), photo(pair["right"]), photo(options[0]), photo(options[1]),
                        missing=c["missing"], cell=192).save(root / path)
        items.append(Item(id=c["id"], task="yesbut.completion", question="", images=[path],
                          answer=["A" if options[0] == correct else "B"],
                          meta={"pair": c["pair"], "missing": c["missing"], "options": options}))
    save_dataset(root, items, info("demo-yesbut"))
    return folders


def yesbut_datasets(records: list[dict], out: str | Path, seed: int = 0) -> Path:
    """A YesBut evaluation dataset folder from collected records (``lib.collect`` manifest rows):
    detection on every labelled image; understanding on the annotated stage-2 originals (each half,
    cut at the gutter, against its description; the whole against the overall description);
    completion as the paper curates it - the original's half kept in its own (ORIG) style, the other
    half chosen between a stylised half from a satirical combination and one from a non-satirical
    combination of the same original, A/B by a seeded shuffle."""
    import random

    from lib.io import dataset_info, load_image, save_dataset
    from lib.panels import completion_grid, split

    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    items = []
    for r in records:
        if r.get("label") not in ("satirical", "non_satirical"):
            continue
        items.append(Item(id=f"{r['id']}-detection", task="yesbut.detection", question="", images=[r["path"]],
                          answer=["Y" if r["label"] == "satirical" else "N"],
                          meta={"stage": r.get("stage"), "styles": f"{r.get('left_style')}|{r.get('right_style')}"}))
    halves: dict = {}

    def half(rec: dict, side: str) -> str:
        key = (rec["id"], side)
        if key not in halves:
            path = out / "images" / f"{rec['id']}_{side}.png"
            if not path.exists():
                split(load_image(rec["path"]))[0 if side == "left" else 1].save(path)
            halves[key] = str(path)
        return halves[key]

    for r in records:
        a = r.get("annotation") or {}
        if r.get("stage") != 2 or not a:
            continue
        for part, ref in (("left", a.get("left_description")), ("right", a.get("right_description")),
                          ("whole", a.get("overall_description"))):
            if ref:
                image = r["path"] if part == "whole" else half(r, part)
                items.append(Item(id=f"{r['id']}-{part}", task="yesbut.understanding", question="", images=[image],
                                  answer=[ref], meta={"part": part, "stage": 2, "difficulty": a.get("difficulty")}))
    rng = random.Random(seed)
    by_original: dict = {}
    for r in records:
        if r.get("stage") in (3, 4) and r.get("original"):
            by_original.setdefault(r["original"], []).append(r)
    originals = {r["id"]: r for r in records if r.get("stage") == 2}
    for oid, gen in sorted(by_original.items()):
        if oid not in originals:
            continue
        for kept in ("left", "right"):
            other = "right" if kept == "left" else "left"
            fits = lambda g, label: g.get("label") == label and g.get(f"{kept}_style") == "ORIG" \
                and g.get(f"{other}_style") != "ORIG"  # noqa: E731
            sat = sorted((g for g in gen if fits(g, "satirical")), key=lambda g: g["id"])
            non = sorted((g for g in gen if fits(g, "non_satirical") and (not sat or g[f"{other}_style"] !=
                                                                          sat[0][f"{other}_style"])), key=lambda g: g["id"])
            if not sat or not non:
                continue
            right, wrong = half(sat[0], other), half(non[0], other)
            options = [right, wrong]
            rng.shuffle(options)
            missing = "yes" if other == "left" else "but"
            kept_img = load_image(half(originals[oid], kept))
            # the kept half fills its own cell; the missing cell shows the question mark whatever is passed
            grid = completion_grid(kept_img, kept_img, load_image(options[0]), load_image(options[1]), missing=missing)
            path = out / "images" / f"{oid}-completion-{missing}.png"
            grid.save(path)
            items.append(Item(id=f"{oid}-completion-{missing}", task="yesbut.completion", question="", images=[str(path)],
                              answer=["A" if options[0] == right else "B"],
                              meta={"original": oid, "missing": missing, "satirical_from": sat[0]["id"],
                                    "non_satirical_from": non[0]["id"]}))
    save_dataset(out, items, dataset_info("yesbut-collected", provenance={"records": len(records)}))
    return out
