"""The compiled steps of the online detectors against full recomputations, at every step.

The Cramér-von Mises step keeps only the window's counts and takes the reference's sum from
prefix sums; the MMD step keeps running kernel sums; ``run`` feeds a block in one compiled
loop. Each is checked here against the statistic recomputed from the whole window, with
ties, and ``run`` against ``update``.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.online import OnlineCVMDetector, OnlineMMDDetector
from dgpbench.online.mmd import gaussian_kernel


def _ecdf_cvm(ref: np.ndarray, win: np.ndarray) -> float:
    """The definition: n W / (n + W)^2 * sum over the pooled points of (F_n - G_W)^2."""
    pooled = np.concatenate([ref, win])
    n, w = len(ref), len(win)
    F = np.searchsorted(np.sort(ref), pooled, side="right") / n  # #{ref <= z} / n
    G = np.searchsorted(np.sort(win), pooled, side="right") / w
    return n * w / (n + w) ** 2 * float(((F - G) ** 2).sum())


def _mmd2(ref: np.ndarray, win: np.ndarray, gamma: float) -> float:
    m, w = len(ref), len(win)
    kxx = gaussian_kernel(ref, ref, gamma).sum() - m
    kyy = gaussian_kernel(win, win, gamma).sum() - w
    kxy = gaussian_kernel(ref, win, gamma).sum()
    return kxx / (m * (m - 1)) + kyy / (w * (w - 1)) - 2.0 * kxy / (m * w)


def _data(kind: str, rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    if kind == "ties":  # many ties within and across the reference and the stream
        return rng.integers(0, 4, size=(n, d)).astype(float)
    return rng.normal(size=(n, d))


@pytest.mark.parametrize("kind", ["continuous", "ties"])
@pytest.mark.parametrize("W, n", [(2, 40), (7, 40), (7, 3000)])
def test_cvm_step_equals_the_ecdf_definition_at_every_step(kind, W, n):
    rng = np.random.default_rng(W)
    X = _data(kind, rng, n, 3)
    det = OnlineCVMDetector(ert=20, window_size=W, n_bootstraps=200, random_state=0).fit(X)
    stream = _data(kind, rng, 30, 3) + 0.3 * (kind == "continuous")
    for t, r in enumerate(det.reset().run(stream, stop_at_alarm=False), start=1):
        if t < W:
            assert np.isnan(r.statistic)
            continue
        want = [_ecdf_cvm(X[:, j], stream[t - W : t, j]) for j in range(3)]
        assert r.statistic == pytest.approx(max(want), rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(det.feature_statistics(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["continuous", "ties"])
def test_mmd_step_equals_the_recomputed_mmd_at_every_step(kind):
    rng = np.random.default_rng(1)
    X = _data(kind, rng, 60, 2)
    det = OnlineMMDDetector(ert=20, window_size=5, n_bootstraps=100, random_state=0).fit(X)
    stream = _data(kind, rng, 40, 2)
    for t, r in enumerate(det.reset().run(stream, stop_at_alarm=False), start=1):
        if t >= 5:
            want = _mmd2(det.X_ref_, stream[t - 5 : t], det.gamma_)
            assert r.statistic == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("cls", [OnlineCVMDetector, OnlineMMDDetector])
@pytest.mark.parametrize("stop_at_alarm, W", [(False, 4), (True, 4), (False, 11)])
def test_run_gives_the_decisions_and_state_of_one_update_per_row(cls, stop_at_alarm, W):
    rng = np.random.default_rng(2)
    det = cls(ert=20, window_size=W, n_bootstraps=200, random_state=0)
    det.fit(rng.normal(size=(50, 2)))
    stream = np.concatenate([rng.normal(size=(30, 2)), rng.normal(loc=2.0, size=(20, 2))])
    first = det.reset().run(stream[:3], stop_at_alarm=stop_at_alarm)  # a block while filling
    ran = first + det.run(stream[3:], stop_at_alarm=stop_at_alarm)
    state, arrays = det.get_stream_state()
    updated = []
    det.reset()
    for x in stream:
        updated.append(det.update(x))
        if stop_at_alarm and updated[-1].is_drift:
            break
    # every field, the statistics bit for bit (NaN as None)
    assert [r.to_dict() for r in ran] == [r.to_dict() for r in updated]
    assert any(r.is_drift for r in ran)
    state2, arrays2 = det.get_stream_state()
    assert state == state2
    for key in arrays:
        np.testing.assert_array_equal(arrays[key], arrays2[key])


@pytest.mark.parametrize("cls", [OnlineCVMDetector, OnlineMMDDetector])
def test_run_feeds_the_rows_before_a_bad_one_then_refuses_it(cls):
    rng = np.random.default_rng(4)
    det = cls(ert=1000, window_size=3, n_bootstraps=2000, random_state=0)
    det.fit(rng.normal(size=(40, 2)))
    stream = rng.normal(size=(10, 2))
    stream[6, 1] = np.nan
    det.reset()
    with pytest.raises(ValueError, match="NaN or infinite"):
        det.run(stream, stop_at_alarm=False)
    assert det.t_ == 6
    with pytest.raises(ValueError, match="3 features"):
        det.run(np.zeros((2, 3)))
    assert det.t_ == 6 and det.run(np.empty((0, 2))) == []
    # an alarm before the bad row ends the feeding first: no error
    shifted = np.concatenate([np.full((8, 2), 9.0), [[np.nan, 0.0]]])
    results = det.reset().run(shifted)
    assert results[-1].is_drift and len(results) <= 8


def test_a_stream_state_whose_counts_do_not_match_its_window_is_refused():
    rng = np.random.default_rng(5)
    det = OnlineCVMDetector(ert=20, window_size=3, n_bootstraps=100, random_state=0)
    det.fit(rng.normal(size=(20, 2))).reset().run(rng.normal(size=(5, 2)), stop_at_alarm=False)
    state, arrays = det.get_stream_state()
    arrays["cw"] = arrays["cw"][::-1].copy()
    with pytest.raises(ValueError, match="do not match the window"):
        det.set_stream_state(state, arrays)
    with pytest.raises(ValueError, match="while the window fills"):
        det.set_stream_state({**state, "filled": 2, "pos": 0}, det.get_stream_state()[1])


@pytest.mark.parametrize("cls", [OnlineCVMDetector, OnlineMMDDetector])
def test_the_thresholds_of_a_block_are_those_of_each_step(cls):
    rng = np.random.default_rng(6)
    det = cls(ert=20, window_size=4, n_bootstraps=200, random_state=0)
    det.fit(rng.normal(size=(30, 2)))
    each = [det.threshold_at(t) for t in range(1, 16)]
    np.testing.assert_array_equal(det.thresholds_for(0, 15), each)
    np.testing.assert_array_equal(det.thresholds_for(5, 10), each[5:])
    assert np.isnan(each[:3]).all() and each[3:7] == det.thresholds_.tolist()
    assert each[7:] == [det.thresholds_[-1]] * 8 and len(det.thresholds_for(7, 0)) == 0
    ran = det.reset().run(rng.normal(size=(15, 2)), stop_at_alarm=False)
    np.testing.assert_array_equal([r.threshold for r in ran], each)
    det.thresholds_ = det.thresholds_ + 1.0  # new thresholds (a refit, a restored state)
    np.testing.assert_array_equal(det.thresholds_for(0, 15), np.array(each) + 1.0)


def test_an_alarm_needs_a_statistic_strictly_above_a_threshold_and_neither_nan():
    from dgpbench.online._kernels import exceeds

    cases = [(2.0, 1.0, True), (1.0, 1.0, False), (0.5, 1.0, False), (np.nan, 1.0, False),
             (2.0, np.nan, False), (np.nan, np.nan, False), (np.inf, np.inf, False)]  # fmt: skip
    for stat, thr, want in cases:
        assert exceeds(stat, thr) is want and exceeds.py_func(stat, thr) is want
