"""YesBut's human evaluation as judged answers: the agreement step's real case.

``Human_Eval_Results.csv`` holds, per image, six overall descriptions - one written by a person,
five by VLMs (``order_of_overall_img_descriptions`` names the writer of description i) - each judged
by people (majority of three) on four criteria (a non-empty cell = yes). The five model
descriptions of an image are its answers; the person's description is their reference; the
question is the WHYFUNNY prompt they answered. Rows follow :data:`lib.agreement.scorers.LABEL_COLUMNS`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

from lib.families.yesbut.paper import HUMAN, HUMAN_CRITERIA
from lib.families.yesbut.task import Understanding

HUMAN_EVAL_CSV = "Human_Eval_Results.csv"


def _cell(row: dict, name: str, where: str) -> str:
    if name not in row:
        raise ValueError(f"{where}: field {name}: expected a column of {HUMAN_EVAL_CSV}")
    return row[name]


def human_judged_answers(csv_path: str | Path) -> pd.DataFrame:
    """One row per (model description, criterion): answer_id (``<image>:<model>``), cluster (the
    image), question, references (the person's description), answer, criterion, label (0/1).
    A row that is not the release's raises ``ValueError`` naming the file, the line and the field."""
    csv_path = Path(csv_path)
    raw = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    question = Understanding.prompts()["why_funny"]
    rows = []
    for line, r in enumerate(raw.to_dict("records"), start=2):
        where = f"{csv_path}:{line}"
        cell = lambda name: _cell(r, name, where)  # noqa: B023 - called within this iteration
        try:
            order = ast.literal_eval(cell("order_of_overall_img_descriptions"))
        except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
            order = e
        if not (isinstance(order, list) and all(isinstance(w, str) for w in order)):
            raise ValueError(
                f"{where}: field order_of_overall_img_descriptions: expected a list of writers, "
                f"got {r['order_of_overall_img_descriptions'][:60]!r}"
            )
        if order.count(HUMAN) != 1:
            raise ValueError(
                f"{where}: field order_of_overall_img_descriptions: {HUMAN!r} must write exactly "
                f"one of the descriptions, got {order}"
            )
        reference = cell(f"description_{order.index(HUMAN) + 1}").strip()
        image = cell("image_filename")
        for i, source in enumerate(order, start=1):
            if source == HUMAN:
                continue
            for criterion in HUMAN_CRITERIA:
                rows.append(
                    {
                        "answer_id": f"{image}:{source}",
                        "cluster": image,
                        "question": question,
                        "references": [reference],
                        "answer": cell(f"description_{i}").strip(),
                        "criterion": criterion,
                        "label": int(bool(cell(f"{criterion}_{i}").strip())),
                    }
                )
    return pd.DataFrame(rows)
