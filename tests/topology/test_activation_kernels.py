"""Per-sample TU, DGP, DGP-approximation and MAGDiff kernels against explicitly built
activation graphs, and where the compiled kernels live."""

from __future__ import annotations

import ast
import copy
import itertools
import tracemalloc
from pathlib import Path

import numba
import numpy as np
import pytest
import torch
from test_topology_oracles import (
    dgp_reference,
    dgp_unsorted_reference,
    explicit_graphs,
    kruskal_mst,
    prim_by_node,
    standardize_ref,
    summary_algorithm1,
    tu_reference,
)
from torch import nn

from dgpbench.threads import numba_threads, resolve_n_jobs
from dgpbench.topology import (
    dgp_approx_representation,
    dgp_representation,
    magdiff_representation,
    mst_weights,
    tu_representation,
)
from dgpbench.topology._kernels import _mst_by_node
from dgpbench.topology.graphs import MLPGraph


def _mlp(sizes, act=nn.ReLU, seed=0):
    gen = torch.Generator().manual_seed(seed)
    modules = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        lin = nn.Linear(a, b)
        with torch.no_grad():
            lin.weight.normal_(0, 1 / np.sqrt(a), generator=gen)
            lin.bias.uniform_(-0.3, 0.3, generator=gen)
        modules.append(lin)
        if i < len(sizes) - 2:
            modules.append(act())
    return MLPGraph.from_module(nn.Sequential(*modules))


def _inputs(rng, n_samples, n_inputs):
    X = rng.random((n_samples, n_inputs)).astype(np.float32)
    X[rng.random(X.shape) < 0.4] = 0.0  # image-like background
    X[0] = 0.0  # an all-zero sample
    X[1] = -X[1]  # negative inputs
    return X


NETS = {
    "relu4": ((9, 8, 7, 6, 3), nn.ReLU),
    "tanh2": ((6, 5, 4), nn.Tanh),
    "linear": ((7, 4), nn.ReLU),
    "bottleneck": ((5, 1, 6, 2), nn.ReLU),
    "medium": ((40, 30, 30, 10), nn.ReLU),
}


@pytest.fixture(scope="module", params=list(NETS))
def case(request):
    sizes, act = NETS[request.param]
    graph = _mlp(sizes, act, seed=len(request.param))
    X = _inputs(np.random.default_rng(sizes), 12, sizes[0])
    return graph, X, explicit_graphs(graph, X)


@pytest.mark.parametrize("standardize", [False, True])
def test_tu_matches_explicit_graphs(case, standardize):
    graph, X, graphs = case
    got = tu_representation(graph, X, standardize=standardize, batch_size=5)
    assert len(got) == graph.n_layers
    for layer, out in enumerate(got):
        n, m = graph.weights[layer].shape
        assert out.shape == (X.shape[0], n + m - 1) and out.dtype == np.float32
    for q, sample in enumerate(graphs):
        ref = tu_reference(sample, standardize)
        for layer, out in enumerate(got):
            if standardize:
                np.testing.assert_allclose(out[q], ref[layer], rtol=2e-5, atol=1e-5)
            else:  # products round exactly as in the explicit graph: bit-identical
                assert np.array_equal(out[q], ref[layer].astype(np.float32)), (q, layer)


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_dgp_matches_explicit_graphs(case, standardize, normalize):
    graph, X, graphs = case
    got = dgp_representation(graph, X, standardize=standardize, normalize=normalize, batch_size=5)
    assert got.shape == (X.shape[0], graph.n_inputs + graph.n_outputs - 1)
    assert got.dtype == np.float32
    for q, sample in enumerate(graphs):
        ref = dgp_reference(sample, standardize, normalize)
        if standardize:
            np.testing.assert_allclose(got[q], ref, rtol=2e-5, atol=1e-6)
        else:  # S selects entries; scaling by the max commutes exactly
            assert np.array_equal(got[q], ref.astype(np.float32)), q
    if normalize:
        assert got.max() <= 1.0


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_dgp_unsorted_matches_prim_in_node_order(case, standardize, normalize):
    """sort=False: per node, the weight of the edge that attached it (Prim from input 0)."""
    graph, X, graphs = case
    got = dgp_representation(
        graph, X, standardize=standardize, normalize=normalize, sort=False, batch_size=5
    )
    assert got.shape == (X.shape[0], graph.n_inputs + graph.n_outputs - 1)
    assert got.dtype == np.float32
    for q, sample in enumerate(graphs):
        ref = dgp_unsorted_reference(sample, standardize, normalize)
        if standardize:
            np.testing.assert_allclose(got[q], ref, rtol=2e-5, atol=1e-6)
        else:  # the same float32 entries and the same tie-breaking: bit-identical
            assert np.array_equal(got[q], ref), q
    # the same tree as the sorted representation: its weights, sorted, bit for bit
    ordered = dgp_representation(graph, X, standardize=standardize, normalize=normalize)
    assert np.array_equal(np.sort(got, axis=1)[:, ::-1], ordered)


@pytest.mark.parametrize("seed", range(8))
def test_mst_by_node_kernel_breaks_ties_like_the_oracle(seed):
    """Small integer matrices (many ties, whole rows equal): the kernel's node order is the
    plain Prim's, lowest node number first among equal keys."""
    rng = np.random.default_rng(seed)
    n, m = rng.integers(1, 300, size=2)  # beyond one key block (128) on either side
    W = rng.integers(0, 3, size=(n, m)).astype(np.float32)
    W[rng.random(n) < 0.3] = 1.0
    out = np.empty(n + m - 1, dtype=np.float32)
    _mst_by_node(np.ones(n, np.float32), W, np.ascontiguousarray(W.T), 0.0, 1.0, out)
    assert np.array_equal(out, prim_by_node(W))


def test_unsorted_dgp_sees_a_relabelling_of_the_pixels():
    """Permuting the input pixels together with the first layer's weights computes the same
    function: the sorted DGP stays (up to the forward pass's rounding), the node-ordered one
    moves with the pixels (only its multiset of weights stays)."""
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(12, 9), nn.ReLU(), nn.Linear(9, 7), nn.ReLU(), nn.Linear(7, 4))
    perm = np.random.default_rng(1).permutation(12)
    permuted = copy.deepcopy(module)
    with torch.no_grad():
        permuted[0].weight.copy_(module[0].weight[:, torch.from_numpy(perm)])
    X = np.random.default_rng(2).random((10, 12)).astype(np.float32)
    for standardize in (False, True):
        a, b = (
            dgp_representation(net, x, standardize=standardize, sort=False)
            for net, x in ((module, X), (permuted, X[:, perm]))
        )
        assert not np.allclose(a, b, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(np.sort(a, 1), np.sort(b, 1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            dgp_representation(module, X, standardize=standardize),
            dgp_representation(permuted, X[:, perm], standardize=standardize),
            rtol=1e-5,
            atol=1e-6,
        )


def test_magdiff_matches_explicit_graphs(case):
    graph, X, graphs = case
    got = magdiff_representation(graph, X, batch_size=5)
    n, m = graph.weights[-1].shape
    assert got.shape == (X.shape[0], n * m) and got.dtype == np.float32
    for q, sample in enumerate(graphs):
        assert np.array_equal(got[q], np.abs(sample[-1]).ravel())
    signed = magdiff_representation(graph, X, signed=True, batch_size=5)
    for q, sample in enumerate(graphs):
        assert np.array_equal(signed[q], sample[-1].ravel())


def test_explicit_reference_agrees_with_activation_graphs():
    graph = _mlp((9, 8, 7, 6, 3))
    X = _inputs(np.random.default_rng(0), 4, 9)
    for q, sample in enumerate(explicit_graphs(graph, X)):
        for G, ref in zip(graph.activation_graphs(X[q], signed=True), sample, strict=True):
            np.testing.assert_allclose(G, ref, rtol=1e-6, atol=1e-7)


def test_results_do_not_depend_on_batch_size_or_threads():
    graph = _mlp((30, 20, 20, 5))
    X = _inputs(np.random.default_rng(1), 23, 30)
    base_tu = tu_representation(graph, X, batch_size=256)
    base_dgp = dgp_representation(graph, X, batch_size=256)
    for kwargs in ({"batch_size": 4}, {"batch_size": 7, "n_jobs": 1}):
        for a, b in zip(base_tu, tu_representation(graph, X, **kwargs), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)
        np.testing.assert_allclose(dgp_representation(graph, X, **kwargs), base_dgp, rtol=1e-6)
    # Same chunks, fewer threads: the very same arithmetic.
    assert np.array_equal(dgp_representation(graph, X, n_jobs=1), base_dgp)


def test_accepts_torch_model_and_torch_tensor():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    graph = MLPGraph.from_module(net)
    X = torch.rand(6, 5)
    assert np.array_equal(dgp_representation(net, X), dgp_representation(graph, X.numpy()))
    assert np.array_equal(tu_representation(net, X)[1], tu_representation(graph, X)[1])
    assert np.array_equal(magdiff_representation(net, X), magdiff_representation(graph, X))
    assert np.array_equal(dgp_approx_representation(net, X), dgp_approx_representation(graph, X))


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_dgp_approx_is_the_row_and_column_maxima_of_the_summary_matrix(standardize, normalize):
    graph = _mlp((7, 6, 5, 3))
    X = _inputs(np.random.default_rng(3), 9, 7)
    got = dgp_approx_representation(
        graph, X, standardize=standardize, normalize=normalize, batch_size=4
    )
    assert got.shape == (9, 7 + 3) and got.dtype == np.float32
    for row, graphs in zip(got, explicit_graphs(graph, X), strict=True):
        mats = [np.abs(standardize_ref(G)) if standardize else np.abs(G) for G in graphs]
        S = summary_algorithm1(mats)
        ref = np.r_[S.max(axis=1), S.max(axis=0)]
        top = max(float(m.max()) for m in mats)
        if normalize and top > 0:
            ref = ref / top
        np.testing.assert_allclose(row, ref, rtol=2e-5, atol=1e-6)


def test_numba_kernels_live_in_the_kernels_module():
    """The persistence computations (dgpbench.features, dgpbench.topology) compile their
    loops in dgpbench/topology/_kernels.py only; the public modules wrap them."""
    root = Path(__file__).resolve().parents[1] / "dgpbench"
    allowed = {root / "topology" / "_kernels.py", root / "topology" / "_threads.py"}
    offenders = []
    for package in ("features", "topology"):
        for path in sorted((root / package).rglob("*.py")):
            if path in allowed:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                if any(n == "numba" or n.startswith("numba.") for n in names):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not offenders, f"numba used outside topology/_kernels.py: {offenders}"


def test_streams_without_materialising_graphs():
    # 2000 samples of a 200-100-100-10 MLP: all activation graphs together would be 250 MB.
    graph = _mlp((200, 100, 100, 10))
    X = _inputs(np.random.default_rng(2), 2000, 200)
    graph_bytes = X.shape[0] * sum(w.size for w in graph.weights) * 4
    dgp_representation(graph, X[:4])
    tu_representation(graph, X[:4])  # compile outside the measurement
    for func in (dgp_representation, tu_representation):
        tracemalloc.start()
        func(graph, X, batch_size=64)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < graph_bytes / 20, (func.__name__, peak, graph_bytes)


def test_thread_setting_is_scoped():
    before = numba.get_num_threads()
    graph = _mlp((6, 5, 4))
    tu_representation(graph, np.ones((3, 6)), n_jobs=1)
    assert numba.get_num_threads() == before
    with pytest.raises(RuntimeError), numba_threads(1):
        assert numba.get_num_threads() == 1
        raise RuntimeError
    assert numba.get_num_threads() == before


def test_nested_default_keeps_the_enclosing_thread_count():
    """n_jobs=None inside a scope (e.g. the CLI's --threads) must not widen it to all cores."""
    with numba_threads(1):
        assert resolve_n_jobs(None) == 1
        with numba_threads(None):
            assert numba.get_num_threads() == 1
        mst_weights(np.random.default_rng(0).random((3, 5, 4)))  # n_jobs=None inside
        assert numba.get_num_threads() == 1


def test_resolve_n_jobs():
    available = numba.config.NUMBA_NUM_THREADS
    assert resolve_n_jobs(None) == numba.get_num_threads() == available
    assert resolve_n_jobs(-1) == available
    assert resolve_n_jobs(1) == 1
    assert resolve_n_jobs(10_000) == available
    assert resolve_n_jobs(-10_000) == 1
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="n_jobs"):
            resolve_n_jobs(bad)


_REPRESENTATIONS = [
    tu_representation,
    dgp_representation,
    dgp_approx_representation,
    magdiff_representation,
]


@pytest.mark.parametrize(
    ("X", "kwargs", "exc", "match"),
    [
        (np.full((2, 6), np.nan), {}, ValueError, "X contains NaN"),
        (np.full((2, 6), np.inf), {}, ValueError, "X contains inf"),
        (np.ones((2, 5)), {}, ValueError, "X has 5 features per sample"),
        (np.ones(6), {}, ValueError, "X must have 2 dimensions"),
        (np.ones((0, 6)), {}, ValueError, "X must not be empty"),
        (np.ones((2, 6)), {"batch_size": 0}, ValueError, "batch_size"),
        (np.ones((2, 6)), {"batch_size": 2.5}, ValueError, "batch_size"),
        (np.ones((2, 6)), {"n_jobs": 0}, ValueError, "n_jobs"),
    ],
)
@pytest.mark.parametrize("func", _REPRESENTATIONS)
def test_bad_input(func, X, kwargs, exc, match):
    if func is magdiff_representation and "n_jobs" in kwargs:
        return
    with pytest.raises(exc, match=match):
        func(_mlp((6, 5, 4)), X, **kwargs)


@pytest.mark.parametrize("func", _REPRESENTATIONS)
def test_bad_graph(func):
    with pytest.raises(TypeError, match="graph must be"):
        func([np.ones((2, 2))], np.ones((1, 2)))
    with pytest.raises(TypeError, match=r"layer 1 \(Softmax\)"):
        func(nn.Sequential(nn.Linear(2, 2), nn.Softmax(dim=1)), np.ones((1, 2)))


@pytest.mark.parametrize("ddof", [0, 1])
def test_standardisation_ddof_matches_numpy(ddof):
    # TU (+ norm) divides by numpy's std (ddof 0), DGP by torch's unbiased std (ddof 1); a
    # 4-3-2 network has 12- and 6-edge layers, where the two differ by 4% and 9%.
    graph = _mlp((4, 3, 2))
    X = _inputs(np.random.default_rng(7), 6, 4)
    graphs = explicit_graphs(graph, X)
    tu = tu_representation(graph, X, standardize=True, ddof=ddof)
    dgp = dgp_representation(graph, X, ddof=ddof)
    differs = []
    for q, sample in enumerate(graphs):
        ref = tu_reference(sample, True, ddof)
        other = tu_reference(sample, True, 1 - ddof)
        for layer, out in enumerate(tu):
            np.testing.assert_allclose(out[q], ref[layer], rtol=2e-5, atol=1e-6)
            differs.append(not np.allclose(out[q], other[layer], rtol=1e-3, atol=0))
        mats = [np.abs(standardize_ref(G, ddof)) for G in sample]
        top = max(float(m.max()) for m in mats)
        expected = kruskal_mst(summary_algorithm1([m / top for m in mats]))
        np.testing.assert_allclose(dgp[q], expected, rtol=2e-5, atol=1e-6)
    assert sum(differs) >= len(differs) // 2  # all-zero graphs (dead ReLUs) agree
    # the defaults are the authors' choices
    np.testing.assert_array_equal(
        np.concatenate(tu_representation(graph, X, standardize=True), 1),
        np.concatenate(tu_representation(graph, X, standardize=True, ddof=0), 1),
    )
    np.testing.assert_array_equal(
        dgp_representation(graph, X), dgp_representation(graph, X, ddof=1)
    )
    with pytest.raises(ValueError, match="ddof must be 0 or 1"):
        tu_representation(graph, X, standardize=True, ddof=2)


def test_standardize_needs_two_edges_per_layer():
    graph = _mlp((3, 1, 1))
    with pytest.raises(ValueError, match="layer 1 of the graph has shape \\(1, 1\\)"):
        dgp_representation(graph, np.ones((2, 3)))
    with pytest.raises(ValueError, match="at least 2 edges"):
        tu_representation(graph, np.ones((2, 3)), standardize=True)
    assert dgp_representation(graph, np.ones((2, 3)), standardize=False).shape == (2, 3)
