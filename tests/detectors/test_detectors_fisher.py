"""Fisher's exact test per binary feature: SciPy's p-values for every alternative, tiny
samples, constant features, non-binary input refused, level, power and the saved round trip."""

import numpy as np
import pytest
from scipy.stats import binom, fisher_exact

from dgpbench.detectors import FisherShiftDetector
from dgpbench.detectors.fisher import fisher_pvalues
from dgpbench.saved import FittedDetector, load_detector, save_detector

HIGH = binom.isf(0.0005, 400, 0.05)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_p_values_are_scipys_for_every_alternative(alternative):
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (2, 2), (2, 5), (5, 3), (20, 30), (200, 50)]:
        ref = (rng.random((n, 8)) < rng.random(8)).astype(float)
        test = (rng.random((m, 8)) < rng.random(8)).astype(float)
        odds, p = fisher_pvalues(ref, test, alternative)
        for j in range(8):
            a, b = int(test[:, j].sum()), int(ref[:, j].sum())
            res = fisher_exact([[a, b], [m - a, n - b]], alternative=alternative)
            assert p[j] == res.pvalue
            assert odds[j] == res.statistic or (np.isnan(odds[j]) and np.isnan(res.statistic))


def test_greater_means_more_ones_in_the_batch():
    ref, test = np.zeros((20, 1)), np.ones((20, 1))
    assert FisherShiftDetector(alternative="greater").fit(ref).predict(test)
    assert not FisherShiftDetector(alternative="less").fit(ref).predict(test)
    res = FisherShiftDetector().fit(ref).test(test)
    assert res.distance[0] == 1.0 and res.to_dict()["meta"]["alternative"] == "two-sided"


def test_booleans_and_constant_features():
    rng = np.random.default_rng(1)
    ref, test = rng.random((10, 3)) < 0.5, rng.random((12, 3)) < 0.5
    ref[:, 0] = test[:, 0] = False
    with pytest.warns(UserWarning, match="1 of 3 features are constant"):
        res = FisherShiftDetector().fit(ref).test(test)
    assert res.p_val[0] == 1.0 and res.distance[0] == 0.0


def test_non_binary_input_is_refused():
    with pytest.raises(ValueError, match=r"values other than 0 and 1 in features \[1\]"):
        FisherShiftDetector().fit(np.array([[0, 0.5], [1, 1]]))
    det = FisherShiftDetector().fit(np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match=r"X has values other than 0 and 1 in features \[0\]"):
        det.test(np.array([[2, 1], [1, 0]]))
    with pytest.raises(ValueError, match="alternative"):
        FisherShiftDetector(alternative="two_sided").fit(np.array([[0, 1], [1, 0]]))


@pytest.mark.parametrize("n", [10, 200])
def test_level_under_the_null(n):
    """400 exchangeable draws of a Bernoulli(0.3) feature, one per column: at most the
    binomial bound of rejections at 0.05 (the exact test is conservative)."""
    rng = np.random.default_rng(2)
    _, p = fisher_pvalues(rng.random((n, 400)) < 0.3, rng.random((n, 400)) < 0.3)
    assert int((p < 0.05).sum()) <= HIGH


def test_power_against_a_change_of_rate():
    rng = np.random.default_rng(3)
    det = FisherShiftDetector().fit(rng.random((100, 4)) < 0.2)
    assert det.predict(rng.random((100, 4)) < np.array([0.2, 0.2, 0.2, 0.5]))


def test_saved_detector_gives_the_same_p_values(tmp_path):
    rng = np.random.default_rng(4)
    det = FisherShiftDetector(alternative="less").fit(rng.random((30, 3)) < 0.5)
    save_detector(tmp_path / "det.npz", FittedDetector(None, det, {}))
    loaded = load_detector(tmp_path / "det.npz")
    batch = (rng.random((20, 3)) < 0.5).astype(float)
    assert loaded.info["test"] == "fisher" and loaded.detector.alternative == "less"
    np.testing.assert_array_equal(loaded.test(batch).p_val, det.test(batch).p_val)
