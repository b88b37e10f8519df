"""Scrapbook: synthetic probing datasets for VQA (objects at absolute and relative positions,
templated questions in four forms, validation levels). Paper: "A Framework for Generating
Artificial Datasets to Validate Absolute and Relative Position Concepts" (CITATION.cff).

    from lib.families.scrapbook import ScrapbookParams, generate
    stats = generate(ScrapbookParams(n_sets=1), "outputs/demo/04_scrapbook")

Stage 04 (:mod:`lib.stages.scrapbook`) runs it for a profile, and shards it for cluster runs
(``python -m lib.stages.scrapbook shard ...``, then ``merge``). Modules: objects (shapes,
cut-outs), layout (regions, relations, placement), questions (queries, answers, paraphrases),
programs (which queries a scene gets: the templates' programs and their handlers), params (the
generator's parameters and checks), scenes (sets, units, a unit's images), items (an image's question
lines, the summary), generate (the streamed run), merge (writing a folder, merging shards), paper (Unique All beside the paper's counts), task (the
``scrapbook`` task: prompts, reading and scoring by the paper's protocol), consistency (that
protocol's rules; it reads one answer and writes the tables' rows), coded (the protocol's group
rules - precedence, questions, consistency, levels, errors - on a group's answers as integer codes:
what the task's scorer runs), explore (a dataset's summary);
``data/``: templates, vocabulary and expressions; ``prompts.yaml``: the task's prompt texts.
"""

from lib.families.scrapbook import tables
from lib.families.scrapbook.generate import generate
from lib.families.scrapbook.items import Summary
from lib.families.scrapbook.merge import merge
from lib.families.scrapbook.params import ScrapbookParamError, ScrapbookParams
from lib.families.scrapbook.task import ScrapbookQA

TASKS = (ScrapbookQA(),)
# stage 06's levels.csv and errors.csv (the paper's Tables 8-15 are made from them)
SCORE_TABLES = {
    tables.LEVELS: tables.LEVEL_COLUMNS,
    tables.ERRORS: tables.ERROR_COLUMNS,
}

__all__ = ["ScrapbookParamError", "ScrapbookParams", "Summary", "generate", "merge", "TASKS"]
