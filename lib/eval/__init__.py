"""The evaluation engine: which questions, asking, reading, scoring, rescoring, manifests, tables.

Stage 06 (:mod:`lib.stages.evaluate`) binds it to a run; training's validation (:mod:`lib.training.validation`) reads
and scores its answers with it; so do the tests. One way to read and score an answer, in the
whole project.

- :mod:`lib.eval.settings` - :class:`EvalConfig`: datasets, models, styles, token limits, judge.
- :mod:`lib.eval.items` - each dataset's items, checked, filtered and sampled in one streaming pass.
- :mod:`lib.eval.requests` - an item's request as evaluation sends it and the comparison shows it.
- :mod:`lib.eval.ask` - every model on every dataset in every style, one process or many (ranks
  merged in order), through the call cache; each judged task's judge on its answers.
- :mod:`lib.eval.score` - an answer read by its task, a group scored by its task's
  :class:`lib.tasks.Scorer`, the group's metric rows and its family's score tables.
- :mod:`lib.eval.manifest` - the fingerprints that tie an evaluation folder's parts together.
- :mod:`lib.eval.rescore` - every table recomputed from the stored answers, streamed, no model.
- :mod:`lib.compare.explain`, :mod:`lib.compare.changes`, :mod:`lib.eval.paired` - two runs paired item
  by item, each change put on its first cause, with paired intervals.
- :mod:`lib.eval.foreign` - another harness's samples (lmms-eval) imported as an evaluation folder.
"""
