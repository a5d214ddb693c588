"""Exact, fast persistence kernels: MST weights, NP, bounds, DGP, and per-sample TU/DGP/MAGDiff.

Three layers, as in giotto-tda: private numba kernels (``_kernels``) that only loop; public
functions here that validate their inputs and allocate outputs; the scikit-learn
transformers in :mod:`dgpbench.features.base` on top.

All matrices are in graph orientation: rows are input nodes, columns output nodes, i.e.
shape ``(n_in, n_out)`` = torch's ``Linear.weight.T``.
"""

from dgpbench.topology.activation import (
    dgp_representation,
    magdiff_representation,
    tu_representation,
)
from dgpbench.topology.dgp import deep_graph_persistence, standardize, summary_matrix
from dgpbench.topology.mst import mst_weights
from dgpbench.topology.persistence import (
    network_neural_persistence,
    neural_persistence,
    np_bounds,
)

__all__ = [
    "deep_graph_persistence",
    "dgp_representation",
    "magdiff_representation",
    "mst_weights",
    "network_neural_persistence",
    "neural_persistence",
    "np_bounds",
    "standardize",
    "summary_matrix",
    "tu_representation",
]
