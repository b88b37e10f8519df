"""Datasets in other formats, brought in as dataset folders or written out from Items.

- :mod:`lib.formats.memeqa`: MemeQA JSON splits (read, checked, imported, exported) and YesBut's
  annotation CSV.
- :mod:`lib.formats.tsv`: TSV with base64 images (VLMEvalKit / lmms-eval style).
- :mod:`lib.formats.custom`: your own dataset from a CSV or a Hugging Face dataset (a
  ``save_to_disk`` folder or a parquet file), every problem named by row and column before
  anything is written.
- ``python -m lib.formats`` (:mod:`lib.formats.__main__`): the command line::

    python -m lib.formats check examples/my_dataset             # also checks items.jsonl against its recorded sha256
    python -m lib.formats import-csv examples/my_dataset/data.csv --out DIR [--task T] [--images-root PATH]
    python -m lib.formats import-hf PATH --out DIR [--split S] [--task T] [--image-column image] [--question-column
        question] [--options-column options] [--answer-column answer] [--id-column id]
"""

from lib.formats.custom import (HF_BATCH, Columns, import_csv, import_hf, open_hf, parse_answer, parse_options,
                                staged_folder)
from lib.formats.memeqa import MEMEQA_KEYS, export_memeqa, import_memeqa, read_memeqa, read_yesbut_annotations
from lib.formats.tsv import export_tsv, import_tsv

__all__ = [
    "HF_BATCH", "Columns", "import_csv", "import_hf", "open_hf", "parse_answer", "parse_options", "staged_folder",
    "MEMEQA_KEYS", "export_memeqa", "import_memeqa", "read_memeqa", "read_yesbut_annotations",
    "export_tsv", "import_tsv",
]
