"""Stage 03 · Adversarial filtering of multiple-choice distractors (MemeQA, after SWAG).

- :mod:`lib.af.skeletons` - skeleton questions from 02's annotations or MemeQA JSON, the 11 types;
- :mod:`lib.af.rules` - rule-based distractors of the annotation-driven types;
- :mod:`lib.af.engine` - the loop, the guards, state and resume, the blind check.
"""

from lib.af.engine import AFConfig, blind_check, final_items, run, screen
from lib.af.skeletons import TYPES, Skeleton, blank_span, from_annotations, from_memeqa

__all__ = ["AFConfig", "Skeleton", "TYPES", "blank_span", "blind_check", "final_items", "from_annotations",
           "from_memeqa", "run", "screen"]
