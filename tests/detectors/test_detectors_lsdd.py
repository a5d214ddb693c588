"""LSDDShiftDetector: statistic vs explicit loops, alibi-detect's bandwidth rule and its
numbers (committed fixture), exact enumeration, level under the null, power, save/load."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.base import clone

from dgpbench.detectors import LSDDShiftDetector
from dgpbench.detectors.lsdd import LAMBDAS, lsdd_statistics, median_sigma_alibi
from dgpbench.saved import FittedDetector, load_detector, save_detector

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lsdd" / "alibi_lsdd.json"


def _k(a, b, sigma):
    return math.exp(-sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) / (2 * sigma**2))


def _loop_lsdd(ref_eff, test, centres, sigma, lam):
    """Bu et al.'s estimate with explicit loops: h, H, (H + lam I)^-1 and h'(2A - AHA)h."""
    C = len(centres)
    h = [
        sum(_k(x, c, sigma) for x in ref_eff) / len(ref_eff)
        - sum(_k(y, c, sigma) for y in test) / len(test)
        for c in centres
    ]
    H = [[_k(a, b, math.sqrt(2) * sigma) for b in centres] for a in centres]
    A = np.linalg.inv(np.array(H) + lam * np.eye(C))
    M = 2 * A - A.T @ np.array(H) @ A
    return sum(h[i] * M[i][j] * h[j] for i in range(C) for j in range(C))


def _parts(det, Y):
    keep = np.ones(len(det.X_ref_), bool)
    keep[det.center_index_] = False
    ref = (det.X_ref_[keep] - det.mean_) / det.scale_
    return ref, (Y - det.mean_) / det.scale_


def test_statistic_equals_the_loops():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(60, 3)), rng.normal(loc=0.3, size=(25, 3))
    det = LSDDShiftDetector(n_permutations=50, random_state=1).fit(X)
    res = det.test(Y)
    ref, test = _parts(det, Y)
    expected = _loop_lsdd(ref, test, det.centers_, det.bandwidth_, res.details["lambda"])
    assert res.statistic == pytest.approx(expected, rel=1e-9)
    assert res.details["n_kernel_centers"] == 3 == len(set(det.center_index_.tolist()))
    np.testing.assert_allclose(det.mean_, X.mean(0))
    np.testing.assert_allclose(det.scale_, X.std(0, ddof=1) + 1e-12)


def test_lambda_is_the_largest_candidate_within_the_relative_difference():
    rng = np.random.default_rng(1)
    c = rng.normal(size=(4, 2))
    H = np.array([[_k(a, b, 1.0) for b in c] for a in c])
    h = rng.normal(scale=0.1, size=(30, 4))
    _, lam = lsdd_statistics(h, H, 0.2)
    for cand in LAMBDAS:  # loops: the mean of 1 - w'Hw / h'w over the rows, w = (H + lam)^-1 h
        rds = []
        for row in h:
            w = np.linalg.solve(H + cand * np.eye(4), row)
            rds.append(1 - (w @ H @ w) / (row @ w))
        if np.mean(rds) < 0.2:
            assert lam == cand
            break


def test_median_bandwidth_is_alibis_sigma_median():
    rng = np.random.default_rng(2)
    for n in (2, 3, 7, 10):
        X = rng.normal(size=(n, 2))
        d2 = sorted(float(np.sum((a - b) ** 2)) for a in X for b in X)  # n^2, diagonal included
        expected = math.sqrt(0.5 * d2[n + (n * n - n) // 2 - 1])
        assert median_sigma_alibi(X) == pytest.approx(expected)


@pytest.mark.skipif(not FIXTURE.exists(), reason="no alibi-detect fixture")
def test_matches_alibi_detect_on_its_own_centres():
    """alibi-detect 0.13's LSDDDrift (fixture made by tests/fixtures/lsdd/make_alibi_lsdd.py): the same
    bandwidth; on its kernel centres with its lambda, the same statistic (the loops); ours
    where our permutations choose its lambda; p-values within the Monte Carlo error of its
    100 permutations, and clear decisions agree."""
    same_lambda = 0
    for case in json.loads(FIXTURE.read_text()):
        X, Y = np.array(case["x_ref"]), np.array(case["x"])
        det = LSDDShiftDetector(n_permutations=500, random_state=0)
        arrays = {
            "X_ref_": X,
            "center_index_": np.array(case["center_index"]),
            "centers_": np.array(case["centers"]),
        }
        det.set_state({}, arrays)
        assert det.bandwidth_ == pytest.approx(case["sigma"], rel=1e-6)  # theirs: float32
        res = det.test(Y)
        ref, test = _parts(det, Y)
        theirs = _loop_lsdd(ref, test, det.centers_, det.bandwidth_, case["lambda"])
        assert theirs == pytest.approx(case["lsdd"], rel=1e-4)
        if res.details["lambda"] == case["lambda"]:
            same_lambda += 1
            assert res.statistic == pytest.approx(case["lsdd"], rel=1e-4)
        assert abs(res.p_val - case["p_val"]) < 0.15
        if case["p_val"] < 0.01 or case["p_val"] > 0.2:
            assert res.is_drift == (case["p_val"] < 0.05)
    assert same_lambda >= 3


def test_tiny_samples_enumerate_every_split():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(7, 2)), rng.normal(size=(3, 2))
    res = LSDDShiftDetector(n_kernel_centers=2, n_permutations=1000).fit(X).test(Y)
    n_splits = math.comb(8, 5)
    assert res.details["exact"] and res.details["n_permutations"] == n_splits
    assert res.p_val * n_splits == pytest.approx(round(res.p_val * n_splits))


@pytest.mark.parametrize(("n_ref", "n", "reps"), [(21, 6, 300), (200, 100, 150)])
def test_level_under_the_null(n_ref, n, reps):
    """Exchangeable samples: with B = 99 the exact level of p < 0.05 is 4/100; the count of
    rejections lies in its 99.9% binomial interval."""
    rng = np.random.default_rng(n)
    rejected = 0
    for r in range(reps):
        Z = rng.normal(size=(n_ref + n, 3))
        det = LSDDShiftDetector(n_permutations=99, random_state=r).fit(Z[:n_ref])
        rejected += det.test(Z[n_ref:]).is_drift
    low, high = binom.interval(0.999, reps, 0.04)
    assert low <= rejected <= high


def test_power_against_a_mean_shift():
    rng = np.random.default_rng(4)
    hits = 0
    for r in range(30):
        X, Y = rng.normal(size=(200, 5)), rng.normal(loc=0.5, size=(100, 5))
        hits += LSDDShiftDetector(n_permutations=99, random_state=r).fit(X).predict(Y)
    assert hits >= 28


def test_save_load_gives_the_same_p_values(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 4))
    X[:4] = X[4:8]  # repeated rows: the centres may be jittered, which the file keeps
    det = LSDDShiftDetector(n_permutations=99, random_state=None).fit(X)
    save_detector(tmp_path / "d.npz", FittedDetector(None, det, {}))
    loaded = load_detector(tmp_path / "d.npz").detector
    np.testing.assert_array_equal(loaded.centers_, det.centers_)
    Y = rng.normal(size=(30, 4))
    for d in (det, loaded):
        d.set_params(random_state=7)
    assert loaded.test(Y).to_dict()["data"] == det.test(Y).to_dict()["data"]


@pytest.mark.parametrize(
    ("X_ref", "X", "match"),
    [
        (np.zeros((1, 2)), np.zeros((5, 2)), "at least 2"),
        (np.ones((5, 2)), np.zeros((5, 2)), "constant"),
        (np.eye(5), np.zeros((4, 3)), "features"),
        (np.eye(5), np.full((4, 5), np.nan), "NaN"),
    ],
)
def test_bad_input(X_ref, X, match):
    with pytest.raises(ValueError, match=match):
        LSDDShiftDetector(n_permutations=5).fit(X_ref).test(X)


@pytest.mark.parametrize(
    "params", [{"alpha": 0.0}, {"n_kernel_centers": 0}, {"lambda_rd_max": -1.0}, {"bandwidth": "x"}]
)
def test_bad_parameters(params):
    with pytest.raises(ValueError):
        LSDDShiftDetector(**params).fit(np.eye(4))


def test_too_many_centres_and_clone():
    with pytest.raises(ValueError, match="no effective reference"):
        LSDDShiftDetector(n_kernel_centers=4).fit(np.eye(4))
    det = LSDDShiftDetector(n_permutations=7, random_state=1)
    assert clone(det).get_params() == det.get_params()
