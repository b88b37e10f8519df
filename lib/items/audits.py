"""The item-quality audits that read the items themselves, not only the answers: their text (the
blind reader, :func:`blind`) and their images (copies across datasets, :func:`leaks`). Both are
audits of :data:`lib.items.quality.AUDITS` (``audit(bank) -> Finding``).

**Which items can be read** (:func:`readable`): each dataset version of the bank is looked up
through the ``config.json`` of the evaluation folders that answered it (the bank's ``source``),
which names the dataset's folder; the folder is read only when its ``items.jsonl`` still has the
digest the evaluation recorded (a dataset rebuilt since holds other items). Otherwise the audit
says why, per dataset version, and reads nothing of it.

**Blind** (:func:`blind`): the linear text-only reader of :mod:`lib.items.blind`, cross-fitted
in :data:`lib.items.blind.FOLDS` folds by image, over the items the bank holds (those evaluated; a
folder larger than the evaluation's sample is not read whole); per
item of the bank its ``p_blind``, flagged ``blind_solvable`` when it exceeds both
:data:`BLIND_FLAG` and its chance by :data:`BLIND_MARGIN`; per dataset version the blind accuracy
beside chance and the rule-based tells (``blind.csv``: :func:`lib.items.blind.blind_table`), a
sentence, and a figure of the ``p_blind`` distributions. A dataset of fewer than
:data:`MIN_IMAGES` images is too small to hold images out: a sentence says so.

**Leaks** (:func:`leaks`): every image of the evaluated items of every readable dataset version against every other
(:func:`lib.items.leaks.image_leaks`: exact, resized, recompressed, mirrored, cropped and
recoloured copies), and the questions asked again of a copied image
(:func:`lib.items.leaks.repeated_questions`). Splits kept as datasets of their own (a train and a
test folder) are compared like any two datasets. Per item the flags ``leaked_image`` (an image of
the item has a copy in another dataset) and ``repeated_question`` (the same question is asked of
that image, or its copy, in another dataset); the pairs are ``leaks.csv`` and
``repeated_questions.csv``. Copies within one dataset are counted in its sentence, not flagged:
one dataset asking several questions of one picture is its design, not a leak.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from lib.io import artifacts, file_sha256, item_index, read_items_at
from lib.items.bank import ITEM
from lib.items.blind import FOLDS, blind_reader, blind_table, image_of
from lib.items.figures import distributions
from lib.items.finding import DATASET, Finding
from lib.items.leaks import image_leaks, repeated_questions

# An item is blind-solvable when the text-only reader gives its right answer a probability above
# BLIND_FLAG (it would pick it over any alternative) and at least BLIND_MARGIN above chance (so a
# yes/no question needs 0.75, a four-option one 0.5): a guess that merely leans right is no flag.
BLIND_FLAG = 0.5
BLIND_MARGIN = 0.25
MIN_IMAGES = 2 * FOLDS  # fewer images than two per fold leave too little to train on
Version = tuple[str, str]  # (dataset, digest)


def _folder_of(version: Version, sources: list[str]) -> tuple[Path | None, str]:
    """The folder holding this dataset version's items, or None and why not."""
    dataset, digest = version
    why = f"no {artifacts.EVAL_CONFIG} of its evaluation names its folder"
    for source in sources:
        config = Path(source) / artifacts.EVAL_CONFIG
        try:
            named = json.loads(config.read_text()).get("datasets", {}).get(dataset)
        except (OSError, ValueError, AttributeError):
            continue
        if not named:
            continue
        folder = Path(named)
        found = file_sha256(folder / "items.jsonl")
        if found == digest:
            return folder, ""
        why = (
            f"{folder}/items.jsonl is missing"
            if found is None
            else f"{folder}/items.jsonl changed since it was evaluated (another digest)"
        )
    return None, why


def readable(bank: pd.DataFrame) -> dict[Version, tuple[Path | None, str]]:
    """Per dataset version of the bank: (its folder, "") where its items can be read as they were
    evaluated, else (None, why)."""
    sources = bank.drop_duplicates([*DATASET, "source"]).groupby(DATASET, sort=True)["source"]
    return {key: _folder_of(key, list(s)) for key, s in sources}


def evaluated(bank: pd.DataFrame, version: Version, folder: Path) -> list:
    """The items of this dataset version the bank holds answers to, from its folder: a folder
    larger than the evaluation's sample is read, audited and shown as evaluated."""
    mine = bank[(bank["dataset"] == version[0]) & (bank["digest"] == version[1])]
    offsets = item_index(folder, wanted=set(mine["item_id"]))  # the index cache: outputs/cache/
    return read_items_at(folder, sorted(offsets.values()))


def _labels(versions) -> dict[Version, str]:
    """A dataset version's name on figures and in pair tables: its name, with the digest's start
    where two versions share a name."""
    names = [d for d, _ in versions]
    return {(d, g): d if names.count(d) == 1 else f"{d}@{g[:8]}" for d, g in versions}


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    index = pd.MultiIndex.from_arrays([[], [], []], names=list(ITEM))
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()}, index=index)


def _ours(frame: pd.DataFrame, bank: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` (ITEM columns) whose item is in the bank, indexed by ITEM."""
    items = bank.drop_duplicates(list(ITEM))[list(ITEM)]
    return frame.merge(items, on=list(ITEM)).set_index(list(ITEM))


# --- blind ----------------------------------------------------------------------------------------


def _blind_said(scored: pd.DataFrame) -> str:
    """One dataset version's blind accuracy, per format, beside chance and the tells."""
    parts = []
    for fmt, part in scored.groupby("format", sort=False):
        read = part[part["reason"] == ""]
        if not len(read):
            parts.append(f"{fmt}: no item read ({part['reason'].iloc[0]})")
            continue
        rule = read["rule_correct"].mean()
        tells = "" if np.isnan(rule) else f", rule-based tells {rule:.2f}"
        parts.append(
            f"{read['correct'].mean():.2f} of {len(read)} {fmt} items right without the image "
            f"(chance {read['chance'].mean():.2f}{tells})"
        )
    return f"blind reader (linear, {FOLDS} folds by image): " + "; ".join(parts)


def _read_blind(version: Version, items: list) -> tuple[pd.DataFrame | None, str]:
    images = len({image_of(it) for it in items})
    if images < MIN_IMAGES:
        return None, (
            f"blind reader: too few images (n = {images} < {MIN_IMAGES}) for {FOLDS} folds by "
            "image; not read"
        )
    try:
        scored = blind_reader(items, kind="linear", folds=FOLDS, dataset=version[0])
    except ValueError as e:  # text the reader cannot fit (no n-gram in common): said, not raised
        return None, f"blind reader: its text could not be read ({e})"
    return scored.assign(digest=version[1]), _blind_said(scored)


def _blind_figure(scored: pd.DataFrame, labels: dict[Version, str]) -> tuple:
    read = scored[scored["reason"] == ""]
    return distributions(
        {labels[k]: part["p_blind"] for k, part in read.groupby(DATASET)},
        "Blind solvability: the right answer's probability from the text alone, per dataset",
        "p_blind (text-only reader, held out by image)",
        (0.0, 1.0),
    )


def blind(bank: pd.DataFrame) -> Finding:
    """The linear blind reader over every readable dataset version (see the module's docstring)."""
    found = Finding("blind", flags=_empty({"blind_solvable": "bool"}))
    frames, versions = [], readable(bank)
    for version, (folder, why) in versions.items():
        if folder is None:
            found.said[version] = f"blind reader: {why}"
            continue
        scored, found.said[version] = _read_blind(version, evaluated(bank, version, folder))
        if scored is not None:
            frames.append(scored)
    if not frames:
        return found
    scored = pd.concat(frames, ignore_index=True)
    mine = _ours(scored[scored["reason"] == ""], bank)
    found.items = mine[["p_blind"]]
    bar = np.maximum(BLIND_FLAG, mine["chance"] + BLIND_MARGIN)
    found.flags = (mine["p_blind"] > bar).rename("blind_solvable").to_frame()
    tables = [
        blind_table(part).assign(digest=key[1]) for key, part in scored.groupby(DATASET, sort=True)
    ]
    found.tables["blind"] = pd.concat(tables, ignore_index=True)
    read = scored[scored["reason"] == ""].groupby(DATASET)
    found.datasets = pd.DataFrame(
        {
            "blind_accuracy": read["correct"].mean(),
            "blind_chance": read["chance"].mean(),
            "blind_rule": read["rule_correct"].mean(),
        }
    )
    found.figures["blind_probability"] = _blind_figure(scored, _labels(versions))
    return found


# --- leaks ----------------------------------------------------------------------------------------


def _image_items(read: Mapping[str, tuple[Path, list]]) -> dict[tuple[str, str], list[str]]:
    """(label, image path as the leak table writes it) -> the ids of the items showing it."""
    out: dict[tuple[str, str], list[str]] = {}
    for label, (folder, items) in read.items():
        for it in items:
            for im in it.images:
                out.setdefault((label, str(folder / im)), []).append(it.id)
    return out


def _flagged(pairs, image_items, versions: dict[str, Version]) -> set[tuple]:
    """The items (ITEM tuples) showing either image of each pair across datasets."""
    out = set()
    for r in pairs[pairs["scope"] == "across"].itertuples():
        for label, path in ((r.split_a, r.a), (r.split_b, r.b)):
            out |= {(*versions[label], i) for i in image_items.get((label, path), [])}
    return out


def _leaks_said(label: str, pairs: pd.DataFrame, repeats: pd.DataFrame) -> str:
    mine = pairs[(pairs["split_a"] == label) | (pairs["split_b"] == label)]
    across = mine[mine["scope"] == "across"]
    own = set(across.loc[across["split_a"] == label, "a"]) | set(
        across.loc[across["split_b"] == label, "b"]
    )
    kinds = ", ".join(f"{k} {n}" for k, n in across["kind"].value_counts().items())
    others = sorted((set(across["split_a"]) | set(across["split_b"])) - {label})
    asked = ((repeats["split_a"] == label) | (repeats["split_b"] == label)).sum()
    text = f"image leaks: {len(own)} of its images have a copy in another dataset"
    text += f" ({len(across)} pairs: {kinds}; with {', '.join(others)})" if len(own) else ""
    text += f", {int((mine['scope'] == 'within').sum())} copy pairs within it"
    return text + f"; {int(asked)} questions asked again of a copied image in another dataset"


def _paths(folder: Path, items: list) -> list[Path]:
    return sorted({folder / im for it in items for im in it.images if (folder / im).is_file()})


def leaks(bank: pd.DataFrame) -> Finding:
    """Copied images and repeated questions across the readable dataset versions (see the
    module's docstring)."""
    found = Finding("leaks", flags=_empty({"leaked_image": "bool", "repeated_question": "bool"}))
    versions = readable(bank)
    labels = _labels(versions)
    read = {}
    for version, (folder, why) in versions.items():
        if folder is None:
            found.said[version] = f"image leaks: {why}"
        else:
            read[labels[version]] = (folder, evaluated(bank, version, folder))
    if not read:
        return found
    pairs = image_leaks({label: _paths(folder, items) for label, (folder, items) in read.items()})
    roots = {label: folder for label, (folder, _) in read.items()}
    repeats = repeated_questions({k: items for k, (_, items) in read.items()}, roots, pairs)
    back = {label: v for v, label in labels.items()}
    leaked = _flagged(pairs, _image_items(read), back)
    asked = {(*back[s], i) for s, i in zip(repeats["split_a"], repeats["item_a"])}
    asked |= {(*back[s], i) for s, i in zip(repeats["split_b"], repeats["item_b"])}
    keys = [
        k
        for k in map(tuple, bank.drop_duplicates(list(ITEM))[list(ITEM)].to_numpy())
        if labels[k[:2]] in read
    ]
    found.flags = pd.DataFrame(
        {
            "leaked_image": [k in leaked for k in keys],
            "repeated_question": [k in asked for k in keys],
        },
        index=pd.MultiIndex.from_tuples(keys, names=list(ITEM)) if keys else _empty({}).index,
    )
    named = {"split_a": "dataset_a", "split_b": "dataset_b"}
    found.tables["leaks"] = pairs.rename(columns=named)
    found.tables["repeated_questions"] = repeats.rename(columns=named)
    for label in read:
        found.said[back[label]] = _leaks_said(label, pairs, repeats)
    return found
