"""mst_weights: exact maximum spanning tree weights against Kruskal/networkx oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from test_topology_oracles import kruskal_mst, networkx_mst

from dgpbench.topology import mst_weights


def _random_matrix(rng: np.random.Generator, n: int, m: int, kind: str) -> np.ndarray:
    if kind == "uniform":
        return rng.random((n, m))
    if kind == "zeros":  # sparse, like ReLU activation graphs
        W = rng.random((n, m))
        W[rng.random((n, m)) < 0.6] = 0.0
        W[rng.random(n) < 0.3, :] = 0.0  # whole zero rows
        return W
    if kind == "ties":
        return rng.integers(0, 3, size=(n, m)) / 2.0
    if kind == "equal":
        return np.full((n, m), 0.25)
    if kind == "all_zero":
        return np.zeros((n, m))
    if kind == "wide_range":
        return rng.random((n, m)) ** 8 * 1e3
    raise AssertionError(kind)


KINDS = ["uniform", "zeros", "ties", "equal", "all_zero", "wide_range"]
SHAPES = [(1, 1), (1, 7), (9, 1), (2, 2), (3, 5), (13, 4), (1, 60), (60, 1), (31, 60), (60, 60)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", KINDS)
def test_matches_kruskal_exactly(shape, kind):
    rng = np.random.default_rng([SHAPES.index(shape), KINDS.index(kind)])
    W = _random_matrix(rng, *shape, kind)
    got = mst_weights(W)
    assert got.dtype == np.float64
    assert got.shape == (shape[0] + shape[1] - 1,)
    assert np.array_equal(got, kruskal_mst(W))


@pytest.mark.parametrize("seed", range(4))
def test_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    W = _random_matrix(rng, 12, 9, KINDS[seed])
    assert np.array_equal(mst_weights(W), networkx_mst(W))


def test_paper_example():
    W = [[0.5, 0.1, 0.8], [0.7, 1.0, 0.1], [0.2, 0.8, 0.0]]
    # The bold entries of the paper's Table (appendix): the MST of this matrix.
    assert np.array_equal(mst_weights(W), [1.0, 0.8, 0.8, 0.7, 0.5])


@pytest.mark.parametrize("kind", ["uniform", "zeros", "ties"])
def test_float32_and_float64_identical(kind):
    rng = np.random.default_rng(7)
    W32 = _random_matrix(rng, 40, 25, kind).astype(np.float32)
    got32 = mst_weights(W32)
    got64 = mst_weights(W32.astype(np.float64))
    assert got32.dtype == np.float32
    assert np.array_equal(got32.astype(np.float64), got64)


def test_batch_equals_per_matrix():
    rng = np.random.default_rng(3)
    W = rng.random((6, 11, 17))
    W[2] = 0.0
    W[3, :, 5] = 1.0
    W[4] = np.round(W[4] * 2) / 2
    got = mst_weights(W)
    assert got.shape == (6, 11 + 17 - 1)
    for q in range(6):
        assert np.array_equal(got[q], kruskal_mst(W[q]))
    assert np.array_equal(mst_weights(W, n_jobs=1), got)


def test_input_not_modified_and_non_contiguous_input():
    rng = np.random.default_rng(4)
    W = rng.random((20, 30))
    before = W.copy()
    view = W.T  # Fortran-ordered view
    assert np.array_equal(mst_weights(view), kruskal_mst(view))
    assert np.array_equal(W, before)


def test_transpose_invariant_and_integer_input():
    rng = np.random.default_rng(5)
    W = rng.integers(0, 5, size=(8, 13))
    assert np.array_equal(mst_weights(W), mst_weights(W.T))
    assert np.array_equal(mst_weights(W), kruskal_mst(W))


@settings(max_examples=150, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 9), st.integers(1, 9)),
        elements=st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1, width=32),
    )
)
def test_property_matches_kruskal(W):
    got = mst_weights(W)
    assert np.array_equal(got, kruskal_mst(W))
    # Invariants: descending, every weight is an entry, the largest entry is in the tree.
    assert np.all(np.diff(got) <= 0)
    assert np.isin(got, W).all()
    assert got[0] == W.max()


@pytest.mark.parametrize(
    ("W", "match"),
    [
        ([[0.1, np.nan]], "W contains NaN"),
        ([[0.1, np.inf]], "W contains inf"),
        ([[0.1, -0.2]], "W must be >= 0"),
        ([0.1, 0.2], "W must have 2 or 3 dimensions"),
        (np.zeros((2, 2, 2, 2)), "W must have 2 or 3 dimensions"),
        (np.zeros((0, 3)), "W must not be empty"),
        (np.zeros((2, 3, 0)), "W must not be empty"),
    ],
)
def test_bad_input(W, match):
    with pytest.raises(ValueError, match=match):
        mst_weights(W)


def test_bad_n_jobs():
    with pytest.raises(ValueError, match="n_jobs"):
        mst_weights(np.ones((2, 2, 2)), n_jobs=0)
