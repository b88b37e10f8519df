"""Which answers an interval resamples together: each answer's cluster (:meth:`lib.tasks.Task.cluster`,
its image by default) as a small integer code, kept as a group of answers is scored."""

from __future__ import annotations

from array import array

import numpy as np


class Clusters:
    """Each answer's cluster (:meth:`Task.cluster`) as a small integer code, in the order answers
    are added: what an interval resamples. A group keeps one 8-byte code per answer and one entry
    per distinct cluster (an image, a Scrapbook image chain)."""

    def __init__(self):
        self._code: dict = {}
        self._codes = array("q")

    def add(self, task, items) -> None:
        self._codes.extend(self._code.setdefault(task.cluster(it), len(self._code)) for it in items)

    def codes(self) -> np.ndarray:
        return (
            np.frombuffer(self._codes, dtype=np.int64)
            if len(self._codes)
            else np.zeros(0, np.int64)
        )


def cluster_codes(task, items) -> np.ndarray:
    """The cluster code of each of ``items`` (:class:`Clusters`)."""
    clusters = Clusters()
    clusters.add(task, items)
    return clusters.codes()
