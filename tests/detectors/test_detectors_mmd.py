"""MMDShiftDetector: statistic vs the direct O(N^2) formula, exact permutation p-values,
calibration under the null, power under a mean shift, blocking, errors, scikit-learn API."""

import numpy as np
import pytest
from sklearn.base import clone

from dgpbench.detectors import MMDShiftDetector
from dgpbench.detectors import mmd as mmd_module
from dgpbench.detectors.mmd import (
    _median_bandwidth,
    _permutation_mmd2,
    _subsets,
    mmd2_unbiased,
)


def _direct_mmd2(X, Y, sigma):
    """Textbook unbiased MMD^2 with explicit double loops over pairs (tiny inputs only)."""

    def k(a, b):
        return np.exp(-np.sum((a - b) ** 2) / (2 * sigma**2))

    n, m = len(X), len(Y)
    xx = sum(k(X[i], X[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = sum(k(Y[i], Y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = sum(k(X[i], Y[j]) for i in range(n) for j in range(m)) / (n * m)
    return xx + yy - 2 * xy


def test_statistic_equals_the_direct_formula():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(12, 3)), rng.normal(loc=0.4, size=(9, 3))
    det = MMDShiftDetector(bandwidth=1.7, n_permutations=9, random_state=0).fit(X)
    assert det.test(Y).statistic == pytest.approx(_direct_mmd2(X, Y, 1.7), rel=1e-10)
    # and with the median heuristic: the median distance over distinct pooled pairs
    Z = np.concatenate([X, Y])
    d = [np.linalg.norm(Z[i] - Z[j]) for i in range(len(Z)) for j in range(i + 1, len(Z))]
    res = MMDShiftDetector(n_permutations=9, random_state=0).fit(X).test(Y)
    assert res.details["bandwidth"] == pytest.approx(np.median(d))
    assert res.statistic == pytest.approx(_direct_mmd2(X, Y, np.median(d)), rel=1e-10)


def test_vectorised_permutations_equal_the_per_permutation_loop():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(40, 4))
    subsets = [np.arange(25)[None], *_subsets(np.random.default_rng(2), 40, 25, 30, 7)]
    fast = _permutation_mmd2(Z, 25, 1.3, subsets, "cpu")
    splits = [sub for block in subsets for sub in block]
    slow = [_direct_mmd2(Z[sub], np.delete(Z, sub, axis=0), 1.3) for sub in splits]
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-13)
    assert fast[0] == pytest.approx(_direct_mmd2(Z[:25], Z[25:], 1.3), rel=1e-10)


def test_row_blocks_give_the_same_statistics(monkeypatch):
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(25, 2))
    whole = MMDShiftDetector(n_permutations=50, random_state=4).fit(X).test(Y)
    monkeypatch.setattr(mmd_module, "BLOCK_BYTES", 8 * 55 * 3)  # 3 kernel rows per block
    blocked = MMDShiftDetector(n_permutations=50, random_state=4).fit(X).test(Y)
    assert blocked.statistic == pytest.approx(whole.statistic, rel=1e-12)
    assert blocked.p_val == whole.p_val


def test_permutation_p_value_counts_the_observed_statistic():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    det = MMDShiftDetector(n_permutations=19, random_state=0).fit(X)
    far = det.test(rng.normal(loc=10.0, size=(40, 2)))
    assert far.p_val == pytest.approx(1 / 20)  # the smallest possible: never 0
    for seed in range(20):
        p = (
            MMDShiftDetector(n_permutations=19, random_state=seed)
            .fit(X)
            .p_value(rng.normal(size=(30, 2)))
        )
        assert 1 / 20 <= p <= 1 and (p * 20) == pytest.approx(round(p * 20))


def test_calibrated_under_the_null():
    """Two samples of one distribution, 1000 repetitions: rejection rate in [0.03, 0.07].

    With B = 199 the exact level of ``p < 0.05`` is 9/200 = 0.045 (p-values are multiples
    of 1/200, and under the null the observed rank is uniform).
    """
    rng = np.random.default_rng(11)
    B, reps = 199, 1000
    rejected = 0
    p_min = 1.0
    for r in range(reps):
        X, Y = rng.normal(size=(20, 3)), rng.normal(size=(15, 3))
        res = MMDShiftDetector(n_permutations=B, random_state=r).fit(X).test(Y)
        rejected += res.is_drift
        p_min = min(p_min, res.p_val)
    assert 0.03 <= rejected / reps <= 0.07
    assert p_min >= 1 / (B + 1)


def test_power_against_a_mean_shift():
    """N(0, I) vs N(0.5, I) in 10 dimensions, n = m = 100: rejected in >= 90% of 100 runs."""
    rng = np.random.default_rng(12)
    hits = 0
    for r in range(100):
        X = rng.normal(size=(100, 10))
        Y = rng.normal(loc=0.5, size=(100, 10))
        hits += MMDShiftDetector(n_permutations=99, random_state=r).fit(X).predict(Y)
    assert hits >= 90


def test_seeded_and_side_effect_free():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    det = MMDShiftDetector(n_permutations=30, random_state=3).fit(X)
    assert det.test(Y).p_val == det.test(Y).p_val
    before = det.X_ref_.copy()
    X[:] = 0.0  # the detector keeps its own copy
    np.testing.assert_array_equal(det.X_ref_, before)


def test_median_bandwidth_is_label_free():
    rng = np.random.default_rng(7)
    Z = rng.normal(size=(30, 2))
    g = np.random.default_rng(0)
    assert _median_bandwidth(Z, g) == _median_bandwidth(Z[rng.permutation(30)], g)


def test_mmd2_unbiased_of_identical_blocks():
    K = np.ones((6, 6))
    assert mmd2_unbiased(K, 3) == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("X_ref", "X", "match"),
    [
        (np.zeros((1, 2)), np.zeros((5, 2)), "at least 2"),
        (np.ones((5, 2)), np.zeros((5, 2)), "constant"),
        (np.eye(5), np.zeros((1, 5)), "at least 2"),
        (np.eye(5), np.zeros((4, 3)), "features"),
        (np.eye(5), np.full((4, 5), np.nan), "NaN"),
    ],
)
def test_bad_input(X_ref, X, match):
    with pytest.raises(ValueError, match=match):
        MMDShiftDetector(n_permutations=5).fit(X_ref).test(X)


def test_all_coinciding_points_need_a_bandwidth():
    X_ref = np.concatenate([np.zeros((10, 1)), [[1.0]]])
    with pytest.raises(ValueError, match="pass a positive bandwidth"):
        MMDShiftDetector(n_permutations=5).fit(X_ref).test(np.zeros((10, 1)))


@pytest.mark.parametrize(
    "params",
    [
        {"alpha": 1.5},
        {"n_permutations": 0},
        {"bandwidth": "mean"},
        {"bandwidth": -1.0},
        {"device": "tpu"},
    ],
)
def test_bad_parameters(params):
    with pytest.raises(ValueError):
        MMDShiftDetector(**params).fit(np.eye(4))


def test_scikit_learn_conventions():
    det = MMDShiftDetector(alpha=0.01, n_permutations=7, bandwidth=2.0, random_state=1)
    twin = clone(det)
    assert twin.get_params() == det.get_params()
    assert twin.get_params()["n_permutations"] == 7
