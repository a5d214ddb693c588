"""Neural persistence, network NP and the bounds of Theorem 3.4."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from test_topology_oracles import kruskal_mst

from dgpbench.topology import (
    mst_weights,
    network_neural_persistence,
    neural_persistence,
    np_bounds,
)

PAPER_W = [[0.5, 0.1, 0.8], [0.7, 1.0, 0.1], [0.2, 0.8, 0.0]]


def np_reference(W, p=2.0, normalize=True):
    """Definition 3.3 from the Kruskal oracle."""
    W = np.asarray(W, dtype=np.float64)
    value = (1.0 + np.sum((1.0 - kruskal_mst(W)) ** p)) ** (1.0 / p)
    return value / (sum(W.shape) - 1) ** (1.0 / p) if normalize else value


def bounds_reference(W, p=2.0, matching="mutual"):
    """Theorem 3.4, written out with loops over rows and columns (no ties).

    ``"argmax"``: a column is matched when it is the argmax of some row (the displayed
    formula); ``"mutual"``: when the row holding the column's maximum has its own maximum
    in that column (the prose and the proof: the two maximum edges coincide).
    """
    W = np.asarray(W, dtype=np.float64)
    n, m = W.shape
    row_argmax = [int(np.argmax(W[a])) for a in range(n)]
    if matching == "argmax":
        matched = {b for b in range(m) if b in row_argmax}
    else:
        matched = {b for b in range(m) if row_argmax[int(np.argmax(W[:, b]))] == b}
    psi = sum((1 - W[a].max()) ** p for a in range(n))
    phi = [(1 - W[:, b].max()) ** p for b in range(m)]
    lower = (sum(phi) + psi) ** (1 / p)
    not_matched = [b for b in range(m) if b not in matched]
    upper = (m - len(not_matched) + sum(phi[b] for b in not_matched) + psi) ** (1 / p)
    return lower, upper


def test_paper_example_bounds():
    lower, upper = np_bounds(PAPER_W)
    assert lower == pytest.approx(0.458, abs=5e-4)
    assert upper == pytest.approx(1.473, abs=5e-4)
    # Worked by hand from the appendix: L^2 = 0.21, U^2 = 2 + 0.09 + 0.08.
    assert lower == pytest.approx(np.sqrt(0.21), rel=1e-12)
    assert upper == pytest.approx(np.sqrt(2.17), rel=1e-12)
    value = neural_persistence(PAPER_W, normalize=False)
    # The MST is the bold entries {1.0, 0.8, 0.8, 0.7, 0.5}.
    assert value == pytest.approx(np.sqrt(1 + 0 + 0.04 + 0.04 + 0.09 + 0.25), rel=1e-12)
    assert lower <= value <= upper


def test_normalised_bounds_and_np():
    lower, upper = np_bounds(PAPER_W, normalize=True)
    raw_lower, raw_upper = np_bounds(PAPER_W)
    assert lower == pytest.approx(raw_lower / np.sqrt(5))
    assert upper == pytest.approx(raw_upper / np.sqrt(5))
    assert neural_persistence(PAPER_W) == pytest.approx(
        neural_persistence(PAPER_W, normalize=False) / np.sqrt(5)
    )


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5])
@pytest.mark.parametrize("seed", range(3))
def test_np_matches_definition(p, seed):
    rng = np.random.default_rng(seed)
    W = rng.random((7, 11))
    W[2] = 0.0
    assert neural_persistence(W, p=p) == pytest.approx(np_reference(W, p), rel=1e-12)
    assert neural_persistence(W, p=p, normalize=False) == pytest.approx(
        np_reference(W, p, normalize=False), rel=1e-12
    )


def test_np_extremes():
    # All-zero weights: every persistence is 1, NP = (n + m)^(1/p) (Rieck et al.'s maximum).
    assert neural_persistence(np.zeros((4, 6)), normalize=False) == pytest.approx(np.sqrt(10))
    # All-one weights: only the constant term remains.
    assert neural_persistence(np.ones((4, 6)), normalize=False) == pytest.approx(1.0)


def test_network_np_matches_manual():
    rng = np.random.default_rng(1)
    layers = [rng.normal(size=(5, 4)), rng.normal(size=(4, 3)) * 3]
    top = max(np.abs(w).max() for w in layers)
    expected = np.mean([np_reference(np.abs(w) / top) for w in layers])
    assert network_neural_persistence(layers) == pytest.approx(expected, rel=1e-12)
    # Scaling every weight by a constant does not change network NP.
    assert network_neural_persistence([w * 7.5 for w in layers]) == pytest.approx(expected)


@pytest.mark.parametrize("matching", ["mutual", "argmax"])
def test_bounds_match_reference_without_ties(matching):
    rng = np.random.default_rng(2)
    for _ in range(200):
        n, m = rng.integers(1, 12, size=2)
        W = rng.random((n, m))
        got = np_bounds(W, matching=matching)
        assert np.allclose(got, bounds_reference(W, matching=matching), rtol=1e-12)


def test_upper_bound_readings_differ_where_a_column_max_is_no_row_max():
    # Column 1 is row 1's argmax (0.2), but its maximum 0.8 sits in row 0, whose maximum is
    # 0.9: the MST {0.9, 0.8, 0.2} holds column 1's maximum edge as a separate edge.
    W = [[0.9, 0.8], [0.1, 0.2]]
    value = neural_persistence(W, normalize=False)
    assert value == pytest.approx(np.sqrt(1 + 0.01 + 0.04 + 0.64), rel=1e-12)  # 1.3
    # mutual (the proof): U^2 = 1 (matched column 0) + Phi_1 0.04 + Psi 0.01 + 0.64 = NP^2
    assert np_bounds(W)[1] == pytest.approx(value, rel=1e-12)
    # the displayed formula matches both columns: U^2 = 2 + 0.65
    assert np_bounds(W, matching="argmax")[1] == pytest.approx(np.sqrt(2.65), rel=1e-12)
    # transposed, the same matrix is matched the other way round
    assert np_bounds(np.transpose(W))[1] == pytest.approx(value, rel=1e-12)


def test_upper_bound_is_tight_when_row_maxima_share_a_column():
    # The paper's extreme case: every row's maximum edge goes to the same column -> NP = U.
    rng = np.random.default_rng(5)
    for _ in range(50):
        n, m = rng.integers(2, 9, size=2)
        W = rng.random((n, m)) * 0.5
        W[:, rng.integers(m)] = 0.5 + 0.5 * rng.random(n)
        value = neural_persistence(W, normalize=False)
        for matching in ("mutual", "argmax"):
            assert np_bounds(W, matching=matching)[1] == pytest.approx(value, rel=1e-12)


def test_mutual_upper_bound_is_never_looser():
    rng = np.random.default_rng(6)
    for t in range(500):
        n, m = rng.integers(1, 12, size=2)
        W = rng.integers(0, 3, size=(n, m)) / 2.0 if t % 2 else rng.random((n, m))
        assert np_bounds(W)[1] <= np_bounds(W, matching="argmax")[1] + 1e-12
        assert np_bounds(W)[0] == np_bounds(W, matching="argmax")[0]


def test_bad_matching():
    with pytest.raises(ValueError, match="matching must be one of"):
        np_bounds(PAPER_W, matching="rows")


def _check_inequality(W, p):
    n, m = W.shape
    value = neural_persistence(W, p=p, normalize=False)
    tol = 1e-9 * (n + m)
    for matching in ("mutual", "argmax"):
        lower, upper = np_bounds(W, p=p, matching=matching)
        assert 0 <= lower <= value + tol
        assert value <= upper + tol
        assert upper <= (n + m) ** (1 / p) + tol


def test_inequality_on_thousands_of_random_matrices():
    rng = np.random.default_rng(3)
    for t in range(3000):
        n, m = rng.integers(1, 16, size=2)
        kind = t % 4
        if kind == 0:
            W = rng.random((n, m))
        elif kind == 1:  # heavy ties
            W = rng.integers(0, 3, size=(n, m)) / 2.0
        elif kind == 2:  # concentrated large weights
            W = rng.random((n, m)) ** 6
        else:  # sparse
            W = rng.random((n, m)) * (rng.random((n, m)) < 0.3)
        _check_inequality(W, p=float(rng.choice([1.0, 2.0, 3.0])))


@settings(max_examples=300, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 8), st.integers(1, 8)),
        elements=st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1),
    ),
    st.sampled_from([1.0, 2.0, 4.0]),
)
def test_property_bounds(W, p):
    _check_inequality(W, p)


def test_np_from_float32_equals_float64():
    rng = np.random.default_rng(4)
    W = rng.random((30, 20)).astype(np.float32)
    assert neural_persistence(W) == neural_persistence(W.astype(np.float64))
    assert np.array_equal(mst_weights(W), mst_weights(W.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize(
    ("W", "match"),
    [
        ([[0.5, 1.5]], "W must be <= 1"),
        ([[0.5, -0.1]], "W must be >= 0"),
        ([[np.nan]], "W contains NaN"),
        ([0.5], "W must have 2 dimensions"),
        (np.zeros((3, 0)), "W must not be empty"),
    ],
)
@pytest.mark.parametrize("func", [neural_persistence, np_bounds])
def test_bad_matrix(func, W, match):
    with pytest.raises(ValueError, match=match):
        func(W)


@pytest.mark.parametrize("p", [0, -1, np.inf, np.nan, "2", True])
def test_bad_p(p):
    with pytest.raises(ValueError, match="p must be"):
        neural_persistence(PAPER_W, p=p)
    with pytest.raises(ValueError, match="p must be"):
        np_bounds(PAPER_W, p=p)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([], "weights must hold at least one matrix"),
        ([np.zeros((2, 2))], "weights are all zero"),
        ([np.ones((2, 2)), np.ones(3)], r"weights\[1\] must have 2 dimensions"),
        ([np.ones((2, 2)), [[np.inf]]], r"weights\[1\] contains inf"),
        (np.ones((2, 2)), "sequence of 2-D matrices"),
        (5, "sequence of 2-D matrices"),
    ],
)
def test_bad_network(weights, match):
    with pytest.raises(ValueError, match=match):
        network_neural_persistence(weights)
