"""The pipeline's eight stages, each named as its notebook: ``notebooks/NN_name.ipynb`` runs
``lib/stages/name.py``, which holds the stage's config class (the one source of its defaults), the
steps the notebook calls one per section, ``run(cfg, out)`` and a command line
(``python -m lib.stages.name --profile P``).

- :mod:`lib.stages.setup` (00) - the machine, the models' files, the demo's data;
- :mod:`lib.stages.collect` (01) - images into a manifest;
- :mod:`lib.stages.annotate` (02) - annotations, by hand, a model or Label Studio;
- :mod:`lib.stages.adversarial_filter` (03) - MemeQA's distractors (engine: :mod:`lib.af`);
- :mod:`lib.stages.scrapbook` (04) - Scrapbook datasets (generator: :mod:`lib.families.scrapbook`);
- :mod:`lib.stages.train` (05) - fine-tuning (engine: :mod:`lib.training`);
- :mod:`lib.stages.evaluate` (06) - every model on every dataset (engine: :mod:`lib.eval`);
- :mod:`lib.stages.analyze` (07) - tables, figures, the papers' numbers, the report.

Stages never import each other (``tests/test_layers.py``); they meet through their output folders.
"""
