"""Batched normalised neural persistence on top of :mod:`dgpbench.topology`'s MST kernel."""

from __future__ import annotations

import numpy as np

# Elements per batch handed to the MST kernel at once (bounds memory to ~160 MB in float64).
BATCH_ELEMENTS = 20_000_000


def batch_neural_persistence(W: np.ndarray, p: float = 2.0) -> np.ndarray:
    """Normalised NP of every matrix of a ``(B, n, m)`` batch with entries in [0, 1].

    Parameters
    ----------
    W : numpy.ndarray of shape (B, n, m)
        Non-negative matrices, rows = input nodes.
    p : float, default=2

    Returns
    -------
    numpy.ndarray of shape (B,)
    """
    from dgpbench.topology import mst_weights
    from dgpbench.topology.persistence import np_from_tree

    W = np.asarray(W)
    if W.ndim != 3:
        raise ValueError(f"W must have shape (B, n, m), got {W.shape}")
    n, m = W.shape[1:]
    out = np.empty(W.shape[0], dtype=np.float64)
    step = max(1, BATCH_ELEMENTS // max(1, n * m))
    for start in range(0, W.shape[0], step):
        out[start : start + step] = np_from_tree(mst_weights(W[start : start + step]), p, True)
    return out
