"""The command line: check a dataset folder, or make one from a CSV or a Hugging Face dataset.

python -m lib.formats check examples/my_dataset             # also checks items.jsonl against its recorded sha256
python -m lib.formats import-csv examples/my_dataset/data.csv --out DIR [--task T] [--images-root PATH]
python -m lib.formats import-hf PATH --out DIR [--split S] [--task T] [--image-column image] [--question-column
    question] [--options-column options] [--answer-column answer] [--id-column id]
"""

from __future__ import annotations

import argparse
import sys

from lib.formats.custom import Columns, default_task, import_csv
from lib.formats.huggingface import import_hf
from lib.io import MAX_PROBLEMS, DatasetError, check_dataset


def _add_import_arguments(sub) -> None:
    """The ``import-csv`` and ``import-hf`` commands: what both take, then each one's own."""
    for command, source in (
        ("import-csv", "the CSV file"),
        ("import-hf", "a save_to_disk folder or a parquet file"),
    ):
        p = sub.add_parser(command, help=f"make a dataset folder from {source}")
        p.add_argument("source", help=source)
        p.add_argument("--out", required=True, help="the dataset folder to write (absent or empty)")
        p.add_argument(
            "--task",
            help=f"the items' task (default: {default_task(True)} for rows with options, "
            f"{default_task(False)} without)",
        )
        p.add_argument(
            "--name", help="the dataset's name in dataset.json (default: the --out folder's name)"
        )
        p.add_argument(
            "--license", default="unspecified", help="the dataset's license, for dataset.json"
        )
    imp_csv, imp_hf = sub.choices["import-csv"], sub.choices["import-hf"]
    imp_csv.add_argument(
        "--images-root", help="the folder image paths start from (default: the CSV's folder)"
    )
    imp_hf.add_argument(
        "--split", help="the split of a save_to_disk DatasetDict (needed when it holds several)"
    )
    for role, default in (
        ("image", "image"),
        ("question", "question"),
        ("options", None),
        ("answer", "answer"),
        ("id", "id"),
    ):
        imp_hf.add_argument(
            f"--{role}-column",
            default=default,
            help={
                "options": "default: 'options' where the dataset has it, else open questions",
                "id": "default: id; '' numbers the rows",
            }.get(role, f"default: {default}"),
        )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m lib.formats",
        description="Check a dataset folder, or make one from a CSV or a Hugging Face dataset.",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    check = sub.add_parser(
        "check", help="list every problem of a dataset folder (items.jsonl, images/, dataset.json)"
    )
    check.add_argument("folder")
    check.add_argument(
        "--max-problems",
        type=int,
        default=MAX_PROBLEMS,
        help="problems listed; the rest are counted",
    )
    _add_import_arguments(sub)
    return ap


def _run(args):
    """The command ``args`` name, run: the dataset folder's check."""
    if args.command == "check":
        return check_dataset(args.folder, args.max_problems)
    if args.command == "import-csv":
        return import_csv(
            args.source, args.out, args.task, args.images_root, args.name, args.license
        )
    columns = Columns(
        args.id_column,
        args.image_column,
        args.question_column,
        args.options_column,
        args.answer_column,
    )
    return import_hf(args.source, args.out, args.split, args.task, columns, args.name, args.license)


def main(argv: list[str] | None = None) -> int:
    """``check DIR`` (exit 1 when it has problems), ``import-csv`` and ``import-hf`` (exit 1 when
    the source or the folder made has problems, 2 on an error such as a missing file)."""
    args = _parser().parse_args(argv)
    try:
        found = _run(args)
    except DatasetError as e:
        print(e)
        print(f"nothing was written to {args.out}")
        return 1
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(found)
    return 0 if found.ok else 1


if __name__ == "__main__":
    sys.exit(main())
