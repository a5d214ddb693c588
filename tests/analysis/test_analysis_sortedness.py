"""Sortedness (Appendix E.2) against a brute-force inversion count."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgpbench.analysis.sortedness import kendall_sortedness, presort_by_means, sortedness


def _omega_bruteforce(W, order):
    """2 * Omega - 1 from the paper's definition: count inversions over position pairs."""
    n, m = W.shape
    positions = [(i, j) for i in range(n) for j in range(m)]
    if order == "index":
        key = lambda p: (p[0], p[1])  # noqa: E731
    elif order == "transpose":
        key = lambda p: (p[1], p[0])  # noqa: E731
    else:  # diagonal: i + j first, then i
        key = lambda p: (p[0] + p[1], p[0])  # noqa: E731
    ordered = sorted(positions, key=key)
    size = len(ordered)
    inv = sum(W[ordered[a]] > W[ordered[b]] for a, b in itertools.combinations(range(size), 2))
    omega = 1 - 2 * inv / (size * (size - 1))
    return 2 * omega - 1


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 6),
    m=st.integers(1, 6),
    order=st.sampled_from(["index", "transpose", "diagonal"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_kendall_sortedness_matches_inversion_count(n, m, order, seed):
    if n * m < 2:
        return
    W = np.random.default_rng(seed).permutation(n * m).reshape(n, m).astype(float)
    assert kendall_sortedness(W, order) == pytest.approx(_omega_bruteforce(W, order))


def test_sorted_is_one_and_reversed_is_minus_one():
    W = np.arange(20.0).reshape(4, 5)
    assert kendall_sortedness(W) == pytest.approx(1.0)
    assert kendall_sortedness(W[::-1, ::-1]) == pytest.approx(-1.0)  # flat order reversed
    assert sortedness(W) == pytest.approx(1.0)
    assert sortedness(W, presort=False, orders=["index"]) == pytest.approx(1.0)
    assert sortedness(W[::-1, ::-1], presort=False, orders=["index"]) == pytest.approx(-1.0)
    # presorting rows/columns by their means undoes the reversal
    assert sortedness(W[::-1, ::-1]) == pytest.approx(1.0)


def test_each_order_detects_its_own_sorting():
    rng = np.random.default_rng(0)
    values = np.sort(rng.random(30))
    col_major = values.reshape(5, 6, order="F")
    assert kendall_sortedness(col_major, "transpose") == pytest.approx(1.0)
    assert kendall_sortedness(col_major, "index") < 1.0
    rows, cols = np.indices((5, 6))
    diag_positions = np.lexsort((rows.ravel(), (rows + cols).ravel()))
    diag = np.empty(30)
    diag[diag_positions] = values
    diag = diag.reshape(5, 6)
    assert kendall_sortedness(diag, "diagonal") == pytest.approx(1.0)
    assert sortedness(diag, presort=False) == pytest.approx(1.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_sortedness_is_invariant_to_row_and_column_permutations(seed):
    rng = np.random.default_rng(seed)
    W = rng.random((6, 7)) + np.arange(6)[:, None] * 0.3
    P = W[rng.permutation(6)][:, rng.permutation(7)]
    assert sortedness(P) == pytest.approx(sortedness(W))
    assert np.array_equal(presort_by_means(P), presort_by_means(W))


def test_sortedness_uses_absolute_values():
    W = np.arange(12.0).reshape(3, 4)
    assert sortedness(-W) == pytest.approx(1.0)
    assert sortedness(-W, absolute=False, presort=False, orders=["index"]) == pytest.approx(-1.0)


def test_random_matrix_is_unsorted():
    W = np.random.default_rng(3).random((80, 80))
    assert abs(kendall_sortedness(W)) < 0.03


def test_bad_input():
    with pytest.raises(ValueError, match="order"):
        kendall_sortedness(np.ones((2, 2)), "spiral")
    with pytest.raises(ValueError, match="W"):
        sortedness(np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        sortedness(np.array([[np.nan, 1.0]]))
