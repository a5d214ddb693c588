"""Batched normalised neural persistence on top of :mod:`dgpbench.topology`'s MST kernel."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

# Elements per batch handed to the MST kernel at once (bounds memory to ~160 MB in float64).
BATCH_ELEMENTS = 20_000_000


@lru_cache(maxsize=4096)
def _normaliser(n: int, m: int, p: float) -> float:
    """Ratio raw / normalised NP of topology.neural_persistence for an (n, m) matrix.

    Derived from the topology module itself so that batched values equal
    ``neural_persistence(W, p, normalize=True)`` whatever its normalisation convention.
    """
    from dgpbench.topology import neural_persistence

    probe = np.full((n, m), 0.5)
    return float(neural_persistence(probe, p=p, normalize=False)) / float(
        neural_persistence(probe, p=p, normalize=True)
    )


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

    W = np.asarray(W)
    if W.ndim != 3:
        raise ValueError(f"W must have shape (B, n, m), got {W.shape}")
    n, m = W.shape[1:]
    out = np.empty(W.shape[0], dtype=np.float64)
    step = max(1, BATCH_ELEMENTS // max(1, n * m))
    for start in range(0, W.shape[0], step):
        mst = np.asarray(mst_weights(W[start : start + step]), dtype=np.float64)
        raw = (1.0 + np.sum((1.0 - mst) ** p, axis=-1)) ** (1.0 / p)
        out[start : start + step] = raw / _normaliser(n, m, float(p))
    return out
