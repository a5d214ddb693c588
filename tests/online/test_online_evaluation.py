"""Measuring online detectors: the run-time interval's coverage, censoring, delays."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.online import (
    OnlineCVMDetector,
    OnlineMMDDetector,
    detection_delay,
    mean_run_time_interval,
    run_times,
)


@pytest.mark.parametrize("mean", [5.0, 50.0])
def test_the_interval_covers_the_mean_of_geometric_times_at_least_at_its_level(mean):
    # 1000 repetitions of 200 geometric run times: coverage >= 95% minus sampling slack
    rng = np.random.default_rng(0)
    times = rng.geometric(1 / mean, size=(1000, 200))
    covered = [low <= mean <= high for low, high in map(mean_run_time_interval, times)]
    assert np.mean(covered) >= 0.93


def test_the_interval_is_exact_for_exponential_times():
    rng = np.random.default_rng(1)
    times = 1 + rng.exponential(30.0, size=(1000, 50))  # shifted so that every time is >= 1
    covered = [low <= 31.0 <= high for low, high in map(mean_run_time_interval, times)]
    assert np.mean(covered) == pytest.approx(0.95, abs=0.02)


@pytest.mark.parametrize("bad", [[], [0, 3], [[1, 2]]])
def test_the_interval_refuses_what_is_not_run_times(bad):
    with pytest.raises(ValueError, match="run times"):
        mean_run_time_interval(bad)


def test_streams_without_alarm_are_reported_as_censored():
    rng = np.random.default_rng(2)
    det = OnlineMMDDetector(ert=1e6, window_size=3, n_bootstraps=200, random_state=0)
    det.fit(rng.normal(size=(30, 2)))
    times, censored = run_times(det, lambda: rng.normal(size=2), 3, 10)
    assert censored.all() and (times == 10 - 2).all()  # run time counts from step W = 3


def test_detection_delay_counts_from_the_first_shifted_sample():
    rng = np.random.default_rng(3)
    det = OnlineMMDDetector(ert=100, window_size=5, n_bootstraps=1000, random_state=0)
    det.fit(rng.normal(size=(100, 2)))
    clean, shifted = rng.normal(size=(20, 2)), rng.normal(loc=10.0, size=(20, 2))
    delay = detection_delay(det, clean, shifted)
    assert 1 <= delay <= 5
    assert detection_delay(det, clean, clean) is None or detection_delay(det, clean, clean) <= 0


def _run_times_per_update(detector, draw, n_streams, max_steps):
    """Oracle: one ``update`` per ``draw()``, the streams one after the other."""
    times, censored = [], []
    for _ in range(n_streams):
        detector.reset()
        while True:
            result = detector.update(draw())
            if result.is_drift or result.t >= max_steps:
                break
        times.append(result.run_time)
        censored.append(not result.is_drift)
    return np.array(times), np.array(censored)


@pytest.mark.parametrize("cls", [OnlineMMDDetector, OnlineCVMDetector], ids=["mmd", "cvm"])
@pytest.mark.parametrize("max_steps", [3, 60, 400])
def test_run_times_in_blocks_equal_one_update_per_draw(cls, max_steps):
    # blocks of 32 then 64 rows: streams end inside a block, past one, and censored
    rng = np.random.default_rng(5)
    det = cls(ert=100, window_size=4, n_bootstraps=2000, random_state=0)
    det.fit(rng.normal(size=(200, 2)))
    blocks, rows = np.random.default_rng(6), np.random.default_rng(6)
    got = run_times(det, lambda: blocks.normal(size=2), 12, max_steps)
    want = _run_times_per_update(det, lambda: rows.normal(size=2), 12, max_steps)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert max_steps < 60 or (not want[1].all() and (want[0] > 32).any())
