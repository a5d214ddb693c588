"""The DGP authors' cheap variant ``dgp_approximate``: row and column maxima of S(x).

Their code (``witness_functions.dnp_witness_function(..., approximate=True)``, with
``get_approximate_mst_weights_from_bipartite_graph``) replaces the maximum spanning tree of
the summary matrix ``S(x)`` by the concatenation of its row maxima (one per input node) and
its column maxima (one per output node): ``n_inputs + n_outputs`` values, in node order.
Every tree edge is the largest edge at one of its ends, so these are the candidate tree
weights without the spanning-tree step. Their registered ``dgp_approximate`` neither
standardises the activation graphs nor normalises them (``variance_correction=False,
normalize=False``): those are the defaults here; both options are available.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit, prange

from dgpbench.features.base import _SummaryFeatures
from dgpbench.topology._kernels import _global_max, _summary_t
from dgpbench.topology.activation import _summary_rows

__all__ = ["DGPApproxFeatures", "dgp_approx_representation"]


@njit(cache=True, parallel=True)
def _dgp_approx_batch(A, a_off, WT, w_off, sizes, wmax, wmin, mu, s, scale_by_max, out):
    """Row maxima then column maxima of S(x) per sample into ``out`` (N, n0 + n_out)."""
    n0 = sizes[0]
    n_out = sizes[sizes.shape[0] - 1]
    for q in prange(A.shape[0]):
        a = A[q]
        st = np.empty((n_out, n0), dtype=A.dtype)  # S transposed: st[k, i] = S[i, k]
        _summary_t(a, a_off, WT, w_off, sizes, mu[q], s[q], st)
        res = out[q]
        for i in range(n0):
            best = st[0, i]
            for k in range(1, n_out):
                best = max(best, st[k, i])
            res[i] = best
        for k in range(n_out):
            best = st[k, 0]
            for i in range(1, n0):
                best = max(best, st[k, i])
            res[n0 + k] = best
        if scale_by_max:
            gmax = _global_max(a, a_off, wmax, wmin, mu[q], s[q])
            if gmax > 0:
                g = A.dtype.type(gmax)
                for t in range(n0 + n_out):
                    res[t] = res[t] / g


def dgp_approx_representation(
    graph: Any,
    X: np.ndarray,
    *,
    standardize: bool = False,
    normalize: bool = False,
    batch_size: int = 256,
    n_jobs: int | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Row and column maxima of every sample's DGP summary matrix ``S(x)``.

    Parameters
    ----------
    graph : MLPGraph
        The network's MLP part.
    X : ndarray of shape (n_samples, n_inputs)
        Inputs of the MLP part (float32).
    standardize, normalize : bool, default=False
        As in :func:`dgpbench.topology.dgp_representation` (ddof 1).
    batch_size : int, default=256
        Samples per chunk.
    n_jobs : int or None
        Numba threads for this call.
    progress : bool, default=False
        tqdm bar over chunks.

    Returns
    -------
    ndarray of shape (n_samples, n_inputs + n_outputs)
        float32: ``max_k S[i, k]`` for every input ``i``, then ``max_i S[i, k]`` for every
        output ``k``.
    """
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


class DGPApproxFeatures(_SummaryFeatures):
    """The DGP authors' ``dgp_approximate``: row/column maxima of S(x) instead of its MST.

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP, a network ending in one, a ``(body, head)`` pair, or a checkpoint.
    standardize : bool, default=False
        Standardise each signed layer graph first (the authors' approximate variant does
        not; their ``dgp_var_approximate`` does).
    normalize : bool, default=False
        Divide by the sample's largest graph weight.
    representation : {"distances", "raw"}, default="distances"
        Distances to the class means (the protocol's features) or the raw maxima.
    head : sequence of str, optional
        The head's ``nn.Linear`` modules by name (e.g. ``("fc1", "fc2")``), for a network
        with its own ``forward``; by default the trailing chain of linear maps, found with
        forward hooks and verified on the reference images (see
        :func:`dgpbench.models.body_head.find_head`).
    batch_size, n_jobs, progress, device
        As for :class:`dgpbench.features.dgp.DGPFeatures`.

    Attributes
    ----------
    graph_, input_shape_, body_, classes_, n_features_in_
        As for :class:`dgpbench.features.dgp.DGPFeatures`.
    class_means_ : list of one ndarray of shape (n_classes, n_inputs + n_outputs)
        Mean raw representation per class.

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X, y = torch.rand(30, 4).numpy(), [0, 1, 2] * 10
    >>> DGPApproxFeatures(model, representation="raw").fit(X, y).transform(X).shape
    (30, 7)
    """

    _prefix = "dgp_approx"
    _summary = staticmethod(dgp_approx_representation)

    def __init__(
        self,
        model: Any = None,
        *,
        standardize: bool = False,
        normalize: bool = False,
        representation: str = "distances",
        head: Sequence[str] | None = None,
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        super().__init__(
            model,
            representation=representation,
            batch_size=batch_size,
            n_jobs=n_jobs,
            progress=progress,
            device=device,
        )
        self.head = head
        self.standardize = standardize
        self.normalize = normalize
