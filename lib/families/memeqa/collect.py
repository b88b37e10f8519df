"""Stage 01's MemeQA parts (the family's ``SOURCES``): a JSON split's images
(``{kind: memeqa, json: <split>, images: <folder>}``) and its questions as a dataset folder."""

from __future__ import annotations

from pathlib import Path

from lib.families.memeqa.importer import import_memeqa, read_memeqa
from lib.io import LoadReport, dataset_info, images_roots, save_dataset
from lib.io.records import Record, records_of
from lib.tasks.collection import Source


def collect_memeqa(
    json_path: str | Path, images: str | Path, progress: bool = True
) -> tuple[list[Record], LoadReport]:
    """The images a MemeQA-format JSON names (``img`` keys) inside ``images``; missing ones are reported."""
    names = sorted({r["img"] for r in read_memeqa(json_path)})
    report = LoadReport()
    present = []
    for n in names:
        if (Path(images) / n).exists():
            present.append(Path(images) / n)
        else:
            report.add_skip(Path(images) / n, "named in the JSON but not found")
    return records_of(present, "memeqa", report, progress), report


def memeqa_dataset(json_path: str | Path, images: str | Path, out: str | Path) -> Path:
    """A MemeQA JSON split as a dataset folder (``mcq`` items; images stay where they are, named
    absolutely and declared in ``images_roots``)."""
    items = import_memeqa(json_path, str(Path(images).resolve()))
    save_dataset(
        out,
        items,
        dataset_info(
            "memeqa",
            provenance={"json": str(Path(json_path).resolve())},
            images_roots=images_roots(items, out),
        ),
    )
    return Path(out)


class MemeQASource(Source):
    keys = ("json", "images")

    def collect(self, entry: dict, out: Path, progress: bool) -> tuple[list[Record], LoadReport]:
        return collect_memeqa(entry["json"], entry["images"], progress=progress)

    def datasets(self, entry: dict, folder_of) -> dict[str, Path]:
        name = f"memeqa_{Path(entry['json']).stem}"
        return {name: memeqa_dataset(entry["json"], entry["images"], folder_of(name))}
