"""The Scrapbook datasets' bytes, pinned: the smoke, demo and Unique All sets (each profile's main
dataset, and the demo's further sets) generated from their profiles must give these SHA-256 digests
of ``items.jsonl`` and of every image and mask. A refactor of the generator that claims "the same
bytes" is checked here; a change meant to alter the data updates the digests in the same commit,
saying why."""

import hashlib
from pathlib import Path

import pytest

from lib.families.scrapbook import generate

from ..conftest import scrapbook_sets

GOLDEN = {  # measured on commit 282d4c4 (the generator as it stood before the #44 redesign)
    "smoke/scrapbook": {
        "items": "57e312e83442e4e7daae1348f0faa8a473a373557bd1873568ae737a71e7e9c8",
        "images": "9ce6a9d6d876d6938560ebeed195eb67d66a8cbe2453f883c6b87e24182e21af",
        "n_images": 12,
    },
    "demo/scrapbook": {
        "items": "c7621fa462014e955eb4ee3fb95661de2aa4633f50e44bb6d98e2d4bc66d3c02",
        "images": "af2667c9284599834f931da0cff6fa8dfa530927f2ed157bdeb1e603e674daae",
        "n_images": 48,
    },
    "demo/fresh": {
        "items": "76df107d4bdcb123b9ec8786a184d95f2e402fe56622cc013c5db1186695586b",
        "images": "98e12349a322f572d16d4104c223c7acbd696dee8ad1c7afcabb5e0317122693",
        "n_images": 72,
    },
    "demo/train": {
        "items": "1ccf550bc62af73c14415068c21921e3aebfc37de9f6795f9d17c53af09ffaef",
        "images": "145a81b3a14d19c7039f235adf8fa939a9d24421a88b1e3cce149ba297d5501b",
        "n_images": 5078,
    },
    "unique_all/scrapbook": {
        "items": "5a83d3be30c1905a267a604eee740166a6b9c010334efe8cf8444381b71d31c1",
        "images": "b4677d1a52ed470ec100cdf3da1f782c16220ebecd8ab661c8745cfda840da44",
        "n_images": 324,
    },
}


def digests(folder: Path) -> dict[str, str]:
    """``items``: the items file's SHA-256; ``images``: the SHA-256 of the sorted lines ``<path>
    <sha256>`` of every image and mask (PNG) under the folder."""
    lines = [
        f"{p.relative_to(folder).as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}"
        for p in sorted(folder.rglob("*.png"))
    ]
    return {
        "items": hashlib.sha256((folder / "items.jsonl").read_bytes()).hexdigest(),
        "images": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
        "n_images": len(lines),
    }


def test_the_smoke_scrapbook_set_has_its_pinned_bytes(tmp_path):
    for name, params in scrapbook_sets("smoke").items():
        generate(params, tmp_path / name, progress=False)
        assert digests(tmp_path / name) == GOLDEN[f"smoke/{name}"], f"smoke/{name}"


@pytest.mark.slow
def test_the_demo_scrapbook_sets_have_their_pinned_bytes(demo_scrapbook_sets):
    for name, folder in demo_scrapbook_sets.items():
        assert digests(folder) == GOLDEN[f"demo/{name}"], f"demo/{name}"


def test_unique_all_has_its_pinned_bytes(unique_all):
    assert digests(unique_all[0]) == GOLDEN["unique_all/scrapbook"]
