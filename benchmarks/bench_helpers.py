"""Networks, inputs and straightforward baselines for the topology benchmarks.

Networks have random (Xavier-normal) weights: the kernels' cost does not depend on training,
only on the sizes and on how many activations are zero (which real MNIST images decide for
the first layer).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import minimum_spanning_tree
from torch import nn

from dgpbench.topology.graphs import MLPGraph

REPO = Path(__file__).resolve().parents[1]
RESULTS: list[dict] = []  # filled by the benchmarks, printed in the terminal summary


def make_mlp(sizes: tuple[int, ...], seed: int = 0) -> MLPGraph:
    """ReLU MLP with Xavier-normal weights (as dgpbench trains them) and small biases."""
    gen = torch.Generator().manual_seed(seed)
    modules: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        lin = nn.Linear(a, b)
        with torch.no_grad():
            nn.init.xavier_normal_(lin.weight, generator=gen)
            nn.init.uniform_(lin.bias, -(a**-0.5), a**-0.5, generator=gen)
        modules.append(lin)
        if i < len(sizes) - 2:
            modules.append(nn.ReLU())
    return MLPGraph.from_module(nn.Sequential(*modules))


def _mnist_root() -> Path | None:
    candidates = [os.environ.get("DGPBENCH_DATA_ROOT", ""), str(REPO.parent / "shared" / "data")]
    for root in candidates:
        if root and (Path(root) / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file():
            return Path(root)
    return None


def mnist_test_images(n: int) -> np.ndarray:
    """The first ``n`` MNIST test images, flattened, in [0, 1] (random sparse if absent)."""
    root = _mnist_root()
    if root is None:
        rng = np.random.default_rng(0)
        X = rng.random((n, 784)).astype(np.float32)
        X[rng.random(X.shape) < 0.8] = 0.0  # MNIST is ~80 % background
        return X
    raw = np.fromfile(root / "MNIST" / "raw" / "t10k-images-idx3-ubyte", dtype=np.uint8, offset=16)
    return (raw.reshape(-1, 784)[:n] / 255.0).astype(np.float32)


def uniform_images(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Dense inputs in [0, 1] (a CIFAR-10-like worst case: no zero pixels)."""
    return np.random.default_rng(seed).random((n, d)).astype(np.float32)


# -- baselines: explicit graphs + scipy, one sample at a time --------------------------------
def scipy_mst_weights(G: np.ndarray) -> np.ndarray:
    """Max spanning tree weights of a bipartite graph with scipy (sorted descending).

    scipy drops zero entries (no edge), so weights are flipped to ``top + 1 - G`` > 0 first;
    this is the usual workaround and is exact only up to rounding.
    """
    n, m = G.shape
    top = float(G.max()) + 1.0
    block = sp.coo_matrix(top - G.astype(np.float64))
    graph = sp.coo_matrix((block.data, (block.row, block.col + n)), shape=(n + m, n + m)).tocsr()
    tree = minimum_spanning_tree(graph)
    return np.sort(top - tree.data)[::-1]


def baseline_tu(graph: MLPGraph, x: np.ndarray) -> list[np.ndarray]:
    """TU of one sample: explicit |a W| per layer, scipy MST."""
    return [scipy_mst_weights(G) for G in graph.activation_graphs(x)]


def baseline_dgp(graph: MLPGraph, x: np.ndarray) -> np.ndarray:
    """DGP of one sample: explicit graphs, standardise, abs, global max, Algorithm 1, scipy."""
    mats = []
    for G in graph.activation_graphs(x, signed=True):
        G = G.astype(np.float64)
        mats.append(np.abs((G - G.mean()) / (G.std(ddof=1) + 1e-8)))
    top = max(m.max() for m in mats)
    mats = [m / top for m in mats][::-1]
    S = mats[0]
    for w in mats[1:]:
        S = np.minimum(S[None, :, :], w[:, :, None]).max(axis=1)
    return scipy_mst_weights(S)
