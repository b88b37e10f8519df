"""Open VQA: a free answer scored against reference answers (VQAv2 / DocVQA style).

- ``task.py``: the ``vqa.open`` task (exact match, ANLS, VQA accuracy; what the LAVE judge rates)
- ``prompts.yaml``: its prompt text
"""

from lib.families.vqa.task import OpenVQA

TASKS = (OpenVQA(),)
