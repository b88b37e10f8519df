"""Adversarial filtering of multiple-choice distractors (MemeQA, after SWAG): the engine stage 03
(:mod:`lib.stages.adversarial_filter`) binds to a run.

- :mod:`lib.af.skeletons` - skeleton questions from 02's annotations or MemeQA JSON, the 11 types;
- :mod:`lib.af.rules` - rule-based distractors of the annotation-driven types;
- :mod:`lib.af.guards` - the checks every generated distractor passes, the length tell;
- :mod:`lib.af.configuration` - the stage's settings, :class:`AFConfig`;
- :mod:`lib.af.questions` - a question's state, its options assembled, its None+ twin;
- :mod:`lib.af.generation` - distractors from the generator (validated, retried) or the rules;
- :mod:`lib.af.engine` - the loop, state and resume, the blind check.
"""

from lib.af.configuration import AFConfig
from lib.af.engine import blind_check, filter_questions, final_items
from lib.af.guards import screen
from lib.af.skeletons import TYPES, Skeleton, blank_span, from_annotations, from_split

__all__ = [
    "AFConfig",
    "Skeleton",
    "TYPES",
    "blank_span",
    "blind_check",
    "filter_questions",
    "final_items",
    "from_annotations",
    "from_split",
    "screen",
]
