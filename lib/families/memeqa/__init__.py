"""MemeQA (paper: ../shared/seeds/000_ce3b79121c844bc4.txt): multiple-choice questions about memes.

- ``task.py``: the ``mcq`` task (single and multi answer, lettered options; exact and Jaccard,
  micro and per question type; the paper's tables)
- ``importer.py``: MemeQA's JSON splits read, checked, imported and exported
- ``prompts.yaml``: the task's prompt texts

Adversarial Filtering, the paper's way of writing hard distractors, is stage 03 (:mod:`lib.af`).
"""

from lib.families.memeqa.task import MultipleChoice

TASKS = (MultipleChoice(),)
