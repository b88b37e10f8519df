"""What a family brings to stage 01: kinds of image source it reads (``SOURCES``: kind ->
:class:`Source`, e.g. YesBut's repository layout, MemeQA's JSON splits) and datasets it builds from
the collected manifest (``MANIFEST_DATASETS``, e.g. YesBut's detection / understanding /
completion sets from labelled two-panel images). The stage keeps the kinds every user has (a
folder, URLs, a Hugging Face dataset, the embedded demo) and asks the registry for the rest."""

from __future__ import annotations

from pathlib import Path

from lib.io import LoadReport
from lib.io.records import Record


class Source:
    """A kind of entry in stage 01's ``sources`` list: ``{kind: <name>, <keys>...}``."""

    keys: tuple[str, ...] = ()  # what an entry of this kind must give besides ``kind``

    def collect(self, entry: dict, out: Path, progress: bool) -> tuple[list[Record], LoadReport]:
        """The images of one entry as records; bad files go to the report, never into the list."""
        raise NotImplementedError

    def datasets(self, entry: dict, folder_of) -> dict[str, Path]:
        """Datasets this entry holds besides its images (``folder_of(name)``: where a dataset of
        that name goes): name -> folder. None by default."""
        return {}
