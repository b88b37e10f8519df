"""Stage 03 · Adversarial filtering of multiple-choice distractors (MemeQA, after SWAG).

- :mod:`lib.af.skeletons` - skeleton questions from 02's annotations or MemeQA JSON, the 11 types;
- :mod:`lib.af.rules` - rule-based distractors of the annotation-driven types;
- :mod:`lib.af.guards` - the checks every generated distractor passes, the length tell;
- :mod:`lib.af.engine` - the loop, state and resume, the blind check;
- :mod:`lib.af.stage` - the stage: :func:`run` (``python -m lib.af --profile P`` or ``--params FILE --out DIR``).
"""

from lib.af.engine import AFConfig, blind_check, filter_questions, final_items
from lib.af.guards import screen
from lib.af.skeletons import TYPES, Skeleton, blank_span, from_annotations, from_memeqa
from lib.af.stage import run, skeletons_of

__all__ = ["AFConfig", "Skeleton", "TYPES", "blank_span", "blind_check", "filter_questions", "final_items",
           "from_annotations", "from_memeqa", "run", "screen", "skeletons_of"]
