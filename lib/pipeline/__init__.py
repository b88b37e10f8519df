"""Running a profile: the stage notebooks under papermill (:mod:`lib.pipeline.execute`,
``python -m lib.pipeline``), the preflight check (:mod:`lib.pipeline.preflight`) and the stages as
cluster jobs (:mod:`lib.pipeline.scheduler`)."""
