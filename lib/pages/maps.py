"""2-D maps of embeddings: UMAP (umap-learn) and t-SNE (scikit-learn), seeded, so the same inputs give
the same coordinates.

umap-learn compiles its numba kernels afresh in every process that fits a map, and a fit of a few
dozen points then costs far more in compilation than in work; every stage 07, notebook and test
process pays it again. :func:`umap_module` turns on numba's own on-disk cache
(``Dispatcher.enable_caching``, the switch behind ``@njit(cache=True)``) for the kernels umap-learn
defines at module level, so only the first process of an environment compiles them (``make``'s set-up
runs ``python -m lib.pages.maps`` to be that process). numba keys each cached
kernel on its source file and numba's version and writes it atomically (several processes may share
it); the compiled code and so the coordinates are the same, cached or not (``tests/test_analysis.py``).
The kernels umap-learn builds inside a fit (its per-epoch layout functions) cannot be cached this way
and are still compiled per process.
"""

from __future__ import annotations

from functools import cache

import numpy as np


@cache
def umap_module():
    """``umap``, its module-level numba kernels cached on disk (numba's ``__pycache__`` beside their
    source, or ``NUMBA_CACHE_DIR``)."""
    import umap
    import umap.distances
    import umap.layouts
    import umap.sparse
    import umap.umap_
    import umap.utils
    from numba.core.registry import CPUDispatcher

    for module in (umap.umap_, umap.layouts, umap.distances, umap.sparse, umap.utils):
        for kernel in vars(module).values():
            if isinstance(kernel, CPUDispatcher):
                kernel.enable_caching()
    return umap


def umap_2d(
    x: np.ndarray, seed: int = 0, n_neighbors: int = 15, metric: str = "cosine"
) -> np.ndarray:
    """2-D UMAP coordinates with a fixed random state (deterministic: umap-learn then runs single-threaded)."""
    if len(x) < 4:
        raise ValueError(f"a UMAP map needs at least 4 points, got {len(x)}")
    reducer = umap_module().UMAP(
        n_components=2,
        n_neighbors=max(2, min(n_neighbors, len(x) - 1)),
        metric=metric,
        random_state=seed,
        init="random" if len(x) < 10 else "spectral",
    )
    return reducer.fit_transform(x)


def tsne_2d(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D t-SNE (scikit-learn), as in the Docmatix post's Figure 1."""
    from sklearn.manifold import TSNE

    return TSNE(
        n_components=2,
        perplexity=max(2.0, min(30.0, (len(x) - 1) / 3)),
        random_state=seed,
        init="random",
    ).fit_transform(x)


if __name__ == "__main__":
    # `make`'s set-up step: compile umap-learn's kernels into numba's cache once per environment, as pip
    # compiles the .pyc files, so no later process (a stage 07, a notebook, a test) pays for it
    umap_2d(np.random.default_rng(0).normal(size=(12, 8)).astype("float32"))
    print(
        f"umap-learn's numba kernels compiled into numba's cache ({umap_module().umap_.smooth_knn_dist.stats.cache_path})"
    )
