"""The online Cramér-von Mises detector: scipy's statistic at every step, the ERT holds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import cramervonmises_2samp
from sklearn.utils import check_random_state

from dgpbench.online import (
    OnlineCVMDetector,
    load_stream_state,
    mean_run_time_interval,
    run_times,
    save_stream_state,
)
from dgpbench.online.cvm import _CHUNK, cvm_from_positions
from dgpbench.online.thresholds import hazard_thresholds
from dgpbench.saved import FittedDetector, load_detector, save_detector


@pytest.mark.parametrize("seed", range(5))
def test_statistic_from_positions_is_scipys(seed):
    rng = np.random.default_rng(seed)
    n, w = int(rng.integers(2, 40)), int(rng.integers(2, 12))
    ref, win = rng.normal(size=n), rng.normal(size=w)
    a = np.searchsorted(np.sort(ref), win)
    assert cvm_from_positions(a, n) == pytest.approx(
        cramervonmises_2samp(ref, win).statistic, rel=1e-12
    )


def test_sliding_update_equals_scipy_on_each_feature_at_every_step():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    det = OnlineCVMDetector(ert=50, window_size=6, n_bootstraps=200, random_state=0).fit(X)
    det.reset()
    for x in rng.normal(loc=0.2, size=(25, 3)):
        r = det.update(x)
        if r.t < 6:
            assert np.isnan(r.statistic) and not r.is_drift and r.run_time == 0
            continue
        w = det.window()
        want = [cramervonmises_2samp(X[:, j], w[:, j]).statistic for j in range(3)]
        np.testing.assert_allclose(det.feature_statistics(), want, rtol=1e-12)
        assert r.statistic == pytest.approx(max(want), rel=1e-12)
        assert r.run_time == r.t - 5


def test_mean_run_time_on_clean_streams_has_an_interval_containing_the_ert():
    rng = np.random.default_rng(1)
    ert = 50
    det = OnlineCVMDetector(ert=ert, window_size=10, n_bootstraps=5000, random_state=2)
    det.fit(rng.normal(size=(300, 2)))
    times, censored = run_times(det, lambda: rng.normal(size=2), 200, 40 * ert)
    assert not censored.any()
    low, high = mean_run_time_interval(times, level=0.99)
    assert low <= ert <= high, (times.mean(), low, high)


def test_a_shift_in_one_feature_is_detected_soon():
    rng = np.random.default_rng(2)
    det = OnlineCVMDetector(ert=200, window_size=10, n_bootstraps=2000, random_state=0)
    det.fit(rng.normal(size=(200, 4)))
    shifted = np.array([0, 0, 2.0, 0])
    delays, censored = run_times(det, lambda: rng.normal(size=4) + shifted, 20, 300)
    assert not censored.any() and np.median(delays) <= 10


def test_save_and_resume_give_the_decisions_of_an_uninterrupted_run(tmp_path):
    rng = np.random.default_rng(3)
    det = OnlineCVMDetector(ert=50, window_size=5, n_bootstraps=300, random_state=0)
    det.fit(rng.normal(size=(60, 2)))
    stream = np.concatenate([rng.normal(size=(30, 2)), rng.normal(loc=1.0, size=(15, 2))])
    whole = det.reset().run(stream, stop_at_alarm=False)
    save_detector(tmp_path / "d.npz", FittedDetector(None, det, {}))
    for cut in (3, 17):  # while the window fills, and after
        first = load_detector(tmp_path / "d.npz").detector.reset()
        part = first.run(stream[:cut], stop_at_alarm=False)
        save_stream_state(tmp_path / "s.npz", first)
        second = load_detector(tmp_path / "d.npz").detector
        load_stream_state(tmp_path / "s.npz", second)
        part += second.run(stream[cut:], stop_at_alarm=False)
        np.testing.assert_array_equal([r.statistic for r in part], [r.statistic for r in whole])
        assert [r.is_drift for r in part] == [r.is_drift for r in whole]


def test_a_damaged_stream_state_is_refused(tmp_path):
    rng = np.random.default_rng(4)
    det = OnlineCVMDetector(ert=20, window_size=3, n_bootstraps=100, random_state=0)
    det.fit(rng.normal(size=(20, 2))).reset().run(rng.normal(size=(5, 2)))
    state, arrays = det.get_stream_state()
    arrays["cr"] = arrays["cr"] + 10
    with pytest.raises(ValueError, match="out of range"):
        det.set_stream_state(state, arrays)
    with pytest.raises(ValueError, match="t must be"):
        det.set_stream_state({**state, "t": -1}, det.get_stream_state()[1])


def _ecdf_cvm(ref: np.ndarray, win: np.ndarray) -> float:
    """The definition: n W / (n + W)^2 * sum over the pooled points of (F_n - G_W)^2."""
    pooled = np.concatenate([ref, win])
    F = (ref[None, :] <= pooled[:, None]).mean(1)
    G = (win[None, :] <= pooled[:, None]).mean(1)
    n, w = len(ref), len(win)
    return n * w / (n + w) ** 2 * float(((F - G) ** 2).sum())


def test_with_ties_the_statistic_is_the_ecdf_definition():
    rng = np.random.default_rng(5)
    X = rng.integers(0, 4, size=(30, 2)).astype(float)  # many ties, in and across samples
    det = OnlineCVMDetector(ert=20, window_size=6, n_bootstraps=100, random_state=0).fit(X)
    det.reset()
    for x in rng.integers(0, 5, size=(20, 2)).astype(float):
        det.update(x)
        if det.t_ >= 6:
            w = det.window()
            want = [_ecdf_cvm(X[:, j], w[:, j]) for j in range(2)]
            np.testing.assert_allclose(det.feature_statistics(), want, rtol=1e-12)


@pytest.mark.parametrize("integers", [False, True], ids=["continuous", "ties"])
def test_reference_calibration_simulates_the_ecdf_statistic_of_permuted_rows(integers):
    rng = np.random.default_rng(6)
    X = rng.integers(0, 4, size=(25, 3)).astype(float) if integers else rng.normal(size=(25, 3))
    det = OnlineCVMDetector(window_size=4, n_bootstraps=3, calibration="reference")
    stats = det._simulate_reference(X, np.random.default_rng(5))
    perm = np.argsort(np.random.default_rng(5).random((3, 25)), axis=1)
    for b in range(3):
        ref, stream = X[perm[b, 7:]], X[perm[b, :7]]
        for k in range(4):
            want = max(_ecdf_cvm(ref[:, j], stream[k : k + 4, j]) for j in range(3))
            assert stats[b, k] == pytest.approx(want, rel=1e-12)


def _sorted_per_stream_maxima(X: np.ndarray, W: int, B: int, rng: np.random.Generator):
    """The reference calibration's statistics computed by sorting every stream's reference.

    Per chunk of streams, a permutation of the rows (``argsort`` of uniforms); per feature
    the ``m`` reference values sorted, the reference points' sum from prefix sums of
    ``F_m`` and ``F_m^2`` between the window values' positions: ``O(B d m log m)``.
    """
    n, d = X.shape
    L, m = 2 * W - 1, n - 2 * W + 1
    scale = m * W / (m + W) ** 2
    stats = np.full((B, W), -np.inf)
    starts = np.arange(W)
    slots = starts[:, None] + np.arange(W)[None, :]  # (window, slot) -> stream index
    level = np.arange(W + 1) / W  # the window's ECDF on each segment
    for start in range(0, B, _CHUNK):
        b = min(_CHUNK, B - start)
        perm = np.argsort(rng.random((b, n)), axis=1)
        for j in range(d):
            ref = np.sort(X[perm[:, L:], j], axis=1)  # (b, m)
            stream = X[perm[:, :L], j]  # (b, L)
            F = np.stack([np.searchsorted(r, r, side="right") for r in ref]) / m
            P1 = np.concatenate([np.zeros((b, 1)), F.cumsum(1)], axis=1)
            P2 = np.concatenate([np.zeros((b, 1)), (F * F).cumsum(1)], axis=1)
            left = np.stack([np.searchsorted(r, s) for r, s in zip(ref, stream, strict=True)])
            right = np.stack([np.searchsorted(r, s, side="right")
                              for r, s in zip(ref, stream, strict=True)])  # fmt: skip
            q = np.sort(left[:, slots], axis=2)  # (b, W windows, W)
            edges = np.concatenate(
                [np.zeros((b, W, 1), dtype=q.dtype), q, np.full((b, W, 1), m)], axis=2
            )
            s1 = np.diff(np.take_along_axis(P1[:, None, :], edges, axis=2), axis=2)
            s2 = np.diff(np.take_along_axis(P2[:, None, :], edges, axis=2), axis=2)
            count = np.diff(edges, axis=2)
            ref_sum = (s2 - 2 * level * s1 + level**2 * count).sum(2)
            le = (stream[:, None, :] <= stream[:, :, None]).cumsum(2, dtype=np.int32)
            before = le[:, slots, (starts - 1)[:, None]] * (starts > 0)[:, None]
            G = (le[:, slots, (starts + W - 1)[:, None]] - before) / W
            win_sum = ((right[:, slots] / m - G) ** 2).sum(2)
            np.maximum(stats[start : start + b], scale * (ref_sum + win_sum),
                       out=stats[start : start + b])  # fmt: skip
    return stats


@pytest.mark.parametrize(
    "n, d, W, data",
    [(5, 1, 2, "ties"), (5, 3, 2, "continuous"), (11, 2, 5, "ties"), (300, 1, 8, "continuous"),
     (300, 4, 8, "ties"), (400, 3, 2, "ties"), (250, 5, 20, "continuous"), (41, 4, 20, "ties"),
     (60, 3, 4, "constant column")],
)  # fmt: skip
def test_reference_calibration_equals_sorting_each_streams_reference(n, d, W, data):
    rng = np.random.default_rng(n * d + W)
    X = rng.normal(size=(n, d)) if data == "continuous" else rng.integers(0, 5, size=(n, d))
    X = X.astype(float)
    if data == "constant column":
        X[:, 1] = 2.0
    B = 300 if n * d < 1000 else 40  # more than one chunk for the small ones
    det = OnlineCVMDetector(window_size=W, n_bootstraps=B, calibration="reference")
    new = det._simulate_reference(X, np.random.default_rng(3))
    old = _sorted_per_stream_maxima(X, W, B, np.random.default_rng(3))
    np.testing.assert_allclose(new, old, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("ties", [False, True], ids=["continuous", "ties"])
def test_reference_calibration_thresholds_are_those_of_sorting_each_streams_reference(ties):
    rng = np.random.default_rng(11)
    X = rng.integers(0, 6, size=(200, 3)).astype(float) if ties else rng.normal(size=(200, 3))
    det = OnlineCVMDetector(ert=50, window_size=6, n_bootstraps=700, random_state=0,
                            calibration="reference").fit(X)  # fmt: skip
    seed = check_random_state(0).randint(2**31 - 1)  # fit's generator
    old = _sorted_per_stream_maxima(X, 6, 700, np.random.default_rng(seed))
    np.testing.assert_allclose(det.thresholds_, hazard_thresholds(old, 1 / 50), rtol=1e-10)


def _correlated(rng: np.random.Generator, size: int, d: int = 5, rho: float = 0.9) -> np.ndarray:
    cov = np.full((d, d), rho) + (1 - rho) * np.eye(d)
    return rng.normal(size=(size, d)) @ np.linalg.cholesky(cov).T


def test_on_dependent_features_reference_calibration_keeps_the_ert_and_gaussian_exceeds_it():
    rng = np.random.default_rng(7)
    ert, ref = 50, _correlated(rng, 600)
    exact = OnlineCVMDetector(ert=ert, window_size=10, n_bootstraps=10000, random_state=0,
                              calibration="reference").fit(ref)  # fmt: skip
    assert len(exact.X_ref_) == 600 - 19
    times, censored = run_times(exact, lambda: _correlated(rng, 1)[0], 200, 40 * ert)
    low, high = mean_run_time_interval(times[~censored], level=0.99)
    assert not censored.any() and low <= ert <= high, (times.mean(), low, high)
    loose = OnlineCVMDetector(ert=ert, window_size=10, n_bootstraps=5000, random_state=0)
    times, censored = run_times(loose.fit(ref), lambda: _correlated(rng, 1)[0], 100, 40 * ert)
    low, _ = mean_run_time_interval(times[~censored], level=0.99)
    assert low > ert  # fewer false alarms than asked: the independence correction is loose


def test_reference_calibration_saves_and_loads(tmp_path):
    rng = np.random.default_rng(8)
    det = OnlineCVMDetector(ert=20, window_size=3, n_bootstraps=100, random_state=0,
                            calibration="reference").fit(rng.normal(size=(30, 2)))  # fmt: skip
    save_detector(tmp_path / "d.npz", FittedDetector(None, det, {}))
    back = load_detector(tmp_path / "d.npz").detector
    assert back.calibration == "reference"
    np.testing.assert_array_equal(back.X_ref_, det.X_ref_)
    np.testing.assert_array_equal(back.thresholds_, det.thresholds_)
