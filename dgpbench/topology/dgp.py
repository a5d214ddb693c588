"""Deep graph persistence of static weights: standardisation, summary matrix S, DGP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dgpbench._validation import as_float_array
from dgpbench.topology._kernels import _summary_t
from dgpbench.topology.mst import mst_weights
from dgpbench.topology.persistence import _check_layers, check_p, np_from_tree

__all__ = ["STD_EPS", "deep_graph_persistence", "standardize", "summary_matrix"]

STD_EPS = 1e-8
"""Added to the standard deviation before dividing, as in the authors' torch code."""


def standardize(W: Any) -> np.ndarray:
    """Standardise a layer: ``(W - mean) / (std + 1e-8)`` over all entries.

    ``std`` is the unbiased standard deviation (torch's ``Tensor.std`` default), computed in
    float64.

    Parameters
    ----------
    W : array-like of shape (n, m)
        A (signed) weight matrix or activation graph with at least two entries.

    Returns
    -------
    ndarray of shape (n, m)
        Same dtype as ``W`` if float32/float64, else float64.

    Raises
    ------
    ValueError
        If ``W`` is not 2-D, has fewer than two entries, or holds NaN/inf.

    Examples
    --------
    >>> standardize([[1.0, 3.0]]).round(6)
    array([[-0.707107,  0.707107]])
    """
    W = as_float_array(W, "W", ndim=2)
    if W.size < 2:
        raise ValueError(f"W needs at least 2 entries for an unbiased std, got shape {W.shape}")
    return _standardize64(W.astype(np.float64)).astype(W.dtype)


def _standardize64(w: np.ndarray) -> np.ndarray:
    return (w - w.mean()) / (w.std(ddof=1) + STD_EPS)


def _pack_static(layers: list[np.ndarray], name: str) -> tuple[np.ndarray, ...]:
    """Flat layout of chained layers for ``_summary_t`` (weights in torch orientation)."""
    for i in range(1, len(layers)):
        if layers[i].shape[0] != layers[i - 1].shape[1]:
            raise ValueError(
                f"{name}[{i}] has shape {layers[i].shape} but {name}[{i - 1}] has "
                f"{layers[i - 1].shape[1]} columns: ragged layer shapes"
            )
    dtype = np.float32 if all(w.dtype == np.float32 for w in layers) else np.float64
    sizes = np.array([layers[0].shape[0]] + [w.shape[1] for w in layers], dtype=np.int64)
    w_off = np.concatenate([[0], np.cumsum([w.size for w in layers])]).astype(np.int64)
    a_off = np.concatenate([[0], np.cumsum(sizes[:-1])]).astype(np.int64)
    wt = np.concatenate([np.ascontiguousarray(w.T, dtype=dtype).ravel() for w in layers])
    return sizes, a_off, w_off, wt, dtype


def summary_matrix(layers: Sequence[Any]) -> np.ndarray:
    """DGP summary matrix ``S`` of a chain of non-negative layers (Algorithm 1).

    ``S[i, k]`` is the largest, over all directed paths from input node ``i`` to output
    node ``k``, of the smallest edge weight on the path (a max-min or bottleneck path).

    Parameters
    ----------
    layers : sequence of array-like
        Non-negative matrices in graph orientation: ``layers[l]`` has shape
        ``(n_l, n_{l+1})``.

    Returns
    -------
    ndarray of shape (n_0, n_L)
        float32 if every layer is float32, else float64. Entries are entries of the layers.

    Raises
    ------
    ValueError
        On an empty sequence, negative/NaN/inf entries, non-2-D or empty layers, or ragged
        shapes (``layers[l].shape[1] != layers[l+1].shape[0]``).

    Examples
    --------
    >>> summary_matrix([[[0.9, 0.1]], [[0.2], [0.8]]])  # paths 0.9->0.2 and 0.1->0.8
    array([[0.2]])
    """
    mats = _check_layers(layers, "layers", non_negative=True)
    sizes, a_off, w_off, wt, dtype = _pack_static(mats, "layers")
    n_layers = len(mats)
    ones = np.ones(a_off[-1], dtype=dtype)
    zeros = np.zeros(n_layers, dtype=dtype)
    st = np.empty((sizes[-1], sizes[0]), dtype=dtype)
    _summary_t(ones, a_off, wt, w_off, sizes, zeros, np.ones(n_layers, dtype=dtype), st)
    return np.ascontiguousarray(st.T)


def deep_graph_persistence(
    weights: Sequence[Any], p: float = 2, standardize: bool = True, normalize: bool = True
) -> float:
    """Deep graph persistence ``DGP_p`` of a network's static weights (Definition 5.1).

    Each layer is standardised (``(W - mean) / (std + 1e-8)``, optional), made absolute and
    divided by the largest resulting value in the network; the summary matrix ``S`` of the
    chain (:func:`summary_matrix`) then gives ``(1 + sum_{w in MST(S)} (1 - w)^p)^(1/p)``.

    Parameters
    ----------
    weights : sequence of array-like
        Raw (signed) weight matrices in graph orientation, ``(n_l, n_{l+1})``, chained.
    p : float, default=2
        Exponent (> 0).
    standardize : bool, default=True
        Standardise every layer first (False gives "DGP (- norm)").
    normalize : bool, default=True
        Divide by ``(n_0 + n_L - 1)^(1/p)``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        On invalid or ragged layers, a layer with a single entry when ``standardize``, or
        invalid ``p``. If every weight is 0 after these steps, ``S = 0`` (no division).

    Examples
    --------
    >>> W1 = [[1.0, -2.0], [0.5, 0.0]]
    >>> W2 = [[1.0], [-1.0]]
    >>> round(deep_graph_persistence([W1, W2], standardize=False, normalize=False), 4)
    1.3463
    """
    p = check_p(p)
    mats = [w.astype(np.float64) for w in _check_layers(weights, "weights")]
    _pack_static(mats, "weights")  # shape check before any work
    if standardize:
        for i, w in enumerate(mats):
            if w.size < 2:
                raise ValueError(
                    f"weights[{i}] needs at least 2 entries to be standardised, got {w.shape}"
                )
        mats = [_standardize64(w) for w in mats]
    mats = [np.abs(w) for w in mats]
    scale = max(float(w.max()) for w in mats)
    if scale > 0:
        mats = [w / scale for w in mats]
    S = summary_matrix(mats)
    return np_from_tree(mst_weights(S), p, normalize)
