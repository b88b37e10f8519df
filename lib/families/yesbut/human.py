"""YesBut's human evaluation as judged answers: the agreement step's real case.

``Human_Eval_Results.csv`` holds, per image, six overall descriptions - one written by a person,
five by VLMs (``order_of_overall_img_descriptions`` names the writer of description i) - each judged
by people (majority of three) on four criteria (a non-empty cell = yes). The five model
descriptions of an image are its answers; the person's description is their reference; the
question is the WHYFUNNY prompt they answered. Rows follow :data:`lib.agreement.LABEL_COLUMNS`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

from lib.families.yesbut.paper import HUMAN, HUMAN_CRITERIA
from lib.families.yesbut.task import Understanding

HUMAN_EVAL_CSV = "Human_Eval_Results.csv"


def human_judged_answers(csv_path: str | Path) -> pd.DataFrame:
    """One row per (model description, criterion): answer_id (``<image>:<model>``), cluster (the
    image), question, references (the person's description), answer, criterion, label (0/1)."""
    csv_path = Path(csv_path)
    raw = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    question = Understanding.prompts()["why_funny"]
    rows = []
    for line, r in enumerate(raw.to_dict("records"), start=2):
        try:
            order = ast.literal_eval(r["order_of_overall_img_descriptions"])
        except (ValueError, SyntaxError, KeyError) as e:
            raise ValueError(
                f"{csv_path}:{line}: order_of_overall_img_descriptions is not a list of writers ({e})"
            )
        if order.count(HUMAN) != 1:
            raise ValueError(
                f"{csv_path}:{line}: {HUMAN!r} must write exactly one of the descriptions, got {order}"
            )
        reference = r[f"description_{order.index(HUMAN) + 1}"].strip()
        for i, source in enumerate(order, start=1):
            if source == HUMAN:
                continue
            for criterion in HUMAN_CRITERIA:
                rows.append(
                    {
                        "answer_id": f"{r['image_filename']}:{source}",
                        "cluster": r["image_filename"],
                        "question": question,
                        "references": [reference],
                        "answer": r[f"description_{i}"].strip(),
                        "criterion": criterion,
                        "label": int(bool(r[f"{criterion}_{i}"].strip())),
                    }
                )
    return pd.DataFrame(rows)
