"""Families of work: one folder per paper and one for plain VQA, each holding what is its own.

    lib/families/memeqa/     MemeQA: the multiple-choice task, its importer (JSON splits), prompts
    lib/families/yesbut/     YesBut: detection / understanding / completion, two-panel images, prompts
    lib/families/scrapbook/  Scrapbook: the generator (stage 04), the task, the consistency protocol,
                             the paper's counts, templates and vocabulary (data/), prompts
    lib/families/lave/       LAVE: the judge (rating 1-3 against references), its prompt and shots
    lib/families/verdict/    a yes/no correctness judge, the second judge beside LAVE
    lib/families/vqa/        open VQA: free answers against references, prompts

A family is a package here whose ``__init__`` declares what it brings to the stages (``TASKS``,
``JUDGES``, ``SCORE_TABLES``, ``SPLIT_READERS``, ``HUMAN_LABELS``). The registry
(:mod:`lib.tasks.registry`) finds the families by looking, not from a list: adding one is one new
folder (``tests/test_toy_task.py`` adds ``tests/support/families/toy`` this way). A task's prompt
texts are the ``prompts.yaml`` beside the module defining it (:meth:`lib.tasks.Task.prompts`), its
settings one block under ``tasks:`` in stage 06's params.

    from lib.tasks.registry import task_of
    task = task_of(item)
"""
