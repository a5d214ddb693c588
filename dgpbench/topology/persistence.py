"""Neural persistence (Rieck et al. 2019) and its bounds (Theorem 3.4 of the DGP paper)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

import numpy as np

from dgpbench._validation import as_float_array
from dgpbench.topology.mst import mst_weights

__all__ = ["network_neural_persistence", "neural_persistence", "np_bounds"]


def check_p(p: Any) -> float:
    """Validate the persistence exponent ``p`` (a finite real > 0)."""
    if isinstance(p, bool) or not isinstance(p, Real) or not math.isfinite(p) or p <= 0:
        raise ValueError(f"p must be a finite real number > 0, got {p!r}")
    return float(p)


def np_from_tree(weights: np.ndarray, p: float, normalize: bool) -> float | np.ndarray:
    """``(1 + sum (1 - w)^p)^(1/p)`` of MST weights, optionally over ``(n + m - 1)^(1/p)``.

    ``weights`` is one tree ``(n + m - 1,)`` (returns a float) or a batch
    ``(B, n + m - 1)`` (returns an array of shape ``(B,)``).
    """
    w = np.asarray(weights, dtype=np.float64)
    value = (1.0 + np.sum((1.0 - w) ** p, axis=-1)) ** (1.0 / p)
    if normalize:
        value = value / w.shape[-1] ** (1.0 / p)  # n + m - 1 edges
    return float(value) if w.ndim == 1 else value


def neural_persistence(W: Any, p: float = 2, normalize: bool = True) -> float:
    """Neural persistence ``NP_p(W)`` of one matrix (Definition 3.3).

    ``NP_p(W) = (1 + sum_{w in MST(W)} (1 - w)^p)^(1/p)``, where ``MST(W)`` are the weights of
    a maximum spanning tree of the complete bipartite graph of ``W`` (see
    :func:`mst_weights`).

    Parameters
    ----------
    W : array-like of shape (n, m)
        Weights in [0, 1] (for a network, the absolute weights divided by the largest one,
        see :func:`network_neural_persistence`).
    p : float, default=2
        Exponent (> 0).
    normalize : bool, default=True
        Divide by ``(n + m - 1)^(1/p)`` (Rieck et al.'s normalisation).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``W`` is not a non-empty 2-D array with entries in [0, 1], or ``p`` is invalid.

    Examples
    --------
    >>> round(neural_persistence([[0.0, 1.0]], normalize=False), 6)  # tree {1, 0}
    1.414214
    """
    p = check_p(p)
    W = as_float_array(W, "W", ndim=2, min_value=0.0, max_value=1.0)
    return np_from_tree(mst_weights(W), p, normalize)


def network_neural_persistence(weights: Sequence[Any], p: float = 2) -> float:
    """Neural persistence of a network: the mean normalised NP over its layers.

    Every weight is mapped to [0, 1] by taking its absolute value and dividing by the largest
    absolute weight of the whole network; then each layer's normalised NP is computed and
    the values are averaged.

    Parameters
    ----------
    weights : sequence of array-like
        Raw (signed) weight matrices, one per linear map, in graph orientation
        ``(n_in, n_out)`` (the orientation does not change NP).
    p : float, default=2
        Exponent (> 0).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        On an empty sequence, a non-2-D or empty layer, NaN/inf, or an all-zero network.

    Examples
    --------
    >>> round(network_neural_persistence([[[1.0, -1.0]], [[-0.5], [0.5]]]), 4)
    0.7866
    """
    p = check_p(p)
    layers = _check_layers(weights, "weights")
    scale = max(float(np.max(np.abs(w))) for w in layers)
    if scale == 0.0:
        raise ValueError("weights are all zero: neural persistence needs a non-zero weight")
    values = [np_from_tree(mst_weights(np.abs(w) / scale), p, True) for w in layers]
    return float(np.mean(values))


MATCHINGS = ("mutual", "argmax")
"""Readings of Theorem 3.4's ``B_notA`` (see :func:`np_bounds`)."""


def np_bounds(
    W: Any, p: float = 2, normalize: bool = False, matching: str = "mutual"
) -> tuple[float, float]:
    r"""Lower and upper bounds ``(L, U)`` on ``NP_p(W)`` from Theorem 3.4.

    With ``Phi_b = (1 - max_a W[a, b])^p`` (columns) and ``Psi_a = (1 - max_b W[a, b])^p``
    (rows)::

        L = (sum_b Phi_b + sum_a Psi_a)^(1/p)
        U = (|B \ B_notA| + sum_{b in B_notA} Phi_b + sum_a Psi_a)^(1/p)

    ``B_notA`` (the columns whose maximum is counted with its own value) has two readings
    in the paper, chosen by ``matching``:

    * ``"mutual"`` (default): the columns whose maximal entry is not the maximal entry of
      its row - the paper's prose ("the set of columns whose maximal element does not
      coincide with the maximal element in any row") and its proof (a column's maximum edge
      is counted separately unless it is also a row's maximum edge). A column is matched
      when one of its maximisers ``(a, b)`` is also a maximiser of row ``a``.
    * ``"argmax"``: the displayed formula, ``{b : b != argmax_b' W[a, b'] for all a}``, the
      columns that are the argmax of no row (every tied maximiser counts as an argmax).

    Both give valid bounds, with ties too: the MST holds one maximum edge per row and one
    per column, and a column's maximum edge can coincide with a row's only if it is a
    mutual maximum. Every ``"mutual"``-matched column is ``"argmax"``-matched, so the
    ``"mutual"`` U is never larger; on random matrices it is much tighter (the paper's
    appendix table of the bounds' errors is reproduced by this reading, not by the other).
    Both agree on the paper's worked example and whenever every row's maximum lies in one
    column (U = NP).

    ``0 <= L <= NP_p(W) <= U <= (n + m)^(1/p)`` holds for every matrix.

    Parameters
    ----------
    W : array-like of shape (n, m)
        Weights in [0, 1].
    p : float, default=2
        Exponent (> 0).
    normalize : bool, default=False
        Divide both bounds by ``(n + m - 1)^(1/p)``, as normalised NP is.
    matching : {"mutual", "argmax"}, default="mutual"
        Reading of ``B_notA`` (above).

    Returns
    -------
    (float, float)
        ``(L, U)``.

    Raises
    ------
    ValueError
        If ``W`` is not a non-empty 2-D array with entries in [0, 1], or ``p`` or
        ``matching`` is invalid.

    Examples
    --------
    >>> W = [[0.5, 0.1, 0.8], [0.7, 1.0, 0.1], [0.2, 0.8, 0.0]]  # the paper's example
    >>> [round(b, 3) for b in np_bounds(W)]
    [0.458, 1.473]
    >>> W = [[0.9, 0.8], [0.1, 0.2]]  # column 1 is row 1's argmax, but its maximum is 0.8
    >>> [round(np_bounds(W, matching=m)[1], 3) for m in ("mutual", "argmax")]
    [1.3, 1.628]
    """
    p = check_p(p)
    if matching not in MATCHINGS:
        raise ValueError(f"matching must be one of {MATCHINGS}, got {matching!r}")
    W = as_float_array(W, "W", ndim=2, min_value=0.0, max_value=1.0, dtype=np.float64)
    row_max = W.max(axis=1)
    col_max = W.max(axis=0)
    psi = (1.0 - row_max) ** p
    phi = (1.0 - col_max) ** p
    row_maximiser = W == row_max[:, None]
    if matching == "argmax":  # column b is a maximiser of some row
        matched = row_maximiser.any(axis=0)
    else:  # some maximiser of column b is also a maximiser of its row
        matched = (row_maximiser & (W == col_max[None, :])).any(axis=0)
    lower = (phi.sum() + psi.sum()) ** (1.0 / p)
    upper = (np.count_nonzero(matched) + phi[~matched].sum() + psi.sum()) ** (1.0 / p)
    if normalize:
        norm = (W.shape[0] + W.shape[1] - 1) ** (1.0 / p)
        lower, upper = lower / norm, upper / norm
    return float(lower), float(upper)


def _check_layers(layers: Any, name: str, *, non_negative: bool = False) -> list[np.ndarray]:
    """Validate a non-empty sequence of 2-D matrices, naming ``name[l]`` in errors."""
    if isinstance(layers, np.ndarray) and layers.ndim == 2:
        raise ValueError(f"{name} must be a sequence of 2-D matrices, got one 2-D array")
    try:
        items = list(layers)
    except TypeError:
        raise ValueError(
            f"{name} must be a sequence of 2-D matrices, got {type(layers).__name__}"
        ) from None
    if not items:
        raise ValueError(f"{name} must hold at least one matrix, got none")
    return [
        as_float_array(w, f"{name}[{i}]", ndim=2, min_value=0.0 if non_negative else None)
        for i, w in enumerate(items)
    ]
