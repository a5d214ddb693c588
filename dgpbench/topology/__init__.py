"""Exact, fast persistence kernels: MST weights, NP, bounds, DGP, per-sample TU/DGP/MAGDiff.

Three layers, as in giotto-tda: private numba kernels (``_kernels``) that only loop; public
functions here that validate their inputs and allocate outputs; the scikit-learn
transformers in :mod:`dgpbench.features.base` on top.

All matrices are in graph orientation: rows are input nodes, columns output nodes, i.e.
shape ``(n_in, n_out)`` = torch's ``Linear.weight.T``.
"""

from dgpbench._lazy import lazy_exports

# Lazy (PEP 562): importing dgpbench.topology.graphs, as every network does, must not
# compile-load the numba kernels a softmax detector never runs.
_EXPORTS = {
    "deep_graph_persistence": "dgpbench.topology.dgp",
    "dgp_approx_representation": "dgpbench.topology.activation",
    "dgp_representation": "dgpbench.topology.activation",
    "magdiff_representation": "dgpbench.topology.activation",
    "mst_weights": "dgpbench.topology.mst",
    "network_neural_persistence": "dgpbench.topology.persistence",
    "neural_persistence": "dgpbench.topology.persistence",
    "np_bounds": "dgpbench.topology.persistence",
    "standardize": "dgpbench.topology.dgp",
    "summary_matrix": "dgpbench.topology.dgp",
    "tu_representation": "dgpbench.topology.activation",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.topology", _EXPORTS)
