"""The online MMD: the sliding update is the full statistic, the ERT holds, shifts are caught."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.detectors.mmd import mmd2_unbiased
from dgpbench.online import (
    OnlineMMDDetector,
    load_stream_state,
    mean_run_time_interval,
    run_times,
    save_stream_state,
)
from dgpbench.online.mmd import gaussian_kernel
from dgpbench.saved import FittedDetector, load_detector, save_detector


def _full_mmd2(det: OnlineMMDDetector) -> float:
    Z = np.concatenate([det.X_ref_, det.window()])
    return mmd2_unbiased(gaussian_kernel(Z, Z, det.gamma_), len(det.X_ref_))


def test_sliding_update_equals_full_recomputation_at_every_step():
    rng = np.random.default_rng(0)
    det = OnlineMMDDetector(ert=50, window_size=7, n_bootstraps=100, random_state=0)
    det.fit(rng.normal(size=(60, 3))).reset()
    for x in rng.normal(loc=0.3, size=(30, 3)):
        r = det.update(x)
        if r.t < 7:
            assert np.isnan(r.statistic) and not r.is_drift and r.run_time == 0
            assert len(det.window()) == r.t
            continue
        assert r.statistic == pytest.approx(_full_mmd2(det), abs=1e-12)
        assert r.run_time == r.t - 6
    np.testing.assert_array_equal(det.window()[-1], x)


def test_simulated_statistics_equal_the_direct_formula():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2))
    det = OnlineMMDDetector(window_size=4, n_bootstraps=3, bandwidth=1.3)
    gamma = 1 / (2 * 1.3**2)
    seed = np.random.default_rng(5)
    stats = det._simulate(X, gamma, np.random.default_rng(5))
    Q = np.argsort(seed.random((3, 30)), axis=1)
    for b in range(3):
        ref = X[Q[b, 7:]]
        for t in range(4):
            Z = np.concatenate([ref, X[Q[b, t : t + 4]]])
            assert stats[b, t] == pytest.approx(
                mmd2_unbiased(gaussian_kernel(Z, Z, gamma), len(ref)), abs=1e-12
            )


def test_mean_run_time_on_clean_streams_has_an_interval_containing_the_ert():
    rng = np.random.default_rng(2)
    ert = 50
    det = OnlineMMDDetector(ert=ert, window_size=10, n_bootstraps=20000, random_state=3)
    det.fit(rng.normal(size=(300, 2)))
    times, censored = run_times(det, lambda: rng.normal(size=2), 200, 40 * ert)
    assert not censored.any()
    low, high = mean_run_time_interval(times, level=0.99)
    assert low <= ert <= high, (times.mean(), low, high)


def test_a_shifted_stream_is_detected_soon():
    rng = np.random.default_rng(3)
    det = OnlineMMDDetector(ert=200, window_size=10, n_bootstraps=1000, random_state=0)
    det.fit(rng.normal(size=(200, 2)))
    delays, censored = run_times(det, lambda: rng.normal(loc=1.5, size=2), 20, 200)
    assert not censored.any() and np.median(delays) <= 15


def test_save_and_resume_give_the_decisions_of_an_uninterrupted_run(tmp_path):
    rng = np.random.default_rng(4)
    det = OnlineMMDDetector(ert=50, window_size=6, n_bootstraps=300, random_state=0)
    det.fit(rng.normal(size=(80, 3)))
    stream = np.concatenate([rng.normal(size=(40, 3)), rng.normal(loc=1.0, size=(20, 3))])
    whole = det.reset().run(stream, stop_at_alarm=False)
    save_detector(tmp_path / "d.npz", FittedDetector(None, det, {}))
    first = load_detector(tmp_path / "d.npz").detector.reset()
    part = first.run(stream[:23], stop_at_alarm=False)
    save_stream_state(tmp_path / "s.npz", first)
    second = load_detector(tmp_path / "d.npz").detector
    load_stream_state(tmp_path / "s.npz", second)
    part += second.run(stream[23:], stop_at_alarm=False)
    np.testing.assert_array_equal([r.statistic for r in part], [r.statistic for r in whole])
    assert [r.is_drift for r in part] == [r.is_drift for r in whole]
    assert [r.t for r in part] == list(range(1, 61))


def test_a_stream_state_resumes_only_on_the_detector_that_wrote_it(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    a = OnlineMMDDetector(ert=20, window_size=4, n_bootstraps=100, random_state=0).fit(X)
    b = OnlineMMDDetector(ert=20, window_size=4, n_bootstraps=100, random_state=1).fit(X)
    save_stream_state(tmp_path / "s.npz", a.reset())
    with pytest.raises(ValueError, match="another detector"):
        load_stream_state(tmp_path / "s.npz", b)


def test_bad_input_is_refused_with_a_clear_error():
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="at least 21"):
        OnlineMMDDetector(window_size=10).fit(rng.normal(size=(20, 2)))
    with pytest.raises(ValueError, match="constant"):
        OnlineMMDDetector(window_size=2).fit(np.ones((10, 2)))
    with pytest.raises(ValueError, match="ert"):
        OnlineMMDDetector(ert=1).fit(rng.normal(size=(100, 2)))
    det = OnlineMMDDetector(ert=20, window_size=3, n_bootstraps=100).fit(rng.normal(size=(30, 2)))
    with pytest.raises(ValueError, match="3 features"):
        det.update(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        det.update(np.array([0.0, np.nan]))


def test_the_same_seed_gives_the_same_thresholds():
    X = np.random.default_rng(7).normal(size=(50, 2))
    a = OnlineMMDDetector(ert=20, window_size=4, n_bootstraps=200, random_state=3).fit(X)
    b = OnlineMMDDetector(ert=20, window_size=4, n_bootstraps=200, random_state=3).fit(X)
    np.testing.assert_array_equal(a.thresholds_, b.thresholds_)
    np.testing.assert_array_equal(a.X_ref_, b.X_ref_)


def test_running_sums_stay_exact_over_a_long_stream():
    rng = np.random.default_rng(8)
    det = OnlineMMDDetector(ert=1e6, window_size=5, n_bootstraps=100, random_state=0)
    det.fit(rng.normal(size=(40, 2))).reset()
    for x in rng.normal(size=(3000, 2)):
        r = det.update(x)
    assert r.statistic == pytest.approx(_full_mmd2(det), abs=1e-11)
