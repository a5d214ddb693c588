"""The KS engine and KSShiftDetector: exactness against scipy (one batch and many), correction
rules, input errors, API citizenship."""

from __future__ import annotations

import dataclasses
import doctest
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import ks_2samp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import dgpbench
import dgpbench.detectors.ks
import dgpbench.detectors.ks_test
from dgpbench.detectors.ks import KSShiftDetector
from dgpbench.detectors.ks_test import (
    KSTestResult,
    apply_correction,
    check_no_constant_features,
    ks_pvalues,
    ks_pvalues_at,
)


def _shifted(n: int, d: int, h: int, feature: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Reference and test batches whose only difference is a KS statistic h/n in `feature`.

    Columns are 0..n-1 (offset per column so none is constant); the test copy of `feature`
    is shifted by h, which makes its two ECDFs differ by exactly h / n.
    """
    ref = np.arange(n, dtype=np.float64)[:, None] + 0.5 * np.arange(d)[None, :]
    test = ref.copy()
    test[:, feature] += h
    return ref, test


def _hand_bh(p: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Textbook Benjamini-Hochberg: adjusted p-values and the rejection mask."""
    d = p.size
    order = np.argsort(p)
    ranked = p[order] * d / np.arange(1, d + 1)
    adj_sorted = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    adjusted = np.empty(d)
    adjusted[order] = adj_sorted
    below = np.flatnonzero(p[order] < alpha * np.arange(1, d + 1) / d)
    k = below.max() + 1 if below.size else 0
    reject = np.zeros(d, dtype=bool)
    reject[order[:k]] = True
    return adjusted, reject


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize(
    ("n_ref", "n", "d", "dtype", "ties"),
    [
        (50, 50, 4, np.float64, False),
        (200, 37, 3, np.float64, False),
        (12, 90, 2, np.float32, False),
        (40, 40, 5, np.float64, True),  # integer-valued data: many ties within and across
        (3, 2, 1, np.float64, False),
    ],
)
def test_pvalues_and_statistics_equal_a_ks_2samp_loop(n_ref, n, d, dtype, ties):
    rng = np.random.default_rng(n_ref * 1000 + n)
    draw = (lambda s: rng.integers(0, 4, size=s)) if ties else (lambda s: rng.normal(size=s))
    X_ref = draw((n_ref, d)).astype(dtype)
    X_ref[0] += 0.5  # integer data may be constant by chance; the reference must not be
    X = (draw((n, d)) + 0.3).astype(dtype)
    res = KSShiftDetector().fit(X_ref).test(X)
    loop = [ks_2samp(X_ref[:, j], X[:, j]) for j in range(d)]
    assert_array_equal(res.p_val, [r.pvalue for r in loop])
    assert_array_equal(res.distance, [r.statistic for r in loop])
    assert res.p_val.shape == res.distance.shape == res.p_val_adjusted.shape == (d,)


@settings(max_examples=25, deadline=None)
@given(
    n_ref=st.integers(2, 30),
    n=st.integers(2, 30),
    d=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    shift=st.floats(-2, 2),
)
def test_pvalues_match_scipy_property(n_ref, n, d, seed, shift):
    rng = np.random.default_rng(seed)
    X_ref = rng.normal(size=(n_ref, d))
    X = rng.normal(loc=shift, size=(n, d))
    res = KSShiftDetector(correction="fdr").fit(X_ref).test(X)
    assert_array_equal(res.p_val, [ks_2samp(X_ref[:, j], X[:, j]).pvalue for j in range(d)])
    # Whatever the correction, adjusted p-values are >= raw ones and within [0, 1].
    assert np.all(res.p_val_adjusted >= res.p_val)
    assert np.all((res.p_val_adjusted >= 0) & (res.p_val_adjusted <= 1))


# ------------------------------------------------------------------- thresholds, decisions


@pytest.mark.parametrize("d", [1, 3, 10])
def test_thresholds_per_correction(d):
    ref, test = _shifted(20, d, h=0)
    assert KSShiftDetector(alpha=0.05).fit(ref).test(test).threshold == 0.05 / d
    assert KSShiftDetector(alpha=0.1, correction=None).fit(ref).test(test).threshold == 0.1
    # No BH rejection: report the first step alpha / d (alibi-detect's convention).
    assert KSShiftDetector(alpha=0.05, correction="fdr").fit(ref).test(test).threshold == (0.05 / d)


def test_known_pvalue_between_bonferroni_and_uncorrected_levels():
    # n = 10, statistic 7/10: exact two-sided p = 0.01234 (in (alpha / 5, alpha) for d = 5).
    ref, test = _shifted(10, 5, h=7, feature=2)
    p = ks_2samp(ref[:, 2], test[:, 2]).pvalue
    assert 0.01 < p < 0.05
    res = KSShiftDetector(correction="bonferroni").fit(ref).test(test)
    assert res.p_val[2] == p and np.all(res.p_val[[0, 1, 3, 4]] == 1.0)
    assert not res.is_drift  # p >= 0.05 / 5
    assert KSShiftDetector(correction=None).fit(ref).predict(test)  # p < 0.05
    assert not KSShiftDetector(correction="fdr").fit(ref).predict(test)  # BH step 1: 0.01
    # A larger shift (h = 8, p = 0.0021 < 0.01) is caught by every correction.
    ref, test = _shifted(10, 5, h=8, feature=4)
    for correction in ("bonferroni", "fdr", None):
        assert KSShiftDetector(correction=correction).fit(ref).predict(test)


def test_identical_batches_are_never_drift():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 6))
    for correction in ("bonferroni", "fdr", None):
        res = KSShiftDetector(correction=correction).fit(X).test(X)
        assert not res.is_drift
        assert_array_equal(res.p_val, 1.0)
        assert_array_equal(res.distance, 0.0)


def test_mean_shift_detected_and_null_not():
    rng = np.random.default_rng(11)
    det = KSShiftDetector().fit(rng.normal(size=(300, 8)))
    X = rng.normal(size=(300, 8))
    assert not det.predict(X)
    X[:, 5] += 1.0  # shift one feature only
    res = det.test(X)
    assert res.is_drift
    assert np.argmin(res.p_val) == 5
    assert res.p_val[5] < res.threshold


def test_decide_fdr_step_up_example_and_bonferroni_contrast():
    # BH cut-offs for d = 4, alpha = 0.05: 0.0125, 0.025, 0.0375, 0.05. Step-up: the largest
    # p = 0.045 < 0.05 rejects all four, although no p is below the Bonferroni level 0.0125.
    p = np.array([0.045, 0.02, 0.04, 0.03])
    drift, thr, adj = apply_correction(p, 0.05, "fdr")
    assert drift and thr == pytest.approx(0.05)
    assert_allclose(adj, 0.045)
    drift, thr, adj = apply_correction(p, 0.05, "bonferroni")
    assert not drift and thr == 0.0125
    assert_allclose(adj, [0.18, 0.08, 0.16, 0.12])
    # Partial rejection: k = 3 smallest p-values, cut-off alpha * 3 / 4.
    p = np.array([0.03, 0.5, 0.01, 0.02])
    drift, thr, _ = apply_correction(p, 0.05, "fdr")
    assert drift and thr == pytest.approx(0.0375)
    assert set(np.flatnonzero(p < thr)) == {0, 2, 3}


def test_decide_rejects_only_strictly_below_the_threshold():
    # The paper: reject if the p-value is *smaller than* 0.05 / d.
    at = np.array([0.05 / 4, 0.5, 0.5, 0.5])
    assert not apply_correction(at, 0.05, "bonferroni")[0]
    assert apply_correction(np.nextafter(at, 0), 0.05, "bonferroni")[0]
    assert not apply_correction(np.array([0.05]), 0.05, None)[0]
    assert not apply_correction(np.array([0.05]), 0.05, "fdr")[0]
    assert apply_correction(np.array([0.0499]), 0.05, "fdr")[0]


@pytest.mark.parametrize("seed", range(5))
def test_decide_fdr_matches_hand_bh(seed):
    rng = np.random.default_rng(seed)
    d = 12
    # A mixture of null-like and tiny p-values so that partial rejections occur.
    p = np.where(rng.random(d) < 0.4, rng.random(d) * 0.01, rng.random(d))
    adjusted, reject = _hand_bh(p, 0.05)
    drift, thr, adj = apply_correction(p, 0.05, "fdr")
    assert_allclose(adj, adjusted, rtol=1e-12)
    assert bool(drift) == reject.any()
    assert_array_equal(p < thr, reject)  # the reported cut-off reproduces BH's rejections


def test_decide_is_vectorised_over_leading_axes():
    rng = np.random.default_rng(0)
    p = rng.random((7, 3, 5)) ** 3
    for correction in ("bonferroni", "fdr", None):
        drift, thr, adj = apply_correction(p, 0.05, correction)
        assert drift.shape == thr.shape == (7, 3) and adj.shape == p.shape
        for i in range(7):
            for j in range(3):
                d1, t1, a1 = apply_correction(p[i, j], 0.05, correction)
                assert drift[i, j] == d1 and thr[i, j] == t1
                assert_array_equal(adj[i, j], a1)


def test_decide_unknown_correction_raises():
    with pytest.raises(ValueError, match="holm"):
        apply_correction(np.array([0.1]), 0.05, "holm")


def test_p_value_helper_is_min_adjusted_and_consistent_with_predict():
    rng = np.random.default_rng(5)
    X_ref = rng.normal(size=(60, 4))
    for loc in (0.0, 0.4, 1.0):
        X = rng.normal(loc=loc, size=(60, 4))
        for correction in ("bonferroni", "fdr", None):
            det = KSShiftDetector(correction=correction).fit(X_ref)
            res = det.test(X)
            assert det.p_value(X) == res.p_val_adjusted.min()
            assert det.predict(X) == (det.p_value(X) < det.alpha)


# ------------------------------------------------------------------------- result record


def test_result_record_schema_and_meta():
    ref, test = _shifted(15, 3, h=9)
    res = KSShiftDetector(alpha=0.01).fit(ref).test(test[:12])
    out = res.to_dict()
    assert set(out) == {"data", "meta"}
    assert set(out["data"]) == {"is_drift", "distance", "p_val", "p_val_adjusted", "threshold"}
    assert out["meta"] == {
        "name": "KSShiftDetector",
        "version": dgpbench.__version__,
        "detector_type": "drift",
        "online": False,
        "correction": "bonferroni",
        "alpha": 0.01,
        "n_ref": 15,
        "n": 12,
        "n_features": 3,
    }
    assert isinstance(out["data"]["is_drift"], bool)
    assert out["data"]["threshold"] == pytest.approx(0.01 / 3)
    out["data"]["p_val"][:] = -1.0  # to_dict hands out copies
    assert np.all(res.p_val >= 0)


def test_result_record_is_immutable_and_picklable():
    ref, test = _shifted(15, 3, h=9)
    res = KSShiftDetector().fit(ref).test(test)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.is_drift = False
    with pytest.raises(ValueError, match="read-only"):
        res.p_val[0] = 0.0
    back = pickle.loads(pickle.dumps(res))
    assert isinstance(back, KSTestResult)
    assert back.is_drift == res.is_drift and back.threshold == res.threshold
    assert_array_equal(back.p_val, res.p_val)


# ------------------------------------------------------------------------------ errors


def test_nan_and_inf_raise():
    X = np.random.default_rng(0).normal(size=(10, 3))
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KSShiftDetector().fit(bad)
    det = KSShiftDetector().fit(X)
    with pytest.raises(ValueError, match="NaN"):
        det.predict(bad)
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        det.test(bad)


def test_fewer_than_two_samples_raise():
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match="1 sample"):
        KSShiftDetector().fit(X[:1])
    with pytest.raises(ValueError, match="1 sample"):
        KSShiftDetector().fit(X).test(X[:1])


def test_feature_count_mismatch_raises():
    X = np.random.default_rng(0).normal(size=(10, 3))
    det = KSShiftDetector().fit(X)
    with pytest.raises(ValueError, match="X has 2 features, but KSShiftDetector is expecting 3"):
        det.predict(X[:, :2])


def test_one_dimensional_input_raises():
    with pytest.raises(ValueError, match="2D array"):
        KSShiftDetector().fit(np.arange(5.0))


def test_features_constant_in_both_samples_get_p_1_with_a_warning_naming_how_many():
    # scipy's p = 1, as the batched engine gives it, not a refusal
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(0)
    X_ref, X = rng.normal(size=(10, 5)), rng.normal(size=(8, 5))
    X_ref[:, 1] = X[:, 1] = 3.0
    X_ref[:, 4] = X[:, 4] = 0.0
    det = KSShiftDetector().fit(X_ref)
    with pytest.warns(UserWarning, match="2 of 5 features are constant in both samples"):
        result = det.test(X)
    assert result.p_val[1] == result.p_val[4] == 1.0 and result.distance[[1, 4]].tolist() == [0, 0]
    np.testing.assert_array_equal(result.p_val, ks_2samp(X_ref, X, axis=0).pvalue)
    assert result.threshold == 0.05 / 5  # they still count in the correction
    # a reference constant at another value than the batch is evidence, as scipy says
    X[:, 4] = 1.0
    with pytest.warns(UserWarning, match="1 of 5 features"):
        assert det.test(X).p_val[4] < 1e-3


def test_nored_ks_runs_on_images_with_constant_border_pixels():
    from dgpbench.features.reductions import NoRedFeatures

    rng = np.random.default_rng(1)
    images = rng.uniform(size=(40, 1, 6, 6))
    images[:, :, 0, :] = 0.0  # a border row that is 0 in every image, as MNIST's
    feats = NoRedFeatures().fit(images[:20])
    det = KSShiftDetector().fit(feats.transform(images[:20]))
    with pytest.warns(UserWarning, match="6 of 36 features"):
        assert not det.predict(feats.transform(images[20:]))


def test_constant_test_batch_is_evidence_not_an_error():
    rng = np.random.default_rng(0)
    det = KSShiftDetector().fit(rng.normal(size=(50, 2)))
    X = rng.normal(size=(50, 2))
    X[:, 0] = 5.0
    assert det.predict(X)


@pytest.mark.parametrize(
    "params",
    [{"alpha": 0.0}, {"alpha": 1.0}, {"alpha": -0.1}, {"alpha": "0.05"}, {"correction": "holm"}],
)
def test_invalid_parameters_raise_at_fit(params):
    X = np.random.default_rng(0).normal(size=(10, 2))
    det = KSShiftDetector(**params)  # __init__ only stores
    with pytest.raises(ValueError, match="parameter of KSShiftDetector"):
        det.fit(X)


@pytest.mark.parametrize("method", ["test", "predict", "p_value"])
def test_not_fitted_error(method):
    with pytest.raises(NotFittedError):
        getattr(KSShiftDetector(), method)(np.zeros((3, 2)))


# ------------------------------------------------------------ citizenship, side effects


def test_predict_has_no_side_effects():
    rng = np.random.default_rng(2)
    X_ref, X = rng.normal(size=(40, 3)), rng.normal(loc=0.5, size=(25, 3))
    det = KSShiftDetector().fit(X_ref)
    state = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(det).items()}
    X_before = X.copy()
    first = det.test(X)
    for _ in range(3):
        det.predict(X)
        det.p_value(X)
    assert vars(det).keys() == state.keys()
    for k, v in state.items():
        assert_array_equal(vars(det)[k], v)
    assert_array_equal(X, X_before)
    assert_array_equal(det.test(X).p_val, first.p_val)


def test_reference_is_copied_not_aliased():
    rng = np.random.default_rng(4)
    X_ref = rng.normal(size=(40, 3))
    X = rng.normal(size=(40, 3))
    det = KSShiftDetector().fit(X_ref)
    before = det.test(X).p_val.copy()
    X_ref += 10.0  # the caller mutates its array after fit
    assert_array_equal(det.test(X).p_val, before)
    assert not np.shares_memory(det.X_ref_, X_ref)


def test_fitted_attributes():
    X = np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)
    det = KSShiftDetector().fit(X)
    assert det.n_features_in_ == 4
    assert det.X_ref_.shape == (12, 4) and det.X_ref_.dtype == np.float32
    assert det.fit(X) is det


def test_pickle_roundtrip_of_fitted_detector():
    rng = np.random.default_rng(6)
    X_ref, X = rng.normal(size=(30, 3)), rng.normal(loc=0.8, size=(30, 3))
    det = KSShiftDetector(alpha=0.1, correction="fdr").fit(X_ref)
    back = pickle.loads(pickle.dumps(det))
    assert back.get_params() == det.get_params()
    assert_array_equal(back.test(X).p_val_adjusted, det.test(X).p_val_adjusted)
    assert back.predict(X) == det.predict(X)


def test_clone_and_params():
    det = KSShiftDetector(alpha=0.01, correction=None).fit(np.eye(3) + np.arange(3))
    twin = clone(det)
    assert twin.get_params() == {"alpha": 0.01, "correction": None}
    assert not hasattr(twin, "X_ref_")
    with pytest.raises(NotFittedError):
        twin.predict(np.eye(3))
    twin.set_params(correction="fdr")
    assert twin.correction == "fdr" and det.correction is None


@pytest.mark.parametrize("module", [dgpbench.detectors.ks, dgpbench.detectors.ks_test])
def test_docstring_examples_run(module):
    results = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0 and results.failed == 0


# ------------------------------------------------------ batched engine == scipy exactly


def _check_batched(ref, test):
    assert_array_equal(ks_pvalues(ref, test), ks_2samp(ref, test, axis=1).pvalue)


@pytest.mark.parametrize("n", [2, 10, 20, 50, 200])
def test_batched_pvalues_equal_ks_2samp_continuous_and_extreme(n):
    rng = np.random.default_rng(n)
    ref = rng.normal(size=(6, n, 3))
    test = rng.normal(size=(6, n, 3))
    test[0] += 100.0  # h = n (disjoint samples)
    test[1] = ref[1][::-1]  # h = 0 (same values)
    test[2] += 0.5
    _check_batched(ref, test)


def test_batched_pvalues_cover_scipy_asymptotic_fallback():
    # At n = 200, h = 1 makes scipy's exact routine fail and fall back to asymptotics.
    n = 200
    base = np.arange(n, dtype=float)[None, :, None]
    ref = np.repeat(base, 3, axis=2)
    test = ref + np.array([0.5, 1.0, 7.0])  # interleaved (h = 1), h = 1 with ties, h = 7
    with pytest.warns(RuntimeWarning, match="Exact calculation unsuccessful"):
        expected = ks_2samp(ref, test, axis=1).pvalue
    assert_array_equal(ks_pvalues(ref, test), expected)


@pytest.mark.parametrize(
    ("dtype_ref", "dtype_test"),
    [(np.float32, np.float32), (np.float32, np.float64), (np.float64, np.float32)],
)
def test_batched_pvalues_equal_ks_2samp_dtypes(dtype_ref, dtype_test):
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(4, 30, 2)).astype(dtype_ref)
    test = rng.normal(loc=0.3, size=(4, 30, 2)).astype(dtype_test)
    _check_batched(ref, test)


@pytest.mark.filterwarnings("ignore:ks_2samp. Exact calculation unsuccessful:RuntimeWarning")
@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 40),
    levels=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
    negzero=st.booleans(),
)
def test_batched_pvalues_equal_ks_2samp_with_ties(n, levels, seed, negzero):
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, levels, size=(3, n, 2)).astype(float)
    test = rng.integers(0, levels + 1, size=(3, n, 2)).astype(float)
    if negzero:  # -0.0 and 0.0 are the same value for an ECDF
        test[test == 0] = -0.0
    _check_batched(ref, test)


def test_batched_pvalues_fall_back_to_scipy_for_unequal_sizes_and_large_n(monkeypatch):
    import dgpbench.detectors.ks_test as engine

    def no_table(n, h):
        raise AssertionError("the exact table is for equal sizes up to SCIPY_MAX_AUTO_N")

    monkeypatch.setattr(engine, "ks_pvalues_at", no_table)
    rng = np.random.default_rng(0)
    _check_batched(rng.normal(size=(2, 12, 2)), rng.normal(size=(2, 9, 2)))
    n = engine.SCIPY_MAX_AUTO_N + 1  # scipy's "auto" switches to the asymptotic p-value
    _check_batched(rng.normal(size=(1, n, 2)), rng.normal(loc=0.05, size=(1, n, 2)))


@pytest.mark.filterwarnings("ignore:ks_2samp. Exact calculation unsuccessful:RuntimeWarning")
def test_table_of_pvalues_is_filled_in_any_order_with_scipys_values(monkeypatch):
    monkeypatch.setattr(dgpbench.detectors.ks_test, "_KS_TABLES", {})  # start empty
    n = 37
    first = ks_pvalues_at(n, np.array([[5, 30], [5, 0]]))
    whole = ks_pvalues_at(n, np.arange(n + 1))
    base = np.arange(n, dtype=float)[:, None]
    expected = ks_2samp(np.broadcast_to(base, (n, n + 1)), base + np.arange(n + 1), axis=0)
    assert_array_equal(whole, expected.pvalue)
    assert_array_equal(first, whole[[[5, 30], [5, 0]]])


def test_batched_pvalues_of_constant_features():
    # constant in both with one value: p = 1; a constant reference only: evidence as any feature
    rng = np.random.default_rng(2)
    ref, test = rng.normal(size=(3, 20, 4)), rng.normal(loc=0.3, size=(3, 20, 4))
    ref[:, :, 0] = test[:, :, 0] = 0.0
    ref[2, :, 1] = 1.0
    p = ks_pvalues(ref, test)
    assert_array_equal(p[:, 0], 1.0)
    assert_array_equal(p, ks_2samp(ref, test, axis=1).pvalue)


def test_pool_with_a_constant_feature_is_refused_by_name():
    X = np.random.default_rng(0).normal(size=(10, 4))
    check_no_constant_features(X, "F_clean")
    X[:, [1, 3]] = 2.0
    with pytest.raises(ValueError, match=r"F_clean has constant features at indices \[1, 3\]"):
        check_no_constant_features(X, "F_clean")
