"""NP and DGP of the static weights of many networks of one architecture, in one kernel call.

:func:`stacked_persistence` is what :func:`dgpbench.analysis.weights.layer_nps` and
:func:`deep_graph_persistence` compute for one network, for ``S`` networks whose weights
are stacked (``(S, n_l, n_{l+1})`` per layer, as :class:`dgpbench.models.stacked.StackedMLP`
holds them). The element-wise steps (absolute values, network maximum, per-layer
standardisation) run vectorised over the stack; every spanning tree -- one per network and
layer for NP, one of the summary matrix per network for DGP -- is then computed by one
parallel numba call over all ``S * (L + 1)`` trees. The trees consist of entries of the
matrices they are computed from, which are prepared with the same float operations as the
one-network functions, so the values agree with them to the rounding of the final sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dgpbench.threads import numba_threads
from dgpbench.topology._kernels import _stacked_trees
from dgpbench.topology.dgp import STD_EPS
from dgpbench.topology.persistence import check_p, np_from_tree

__all__ = ["stacked_persistence"]


def _check_stack(weights: Sequence[Any]) -> list[np.ndarray]:
    if len(weights) == 0:
        raise ValueError("weights must hold at least one stacked layer")
    mats = [np.asarray(w) for w in weights]
    for i, w in enumerate(mats):
        if w.ndim != 3 or w.size == 0:
            raise ValueError(f"weights[{i}] must have shape (S, n_in, n_out), got {w.shape}")
        if not np.issubdtype(w.dtype, np.floating) or not np.isfinite(w).all():
            raise ValueError(f"weights[{i}] must hold finite floats")
        if w.shape[0] != mats[0].shape[0]:
            raise ValueError(f"weights[{i}] stacks {w.shape[0]} networks, weights[0] {len(w)}")
        if i and w.shape[1] != mats[i - 1].shape[2]:
            raise ValueError(
                f"weights[{i}] has {w.shape[1]} inputs but weights[{i - 1}] {mats[i - 1].shape[2]}"
                " outputs: ragged layer shapes"
            )
    return mats


def stacked_persistence(
    weights: Sequence[Any], *, p: float = 2.0, dgp: bool = True, n_jobs: int | None = None
) -> dict[str, np.ndarray]:
    """Per-layer NP and DGP of ``S`` networks of one architecture.

    Parameters
    ----------
    weights : sequence of array-like
        Per linear map, the signed weights of every network, ``(S, n_l, n_{l+1})`` (graph
        orientation: rows are input nodes), chained.
    p : float, default=2
        Exponent of the persistence norm.
    dgp : bool, default=True
        Also compute DGP (per-layer standardisation, normalised).
    n_jobs : int, optional
        Numba threads (None: all).

    Returns
    -------
    dict of numpy.ndarray
        ``np_layers`` (S, L): normalised NP of each layer of the network-normalised weights
        ``|W| / max |W|`` (as :func:`dgpbench.analysis.weights.layer_nps`); ``np`` (S,):
        their mean; with ``dgp``, ``dgp`` (S,): as :func:`deep_graph_persistence` with
        ``standardize=True, normalize=True``.

    Raises
    ------
    ValueError
        On shapes that do not chain, different stack sizes, non-finite weights, a network
        whose weights are all zero, or a single-entry layer with ``dgp``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> out = stacked_persistence([rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 4, 2))])
    >>> out["np_layers"].shape, out["dgp"].shape
    ((3, 2), (3,))
    """
    p = check_p(p)
    mats = _check_stack(weights)
    n_nets, n_layers = mats[0].shape[0], len(mats)
    sizes = np.array([mats[0].shape[1]] + [w.shape[2] for w in mats], dtype=np.int64)
    w_off = np.concatenate([[0], np.cumsum([w[0].size for w in mats])]).astype(np.int64)
    t_off = np.concatenate([[0], np.cumsum(sizes[:-1] + sizes[1:] - 1)]).astype(np.int64)

    # NP: |W| / network max, in the weights' dtype (as normalised_weights)
    absw = [np.abs(w) for w in mats]
    top = np.max([a.reshape(n_nets, -1).max(axis=1) for a in absw], axis=0)
    if (top <= 0).any():
        raise ValueError(f"network {int(np.argmin(top))} has only zero weights: NP is undefined")
    scale = top.astype(absw[0].dtype)[:, None, None]
    G = np.concatenate([(a / scale).reshape(n_nets, -1) for a in absw], axis=1)

    dgp_out = np.zeros((n_nets, sizes[0] + sizes[-1] - 1), dtype=np.float64)
    if dgp:
        std_layers = []
        for i, w in enumerate(mats):
            if w[0].size < 2:
                raise ValueError(f"weights[{i}] needs at least 2 entries per network for DGP")
            w64 = w.astype(np.float64)
            mean = w64.mean(axis=(1, 2), keepdims=True)
            std = w64.std(axis=(1, 2), ddof=1, keepdims=True)
            # torch orientation (n_{l+1}, n_l), the layout of the summary kernel
            std_layers.append(np.abs((w64 - mean) / (std + STD_EPS)).transpose(0, 2, 1))
        dmax = np.max([s.reshape(n_nets, -1).max(axis=1) for s in std_layers], axis=0)
        dmax = np.where(dmax > 0, dmax, 1.0)[:, None, None]
        D = np.concatenate([(s / dmax).reshape(n_nets, -1) for s in std_layers], axis=1)
    else:
        D = np.zeros(1, dtype=np.float64)

    np_out = np.empty((n_nets, int(t_off[-1])), dtype=G.dtype)
    with numba_threads(n_jobs):
        _stacked_trees(
            np.ascontiguousarray(G).ravel(),
            np.ascontiguousarray(D).ravel(),
            w_off,
            sizes,
            t_off,
            dgp,
            np_out,
            dgp_out,
        )
    np_layers = np.stack(
        [np_from_tree(np_out[:, t_off[i] : t_off[i + 1]], p, True) for i in range(n_layers)],
        axis=1,
    )
    out = {"np_layers": np_layers, "np": np_layers.mean(axis=1)}
    if dgp:
        out["dgp"] = np.asarray(np_from_tree(dgp_out, p, True), dtype=np.float64)
    return out
