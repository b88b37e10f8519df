"""MemeQA (paper: "MemeQA: Holistic Evaluation for Meme Understanding", CITATION.cff): multiple-choice questions about memes.

- ``task.py``: the ``mcq`` task (single and multi answer, lettered options; exact and Jaccard,
  micro and per question type; the paper's tables)
- ``collect.py``: stage 01's ``memeqa`` source kind (a split's images, its questions as a dataset)
- ``importer.py``: MemeQA's JSON splits read, checked, imported and exported
- ``prompts.yaml``: the task's prompt texts

Adversarial Filtering, the paper's way of writing hard distractors, is stage 03 (:mod:`lib.af`).
"""

from lib.families.memeqa.collect import MemeQASource
from lib.families.memeqa.importer import import_memeqa
from lib.families.memeqa.paper import MemeQAAnalysis
from lib.families.memeqa.task import MultipleChoice

TASKS = (MultipleChoice(),)
AF_QUESTIONS = TASKS[0]  # stage 03 writes multiple-choice questions (the paper's method)
SPLIT_READERS = {".json": import_memeqa}  # a released split: read by training and stage 03
SOURCES = {"memeqa": MemeQASource()}  # stage 01: {kind: memeqa, json: <split>, images: <folder>}
ANALYSIS = MemeQAAnalysis()  # stage 07: the shortcut audit's table, the release beside the paper
