"""MMDAggShiftDetector: per-kernel statistics vs explicit loops, the authors' reference code's
numbers on fixed draws (committed fixture), the decision as a p-value, level, power, save/load."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.base import clone

from dgpbench.detectors import MMDAggShiftDetector
from dgpbench.detectors.mmdagg import mmdagg_bandwidths, mmdagg_weights
from dgpbench.saved import FittedDetector, load_detector, save_detector

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mmdagg" / "mmdagg_reference.json"
SMALL = {"n_draws_quantile": 99, "n_draws_level": 99}
#: Enough quantile draws for the smallest per-kernel thresholds (about alpha / 20) to be
#: reachable: with 99, no p-value is below 1/100 and the test can hardly reject.
LEVEL = {"n_draws_quantile": 499, "n_draws_level": 99}


def _kernel(a, b, kind, bw):
    if kind == "laplace":
        return math.exp(-sum(abs(x - y) for x, y in zip(a, b, strict=True)) / bw)
    return math.exp(-sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) / bw**2)


def _loop_unbiased(X, Y, kind, bw):
    n, m = len(X), len(Y)
    xx = sum(_kernel(X[i], X[j], kind, bw) for i in range(n) for j in range(n) if i != j)
    yy = sum(_kernel(Y[i], Y[j], kind, bw) for i in range(m) for j in range(m) if i != j)
    xy = sum(_kernel(x, y, kind, bw) for x in X for y in Y)
    return xx / (n * (n - 1)) + yy / (m * (m - 1)) - 2 * xy / (n * m)


def _loop_paired(X, Y, kind, bw):
    """The wild bootstrap's statistic: the U-statistic of h over pairs i != j."""
    n = len(X)
    total = 0.0
    for i in range(n):
        for j in range(n):
            if i != j:
                total += (
                    _kernel(X[i], X[j], kind, bw)
                    + _kernel(Y[i], Y[j], kind, bw)
                    - _kernel(X[i], Y[j], kind, bw)
                    - _kernel(X[j], Y[i], kind, bw)
                )
    return total / (n * (n - 1))


@pytest.mark.parametrize(("m", "n", "same"), [(9, 7, False), (8, 8, False), (8, 8, True)])
def test_per_kernel_statistics_equal_the_loops(m, n, same):
    rng = np.random.default_rng(m + n)
    X, Y = rng.normal(size=(m, 2)), rng.normal(loc=0.3, size=(n, 2))
    det = MMDAggShiftDetector(number_bandwidths=3, permutations_same_sample_size=same, **SMALL)
    res = det.set_params(random_state=0).fit(X).test(Y)
    loop = _loop_paired if (m == n and not same) else _loop_unbiased
    assert res.details["approximation"] == (
        "wild bootstrap" if loop is _loop_paired else "permutations"
    )
    for kind, bw, value in zip(
        res.details["kernels"], res.details["bandwidths"], res.details["mmd2"], strict=True
    ):
        assert value == pytest.approx(loop(X, Y, kind, bw), rel=1e-9, abs=1e-14)


def test_bandwidths_and_weights():
    d = np.array([0.05] * 5 + [0.5] * 95 + [2.0])  # smallest < 0.1: the 5% quantile, >= 0.1
    bw = mmdagg_bandwidths(d, 4)
    assert bw[0] == pytest.approx(0.25) and bw[-1] == pytest.approx(4.0)
    np.testing.assert_allclose(np.diff(np.log(bw)), np.log(16) / 3)
    for kind in ("uniform", "decreasing", "increasing", "centred"):
        for L in (2, 5, 10):
            w = mmdagg_weights(L, kind)
            assert w.sum() == pytest.approx(1.0) and (w > 0).all()
    np.testing.assert_allclose(mmdagg_weights(3, "decreasing"), np.array([6, 3, 2]) / 11)
    np.testing.assert_allclose(mmdagg_weights(3, "centred"), np.array([1, 2, 1]) / 4)


@pytest.mark.skipif(not FIXTURE.exists(), reason="no reference fixture")
def test_matches_the_authors_reference_code():
    """antoninschrab/mmdagg's np.py (tests/fixtures/mmdagg/make_mmdagg_reference.py) with seed = random_state:
    the same draws, so the same bandwidths, MMD values, level correction and decisions."""
    for case in json.loads(FIXTURE.read_text()):
        X, Y = np.array(case["X"]), np.array(case["Y"])
        det = MMDAggShiftDetector(
            kernel=case["kernel"],
            weights_type=case["weights_type"],
            permutations_same_sample_size=case["permutations_same_sample_size"],
            n_draws_quantile=case["B1"],
            n_draws_level=case["B2"],
            random_state=case["seed"],
        )
        res = det.fit(X).test(Y)
        n = len(Y)
        scale = n * (n - 1) if res.details["approximation"] == "wild bootstrap" else 1
        np.testing.assert_allclose(res.details["bandwidths"], case["bandwidths"], rtol=1e-12)
        np.testing.assert_allclose(
            np.array(res.details["mmd2"]) * scale, case["mmd"], rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(
            res.details["p_value_thresholds"], case["thresholds"], rtol=1e-12
        )
        single = np.array(res.details["p_values"]) <= np.array(res.details["p_value_thresholds"])
        assert single.tolist() == case["single_reject"]
        assert res.is_drift == case["reject"]


def test_decision_is_the_p_value_at_most_alpha():
    rng = np.random.default_rng(1)
    for r in range(25):
        X = rng.normal(size=(20, 2))
        Y = rng.normal(loc=0.12 * (r % 6), size=(15 + 5 * (r % 2), 2))
        res = MMDAggShiftDetector(random_state=r, **SMALL).fit(X).test(Y)
        assert res.is_drift == (res.p_val <= 0.05)
        assert 0 <= res.p_val <= 1


@pytest.mark.parametrize(("m", "n", "reps"), [(10, 10, 150), (40, 30, 80)])
def test_level_under_the_null(m, n, reps):
    """Exchangeable samples: the rejection count is at most the 99.9% binomial bound at 0.05
    (the aggregated test is calibrated by simulation and is conservative: measured 8/200 and
    2/120 rejections at these sizes)."""
    rng = np.random.default_rng(m * n)
    rejected = 0
    for r in range(reps):
        Z = rng.normal(size=(m + n, 2))
        rejected += MMDAggShiftDetector(random_state=r, **LEVEL).fit(Z[:m]).predict(Z[m:])
    assert rejected <= binom.ppf(0.9995, reps, 0.05)


def test_power_against_a_scale_change():
    rng = np.random.default_rng(2)
    hits = 0
    for r in range(20):
        X, Y = rng.normal(size=(60, 3)), rng.normal(scale=1.6, size=(60, 3))
        hits += MMDAggShiftDetector(random_state=r, **LEVEL).fit(X).predict(Y)
    assert hits >= 16


def test_save_load_gives_the_same_p_values(tmp_path):
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(30, 3)), rng.normal(loc=0.4, size=(25, 3))
    det = MMDAggShiftDetector(kernel="gaussian", random_state=5, **SMALL).fit(X)
    save_detector(tmp_path / "d.npz", FittedDetector(None, det, {}))
    loaded = load_detector(tmp_path / "d.npz").detector
    assert loaded.get_params() == det.get_params()
    assert loaded.test(Y).to_dict() == det.test(Y).to_dict()


@pytest.mark.parametrize(
    "params",
    [{"kernel": "imq"}, {"number_bandwidths": 1}, {"weights_type": "flat"}, {"n_bisection": 0}],
)
def test_bad_parameters(params):
    with pytest.raises(ValueError):
        MMDAggShiftDetector(**params).fit(np.eye(4))


@pytest.mark.parametrize(
    ("X_ref", "X", "match"),
    [
        (np.zeros((1, 2)), np.zeros((5, 2)), "at least 2"),
        (np.eye(5), np.zeros((1, 5)), "at least 2"),
        (np.eye(5), np.full((4, 5), np.inf), "infinity"),
    ],
)
def test_bad_input(X_ref, X, match):
    with pytest.raises(ValueError, match=match):
        MMDAggShiftDetector(**SMALL).fit(X_ref).test(X)


def test_clone():
    det = MMDAggShiftDetector(n_draws_level=7, random_state=1)
    assert clone(det).get_params() == det.get_params()
