"""Straightforward reference implementations (oracles) for the topology kernels.

Other test files import these. They are deliberately naive: Kruskal with a union-find over
an explicit sorted edge list, networkx's maximum spanning tree, an exhaustive search over
all input-output paths, and activation graphs built explicitly sample by sample. The tests
in this file check the oracles against each other.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from dgpbench.topology.graphs import MLPGraph


def kruskal_mst(W: np.ndarray) -> np.ndarray:
    """Maximum spanning tree weights (descending, float64) by Kruskal on all n*m edges."""
    W = np.asarray(W, dtype=np.float64)
    n, m = W.shape
    edges = sorted(((W[i, j], i, n + j) for i in range(n) for j in range(m)), reverse=True)
    parent = list(range(n + m))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    out = []
    for w, u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[ru] = rv
            out.append(w)
    assert len(out) == n + m - 1
    return np.array(sorted(out, reverse=True))


def networkx_mst(W: np.ndarray) -> np.ndarray:
    """Maximum spanning tree weights (descending) with networkx; zero weights are edges."""
    W = np.asarray(W, dtype=np.float64)
    n, m = W.shape
    G = nx.Graph()
    G.add_nodes_from(range(n + m))
    for i in range(n):
        for j in range(m):
            G.add_edge(i, n + j, weight=W[i, j])
    T = nx.maximum_spanning_tree(G)
    return np.array(sorted((d["weight"] for _, _, d in T.edges(data=True)), reverse=True))


def prim_by_node(W: np.ndarray) -> np.ndarray:
    """Maximum spanning tree weights in node order, by a plain O(N^2) Prim from node 0.

    Nodes are the rows ``0..n-1`` of ``W`` then its columns ``n..n+m-1``; entry ``v - 1``
    of the result is the weight of the tree edge that attached node ``v``. Among equal keys
    the lowest node number joins first (``np.argmax`` takes the first maximum).
    """
    W = np.asarray(W)
    n, m = W.shape
    adj = np.full((n + m, n + m), -np.inf, dtype=W.dtype)
    adj[:n, n:] = W
    adj[n:, :n] = W.T
    key = adj[0].copy()
    in_tree = np.zeros(n + m, dtype=bool)
    in_tree[0] = True
    out = np.empty(n + m - 1, dtype=W.dtype)
    for _ in range(n + m - 1):
        v = int(np.argmax(np.where(in_tree, -np.inf, key)))
        out[v - 1] = key[v]
        in_tree[v] = True
        key = np.maximum(key, adj[v])
    return out


def summary_bruteforce(layers: list[np.ndarray]) -> np.ndarray:
    """S[i, k] = max over all paths i -> ... -> k of the minimum edge weight (exhaustive)."""
    sizes = [layers[0].shape[0]] + [w.shape[1] for w in layers]
    S = np.zeros((sizes[0], sizes[-1]))
    for i in range(sizes[0]):
        for k in range(sizes[-1]):
            best = -np.inf
            for middle in itertools.product(*(range(s) for s in sizes[1:-1])):
                path = (i, *middle, k)
                best = max(best, min(layers[h][path[h], path[h + 1]] for h in range(len(layers))))
            S[i, k] = best
    return S


def summary_algorithm1(layers: list[np.ndarray]) -> np.ndarray:
    """The paper's Algorithm 1, literally (numpy broadcasting)."""
    rev = [np.asarray(w) for w in layers][::-1]
    S = rev[0]
    for w in rev[1:]:
        S = np.minimum(S[None, :, :], w[:, :, None]).max(axis=1)
    return S


def standardize_ref(G: np.ndarray, ddof: int = 1) -> np.ndarray:
    """(G - mean) / (std + 1e-8) in float64; unbiased std (DGP) unless ``ddof=0`` (TU)."""
    G = np.asarray(G, dtype=np.float64)
    return (G - G.mean()) / (G.std(ddof=ddof) + 1e-8)


def explicit_graphs(graph: MLPGraph, X: np.ndarray) -> list[list[np.ndarray]]:
    """Signed float32 activation graphs a_l[i] * W_l[i, j] per sample, built explicitly."""
    inputs = graph.layer_inputs(X)
    return [
        [inputs[h][q][:, None] * graph.weights[h] for h in range(graph.n_layers)]
        for q in range(X.shape[0])
    ]


def tu_reference(graphs: list[np.ndarray], standardize: bool, ddof: int = 0) -> list[np.ndarray]:
    """Per layer, Kruskal MST weights of |G| or |standardise(G)| (numpy's std, as the
    authors' TU (+ norm))."""
    return [
        kruskal_mst(
            np.abs(standardize_ref(G, ddof)) if standardize else np.abs(G).astype(np.float64)
        )
        for G in graphs
    ]


def dgp_unsorted_reference(graphs: list[np.ndarray], standardize: bool, normalize: bool):
    """Standardise, abs, Algorithm 1, Prim in node order, divide by the global max.

    Dividing after the tree (as the kernel does) keeps ties exactly as the kernel sees them:
    rounding the division could make two distinct weights equal and change the order.
    """
    if standardize:
        mats = [np.abs(standardize_ref(G)) for G in graphs]
    else:
        mats = [np.abs(G) for G in graphs]  # float32, exactly as the kernels see them
    out = prim_by_node(summary_algorithm1(mats))
    top = max(float(m.max()) for m in mats)
    if normalize and top > 0:
        out = out / out.dtype.type(top)
    return out


def dgp_reference(graphs: list[np.ndarray], standardize: bool, normalize: bool) -> np.ndarray:
    """Standardise, abs, divide by the global max, Algorithm 1, Kruskal."""
    if standardize:
        mats = [np.abs(standardize_ref(G)) for G in graphs]
    else:
        mats = [np.abs(G) for G in graphs]  # float32, exactly as the kernels see them
    if normalize:
        top = max(float(m.max()) for m in mats)
        if top > 0:
            mats = [m / m.dtype.type(top) for m in mats]
    return kruskal_mst(summary_algorithm1(mats))


# -- the oracles agree with each other -------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_prim_by_node_is_a_maximum_spanning_tree_in_node_order(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(1, 7, size=2)
    W = rng.integers(0, 4, size=(n, m)).astype(float)  # small integers: many ties
    got = prim_by_node(W)
    np.testing.assert_array_equal(np.sort(got)[::-1], kruskal_mst(W))
    # every column node attaches through one of its own edges, and so does every row but 0
    for v in range(1, n + m):
        edges = W[v] if v < n else W[:, v - n]
        assert got[v - 1] in edges


@pytest.mark.parametrize("seed", range(6))
def test_kruskal_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(1, 9, size=2)
    W = rng.integers(0, 4, size=(n, m)) / 3.0  # heavy ties and zeros
    assert np.array_equal(kruskal_mst(W), networkx_mst(W))


@pytest.mark.parametrize("seed", range(6))
def test_algorithm1_matches_exhaustive_paths(seed):
    rng = np.random.default_rng(100 + seed)
    n_layers = int(rng.integers(1, 5))
    sizes = rng.integers(1, 5, size=n_layers + 1)
    layers = [rng.random((sizes[h], sizes[h + 1])) for h in range(n_layers)]
    assert np.array_equal(summary_algorithm1(layers), summary_bruteforce(layers))
