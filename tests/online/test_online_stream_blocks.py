"""The stream evaluation fed in blocks through ``run`` against one ``update`` per row."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from dgpbench.online import OnlineCVMDetector, OnlineMMDDetector
from dgpbench.online.streams import WindowDraw, clean_run_times, shift_delays


class _PythonWindowDraw:
    """Oracle of :class:`WindowDraw`: one candidate at a time, the recent rows in a deque."""

    def __init__(self, n_rows, window_size, rng):
        self.n_rows, self.rng, self._lag = n_rows, rng, window_size - 1
        self._recent = deque(maxlen=max(self._lag, 1))
        self._candidates, self._next = [], 0

    def restart(self):
        self._recent.clear()
        return self

    def __call__(self):
        while True:
            if self._next == len(self._candidates):
                self._candidates = self.rng.integers(self.n_rows, size=256).tolist()
                self._next = 0
            i = self._candidates[self._next]
            self._next += 1
            if self._lag == 0 or i not in self._recent:
                break
        if self._lag:
            self._recent.append(i)
        return i

    def take(self, n):
        return np.array([self() for _ in range(n)], dtype=np.int64)


def _clean_per_row(detector, pool, n_streams, max_steps, seed, window_size):
    """Oracle: one ``update`` per drawn row, until the alarm or ``max_steps``."""
    draw = _PythonWindowDraw(len(pool), window_size, np.random.default_rng(seed))
    times, censored = [], []
    for _ in range(n_streams):
        draw.restart()
        detector.reset()
        while True:
            result = detector.update(pool[draw()])
            if result.is_drift or result.t >= max_steps:
                break
        times.append(result.run_time)
        censored.append(not result.is_drift)
    return np.array(times), np.array(censored)


def _shift_per_row(detector, clean_pool, shifted_pool, change_point, n_streams, max_after,
                   seed, window_size):  # fmt: skip
    """Oracle: all rows of a stream drawn first, then one ``update`` each until the alarm."""
    rng = np.random.default_rng(seed)
    before = _PythonWindowDraw(len(clean_pool), window_size, rng)
    after = _PythonWindowDraw(len(shifted_pool), window_size, rng)
    delays = []
    for _ in range(n_streams):
        rows = np.concatenate([clean_pool[before.restart().take(change_point)],
                               shifted_pool[after.restart().take(max_after)]])  # fmt: skip
        detector.reset()
        delay = np.nan
        for x in rows:
            result = detector.update(x)
            if result.is_drift:
                delay = result.t - change_point
                break
        delays.append(delay)
    return np.array(delays)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(200, 3)), rng.normal(size=(40, 3))


DETECTORS = [
    pytest.param(OnlineMMDDetector, id="mmd"),
    pytest.param(OnlineCVMDetector, id="cvm"),
]


@pytest.mark.parametrize("cls", DETECTORS)
@pytest.mark.parametrize("window, max_steps", [(5, 400), (5, 30), (1, 150)])
def test_clean_run_times_in_blocks_equal_one_update_per_row(data, cls, window, max_steps):
    ref, pool = data
    det = cls(ert=60, window_size=max(window, 2), n_bootstraps=600, random_state=1).fit(ref)
    got = clean_run_times(det, pool, 25, max_steps, seed=4, window_size=window)
    want = _clean_per_row(det, pool, 25, max_steps, 4, window)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert not want[1].all() and (want[1].any() or max_steps > 100)  # some alarms, censored


@pytest.mark.parametrize("cls", DETECTORS)
@pytest.mark.parametrize("change_point, max_after", [(5, 300), (60, 20), (0, 3)])
def test_shift_delays_equal_one_update_per_row(data, cls, change_point, max_after):
    ref, pool = data
    det = cls(ert=60, window_size=5, n_bootstraps=600, random_state=2).fit(ref)
    shifted = pool * 1.3 + 0.4
    got = shift_delays(det, pool, shifted, change_point, 15, max_after, seed=5)
    want = _shift_per_row(det, pool, shifted, change_point, 15, max_after, 5, 5)
    np.testing.assert_array_equal(got, want)


def test_clean_streams_past_the_largest_block_equal_one_update_per_row(data):
    ref, pool = data
    det = OnlineCVMDetector(ert=1500, window_size=5, n_bootstraps=1500, random_state=3).fit(ref)
    got = clean_run_times(det, pool, 4, 5000, seed=6)
    want = _clean_per_row(det, pool, 4, 5000, 6, 5)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert (want[0] > 2048).any()


def test_a_rewound_draw_repeats_its_rows():
    draw = WindowDraw(12, 4, np.random.default_rng(0))
    draw.take(300)
    mark = draw._mark()
    first = draw.take(700)
    draw._rewind(mark)
    np.testing.assert_array_equal(draw.take(700), first)


@pytest.mark.parametrize("n_rows, window", [(12, 4), (5, 5), (30, 1), (1, 1)])
def test_compiled_draws_equal_one_candidate_at_a_time(n_rows, window):
    fast = WindowDraw(n_rows, window, np.random.default_rng(7))
    slow = _PythonWindowDraw(n_rows, window, np.random.default_rng(7))
    for n in (1, 3, 255, 600, 2, 1000):
        np.testing.assert_array_equal(fast.take(n), slow.take(n))
        fast.restart(), slow.restart()
    assert fast() == slow()
