"""What the toy family brings to the stages besides its task: a kind of image source for stage 01
(``{kind: toy, n: 3}``: plain colour squares, labelled by colour; more than three repeat a
colour, and stage 01 drops the copies), the dataset it builds from the
manifest, and stage 07's figure and paper rows."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from lib.families.toy.task import COLOURS, Colour
from PIL import Image

from lib.core.papers import PAPER_COLUMNS
from lib.io import LoadReport, artifacts, dataset_info, images_roots, save_dataset
from lib.io.records import records_of
from lib.tasks.analysis import Analysis
from lib.tasks.collection import Source


class ToySource(Source):
    keys = ("n",)

    def collect(self, entry, out, progress):
        folder = Path(out) / "toy"
        folder.mkdir(parents=True, exist_ok=True)
        names = list(COLOURS)
        paths = []
        for i in range(entry["n"]):
            paths.append(folder / f"{i}-{names[i % len(names)]}.png")
            Image.new("RGB", (56, 56), COLOURS[names[i % len(names)]]).save(paths[-1])
        report = LoadReport()
        label = lambda p: {"label": p.stem.split("-")[1]}
        return records_of(paths, "toy", report, progress, label), report


def toy_dataset(manifest, folder_of, seed):
    """The ``toy`` dataset: one question per toy image of the manifest."""
    rows = [r for r in manifest if r["source"] == "toy"]
    if not rows:
        return {}
    out = folder_of("toy")
    items = [Colour.make_item(r["id"], r["path"], r["label"]) for r in rows]
    save_dataset(out, items, dataset_info("toy", images_roots=images_roots(items, out)))
    return {"toy": out}


class ToyAnalysis(Analysis):
    def figures(self, run_folder, data):
        metrics = artifacts.read_table(run_folder, artifacts.EVALUATE, artifacts.METRICS)
        if metrics is None:
            return {}
        rows = metrics[(metrics["task"] == Colour.name) & (metrics["metric"] == "accuracy")]
        fig, ax = plt.subplots()
        ax.bar(rows["model"] + " " + rows["style"], rows["value"])
        ax.set_ylabel("accuracy")
        return {"toy_accuracy": (fig, ax)}

    def paper(self, run_folder, data):
        metrics = artifacts.read_table(run_folder, artifacts.EVALUATE, artifacts.METRICS)
        if metrics is None:
            return None
        ours = metrics[(metrics["task"] == Colour.name) & (metrics["metric"] == "accuracy")]
        row = ["Toy", "accuracy (stated 1/3)", 1 / 3, round(ours["value"].mean(), 2), None, "", ""]
        return pd.DataFrame([row], columns=PAPER_COLUMNS)
