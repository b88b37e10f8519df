"""YesBut (paper: "YesBut: A High-Quality Annotated Multimodal Dataset...", CITATION.cff): two-panel satirical images.

- ``task.py``: ``yesbut.detection``, ``yesbut.understanding`` and ``yesbut.completion`` with the
  paper's prompts, metrics and tables
- ``panels.py``: a two-panel image split into halves, composed side by side, the 2x2 completion grid
- ``release.py``: the release's layout (annotation CSV, file and folder names of the restylings)
- ``collect.py``: stage 01's ``yesbut`` source kind (the repository's layout) and datasets
- ``datasets.py``: the evaluation datasets (detection, understanding, completion) from 01's manifest
- ``demo.py``: the embedded demo's two-panel images
- ``analysis.py``: stage 07's figures, topic texts and the paper's numbers beside ours
- ``human.py``: the human evaluation of descriptions as judged answers (``python -m lib.agreement``)
- ``prompts.yaml``: the tasks' prompt texts (appendix E.2, verbatim)

Collecting and annotating the images are stages 01 and 02 (:mod:`lib.stages.collect`, :mod:`lib.stages.annotate`).
"""

from lib.families.yesbut.analysis import YesButAnalysis
from lib.families.yesbut.collect import YesButSource, manifest_datasets
from lib.families.yesbut.human import HUMAN_EVAL_CSV, human_judged_answers
from lib.families.yesbut.task import Completion, Detection, Understanding

TASKS = (Detection(), Understanding(), Completion())
HUMAN_LABELS = {
    HUMAN_EVAL_CSV: (Understanding.name, human_judged_answers)
}  # read by lib.agreement.scorers
SOURCES = {"yesbut": YesButSource()}  # stage 01: {kind: yesbut, path: <a clone of the repository>}
MANIFEST_DATASETS = (manifest_datasets,)  # stage 01: detection / understanding / completion sets
ANALYSIS = YesButAnalysis()  # stage 07: Figures 3 and 14, the release's texts, the paper's numbers
