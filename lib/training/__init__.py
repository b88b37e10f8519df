"""The training engine: stage 05 (:mod:`lib.stages.train`) binds it to a run; ``scripts/gpu_check.py``
and the tests drive it directly.

- :mod:`lib.training.plan` - what is derived from the stage's settings (precision, step budget,
  the data-parallel check).
- :mod:`lib.training.data` - examples, splits, filters, collated batches, balanced drawing.
- :mod:`lib.training.model` - the model prepared for LoRA or full fine-tuning, its optimiser,
  saved weights loaded back.
- :mod:`lib.training.validation` - validation questions asked, read and scored as stage 06 does
  (:mod:`lib.eval.score`), accuracies, the selection metric, the majority answer.
- :mod:`lib.training.loop` - the session, its steps, validation on schedule, checkpoints, resume.
"""
