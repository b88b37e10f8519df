"""The pipeline's stages as jobs of a cluster's scheduler: Slurm (:mod:`lib.pipeline.scheduler.slurm`), chosen by
a profile's ``cluster:`` block (:class:`lib.pipeline.scheduler.cluster.ClusterConfig`)."""
