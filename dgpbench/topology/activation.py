"""Per-sample raw representations of a trained MLP: TU, DGP, its approximation and MAGDiff.

All of them read the *activation graph* of a sample (Definition 5.2): for linear map ``l``
with input ``a_l`` and weights ``W_l`` (graph orientation ``(n_l, n_{l+1})``), edge
``(i, j)`` weighs ``|a_l[i] * W_l[i, j]|``. The kernels form these weights on the fly,
sample by sample, in parallel over the samples of a chunk; a batch of graphs is never
materialised (one 784-650 graph alone is 2 MB).

Standardising the *signed* graph ``G = a_l[:, None] * W_l`` needs its mean and standard
deviation; both have closed forms, computed in float64 per chunk:
``sum G = a_l . rowsum(W_l)`` and ``sum G^2 = a_l^2 . rowsum(W_l^2)``. As in the authors'
code, DGP divides by the unbiased standard deviation (torch's ``std()``, ``ddof=1``) and
"TU (+ norm)" by the population one (numpy's ``std()``, ``ddof=0``), each plus 1e-8.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from dgpbench._validation import check_int
from dgpbench.threads import numba_threads
from dgpbench.topology._kernels import (
    _dgp_approx_batch,
    _dgp_batch,
    _dgp_batch_unsorted,
    _tu_batch,
)
from dgpbench.topology.dgp import STD_EPS
from dgpbench.topology.graphs import MLPGraph

log = logging.getLogger(__name__)

__all__ = [
    "dgp_approx_representation",
    "dgp_representation",
    "magdiff_representation",
    "tu_representation",
]


@dataclass(frozen=True)
class _Packed:
    """A graph's weights in the flat layout the kernels read (built once per graph)."""

    sizes: np.ndarray  # (L + 1,) int64 node counts
    a_off: np.ndarray  # (L + 1,) offsets of each layer's input in a concatenated sample
    w_off: np.ndarray  # (L + 1,) offsets of each layer in W / WT
    W: np.ndarray  # flat float32, graph orientation (n_l, n_{l+1}) per layer
    WT: np.ndarray  # flat float32, torch orientation (n_{l+1}, n_l) per layer
    wmax: np.ndarray  # flat float32 (sum n_l,): row maxima of each W_l
    wmin: np.ndarray  # flat float32: row minima
    rowsum: tuple[np.ndarray, ...]  # float64 (n_l,): row sums of W_l
    rowsq: tuple[np.ndarray, ...]  # float64 (n_l,): row sums of W_l ** 2
    o_off: np.ndarray  # (L + 1,) offsets of each layer's TU block (n_l + n_{l+1} - 1)


_PACKED: weakref.WeakKeyDictionary[MLPGraph, _Packed] = weakref.WeakKeyDictionary()


def _packed(graph: MLPGraph) -> _Packed:
    cached = _PACKED.get(graph)
    if cached is not None:
        return cached
    sizes = np.array(graph.layer_sizes, dtype=np.int64)
    ws = graph.weights
    packed = _Packed(
        sizes=sizes,
        a_off=np.concatenate([[0], np.cumsum(sizes[:-1])]).astype(np.int64),
        w_off=np.concatenate([[0], np.cumsum([w.size for w in ws])]).astype(np.int64),
        W=np.concatenate([w.ravel() for w in ws]),
        WT=np.concatenate([wt.ravel() for wt in graph.weights_t]),
        wmax=np.concatenate([w.max(axis=1) for w in ws]),
        wmin=np.concatenate([w.min(axis=1) for w in ws]),
        rowsum=tuple(w.astype(np.float64).sum(axis=1) for w in ws),
        rowsq=tuple((w.astype(np.float64) ** 2).sum(axis=1) for w in ws),
        o_off=np.concatenate([[0], np.cumsum(sizes[:-1] + sizes[1:] - 1)]).astype(np.int64),
    )
    _PACKED[graph] = packed
    return packed


def _as_graph(graph: Any) -> MLPGraph:
    if isinstance(graph, MLPGraph):
        return graph
    try:
        from torch import nn
    except ImportError:  # pragma: no cover - torch is a hard dependency
        nn = None
    if nn is not None and isinstance(graph, nn.Module):
        return MLPGraph.from_module(graph)
    raise TypeError(
        f"graph must be an MLPGraph or a torch nn.Sequential, got {type(graph).__name__}"
    )


def _check_standardizable(graph: MLPGraph) -> None:
    for i, w in enumerate(graph.weights):
        if w.size < 2:
            raise ValueError(
                f"standardize=True needs at least 2 edges per layer; layer {i} of the graph "
                f"has shape {w.shape}"
            )


def _chunks(X: np.ndarray, batch_size: int, progress: bool, desc: str) -> Iterator[tuple[int, int]]:
    n = X.shape[0]
    starts = range(0, n, batch_size)
    bar = tqdm(starts, desc=desc, unit="chunk", disable=None if progress else True)
    for start in bar:
        yield start, min(start + batch_size, n)


def _check_ddof(ddof: Any) -> int:
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 or 1, got {ddof!r}")
    return int(ddof)


def _standardisation(
    inputs: list[np.ndarray], packed: _Packed, standardize: bool, ddof: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample, per-layer ``mu`` and ``s = 1 / (std + 1e-8)`` of the signed graphs.

    ``std`` divides the sum of squared deviations by ``count - ddof``.
    """
    n_samples = inputs[0].shape[0]
    n_layers = len(inputs)
    mu = np.zeros((n_samples, n_layers), dtype=np.float32)
    s = np.ones((n_samples, n_layers), dtype=np.float32)
    if not standardize:
        return mu, s
    sizes = packed.sizes
    for layer, a in enumerate(inputs):
        count = float(sizes[layer] * sizes[layer + 1])
        a64 = a.astype(np.float64)
        total = a64 @ packed.rowsum[layer]
        total_sq = (a64 * a64) @ packed.rowsq[layer]
        mean = total / count
        var = np.maximum(total_sq - total * mean, 0.0) / (count - ddof)
        mu[:, layer] = mean
        s[:, layer] = 1.0 / (np.sqrt(var) + STD_EPS)
    return mu, s


def _prepare(graph: Any, X: Any) -> tuple[MLPGraph, np.ndarray]:
    graph = _as_graph(graph)
    X = graph._check_batch(X, "X")
    return graph, X


def _graph_chunks(
    graph: MLPGraph,
    X: np.ndarray,
    packed: _Packed,
    *,
    standardize: bool,
    ddof: int,
    batch_size: int,
    progress: bool,
    desc: str,
) -> Iterator[tuple[slice, np.ndarray, np.ndarray, np.ndarray]]:
    """The kernels' inputs, chunk by chunk: ``(rows, A, mu, s)``.

    ``rows`` selects the chunk's samples, ``A`` holds every layer's input activations side by
    side (C-contiguous) and ``mu, s`` their standardisation (:func:`_standardisation`).
    """
    for start, stop in _chunks(X, batch_size, progress, desc):
        inputs = graph._forward(X[start:stop], keep_inputs=True)[0]
        mu, s = _standardisation(inputs, packed, standardize, ddof)
        yield slice(start, stop), np.ascontiguousarray(np.concatenate(inputs, axis=1)), mu, s


def tu_representation(
    graph: MLPGraph,
    X: Any,
    *,
    standardize: bool = False,
    ddof: int = 0,
    batch_size: int = 256,
    n_jobs: int | None = None,
    progress: bool = False,
) -> list[np.ndarray]:
    """Topological Uncertainty raw representation: per layer, sorted MST weights.

    For every sample and linear map ``l``, the ``n_l + n_{l+1} - 1`` weights of a maximum
    spanning tree of the activation graph ``|a_l[i] W_l[i, j]|``, in descending order
    (Lacombe et al. 2021). Input nodes with activation 0 form zero rows; they are handled in
    closed form (one 0 each), which makes ReLU networks and image backgrounds cheap.

    Parameters
    ----------
    graph : MLPGraph or torch.nn.Sequential
        The trained network.
    X : array-like of shape (n_samples, n_inputs)
        Flattened samples.
    standardize : bool, default=False
        Standardise each signed graph first, ``(G - mean) / (std + 1e-8)`` ("TU (+ norm)").
    ddof : {0, 1}, default=0
        Delta degrees of freedom of that ``std``: 0 (numpy's ``std()``) as in the authors'
        TU (+ norm); 1 is DGP's unbiased one.
    batch_size : int, default=256
        Samples per chunk (forward pass and kernel call); bounds the working memory.
    n_jobs : int, optional
        Numba threads (None: all), set for this call only.
    progress : bool, default=False
        Show a tqdm bar over chunks (only on a terminal).

    Returns
    -------
    list of ndarray
        One float32 array of shape ``(n_samples, n_l + n_{l+1} - 1)`` per linear map.

    Raises
    ------
    ValueError
        On a wrong shape or NaN/inf in ``X``, a bad ``batch_size``/``n_jobs``/``ddof``, or
        ``standardize`` with a single-edge layer.
    TypeError
        If ``graph`` is neither an MLPGraph nor a supported torch model.
    """
    graph, X = _prepare(graph, X)
    batch_size = check_int(batch_size, "batch_size")
    ddof = _check_ddof(ddof)
    if standardize:
        _check_standardizable(graph)
    packed = _packed(graph)
    sizes = packed.sizes
    n = X.shape[0]
    outs = [
        np.empty((n, sizes[i] + sizes[i + 1] - 1), dtype=np.float32) for i in range(len(sizes) - 1)
    ]
    log.debug("TU representation of %d samples, layers %s", n, graph.layer_sizes)
    chunks = _graph_chunks(
        graph,
        X,
        packed,
        standardize=standardize,
        ddof=ddof,
        batch_size=batch_size,
        progress=progress,
        desc="TU",
    )
    with numba_threads(n_jobs):
        for rows, A, mu, s in chunks:
            tmp = np.empty((A.shape[0], packed.o_off[-1]), dtype=np.float32)
            skip_zero_rows = not standardize  # zero rows are only zero when mu == 0
            _tu_batch(
                A,
                packed.a_off,
                packed.W,
                packed.WT,
                packed.w_off,
                sizes,
                mu,
                s,
                skip_zero_rows,
                tmp,
                packed.o_off,
            )
            for i, out in enumerate(outs):
                out[rows] = tmp[:, packed.o_off[i] : packed.o_off[i + 1]]
    return outs


def dgp_representation(
    graph: MLPGraph,
    X: Any,
    *,
    standardize: bool = True,
    normalize: bool = True,
    sort: bool = True,
    ddof: int = 1,
    batch_size: int = 256,
    n_jobs: int | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Sample-weighted DGP raw representation: sorted MST weights of the summary matrix S(x).

    Per sample: standardise each signed activation graph (optional), take absolute values,
    divide by the sample's largest value over all layers (optional), build the summary
    matrix ``S(x)`` (max-min paths from inputs to outputs, Algorithm 1) and return the
    ``n_inputs + n_outputs - 1`` MST weights of ``S(x)`` in descending order
    (Definitions 5.2-5.3 of the paper), or in node order (``sort=False``).

    **Node order** (the ablation "DGP (- sort)"). The nodes of the bipartite graph of
    ``S(x)`` are numbered inputs ``0..n_inputs-1``, then outputs
    ``n_inputs..n_inputs+n_outputs-1``. Prim's algorithm started from node 0 attaches every
    other node ``v`` to the tree by exactly one tree edge; column ``v - 1`` of the result is
    that edge's weight, for ``v = 1..n_inputs+n_outputs-1``. Among equal keys Prim takes the
    lowest node number first, so the result is deterministic. Its sorted rows are the
    default (sorted) rows: the same tree, so the same multiset of weights.

    Parameters
    ----------
    graph : MLPGraph or torch.nn.Sequential
        The trained network.
    X : array-like of shape (n_samples, n_inputs)
        Flattened samples.
    standardize : bool, default=True
        Standardise each signed layer graph, ``(G - mean) / (std + 1e-8)`` with the
        unbiased std; False gives "DGP (- norm)".
    normalize : bool, default=True
        Divide by the sample's global maximum (a sample whose graphs are all zero stays 0).
    sort : bool, default=True
        Sort the tree weights in descending order (the paper's DGP, invariant to a
        relabelling of the nodes); False gives them in node order (see above), which keeps
        which pixel and which class each weight belongs to.
    ddof : {0, 1}, default=1
        Delta degrees of freedom of the standardisation's ``std``: 1 (torch's unbiased
        ``std()``) as in the authors' DGP.
    batch_size : int, default=256
        Samples per chunk.
    n_jobs : int, optional
        Numba threads (None: all), set for this call only.
    progress : bool, default=False
        Show a tqdm bar over chunks (only on a terminal).

    Returns
    -------
    ndarray of shape (n_samples, n_inputs + n_outputs - 1)
        float32.

    Raises
    ------
    ValueError
        On a wrong shape or NaN/inf in ``X``, a bad ``batch_size``/``n_jobs``/``ddof``, or
        ``standardize`` with a single-edge layer.
    TypeError
        If ``graph`` is neither an MLPGraph nor a supported torch model.
    """
    graph, X = _prepare(graph, X)
    batch_size = check_int(batch_size, "batch_size")
    ddof = _check_ddof(ddof)
    log.debug("DGP representation of %d samples, layers %s", X.shape[0], graph.layer_sizes)
    return _summary_rows(
        _dgp_batch if sort else _dgp_batch_unsorted,
        graph,
        X,
        graph.n_inputs + graph.n_outputs - 1,
        standardize=standardize,
        normalize=normalize,
        ddof=ddof,
        batch_size=batch_size,
        n_jobs=n_jobs,
        progress=progress,
        desc="DGP",
    )


def dgp_approx_representation(
    graph: MLPGraph,
    X: Any,
    *,
    standardize: bool = False,
    normalize: bool = False,
    batch_size: int = 256,
    n_jobs: int | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Row and column maxima of every sample's DGP summary matrix ``S(x)``.

    The DGP authors' cheap variant ``dgp_approximate``: their code
    (``witness_functions.dnp_witness_function(..., approximate=True)``, with
    ``get_approximate_mst_weights_from_bipartite_graph``) replaces the maximum spanning tree
    of ``S(x)`` by the concatenation of its row maxima (one per input node) and its column
    maxima (one per output node), in node order. Every tree edge is the largest edge at one
    of its ends, so these are the candidate tree weights without the spanning-tree step.
    Their registered ``dgp_approximate`` neither standardises the activation graphs nor
    normalises them (``variance_correction=False, normalize=False``): those are the defaults.

    Parameters
    ----------
    graph : MLPGraph or torch.nn.Sequential
        The trained network.
    X : array-like of shape (n_samples, n_inputs)
        Flattened samples.
    standardize, normalize : bool, default=False
        As in :func:`dgp_representation` (``ddof=1``).
    batch_size : int, default=256
        Samples per chunk.
    n_jobs : int, optional
        Numba threads (None: all), set for this call only.
    progress : bool, default=False
        Show a tqdm bar over chunks (only on a terminal).

    Returns
    -------
    ndarray of shape (n_samples, n_inputs + n_outputs)
        float32: ``max_k S[i, k]`` for every input ``i``, then ``max_i S[i, k]`` for every
        output ``k``.

    Raises
    ------
    ValueError
        On a wrong shape or NaN/inf in ``X``, a bad ``batch_size``/``n_jobs``, or
        ``standardize`` with a single-edge layer.
    TypeError
        If ``graph`` is neither an MLPGraph nor a supported torch model.
    """
    graph, X = _prepare(graph, X)
    batch_size = check_int(batch_size, "batch_size")
    return _summary_rows(
        _dgp_approx_batch,
        graph,
        X,
        graph.n_inputs + graph.n_outputs,
        standardize=standardize,
        normalize=normalize,
        ddof=1,
        batch_size=batch_size,
        n_jobs=n_jobs,
        progress=progress,
        desc="DGP approx",
    )


def _summary_rows(
    kernel: Any,
    graph: MLPGraph,
    X: np.ndarray,
    width: int,
    *,
    standardize: bool,
    normalize: bool,
    ddof: int,
    batch_size: int,
    n_jobs: int | None,
    progress: bool,
    desc: str,
) -> np.ndarray:
    """Run a per-sample kernel on the summary matrix S(x), chunk by chunk.

    ``kernel`` has :func:`~dgpbench.topology._kernels._dgp_batch`'s signature and writes
    ``width`` float32 values per sample: the MST weights for DGP, the row and column maxima
    for :func:`dgp_approx_representation`. ``X`` is already checked.
    """
    if standardize:
        _check_standardizable(graph)
    packed = _packed(graph)
    out = np.empty((X.shape[0], width), dtype=np.float32)
    chunks = _graph_chunks(
        graph,
        X,
        packed,
        standardize=standardize,
        ddof=ddof,
        batch_size=batch_size,
        progress=progress,
        desc=desc,
    )
    with numba_threads(n_jobs):
        for rows, A, mu, s in chunks:
            kernel(
                A,
                packed.a_off,
                packed.WT,
                packed.w_off,
                packed.sizes,
                packed.wmax,
                packed.wmin,
                mu,
                s,
                bool(normalize),
                out[rows],
            )
    return out


def magdiff_representation(
    graph: MLPGraph, X: Any, *, signed: bool = False, batch_size: int = 256
) -> np.ndarray:
    """MAGDiff raw representation: the last layer's activation graph, flattened.

    Parameters
    ----------
    graph : MLPGraph or torch.nn.Sequential
        The trained network.
    X : array-like of shape (n_samples, n_inputs)
        Flattened samples.
    signed : bool, default=False
        Keep the signed graph ``a_{L-1}[i] * W_{L-1}[i, j]`` (the authors' code) instead of
        its absolute value. When the last layer's input is non-negative (ReLU networks),
        the two differ by a fixed sign per coordinate, so their distances to class means
        are equal; with tanh they differ.
    batch_size : int, default=256
        Samples per chunk.

    Returns
    -------
    ndarray of shape (n_samples, n_{L-1} * n_outputs)
        float32, row-major flatten of ``|a_{L-1}[i] * W_{L-1}[i, j]|`` (or the signed
        product).

    Raises
    ------
    ValueError
        On a wrong shape or NaN/inf in ``X`` or a bad ``batch_size``.
    TypeError
        If ``graph`` is neither an MLPGraph nor a supported torch model.
    """
    graph, X = _prepare(graph, X)
    batch_size = check_int(batch_size, "batch_size")
    w = graph.weights[-1]
    out = np.empty((X.shape[0], w.size), dtype=np.float32)
    for start, stop in _chunks(X, batch_size, False, "MAGDiff"):
        a = graph._forward(X[start:stop], keep_inputs=True)[0][-1]
        block = out[start:stop].reshape(-1, *w.shape)
        np.multiply(a[:, :, None], w[None, :, :], out=block)
        if not signed:
            np.abs(block, out=block)
    return out
