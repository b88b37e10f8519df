"""Writing a finished Scrapbook dataset: its tables, ``summary.json`` and manifest
(:func:`finish_dataset`), built aside and swapped in whole, never over a folder of another kind
(:func:`built_aside`); and the merge of a sharded run's folders into the files the unsharded run
writes, byte for byte (:func:`merge`), after checking they are the whole set of shards of one dataset."""

from __future__ import annotations

import csv
import heapq
import json
import shutil
from collections import Counter
from pathlib import Path

from lib.families.scrapbook.items import Summary
from lib.families.scrapbook.params import ScrapbookParamError
from lib.families.scrapbook.scenes import UNIT_SIZES, unit_index
from lib.io import (
    HashingWriter,
    IncompleteDataset,
    aside_folder,
    check_complete,
    check_ours,
    dataset_info,
    manifest_fields,
    mark,
    swap_in,
    write_json,
)
from lib.io.folders import Legacy

KIND = "scrapbook dataset"  # the marker of a folder generate() or merge() writes (lib.io.folders)
# a Scrapbook dataset written before markers: only the files Scrapbook writes, its dataset.json
# naming Scrapbook (any other dataset, e.g. stage 00's, holds dataset.json and items.jsonl too)
LEGACY = Legacy(
    ("images", "masks", "scenes.jsonl", "items.jsonl", "counts.csv", "concepts.csv")
    + ("summary.json", "dataset.json"),
    says=("dataset.json", "name", "scrapbook"),
)
SHARD_FILES = ("items.jsonl", "scenes.jsonl", "summary.json", "dataset.json")
# the fields of a shard's summary.json that a merge adds up, with their types
SUMMARY_FIELDS = {"units": int, "sets": list, "placement_failures": dict, "skipped_files": list}


def finish_dataset(
    out: Path, summary: Summary, info: dict, items_bytes: int, items_sha256: str
) -> dict:
    """The tables, ``summary.json`` and, last, ``dataset.json`` with the manifest of the items
    file (its size and SHA-256, as the :class:`lib.io.HashingWriter` that wrote it counted them)."""
    for name, rows in zip(("counts.csv", "concepts.csv"), summary.rows()):
        with open(out / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["questions"])
            writer.writeheader()
            writer.writerows(rows)
    stats = {**summary.to_dict(), **info}
    write_json(out / "summary.json", stats)
    write_json(
        out / "dataset.json",
        {
            **dataset_info("scrapbook", license="CC-BY-4.0 (generated)"),
            **manifest_fields(stats["questions"], summary.images, items_bytes, items_sha256),
            **info,
        },
    )
    return stats


def built_aside(out: Path, build) -> dict:
    """Run ``build(folder)`` on a new folder beside ``out`` that is this run's alone
    (:func:`lib.io.aside_folder`), then mark it and put it in ``out``'s place (:func:`lib.io.swap_in`,
    which deletes only the version it replaces); a build that fails or is interrupted removes its
    folder. An ``out`` that holds anything but a Scrapbook dataset is refused first
    (:class:`lib.io.NotOurFolder`), untouched."""
    check_ours(out, KIND, LEGACY)
    tmp = aside_folder(out)
    try:
        stats = build(tmp)
        mark(tmp, KIND)
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats


def merge(shard_dirs: list[str | Path], out_dir: str | Path) -> dict:
    """Union of shard outputs in unit order: the same files an unsharded run writes. Refuses an
    unfinished shard, a shard whose files are links, shards of different parameters, seeds or shard
    counts (their union is no dataset), a shard given twice or two claiming one index, and a set with
    gaps: shards ``0..k-1`` of one ``num_shards=k`` must all be there, each once (the error names what
    is wrong). A shard holding units of another index (its summary edited) is refused as it is read."""
    out = Path(out_dir)
    shards = [Path(d) for d in shard_dirs]
    if not shards:
        raise ScrapbookParamError("merge: no shard folders given")
    for d in shards:
        _check_shard_files(d)
    infos = [_shard_summary(d) for d in shards]
    for d, i in zip(shards, infos):
        if i.get("num_shards") != infos[0]["num_shards"]:
            raise ScrapbookParamError(
                f"merge: {d} is shard {i['shard']} of {i['num_shards']} but {shards[0]} is shard "
                f"{infos[0]['shard']} of {infos[0]['num_shards']}: the shards of one dataset "
                f"are made with one --num-shards; pass the shards of one set"
            )
        if i["params"] != infos[0]["params"]:
            diff = sorted(k for k in i["params"] if i["params"][k] != infos[0]["params"].get(k))
            raise ScrapbookParamError(
                f"merge: {d} was made with other parameters than {shards[0]} "
                f"({', '.join(diff) or 'parameters'} differ); shards of one dataset share them"
            )
    _check_each_once(shards, infos)
    _check_complete_set(infos)
    return built_aside(out, lambda tmp: _merge(shards, infos, tmp))


def _check_shard_files(d: Path) -> None:
    """A finished shard whose files are its own: no link (to a file outside it) is copied into a merge."""
    if not all((d / name).exists() for name in SHARD_FILES):
        raise ScrapbookParamError(
            f"merge: {d}: not a finished Scrapbook shard (no items.jsonl, scenes.jsonl, "
            f"summary.json or dataset.json); generate that shard again"
        )
    try:
        check_complete(d)
    except IncompleteDataset as e:
        raise ScrapbookParamError(f"merge: {e}") from None
    for sub in ("images", "masks"):
        if (d / sub).is_symlink() or not (d / sub).is_dir():
            raise ScrapbookParamError(
                f"merge: {d / sub}: a link or not a folder, in a shard that should hold only "
                f"what its generation wrote; nothing was merged: generate that shard again"
            )
    files = [f for sub in ("images", "masks") for f in sorted((d / sub).iterdir())]
    for f in [*(d / name for name in SHARD_FILES), *files]:
        if f.is_symlink() or not f.is_file():
            raise ScrapbookParamError(
                f"merge: {f}: a link or not a file, in a shard that should hold only the files "
                f"its generation wrote; nothing was merged: generate that shard again"
            )


def _shard_summary(d: Path) -> dict:
    """A shard's ``summary.json``, refused unless it names the shard's index, count and parameters."""
    try:
        info = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ScrapbookParamError(
            f"merge: {d}/summary.json is not JSON ({e}); generate that shard again"
        ) from None
    if (
        not isinstance(info, dict)
        or not isinstance(info.get("params"), dict)
        or not all(type(info["params"].get(name)) is int for name in UNIT_SIZES)
    ):
        raise ScrapbookParamError(
            f"merge: {d}/summary.json does not hold a Scrapbook summary with its parameters; "
            f"generate that shard again"
        )
    if type(info.get("shard")) is not int or type(info.get("num_shards")) is not int:
        raise ScrapbookParamError(
            f"merge: {d} is not a shard (its summary.json has shard={info.get('shard')!r}, "
            f"num_shards={info.get('num_shards')!r}; a merged folder is merged already)"
        )
    for key, kind in SUMMARY_FIELDS.items():
        if type(info.get(key)) is not kind:
            said = "missing" if key not in info else f"expected {kind.__name__}"
            raise ScrapbookParamError(
                f"merge: {d}/summary.json: field {key!r} {said}; generate that shard again"
            )
    return info


def _check_each_once(shards: list[Path], infos: list[dict]) -> None:
    """No folder given twice, no two folders claiming one shard index."""
    seen: dict = {}
    for d, i in zip(shards, infos):
        if d.resolve() in seen:
            raise ScrapbookParamError(
                f"merge: {d} is given twice (also as {seen[d.resolve()]}); pass each shard once"
            )
        seen[d.resolve()] = d
        other = next(
            (
                e
                for e, j in zip(shards, infos)
                if e is not d and e.resolve() != d.resolve() and j["shard"] == i["shard"]
            ),
            None,
        )
        if other is not None:
            raise ScrapbookParamError(
                f"merge: {d} and {other} both say they are shard {i['shard']} of "
                f"{i['num_shards']} (one made twice, or its summary.json edited); pass one"
            )


def _check_complete_set(infos: list[dict]) -> None:
    """Every shard of ``0..num_shards-1`` once: a merge of some of them would look like the whole
    dataset (its summary says ``num_shards: 1``) with questions missing."""
    k = infos[0]["num_shards"]
    have = sorted(i["shard"] for i in infos)
    outside = [s for s in have if not 0 <= s < k]
    missing = sorted(set(range(k)) - set(have))
    if outside or missing:
        raise ScrapbookParamError(
            f"merge: the shards given ({', '.join(map(str, have))}) are not all of the {k} shards of one dataset: "
            + (f"shard(s) {', '.join(map(str, missing))} missing" if missing else "")
            + ("; " if missing and outside else "")
            + (f"shard(s) {outside} out of range" if outside else "")
            + "; generate the missing shard(s) (--shard i --num-shards k) and pass every shard folder"
        )


def _lines(d: Path, info: dict, name: str):
    """``(unit, line)`` of a shard's file, each unit checked to be one this shard makes, in the
    order it makes them: a shard whose summary.json names another index (edited, or copied from
    another shard) merges no unit twice, and the merge, which interleaves the shards by unit,
    never puts a line out of its place."""
    k, last = info["num_shards"], -1
    with open(d / name, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                unit = row["unit"] if "unit" in row else row["meta"]["unit"]
            except (ValueError, KeyError, TypeError):
                raise ScrapbookParamError(
                    f"merge: {d / name}: line {n} is not a Scrapbook record with its unit; "
                    f"generate that shard again"
                ) from None
            index = unit_index(info["params"], unit)
            if index is None or index % k != info["shard"]:
                raise ScrapbookParamError(
                    f"merge: {d / name}: line {n} is unit {unit}, which "
                    + (
                        "is no unit of these parameters"
                        if index is None
                        else f"belongs to shard {index % k}"
                    )
                    + f", but {d}/summary.json says this folder is shard {info['shard']} of {k}; "
                    f"generate that shard again"
                )
            if index < last:
                raise ScrapbookParamError(
                    f"merge: {d / name}: line {n} is unit {unit}, which comes before the unit of "
                    f"the line above in the order a shard makes its units; generate that shard again"
                )
            last = index
            yield tuple(unit), line


def _merge(shards: list[Path], infos: list[dict], out: Path) -> dict:
    for sub in ("images", "masks"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for d in shards:
            for f in sorted((d / sub).iterdir()):
                shutil.copy2(f, out / sub / f.name)
    summary, written = Summary(), {}
    for name in ("scenes.jsonl", "items.jsonl"):
        with open(out / f".{name}.part", "wb") as f:
            written[name] = HashingWriter(f)
            for _, line in heapq.merge(
                *(_lines(d, i, name) for d, i in zip(shards, infos)), key=lambda t: t[0]
            ):
                written[name].write(line.encode("utf-8"))
                if name == "items.jsonl":
                    summary.add_row(json.loads(line))
                else:
                    summary.images += 1
        (out / f".{name}.part").replace(out / name)
    failures: Counter = Counter()
    for i in infos:
        failures.update(i["placement_failures"])
    info = {
        "params": infos[0]["params"],
        "shard": None,
        "num_shards": 1,
        "merged_from": [str(d) for d in shards],
        "units": sum(i["units"] for i in infos),
        "placement_failures": dict(failures),
        "skipped_files": [s for i in infos for s in i["skipped_files"]],
        "sets": infos[0]["sets"],
    }
    return finish_dataset(
        out, summary, info, written["items.jsonl"].bytes, written["items.jsonl"].hexdigest()
    )
