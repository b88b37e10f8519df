"""YesBut's paper figures from its release: Figure 3 (text in images, connected halves, difficulty),
Figure 14 (the human evaluation of descriptions, tidy), and the stated numbers of both beside ours
(:func:`yesbut_reproduction`, rows of stage 07's ``paper.csv``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd

from lib.core.papers import paper_frame
from lib.core.schema import DIFFICULTY
from lib.families.yesbut.release import ANNOTATIONS_CSV, read_yesbut_annotations, yesbut_stage

HUMAN = "humanannotation"  # Human_Eval_Results.csv's name for the human-written description

HUMAN_CRITERIA = ("correctness", "appropriate_length", "visual_completeness", "faithfulness")


def human_eval(csv_path: str | Path) -> pd.DataFrame:
    """YesBut's Human_Eval_Results.csv as tidy rows (image, source, criterion, yes): description i of an
    image was written by the i-th entry of ``order_of_overall_img_descriptions``; a non-empty cell = yes."""
    raw = pd.read_csv(csv_path)
    rows = []
    for _, r in raw.iterrows():
        order = ast.literal_eval(r["order_of_overall_img_descriptions"])
        for i, source in enumerate(order, start=1):
            for c in HUMAN_CRITERIA:
                v = r[f"{c}_{i}"]
                rows.append(
                    {
                        "image": r["image_filename"],
                        "source": source,
                        "criterion": c,
                        "yes": bool(isinstance(v, str) and v.strip()),
                    }
                )
    return pd.DataFrame(rows)


def figure3_counts(annotations: pd.DataFrame) -> dict[str, pd.Series]:
    """YesBut Figure 3: text in images (none / left only / right only / both), connected halves,
    difficulty - from a table with the fields text_in_left, text_in_right, connected, difficulty."""
    a = annotations
    left, right = a["text_in_left"].astype(bool), a["text_in_right"].astype(bool)
    text = pd.Series(
        np.select(
            [left & right, left, right], ["both halves", "left only", "right only"], "no text"
        )
    )
    return {
        "text_in_image": text.value_counts().reindex(
            ["no text", "left only", "right only", "both halves"], fill_value=0
        ),
        "connected": a["connected"]
        .astype(bool)
        .map({True: "connected", False: "not connected"})
        .value_counts()
        .reindex(["connected", "not connected"], fill_value=0),
        "difficulty": a["difficulty"].value_counts().reindex(list(DIFFICULTY), fill_value=0),
    }


def yesbut_reproduction(folder: str | Path) -> pd.DataFrame:
    """YesBut's stated Figure 3 and Figure 14 numbers (papers.yaml) beside ours from the release in
    ``folder`` (:func:`figure3_counts`, :func:`human_eval`), then the values of ours the figures draw."""
    folder = Path(folder)
    release = pd.DataFrame(read_yesbut_annotations(folder / ANNOTATIONS_CSV).values())
    counts, n = figure3_counts(release), len(release)
    ours = {
        "images": n,
        "no_text": 100 * counts["text_in_image"]["no text"] / n,
        "not_connected": 100 * counts["connected"]["not connected"] / n,
        "medium_or_hard": 100 * counts["difficulty"][["MEDIUM", "HARD"]].sum() / n,
    }
    drawn = dict(counts)
    human_csv = folder / "Human_Eval_Results.csv"
    if human_csv.exists():
        tidy = human_eval(human_csv)
        shares = 100 * tidy.groupby(["criterion", "source"])["yes"].mean()
        stages = tidy.drop_duplicates("image")["image"].map(yesbut_stage).value_counts()
        ours |= {
            "human_eval_images": int(stages.sum()),
            "human_eval_models": tidy.loc[tidy["source"] != HUMAN, "source"].nunique(),
        }
        ours |= {f"human_eval_stage{s}_images": int(stages.get(s, 0)) for s in (2, 3, 4)}
        ours |= {f"gap_{c}": shares[c][HUMAN] - shares[c].drop(HUMAN).max() for c in HUMAN_CRITERIA}
        drawn["human_eval"] = shares
    return paper_frame(
        "YesBut", ours, drawn, missing=f"no {human_csv}: the human evaluation is not computed"
    )
