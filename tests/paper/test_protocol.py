"""The bootstrap protocol: draws, batch assembly, pairing, calibration, aggregation."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import binom, binomtest, ks_2samp

import dgpbench.paper.protocol as protocol
from dgpbench.detectors.ks import KSShiftDetector
from dgpbench.detectors.ks_test import ks_pvalues_at
from dgpbench.paper.protocol import (
    bootstrap_detection,
    calibration,
    detection_ratio,
    draw_indices,
    n_corrupted,
    wilson_interval,
)


@pytest.fixture(scope="module")
def features():
    rng = np.random.default_rng(2023)
    F_clean = rng.normal(size=(400, 4))
    F_corr = F_clean + rng.normal(scale=1.0, size=F_clean.shape) + 0.5  # moderate shift
    return F_clean, F_corr


def _assemble(F_clean, F_corr, idx, i):
    test = F_clean[idx.test[i]].copy()
    test[idx.corrupted[i]] = F_corr[idx.test[i][idx.corrupted[i]]]
    return F_clean[idx.reference[i]], test


# --------------------------------------------------------------------------------- draws


@pytest.mark.parametrize(("n", "delta"), [(10, 0.25), (10, 0.75), (20, 0.5), (50, 0.25), (7, 1.0)])
def test_draw_indices_structure(n, delta):
    idx = draw_indices(60, n, delta, n_draws=30, seed=1)
    assert idx.test.shape == idx.reference.shape == idx.corrupted.shape == (30, n)
    assert_array_equal(idx.corrupted.sum(axis=1), round(delta * n))
    for row in (*idx.test, *idx.reference):  # without replacement, within range
        assert len(set(row.tolist())) == n and row.min() >= 0 and row.max() < 60
    # The reference is drawn independently of the test batch: they are not the same rows.
    assert not np.array_equal(np.sort(idx.test, axis=1), np.sort(idx.reference, axis=1))


def test_draw_indices_depend_only_on_seed_n_delta_draw():
    a = draw_indices(100, 10, 0.5, n_draws=5, seed=112)
    b = draw_indices(100, 10, 0.5, n_draws=12, seed=112)
    for field in ("test", "corrupted", "reference"):  # draw i does not depend on n_draws
        assert_array_equal(getattr(a, field), getattr(b, field)[:5])
    assert not np.array_equal(a.test, draw_indices(100, 10, 0.5, n_draws=5, seed=113).test)
    assert not np.array_equal(a.test, draw_indices(100, 10, 0.25, n_draws=5, seed=112).test)
    assert not a.test.flags.writeable  # cached and shared: must be immutable


def test_n_corrupted_is_python_round():
    # Python's round(delta * n), half to even; pinned so a change of rule is deliberate.
    assert [n_corrupted(10, d) for d in (0.25, 0.5, 0.75)] == [2, 5, 8]
    assert [n_corrupted(50, d) for d in (0.25, 0.5, 0.75)] == [12, 25, 38]
    assert [n_corrupted(n, 0.25) for n in (20, 100, 200)] == [5, 25, 50]
    assert n_corrupted(10, 0.0) == 0 and n_corrupted(10, 1.0) == 10


# ------------------------------------------------------------------------ batch assembly


@pytest.mark.parametrize(("n", "delta"), [(10, 0.25), (20, 0.75), (50, 0.5), (10, 0.0)])
def test_batches_are_assembled_from_the_drawn_rows(monkeypatch, n, delta):
    """Spy on the KS kernel; marker features reveal which rows and twins each batch holds."""
    N = 120
    rng = np.random.default_rng(0)
    F_clean = np.column_stack([np.arange(N, dtype=float), rng.normal(size=N)])
    F_corr = np.column_stack([-(np.arange(N, dtype=float) + 1), rng.normal(size=N)])
    seen = []
    real = protocol.ks_pvalues

    def spy(ref, test):
        seen.append((ref.copy(), test.copy()))
        return real(ref, test)

    monkeypatch.setattr(protocol, "ks_pvalues", spy)
    monkeypatch.setattr(protocol, "_MAX_CHUNK_ELEMENTS", 2 * n * 2 * 7)  # chunks of 7 draws
    n_draws = 20
    rec = bootstrap_detection(F_clean, F_corr, ns=[n], deltas=[delta], n_draws=n_draws, seed=5)
    assert len(seen) == 3  # 7 + 7 + 6 draws
    ref = np.concatenate([r for r, _ in seen])[:, :, 0]
    test = np.concatenate([t for _, t in seen])[:, :, 0]
    idx = draw_indices(N, n, delta, n_draws=n_draws, seed=5)
    corrupted = test < 0
    assert_array_equal(corrupted.sum(axis=1), round(delta * n))  # the marker count
    assert_array_equal(corrupted, idx.corrupted)
    assert_array_equal(np.where(corrupted, -test - 1, test), idx.test)  # twins of same rows
    assert np.all(ref >= 0)  # the reference is always clean
    assert_array_equal(ref, idx.reference)
    assert len(rec) == n_draws


def test_decisions_equal_the_detector_on_the_same_rows(features):
    F_clean, F_corr = features
    idx = draw_indices(len(F_clean), 20, 0.5, n_draws=40, seed=112)
    for correction in ("bonferroni", "fdr", None):
        rec = bootstrap_detection(
            F_clean, F_corr, ns=[20], deltas=[0.5], n_draws=40, correction=correction
        )
        expected_rejected, expected_min_p = [], []
        for i in range(40):
            ref, test = _assemble(F_clean, F_corr, idx, i)
            expected_rejected.append(KSShiftDetector(correction=correction).fit(ref).predict(test))
            expected_min_p.append(min(ks_2samp(ref[:, j], test[:, j]).pvalue for j in range(4)))
        assert_array_equal(rec["rejected"], expected_rejected)
        assert_array_equal(rec["min_p"], expected_min_p)
        assert 0 < rec["rejected"].sum() < 40  # both outcomes occur: the check is not vacuous


# ------------------------------------------------------- determinism, pairing, calibration


def test_same_inputs_give_identical_records(features):
    F_clean, F_corr = features
    kw = {"ns": [10, 50], "deltas": [0.25, 0.75], "n_draws": 15}
    a = bootstrap_detection(F_clean, F_corr, **kw)
    protocol._draw_indices.cache_clear()  # recompute the draws, do not reuse cached ones
    b = bootstrap_detection(F_clean.copy(), F_corr.copy(), **kw)
    pd.testing.assert_frame_equal(a, b)
    assert a.columns.tolist() == ["n", "delta", "draw", "rejected", "min_p"]
    assert a.dtypes.astype(str).tolist() == ["int64", "float64", "int64", "bool", "float64"]
    assert a[["n", "delta"]].drop_duplicates().values.tolist() == [
        [10, 0.25],
        [10, 0.75],
        [50, 0.25],
        [50, 0.75],
    ]
    c = bootstrap_detection(F_clean, F_corr, seed=7, **kw)
    assert not np.array_equal(a["min_p"], c["min_p"])


def test_inputs_are_not_modified(features):
    F_clean, F_corr = features
    before = F_clean.copy(), F_corr.copy()
    bootstrap_detection(F_clean, F_corr, ns=[20], deltas=[1.0], n_draws=5)
    assert_array_equal(F_clean, before[0])
    assert_array_equal(F_corr, before[1])


def test_methods_see_the_same_draws(features):
    """Draws depend on (seed, n, delta, draw) only, so methods are compared on paired draws.

    KS p-values are invariant under strictly increasing maps of a feature, and duplicated
    features do not change the minimum p-value: if both methods see the same rows, their
    records coincide exactly.
    """
    F_clean, F_corr = features
    kw = {"ns": [10, 50], "deltas": [0.25, 0.75], "n_draws": 20, "correction": None}
    method_a = bootstrap_detection(F_clean, F_corr, **kw)
    method_b = bootstrap_detection(np.exp(F_clean), np.exp(F_corr), **kw)
    wide = lambda F: np.hstack([F, 3.0 * F[:, ::-1] - 1.0])  # noqa: E731
    method_c = bootstrap_detection(wide(F_clean), wide(F_corr), **kw)
    pd.testing.assert_frame_equal(method_a, method_b)
    pd.testing.assert_frame_equal(method_a, method_c)


def test_calibration_equals_delta_zero_rows(features):
    F_clean, F_corr = features
    rec = bootstrap_detection(F_clean, F_corr, ns=[10, 20], deltas=[0.0, 0.5], n_draws=10)
    cal = calibration(F_clean, ns=[10, 20], n_draws=10)
    pd.testing.assert_frame_equal(
        rec[rec["delta"] == 0.0].reset_index(drop=True), cal.reset_index(drop=True)
    )


def test_calibration_false_positive_rate_matches_exact_ks_size():
    """iid Gaussian features: the rejection rate is the KS test's exact size, close to alpha.

    With continuous data, P(p < t) is the largest attainable exact p-value below t
    (KS p-values are discrete), so with d independent features and Bonferroni the expected
    false detection rate is 1 - (1 - size)^d, a little below alpha.
    """
    rng = np.random.default_rng(42)
    d, alpha, n_draws, ns = 3, 0.05, 200, (20, 50, 100)
    F = rng.normal(size=(20_000, d))  # large pool: few shared rows between ref and test
    cal = calibration(F, ns=ns, n_draws=n_draws, alpha=alpha)
    expected = []
    for n in ns:
        table = ks_pvalues_at(n, np.arange(n + 1))
        size = table[table < alpha / d].max()
        expected.append(1 - (1 - size) ** d)
    assert 0.03 < np.mean(expected) < alpha  # conservative, but close to alpha
    k = int(cal["rejected"].sum())
    lo, hi = binom.ppf([0.0005, 0.9995], len(cal), np.mean(expected))
    assert lo <= k <= hi, (k, lo, hi)
    assert_array_equal(cal["rejected"], cal["min_p"] < alpha / d)


def test_strong_shift_is_detected():
    rng = np.random.default_rng(8)
    F_clean = rng.normal(size=(1000, 5))
    F_corr = F_clean + 6.0  # corrupted twins lie beyond every clean value
    rec = bootstrap_detection(
        F_clean, F_corr, ns=[10, 50, 200], deltas=[0.25, 0.5, 0.75], n_draws=30
    )
    ratio = detection_ratio(rec).set_index(["n", "delta"])["detection_ratio"]
    # Half the test batch beyond the reference range: KS statistic >= 0.5.
    assert ratio.loc[(50, 0.5)] == 1.0 and ratio.loc[(200, 0.25)] == 1.0
    assert ratio.loc[(200, 0.75)] == 1.0 and ratio.loc[(50, 0.75)] == 1.0
    for n in (10, 50, 200):
        assert ratio.loc[(n, 0.25)] <= ratio.loc[(n, 0.5)] <= ratio.loc[(n, 0.75)]
    assert ratio.loc[(10, 0.25)] < 1.0  # 2 corrupted rows out of 10 cannot reach alpha / 5


# ---------------------------------------------------------------------------- validation


def test_n_larger_than_available_rows_raises(features):
    F_clean, F_corr = features
    with pytest.raises(ValueError, match=r"n=500 .*available rows \(400\)"):
        bootstrap_detection(F_clean, F_corr, ns=[10, 500], deltas=[0.5])
    with pytest.raises(ValueError, match=r"n=401 .*\(400\)"):
        calibration(F_clean, ns=[401])


def test_shape_mismatch_raises(features):
    F_clean, F_corr = features
    with pytest.raises(ValueError, match="F_corr must have the shape of F_clean"):
        bootstrap_detection(F_clean, F_corr[:-1], ns=[10])
    with pytest.raises(ValueError, match="F_corr must have the shape of F_clean"):
        bootstrap_detection(F_clean, F_corr[:, :-1], ns=[10])
    with pytest.raises(ValueError, match="F_clean must have 2 dimensions"):
        bootstrap_detection(F_clean[:, 0], None, ns=[10], deltas=[0.0])


def test_nan_raises(features):
    F_clean, F_corr = features
    bad = F_corr.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="F_corr contains NaN"):
        bootstrap_detection(F_clean, bad, ns=[10])
    with pytest.raises(ValueError, match="F_clean contains NaN"):
        calibration(bad, ns=[10])


def test_other_invalid_arguments_raise(features):
    F_clean, F_corr = features
    with pytest.raises(ValueError, match="F_corr is None"):
        bootstrap_detection(F_clean, None, ns=[10], deltas=[0.0, 0.25])
    with pytest.raises(ValueError, match="delta must be in"):
        bootstrap_detection(F_clean, F_corr, ns=[10], deltas=[1.5])
    with pytest.raises(ValueError, match="n must be >= 2"):
        bootstrap_detection(F_clean, F_corr, ns=[1])
    with pytest.raises(ValueError, match="duplicates"):
        bootstrap_detection(F_clean, F_corr, ns=[10, 10])
    with pytest.raises(ValueError, match="correction"):
        bootstrap_detection(F_clean, F_corr, ns=[10], correction="holm")
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_detection(F_clean, F_corr, ns=[10], alpha=1.0)
    with pytest.raises(ValueError, match="n_draws"):
        calibration(F_clean, ns=[10], n_draws=0)
    with pytest.raises(TypeError, match="n must be an integer"):
        calibration(F_clean, ns=[10.0])
    const = F_clean.copy()
    const[:, 2] = 1.0
    with pytest.raises(ValueError, match=r"constant features at indices \[2\]"):
        calibration(const, ns=[10])


# --------------------------------------------------------------------------- aggregation


@pytest.mark.parametrize(
    ("k", "n"), [(0, 10), (1, 10), (5, 100), (37, 100), (99, 100), (100, 100), (3, 7)]
)
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_interval_matches_binomtest(k, n, confidence):
    ref = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert_allclose([low, high], [ref.low, ref.high], rtol=1e-10, atol=1e-14)


def test_the_95_percent_normal_quantile_is_scipys_bit_for_bit():
    from scipy.stats import norm

    from dgpbench.paper.protocol import _normal_quantile

    for q in (0.975, 0.95, 0.995):
        assert _normal_quantile(q) == norm.ppf(q)
    assert type(_normal_quantile(0.975)) is type(norm.ppf(0.95))


def test_wilson_interval_vectorised_and_validated():
    low, high = wilson_interval(np.array([0, 5, 10]), 10)
    assert low.shape == high.shape == (3,)
    assert np.all(low <= np.array([0, 5, 10]) / 10) and np.all(high >= np.array([0, 5, 10]) / 10)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 10, confidence=1.0)


def test_detection_ratio_against_groupby(features):
    F_clean, F_corr = features
    parts = []
    for method, transform in (("a", lambda F: F), ("b", lambda F: F[:, :2])):
        rec = bootstrap_detection(
            transform(F_clean), transform(F_corr), ns=[10, 50], deltas=[0.25, 0.75], n_draws=12
        )
        parts.append(rec.assign(method=method))
    records = pd.concat(parts, ignore_index=True)
    out = detection_ratio(records, by=["method", "n"])
    assert out.columns.tolist() == [
        "method",
        "n",
        "detection_ratio",
        "n_rejected",
        "count",
        "ci_low",
        "ci_high",
    ]
    hand = records.groupby(["method", "n"])["rejected"].agg(["mean", "sum", "size"])
    assert_allclose(out["detection_ratio"], hand["mean"].to_numpy())
    assert_array_equal(out["n_rejected"], hand["sum"].to_numpy())
    assert_array_equal(out["count"], 24)
    low, high = wilson_interval(hand["sum"].to_numpy(), hand["size"].to_numpy())
    assert_allclose(out["ci_low"], low)
    assert_allclose(out["ci_high"], high)
    pooled = detection_ratio(records, by=[])
    assert pooled["count"].item() == len(records)
    assert pooled["detection_ratio"].item() == pytest.approx(records["rejected"].mean())


def test_detection_ratio_validation():
    rec = pd.DataFrame({"n": [10], "rejected": [True]})
    with pytest.raises(ValueError, match="lacks columns"):
        detection_ratio(rec, by=["delta"])
    with pytest.raises(ValueError, match="empty"):
        detection_ratio(rec.iloc[:0], by=["n"])
    with pytest.raises(ValueError, match="boolean"):
        detection_ratio(pd.DataFrame({"n": [10], "rejected": [0.5]}), by=["n"])
    with pytest.raises(TypeError, match="DataFrame"):
        detection_ratio(rec.to_dict(), by=["n"])


def test_docstring_examples_run():
    results = doctest.testmod(protocol, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0 and results.failed == 0
