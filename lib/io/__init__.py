"""Datasets on disk, one module per concern; every public name is re-exported here, so
``from lib.io import X`` is the way in.

- :mod:`lib.io.memory`: the speed tricks of reading many records (chunked JSON decoding, short
  strings shared, the collector paused, freed memory handed back), each with its reason.
- :mod:`lib.io.jsonl`: JSONL, JSON and CSV files, written atomically or appended.
- :mod:`lib.io.digests`: files' SHA-256 digests, remembered by path, size and modification time.
- :mod:`lib.io.annotations`: the append-only annotation file (:class:`AnnotationStore`).
- :mod:`lib.io.images`: validated image loading, the decoded-image cache, the demo's photographs.
- :mod:`lib.io.dataset_manifest`: when a dataset folder is complete (what ``dataset.json`` records must hold).
- :mod:`lib.io.swap`: folders built aside and swapped in whole.
- :mod:`lib.io.folders`: output folders marked with their kind; a folder of another kind is never overwritten.
- :mod:`lib.io.datasets`: dataset folders written, read whole, streamed, or read at offsets.
- :mod:`lib.io.index`: a dataset's id -> byte offset index.
- :mod:`lib.io.check`: every problem of a dataset folder (``python -m lib.formats check DIR``).

Foreign formats (MemeQA JSON, base64 TSV) and the CSV / Hugging Face imports are in :mod:`lib.formats`.
"""

from lib.io.check import (
    ITEM_FIELDS,
    ITEM_REQUIRED,
    MAX_PROBLEMS,
    DatasetCheck,
    DatasetError,
    DatasetProblem,
    check_dataset,
    item_problems,
)
from lib.io.dataset_manifest import (
    MANIFEST_KEYS,
    IncompleteDataset,
    check_complete,
    dataset_manifest,
    manifest_fields,
    verify_dataset,
)
from lib.io.datasets import (
    ItemsAt,
    ItemsChanged,
    dataset_info,
    held_images,
    images_roots,
    link_or_copy,
    load_dataset_info,
    load_items,
    outside_images,
    read_items_at,
    save_dataset,
    scan_items,
    to_hf_dataset,
)
from lib.io.digests import file_sha256
from lib.io.folders import MARKER, NotOurFolder, check_ours, kind_of, mark
from lib.io.images import (
    IMAGE_SUFFIXES,
    MAX_IMAGE_PIXELS,
    SAMPLE_IMAGES,
    ByteLRU,
    ImageCache,
    ImageError,
    LoadReport,
    load_image,
    load_images,
    scan_images,
    write_sample_images,
)
from lib.io.index import IdLookup, item_index, save_item_index
from lib.io.jsonl import (
    HashingWriter,
    JSONLError,
    append_jsonl,
    atomic_file,
    jsonl_line,
    read_jsonl,
    write_csv,
    write_json,
    write_jsonl,
    write_jsonl_hashed,
    write_lines_hashed,
)
from lib.io.memory import (
    CHUNK_LINES,
    SHARED_STRING_CHARS,
    Outlived,
    decode_lines,
    paused_gc,
    release_memory,
    share_strings,
)
from lib.io.swap import aside_folder, swap_in


def __getattr__(name: str):
    """:class:`AnnotationStore` on first use: its module imports pandas, which most users of
    :mod:`lib.io` - every stage, the evaluation engine - never need."""
    if name == "AnnotationStore":
        # deferred on purpose: pandas is imported only where annotations are kept
        from lib.io.annotations import AnnotationStore

        return AnnotationStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnnotationStore",
    "ITEM_FIELDS",
    "ITEM_REQUIRED",
    "MAX_PROBLEMS",
    "DatasetCheck",
    "DatasetError",
    "DatasetProblem",
    "check_dataset",
    "item_problems",
    "ItemsAt",
    "ItemsChanged",
    "dataset_info",
    "held_images",
    "images_roots",
    "link_or_copy",
    "load_dataset_info",
    "load_items",
    "outside_images",
    "read_items_at",
    "save_dataset",
    "scan_items",
    "to_hf_dataset",
    "file_sha256",
    "MARKER",
    "NotOurFolder",
    "check_ours",
    "kind_of",
    "mark",
    "IMAGE_SUFFIXES",
    "MAX_IMAGE_PIXELS",
    "SAMPLE_IMAGES",
    "ByteLRU",
    "ImageCache",
    "ImageError",
    "LoadReport",
    "load_image",
    "load_images",
    "scan_images",
    "write_sample_images",
    "IdLookup",
    "item_index",
    "save_item_index",
    "HashingWriter",
    "JSONLError",
    "append_jsonl",
    "atomic_file",
    "jsonl_line",
    "read_jsonl",
    "write_csv",
    "write_json",
    "write_jsonl",
    "write_jsonl_hashed",
    "write_lines_hashed",
    "MANIFEST_KEYS",
    "IncompleteDataset",
    "check_complete",
    "dataset_manifest",
    "manifest_fields",
    "verify_dataset",
    "CHUNK_LINES",
    "SHARED_STRING_CHARS",
    "Outlived",
    "decode_lines",
    "paused_gc",
    "release_memory",
    "share_strings",
    "aside_folder",
    "swap_in",
]
