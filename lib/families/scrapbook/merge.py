"""Writing a finished Scrapbook dataset: its tables, ``summary.json`` and manifest
(:func:`finish_dataset`), built aside and swapped in whole (:func:`built_aside`); and the merge of
a sharded run's folders into the files the unsharded run writes, byte for byte (:func:`merge`)."""

from __future__ import annotations

import csv
import heapq
import json
import shutil
from collections import Counter
from pathlib import Path

from lib.io import (HashingWriter, IncompleteDataset, aside_folder, check_complete, dataset_info, manifest_fields,
                    swap_in, write_json)
from lib.families.scrapbook.items import Summary
from lib.families.scrapbook.params import ScrapbookParamError


def finish_dataset(out: Path, summary: Summary, info: dict, items_bytes: int, items_sha256: str) -> dict:
    """The tables, ``summary.json`` and, last, ``dataset.json`` with the manifest of the items
    file (its size and SHA-256, as the :class:`lib.io.HashingWriter` that wrote it counted them)."""
    for name, rows in zip(("counts.csv", "concepts.csv"), summary.rows()):
        with open(out / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["questions"])
            writer.writeheader()
            writer.writerows(rows)
    stats = {**summary.to_dict(), **info}
    write_json(out / "summary.json", stats)
    write_json(out / "dataset.json", {**dataset_info("scrapbook", license="CC-BY-4.0 (generated)"),
                                      **manifest_fields(stats["questions"], summary.images, items_bytes, items_sha256),
                                      **info})
    return stats


def built_aside(out: Path, build) -> dict:
    """Run ``build(folder)`` on a new folder beside ``out`` that is this run's alone
    (:func:`lib.io.aside_folder`), then put it in ``out``'s place (:func:`lib.io.swap_in`, which
    deletes only the version it replaces); a build that fails or is interrupted removes its folder."""
    tmp = aside_folder(out)
    try:
        stats = build(tmp)
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats


def _unit_key(line: str) -> tuple:
    row = json.loads(line)
    return tuple(row["unit"] if "unit" in row else row["meta"]["unit"])


def merge(shard_dirs: list[str | Path], out_dir: str | Path) -> dict:
    """Union of shard outputs in unit order: the same files an unsharded run writes. Refuses an
    unfinished shard, a shard given twice, shards made with different parameters or seeds (their
    union is no dataset) and a set with gaps: shards ``0..k-1`` of one ``num_shards=k`` must all be
    there, each once (the error names the missing indexes)."""
    out = Path(out_dir)
    shards = [Path(d) for d in shard_dirs]
    for d in shards:
        if not (d / "items.jsonl").exists() or not (d / "summary.json").exists() or not (d / "dataset.json").exists():
            raise FileNotFoundError(f"{d}: not a finished Scrapbook shard (no items.jsonl, summary.json or "
                                    f"dataset.json); generate that shard again")
        try:
            check_complete(d)
        except IncompleteDataset as e:
            raise ScrapbookParamError(f"merge: {e}") from None
    infos = [json.loads((d / "summary.json").read_text()) for d in shards]
    seen: dict = {}
    for d, i in zip(shards, infos):
        key = (d.resolve(), None) if i.get("shard") is None else (None, i["shard"])
        if d.resolve() in {k[0] for k in seen} or key in seen:
            raise ScrapbookParamError(f"merge: {d} is shard {i.get('shard')} of {i.get('num_shards')}, given twice "
                                      f"(also as {seen.get(key, d)})")
        seen[key] = d
        seen[(d.resolve(), None)] = d
        if i["params"] != infos[0]["params"] or i.get("num_shards") != infos[0].get("num_shards"):
            diff = sorted(k for k in i["params"] if i["params"][k] != infos[0]["params"].get(k))
            raise ScrapbookParamError(f"merge: {d} was made with other parameters than {shards[0]} "
                                      f"({', '.join(diff) or 'num_shards'} differ); shards of one dataset share them")
    _check_complete_set(shards, infos)
    return built_aside(out, lambda tmp: _merge(shards, infos, tmp))


def _check_complete_set(shards: list[Path], infos: list[dict]) -> None:
    """Every shard of ``0..num_shards-1`` once: a merge of some of them would look like the whole
    dataset (its summary says ``num_shards: 1``) with questions missing."""
    for d, i in zip(shards, infos):
        if not isinstance(i.get("shard"), int) or not isinstance(i.get("num_shards"), int):
            raise ScrapbookParamError(f"merge: {d} is not a shard (its summary.json has shard={i.get('shard')!r}, "
                                      f"num_shards={i.get('num_shards')!r}; a merged folder is merged already)")
    k = infos[0]["num_shards"]
    have = sorted(i["shard"] for i in infos)
    outside = [s for s in have if not 0 <= s < k]
    missing = sorted(set(range(k)) - set(have))
    if outside or missing:
        raise ScrapbookParamError(
            f"merge: the shards given ({', '.join(map(str, have))}) are not all of the {k} shards of one dataset: "
            + (f"shard(s) {', '.join(map(str, missing))} missing" if missing else "")
            + ("; " if missing and outside else "") + (f"shard(s) {outside} out of range" if outside else "")
            + "; generate the missing shard(s) (--shard i --num-shards k) and pass every shard folder")


def _merge(shards: list[Path], infos: list[dict], out: Path) -> dict:
    for sub in ("images", "masks"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for d in shards:
            for f in sorted((d / sub).iterdir()):
                shutil.copy2(f, out / sub / f.name)
    summary, written = Summary(), {}
    for name in ("scenes.jsonl", "items.jsonl"):
        files = [open(d / name, encoding="utf-8") for d in shards]
        try:
            with open(out / f".{name}.part", "wb") as f:
                written[name] = HashingWriter(f)
                for line in heapq.merge(*files, key=_unit_key):
                    written[name].write(line.encode("utf-8"))
                    if name == "items.jsonl":
                        summary.add_row(json.loads(line))
                    else:
                        summary.images += 1
        finally:
            for fh in files:
                fh.close()
        (out / f".{name}.part").replace(out / name)
    failures: Counter = Counter()
    for i in infos:
        failures.update(i.get("placement_failures", {}))
    info = {"params": infos[0]["params"], "shard": None, "num_shards": 1, "merged_from": [str(d) for d in shards],
            "units": sum(i["units"] for i in infos), "placement_failures": dict(failures),
            "skipped_files": [s for i in infos for s in i.get("skipped_files", [])], "sets": infos[0]["sets"]}
    return finish_dataset(out, summary, info, written["items.jsonl"].bytes, written["items.jsonl"].hexdigest())
