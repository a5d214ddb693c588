"""Static DGP: standardisation, the summary matrix S and deep graph persistence."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_topology_oracles import (
    kruskal_mst,
    standardize_ref,
    summary_algorithm1,
    summary_bruteforce,
)

from dgpbench.topology import (
    deep_graph_persistence,
    neural_persistence,
    standardize,
    summary_matrix,
)


def _random_layers(rng, sizes, kind="uniform"):
    layers = []
    for a, b in itertools.pairwise(sizes):
        if kind == "ties":
            layers.append(rng.integers(0, 3, size=(a, b)) / 2.0)
        else:
            w = rng.random((a, b))
            if kind == "zeros":
                w[rng.random((a, b)) < 0.5] = 0.0
            layers.append(w)
    return layers


@pytest.mark.parametrize(
    "sizes",
    [(1, 1), (3, 1), (1, 4), (4, 3), (3, 4, 2), (2, 3, 3, 2), (4, 1, 3, 2), (3, 2, 2, 2, 3)],
)
@pytest.mark.parametrize("kind", ["uniform", "zeros", "ties"])
def test_summary_matrix_equals_exhaustive_path_search(sizes, kind):
    rng = np.random.default_rng([len(sizes), *sizes])
    layers = _random_layers(rng, sizes, kind)
    S = summary_matrix(layers)
    assert S.shape == (sizes[0], sizes[-1])
    assert np.array_equal(S, summary_bruteforce(layers))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=2, max_size=5),
    st.integers(0, 2**32 - 1),
)
def test_property_summary_matrix(sizes, seed):
    rng = np.random.default_rng(seed)
    layers = _random_layers(rng, sizes, ["uniform", "zeros", "ties"][seed % 3])
    assert np.array_equal(summary_matrix(layers), summary_bruteforce(layers))


def test_summary_matrix_larger_network_matches_algorithm1():
    rng = np.random.default_rng(0)
    layers = _random_layers(rng, (37, 29, 41, 6), "zeros")
    assert np.array_equal(summary_matrix(layers), summary_algorithm1(layers))
    layers32 = [w.astype(np.float32) for w in layers]
    S32 = summary_matrix(layers32)
    assert S32.dtype == np.float32
    assert np.array_equal(S32, summary_algorithm1(layers32))


def test_summary_matrix_single_layer_is_identity():
    W = np.random.default_rng(1).random((5, 3))
    assert np.array_equal(summary_matrix([W]), W)


def test_standardize_matches_torch_unbiased_std():
    W = np.random.default_rng(2).normal(size=(13, 7)) * 3 + 1
    t = torch.from_numpy(W)
    expected = ((t - t.mean()) / (t.std() + 1e-8)).numpy()
    got = standardize(W)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    got32 = standardize(W.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expected, rtol=1e-5, atol=1e-5)


def test_standardize_constant_matrix_is_zero():
    assert np.array_equal(standardize(np.full((3, 4), 2.5)), np.zeros((3, 4)))


def _dgp_reference(weights, p=2.0, standardize_=True, normalize=True):
    mats = [
        standardize_ref(w) if standardize_ else np.asarray(w, dtype=np.float64) for w in weights
    ]
    mats = [np.abs(m) for m in mats]
    top = max(m.max() for m in mats)
    mats = [m / top for m in mats]
    tree = kruskal_mst(summary_bruteforce(mats))
    value = (1 + np.sum((1 - tree) ** p)) ** (1 / p)
    return value / tree.size ** (1 / p) if normalize else value


@pytest.mark.parametrize("standardize_", [True, False])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("p", [1.0, 2.0])
def test_dgp_matches_reference(standardize_, normalize, p):
    rng = np.random.default_rng(3)
    weights = [rng.normal(size=(5, 4)), rng.normal(size=(4, 3)), rng.normal(size=(3, 2))]
    got = deep_graph_persistence(weights, p=p, standardize=standardize_, normalize=normalize)
    assert got == pytest.approx(_dgp_reference(weights, p, standardize_, normalize), rel=1e-12)


def test_dgp_single_layer_equals_np_of_scaled_layer():
    W = np.random.default_rng(4).normal(size=(6, 5))
    Z = np.abs(standardize_ref(W))
    assert deep_graph_persistence([W]) == pytest.approx(neural_persistence(Z / Z.max()))


def test_dgp_is_scale_invariant():
    rng = np.random.default_rng(5)
    weights = [rng.normal(size=(6, 5)), rng.normal(size=(5, 3))]
    assert deep_graph_persistence(weights) == pytest.approx(
        deep_graph_persistence([w * 10 for w in weights])
    )


def test_dgp_all_zero_network_is_defined():
    # Constant layers standardise to 0: S = 0, every persistence is 1.
    value = deep_graph_persistence([np.ones((3, 2)), np.ones((2, 2))], normalize=False)
    assert value == pytest.approx(np.sqrt(1 + 4))


@pytest.mark.parametrize(
    ("layers", "match"),
    [
        ([], "layers must hold at least one matrix"),
        ([np.ones((2, 3)), np.ones((2, 2))], r"layers\[1\] has shape \(2, 2\).*ragged"),
        ([np.ones((2, 3)), -np.ones((3, 2))], r"layers\[1\] must be >= 0"),
        ([np.ones((2, 3)), np.full((3, 2), np.nan)], r"layers\[1\] contains NaN"),
        ([np.ones(3)], r"layers\[0\] must have 2 dimensions"),
        ([np.ones((0, 2))], r"layers\[0\] must not be empty"),
    ],
)
def test_summary_matrix_bad_input(layers, match):
    with pytest.raises(ValueError, match=match):
        summary_matrix(layers)


@pytest.mark.parametrize(
    ("weights", "kwargs", "match"),
    [
        ([np.ones((2, 3)), np.ones((4, 2))], {}, r"weights\[1\].*ragged"),
        ([np.ones((1, 1))], {}, r"weights\[0\] needs at least 2 entries"),
        ([np.ones((2, 3))], {"p": 0}, "p must be"),
        ([[[np.inf, 1.0]]], {}, r"weights\[0\] contains inf"),
    ],
)
def test_dgp_bad_input(weights, kwargs, match):
    with pytest.raises(ValueError, match=match):
        deep_graph_persistence(weights, **kwargs)


@pytest.mark.parametrize(
    ("W", "match"),
    [
        ([[1.0]], "at least 2 entries"),
        ([1.0, 2.0], "W must have 2 dimensions"),
        ([[np.nan, 1]], "NaN"),
    ],
)
def test_standardize_bad_input(W, match):
    with pytest.raises(ValueError, match=match):
        standardize(W)
