"""The Cramér-von Mises detector: SciPy's p-values on random and tied data, tiny samples,
constant features, bad input, level under the null, power and the saved round trip."""

import warnings

import numpy as np
import pytest
from scipy.stats import binom, cramervonmises_2samp

from dgpbench.detectors import CvMShiftDetector
from dgpbench.detectors.cvm import cvm_pvalues
from dgpbench.detectors.ks_test import apply_correction
from dgpbench.saved import FittedDetector, load_detector, save_detector

#: 99.9 % two-sided acceptance bounds of the number of rejections in 400 draws at level 0.05.
LOW, HIGH = binom.ppf(0.0005, 400, 0.05), binom.isf(0.0005, 400, 0.05)


def _samples(rng, kind, n, m, d):
    if kind == "normal":
        return rng.normal(size=(n, d)), rng.normal(size=(m, d))
    if kind == "integers":  # heavy ties
        return rng.integers(0, 4, (n, d)).astype(float), rng.integers(0, 4, (m, d)).astype(float)
    return np.round(rng.normal(size=(n, d)), 1), np.round(rng.normal(0.3, size=(m, d)), 1)


@pytest.mark.parametrize("kind", ["normal", "integers", "rounded"])
def test_p_values_are_scipys_on_random_and_tied_data(kind):
    rng = np.random.default_rng(0)
    for n, m in [(2, 2), (3, 5), (5, 4), (12, 20), (21, 7), (30, 45), (200, 60)]:
        ref, test = _samples(rng, kind, n, m, 4)
        stat, p = cvm_pvalues(ref, test)
        for j in range(4):
            res = cramervonmises_2samp(ref[:, j], test[:, j], method="auto")
            assert stat[j] == pytest.approx(res.statistic, rel=1e-12, abs=1e-15)
            assert p[j] == pytest.approx(res.pvalue, rel=1e-12, abs=1e-15)


def test_detector_decides_with_the_ks_corrections():
    rng = np.random.default_rng(1)
    ref, test = rng.normal(size=(40, 5)), rng.normal(0.4, size=(30, 5))
    for correction in ("bonferroni", "fdr", None):
        res = CvMShiftDetector(correction=correction).fit(ref).test(test)
        p = cramervonmises_2samp(ref, test, axis=0).pvalue
        is_drift, threshold, p_adj = apply_correction(p, 0.05, correction)
        assert res.is_drift == bool(is_drift) and res.threshold == float(threshold)
        np.testing.assert_array_equal(res.p_val_adjusted, p_adj)
        assert res.name == "CvMShiftDetector" and res.to_dict()["meta"]["method"] == "asymptotic"


def test_constant_features_get_p_one_and_a_warning():
    rng = np.random.default_rng(2)
    ref, test = rng.normal(size=(10, 3)), rng.normal(size=(8, 3))
    ref[:, 1] = test[:, 1] = 2.0
    with pytest.warns(UserWarning, match="1 of 3 features are constant"):
        res = CvMShiftDetector().fit(ref).test(test)
    assert res.p_val[1] == 1.0 and res.distance[1] == 0.0
    test[:, 1] = 3.0  # constant at another value: evidence, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert CvMShiftDetector().fit(ref).test(test).p_val[1] < 1e-3


def test_bad_input_is_refused():
    det = CvMShiftDetector().fit(np.zeros((5, 2)) + np.arange(5)[:, None])
    with pytest.raises(ValueError, match="NaN"):
        det.test(np.full((5, 2), np.nan))
    with pytest.raises(ValueError, match="2 features"):
        det.test(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="minimum of 2"):
        det.test(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="correction"):
        CvMShiftDetector(correction="holm").fit(np.zeros((5, 2)))


@pytest.mark.parametrize(("n", "two_sided"), [(5, False), (100, True)])
def test_level_under_the_null(n, two_sided):
    """400 exchangeable draws, one per column: rejections at 0.05 within the binomial bounds
    (the exact test at n = 5 is discrete, hence conservative: only the upper bound)."""
    rng = np.random.default_rng(3)
    _, p = cvm_pvalues(rng.normal(size=(n, 400)), rng.normal(size=(n, 400)))
    rejected = int((p < 0.05).sum())
    assert rejected <= HIGH and (not two_sided or rejected >= LOW), rejected


def test_power_against_a_location_and_a_scale_shift():
    rng = np.random.default_rng(4)
    det = CvMShiftDetector().fit(rng.normal(size=(100, 3)))
    assert det.predict(rng.normal(0.6, size=(100, 3)))
    assert det.predict(rng.normal(scale=2.5, size=(100, 3)))


def test_saved_detector_gives_the_same_p_values(tmp_path):
    rng = np.random.default_rng(5)
    det = CvMShiftDetector(correction="fdr").fit(rng.normal(size=(30, 3)))
    save_detector(tmp_path / "det.npz", FittedDetector(None, det, {}))
    loaded = load_detector(tmp_path / "det.npz")
    batch = rng.normal(size=(20, 3))
    assert loaded.info["test"] == "cvm" and loaded.detector.correction == "fdr"
    np.testing.assert_array_equal(loaded.test(batch).p_val, det.test(batch).p_val)
