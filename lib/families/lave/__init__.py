"""LAVE (paper: "LAVE: Zero-shot VQA Evaluation on Docmatix with LLMs", CITATION.cff): an LLM judge rating an answer 1-3
against reference answers, score (rating - 1) / 2.

- ``judge.py``: the prompt as the reference implementation (mair-lab/lave) builds it, the rating
  read without guessing, the reference's own reading beside it
- ``prompts.yaml``: the task definition and the demonstrations

LAVE judges other tasks' open answers (``tasks: {<task>: {judge: lave}}`` in stage 06's params):
it declares a judge and no task of its own.
"""

from lib.families.lave.judge import Lave

JUDGES = (Lave(),)
