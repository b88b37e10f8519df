"""lmms-eval hooks of a VQA Lab benchmark, written by ``python -m lib.export lmms-eval``.

The prompts are VQA Lab's zero-shot prompts, rendered at export into ``docs_<task>.jsonl``; the
replies are read and scored by VQA Lab's own task code (free generation: a reply is parsed as VQA
Lab parses an unconstrained answer), so the numbers are VQA Lab's. VQA Lab must be importable
where lmms-eval runs (``pip install --no-deps -e <vqa-lab>`` plus its ``lmms-eval`` extra, or its
folder on PYTHONPATH); ``vqalab.json`` beside this file says where the dataset's images are and
how to score. lmms-eval's chat path (``doc_to_messages``) asks what VQA Lab's stage 06 asks; its
"simple" path (``doc_to_text``) lets the model place its own image tokens (see ``lib/export/harnesses.py``).
"""

import json
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
EXPORT = json.loads((HERE / "vqalab.json").read_text())


def doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    root = Path(EXPORT["dataset"])
    return [Image.open(root / im).convert("RGB") for im in doc["images"]]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["prompt"]


def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    images = [{"type": "image", "url": im} for im in doc_to_visual(doc)]
    text = [{"type": "text", "text": doc["prompt"]}]
    return [
        {"role": "user", "content": text + images if EXPORT["question_first"] else images + text}
    ]


def doc_to_target(doc):
    return doc["target"]


def process_results(doc, results):
    """Every metric gets the reply itself: VQA Lab scores the whole set in the aggregation (its
    metrics are not all means of per-item values: Scrapbook's versions, corpus BLEU...)."""
    row = {"id": doc["id"], "task": doc["task"], "raw": results[0] if results else ""}
    return {metric: row for metric in EXPORT["metrics"][doc["task"]]}


def _aggregate(metric, rows):
    """NaN for a metric the evaluated docs have no rows of (a subset ``--limit`` left out)."""
    # deferred on purpose: lmms-eval imports this file to register the hooks, before VQA Lab is needed
    from lib.export.harnesses import metric_value

    return metric_value(HERE, metric, rows)


# one aggregation per metric (lmms-eval names them in the task YAML), appended at export
