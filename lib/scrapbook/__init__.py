"""Scrapbook: synthetic probing datasets for VQA (objects at absolute and relative positions,
templated questions in four forms, validation levels). Paper: ../shared/seeds/003_876a3124b98bb2e8.txt.

    from lib.scrapbook import ScrapbookParams, generate
    stats = generate(ScrapbookParams(n_sets=1), "outputs/demo/04_scrapbook")

The stage: ``run(ScrapbookConfig(...), out)`` or ``python -m lib.scrapbook --params FILE --out DIR``.
Cluster runs: ``python -m lib.scrapbook --params FILE --out DIR --shard i --num-shards k`` per
shard, then ``python -m lib.scrapbook merge --out DIR SHARD_DIR...``. Modules: objects (shapes,
cut-outs), layout (regions, relations, placement), questions (queries, answers, paraphrases),
programs (which queries a scene gets: the templates' programs and their handlers), generate (sets,
units, streaming writer, summary, merge), paper (Unique All beside the paper's counts).
"""

from lib.scrapbook.generate import ScrapbookParamError, ScrapbookParams, Summary, generate, merge
from lib.scrapbook.stage import ScrapbookConfig, run

__all__ = ["ScrapbookConfig", "ScrapbookParamError", "ScrapbookParams", "Summary", "generate", "merge", "run"]
