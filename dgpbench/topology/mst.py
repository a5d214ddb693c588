"""0-dimensional persistence of a complete bipartite graph: its maximum spanning tree weights."""

from __future__ import annotations

from typing import Any

import numpy as np

from dgpbench._validation import as_float_array
from dgpbench.threads import numba_threads
from dgpbench.topology._kernels import _mst_batch, _mst_one

__all__ = ["mst_weights"]


def mst_weights(W: Any, *, n_jobs: int | None = None) -> np.ndarray:
    """Edge weights of a maximum spanning tree of the complete bipartite graph of ``W``.

    Rows of ``W`` are one side of the graph, columns the other, and edge ``(i, j)`` weighs
    ``W[i, j]`` (zeros are edges too). The ``n + m - 1`` tree weights, sorted in descending
    order, are the deaths of the 0-dimensional persistence diagram used by neural
    persistence, Topological Uncertainty and DGP. The tree may not be unique under ties, but
    its multiset of weights is, so the result is exact and deterministic. It is computed by
    dense Prim in O(n m) and consists of entries of ``W``, so float32 and float64 inputs
    give the same values.

    Parameters
    ----------
    W : array-like of shape (n, m) or (B, n, m)
        Non-negative finite weights; a 3-D array is a batch of matrices.
    n_jobs : int, optional
        Numba threads for a batch (None: all).

    Returns
    -------
    ndarray of shape (n + m - 1,) or (B, n + m - 1)
        Same dtype as ``W`` when it is float32 or float64, else float64.

    Raises
    ------
    ValueError
        If ``W`` is empty, not 2-D or 3-D, or has negative, NaN or infinite entries.

    Examples
    --------
    >>> mst_weights([[0.5, 0.1, 0.8], [0.7, 1.0, 0.1], [0.2, 0.8, 0.0]])
    array([1. , 0.8, 0.8, 0.7, 0.5])
    """
    W = as_float_array(W, "W", ndim=(2, 3), min_value=0.0)
    if W.ndim == 2:
        out = np.empty(W.shape[0] + W.shape[1] - 1, dtype=W.dtype)
        _mst_one(W, out)
        return out
    out = np.empty((W.shape[0], W.shape[1] + W.shape[2] - 1), dtype=W.dtype)
    with numba_threads(n_jobs):
        _mst_batch(W, out)
    return out
