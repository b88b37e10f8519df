"""Datasets in other formats, brought in as dataset folders or written out from Items. A family's own
format is its family's (MemeQA's JSON splits: :mod:`lib.families.memeqa.importer`).

- :mod:`lib.formats.tsv`: TSV with base64 images (VLMEvalKit / lmms-eval style).
- :mod:`lib.formats.custom`: your own dataset from a CSV or a Hugging Face dataset (a
  ``save_to_disk`` folder or a parquet file), every problem named by row and column before
  anything is written.
- ``python -m lib.formats`` (:mod:`lib.formats.__main__`): the command line.

```text
python -m lib.formats check examples/my_dataset             # also checks items.jsonl against its recorded sha256
python -m lib.formats import-csv examples/my_dataset/data.csv --out DIR [--task T] [--images-root PATH]
python -m lib.formats import-hf PATH --out DIR [--split S] [--task T] [--image-column image] [--question-column
    question] [--options-column options] [--answer-column answer] [--id-column id]
```
"""

from lib.formats.custom import (
    Columns,
    import_csv,
    parse_answer,
    parse_options,
    staged_folder,
)
from lib.formats.huggingface import HF_BATCH, import_hf, open_hf
from lib.formats.tsv import export_tsv, import_tsv

__all__ = [
    "HF_BATCH",
    "Columns",
    "import_csv",
    "import_hf",
    "open_hf",
    "parse_answer",
    "parse_options",
    "staged_folder",
    "export_tsv",
    "import_tsv",
]
