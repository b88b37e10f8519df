"""A yes/no correctness judge: an LLM says whether a candidate answer is correct given the
reference answers; score 1 or 0.

- ``judge.py``: the prompt, one call constrained to "yes" / "no" where the backend can, the verdict
  read without guessing
- ``prompts.yaml``: its wording

It rates other tasks' open answers (``tasks: {<task>: {judge: verdict}}`` in stage 06's params) as
LAVE does, on any backend: a second judge beside LAVE's graded one, for a researcher who wants the
binary reading many VQA leaderboards use.
"""

from lib.families.verdict.judge import Verdict

JUDGES = (Verdict(),)
