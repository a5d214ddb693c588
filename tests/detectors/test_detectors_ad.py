"""The Anderson-Darling detector: SciPy's statistic and p-value on random and tied data,
the capping made visible, tiny samples, constant features, bad input, level, power and the
saved round trip."""

import warnings

import numpy as np
import pytest
from scipy.stats import anderson_ksamp, binom

from dgpbench.detectors import ADShiftDetector
from dgpbench.detectors.anderson import anderson_pvalues
from dgpbench.saved import FittedDetector, load_detector, save_detector

LOW, HIGH = binom.ppf(0.0005, 400, 0.05), binom.isf(0.0005, 400, 0.05)


def _scipy(ref, test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns on every capped p-value
        return anderson_ksamp([ref, test], midrank=True)  # variant="midrank" in SciPy >= 1.17


@pytest.mark.parametrize("kind", ["normal", "integers", "rounded", "shifted"])
def test_statistic_and_p_value_are_scipys(kind):
    rng = np.random.default_rng(0)
    for n, m in [(1, 3), (3, 1), (2, 2), (2, 3), (3, 5), (5, 4), (12, 20), (30, 45), (300, 60)]:
        if kind == "integers":
            ref, test = rng.integers(0, 4, (n, 6)), rng.integers(0, 4, (m, 6))
        elif kind == "rounded":
            ref, test = np.round(rng.normal(size=(n, 6)), 1), np.round(rng.normal(size=(m, 6)), 1)
        else:
            ref, test = rng.normal(size=(n, 6)), rng.normal(kind == "shifted", size=(m, 6))
        ref, test = ref.astype(float), test.astype(float)
        stat, p, capped = anderson_pvalues(ref, test)
        for j in range(6):
            if np.unique(np.r_[ref[:, j], test[:, j]]).size < 2:
                assert p[j] == 1.0 and capped[j] == 0  # SciPy refuses these
                continue
            res = _scipy(ref[:, j], test[:, j])
            assert stat[j] == pytest.approx(res.statistic, rel=1e-12, abs=1e-12)
            assert p[j] == pytest.approx(res.pvalue, rel=1e-12)
            assert capped[j] == (1 if res.pvalue == 0.25 else -1 if res.pvalue == 0.001 else 0)


def test_capping_is_in_the_record_and_extrapolation_goes_beyond():
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(50, 2))
    test = np.c_[rng.normal(3.0, size=50), rng.normal(size=50)]
    res = ADShiftDetector(correction=None).fit(ref).test(test)
    assert res.p_val[0] == 0.001 and res.to_dict()["meta"]["p_val_capped"][0] == -1
    far = ADShiftDetector(correction=None, extrapolate=True).fit(ref).test(test)
    assert (
        far.p_val[0] < 1e-6
        and far.p_val[0] == pytest.approx(2.9e-7, rel=0.1)
        and far.to_dict()["meta"]["p_val_capped"].tolist() == [0, 0]
    )
    assert far.distance[0] == res.distance[0]


def test_bonferroni_below_the_floor_warns():
    rng = np.random.default_rng(2)
    det = ADShiftDetector().fit(rng.normal(size=(20, 60)))
    with pytest.warns(UserWarning, match="can never reject"):
        det.test(rng.normal(5.0, size=(20, 60)))
    assert ADShiftDetector(extrapolate=True).fit(det.X_ref_).predict(rng.normal(5.0, size=(20, 60)))


def test_constant_features_get_p_one_and_a_warning():
    rng = np.random.default_rng(3)
    ref, test = rng.normal(size=(10, 3)), rng.normal(size=(8, 3))
    ref[:, 2] = test[:, 2] = -1.0
    with pytest.warns(UserWarning, match="1 of 3 features are constant"):
        res = ADShiftDetector().fit(ref).test(test)
    assert res.p_val[2] == 1.0


def test_bad_input_is_refused():
    det = ADShiftDetector().fit(np.arange(10.0).reshape(5, 2))
    with pytest.raises(ValueError, match="infinity"):
        det.test(np.full((5, 2), np.inf))
    with pytest.raises(ValueError, match="minimum of 2"):
        det.test(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="at least 4 pooled values"):
        anderson_pvalues(np.zeros((2, 1)), np.ones((1, 1)))
    with pytest.raises(ValueError, match="extrapolate"):
        ADShiftDetector(extrapolate="yes").fit(np.zeros((5, 2)))


@pytest.mark.parametrize(("n", "two_sided"), [(5, False), (100, True)])
def test_level_under_the_null(n, two_sided):
    """400 exchangeable draws, one per column: rejections at 0.05 within binomial bounds."""
    rng = np.random.default_rng(4)
    _, p, _ = anderson_pvalues(rng.normal(size=(n, 400)), rng.normal(size=(n, 400)))
    rejected = int((p < 0.05).sum())
    assert rejected <= HIGH and (not two_sided or rejected >= LOW), rejected


def test_power_against_a_location_and_a_scale_shift():
    rng = np.random.default_rng(5)
    det = ADShiftDetector().fit(rng.normal(size=(100, 3)))
    assert det.predict(rng.normal(0.6, size=(100, 3)))
    assert det.predict(rng.normal(scale=2.5, size=(100, 3)))


def test_saved_detector_gives_the_same_p_values(tmp_path):
    rng = np.random.default_rng(6)
    det = ADShiftDetector(extrapolate=True).fit(rng.normal(size=(30, 3)))
    save_detector(tmp_path / "det.npz", FittedDetector(None, det, {}))
    loaded = load_detector(tmp_path / "det.npz")
    batch = rng.normal(size=(20, 3))
    assert loaded.info["test"] == "ad" and loaded.detector.extrapolate is True
    np.testing.assert_array_equal(loaded.test(batch).p_val, det.test(batch).p_val)


def test_extrapolated_p_values_never_grow_with_the_statistic():
    rng = np.random.default_rng(7)
    ref = rng.normal(size=(40, 1))
    shifts = np.linspace(0.0, 8.0, 60)
    tests = np.concatenate([rng.normal(size=(40, 1)) + s for s in shifts], axis=1)
    stat, p, _ = anderson_pvalues(np.repeat(ref, len(shifts), axis=1), tests, extrapolate=True)
    order = np.argsort(stat)
    assert np.all(np.diff(p[order]) <= 0) and p.min() > 0
