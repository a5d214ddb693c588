"""Speed of the online detectors: a step's update against a recomputation, and configuration.

* Online MMD (n_ref = 1000, d = 32, W = 50): :meth:`OnlineMMDDetector.update` (running
  kernel sums, ``O((m + W) d)``) against recomputing the statistic from the window at every
  step (the reference's own kernel sum cached, the ``m x W`` and ``W x W`` kernel blocks
  rebuilt: what a detector without running sums does); same statistics asserted, ratio
  printed.
* Online Cramér-von Mises (n_ref = 1000, d = 10 features as DGP's, W = 50): the update
  (the window's integer counts and prefix sums of the reference's ECDF, ``O(W d + d log n)``)
  against :func:`scipy.stats.cramervonmises_2samp` per feature per step.
* Both fed one sample per ``update`` call and as one block through ``run`` (one compiled
  loop); compiled code warmed up first.
* Clean streams of the ``stream`` target (n_ref = 2000, 8000 held-out rows, d = 10,
  W = 20, ERT 200): :func:`~dgpbench.online.streams.clean_run_times` (compiled draws,
  blocks through ``run``) against rows drawn one at a time in Python and one ``update``
  each; same run times asserted, ratio printed.
* Threshold configuration time of both at alibi-detect's default ``n_bootstraps``, the
  Cramér-von Mises detector's with both calibrations.
* alibi-detect's detectors on the same data: ``test_bench_online_alibi.py``.

Run with ``python -m pytest benchmarks/test_bench_online.py --benchmark-only -s``.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import pytest
from bench_helpers import RESULTS

from dgpbench.detectors.mmd import mmd2_unbiased
from dgpbench.online import OnlineCVMDetector, OnlineMMDDetector
from dgpbench.online.mmd import gaussian_kernel
from dgpbench.online.streams import clean_run_times

N_REF, W, STEPS = 1000, 50, 300


def _recomputed_mmd(det: OnlineMMDDetector, window: np.ndarray) -> float:
    m = len(det.X_ref_)
    kxy = gaussian_kernel(det.X_ref_, window, det.gamma_).sum()
    kyy = gaussian_kernel(window, window, det.gamma_).sum() - len(window)
    return det.kxx_term_ + kyy / (W * (W - 1)) - 2.0 * kxy / (m * W)


def _run_time(det, stream: np.ndarray, rounds: int = 5) -> float:
    """Best-of-``rounds`` seconds per sample of ``run`` over the whole stream (warmed up)."""
    det.reset().run(stream[: 2 * W], stop_at_alarm=False)
    best = np.inf
    for _ in range(rounds):
        det.reset()
        start = time.perf_counter()
        det.run(stream, stop_at_alarm=False)
        best = min(best, time.perf_counter() - start)
    return best / len(stream)


def test_online_mmd_update_vs_recomputation(benchmark):
    rng = np.random.default_rng(0)
    det = OnlineMMDDetector(ert=1000, window_size=W, n_bootstraps=200, random_state=0)
    det.fit(rng.normal(size=(N_REF + 2 * W, 32)))
    stream = rng.normal(size=(STEPS, 32))

    def online() -> list[float]:
        det.reset()
        return [det.update(x).statistic for x in stream]

    stats = benchmark.pedantic(online, rounds=7, iterations=1, warmup_rounds=1)
    ours = benchmark.stats.stats.min / STEPS
    block = _run_time(det, stream)
    start = time.perf_counter()
    full = [_recomputed_mmd(det, stream[t - W + 1 : t + 1]) for t in range(W - 1, STEPS)]
    theirs = (time.perf_counter() - start) / (STEPS - W + 1)
    np.testing.assert_allclose(stats[W - 1 :], full, atol=1e-10)
    Z = np.concatenate([det.X_ref_, stream[-W:]])
    assert stats[-1] == pytest.approx(
        mmd2_unbiased(gaussian_kernel(Z, Z, det.gamma_), len(det.X_ref_))
    )
    line = (f"online MMD n_ref {len(det.X_ref_)}, d 32, W {W}: update {ours * 1e6:.1f} us/sample, "
            f"run {block * 1e6:.1f} us/sample, recomputation {theirs * 1e6:.0f} us/sample "
            f"({theirs / ours:.1f}x the update)")  # fmt: skip
    RESULTS.append({"line": line})
    print(line)


def test_online_cvm_update_vs_scipy(benchmark):
    from scipy.stats import cramervonmises_2samp

    rng = np.random.default_rng(1)
    ref = rng.normal(size=(N_REF, 10))
    det = OnlineCVMDetector(ert=1000, window_size=W, n_bootstraps=200, random_state=0).fit(ref)
    stream = rng.normal(size=(STEPS, 10))

    def online() -> np.ndarray:
        det.reset()
        out = []
        for x in stream:
            det.update(x)
            out.append(det.feature_statistics())
        return np.asarray(out)

    stats = benchmark.pedantic(online, rounds=7, iterations=1, warmup_rounds=1)
    ours = benchmark.stats.stats.min / STEPS
    block = _run_time(det, stream)
    steps = range(STEPS - 60, STEPS)
    start = time.perf_counter()
    full = [[cramervonmises_2samp(ref[:, j], stream[t - W + 1 : t + 1, j]).statistic
             for j in range(10)] for t in steps]  # fmt: skip
    theirs = (time.perf_counter() - start) / len(steps)
    np.testing.assert_allclose(stats[list(steps)], full, rtol=1e-10)
    line = (f"online CvM n_ref {N_REF}, d 10, W {W}: update {ours * 1e6:.1f} us/sample (with "
            f"feature_statistics), run {block * 1e6:.1f} us/sample, scipy per feature "
            f"{theirs * 1e6:.0f} us/sample ({theirs / ours:.1f}x the update)")  # fmt: skip
    RESULTS.append({"line": line})
    print(line)


def _clean_per_row(det, pool: np.ndarray, n_streams: int, max_steps: int, seed: int):
    """Run times of clean streams, one row drawn in Python and one ``update`` at a time."""
    rng, lag = np.random.default_rng(seed), int(det.window_size) - 1
    candidates: list[int] = []
    nxt, times = 0, []
    for _ in range(n_streams):
        recent: deque[int] = deque(maxlen=lag)
        det.reset()
        while True:
            while True:  # WindowDraw's rule, one candidate at a time
                if nxt == len(candidates):
                    candidates, nxt = rng.integers(len(pool), size=256).tolist(), 0
                i, nxt = candidates[nxt], nxt + 1
                if i not in recent:
                    break
            recent.append(i)
            result = det.update(pool[i])
            if result.is_drift or result.t >= max_steps:
                break
        times.append(result.run_time)
    return np.array(times)


@pytest.mark.parametrize("cls", [OnlineMMDDetector, OnlineCVMDetector], ids=["mmd", "cvm"])
def test_clean_streams_in_blocks_vs_one_update_per_row(benchmark, cls):
    X = np.random.default_rng(3).normal(size=(10_000, 10))
    det = cls(ert=200, window_size=20, n_bootstraps=2000, random_state=0).fit(X[:2000])
    pool, n_streams = X[2000:], 10
    clean_run_times(det, pool, 1, 50, seed=9)  # compiled code warmed up

    def blocks() -> np.ndarray:
        return clean_run_times(det, pool, n_streams, 2000, seed=1)[0]

    times = benchmark.pedantic(blocks, rounds=3, iterations=1)
    ours = benchmark.stats.stats.min
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        baseline = _clean_per_row(det, pool, n_streams, 2000, seed=1)
        best = min(best, time.perf_counter() - start)
    np.testing.assert_array_equal(times, baseline)
    steps = int(times.sum()) + 19 * n_streams
    line = (f"clean streams {cls.__name__} d 10, W 20, ERT 200, {steps} steps: blocks "
            f"{ours / steps * 1e6:.1f} us/step, one update per row {best / steps * 1e6:.1f} "
            f"us/step ({best / ours:.2f}x)")  # fmt: skip
    RESULTS.append({"line": line})
    print(line)


@pytest.mark.parametrize(
    "cls, d, boots, extra",
    [
        (OnlineMMDDetector, 32, 1000, {}),
        (OnlineCVMDetector, 10, 10000, {}),
        (OnlineCVMDetector, 10, 10000, {"calibration": "reference"}),
    ],
    ids=["mmd", "cvm", "cvm-reference"],
)
def test_threshold_configuration_time(benchmark, cls, d, boots, extra):
    X = np.random.default_rng(2).normal(size=(N_REF + 2 * W, d))
    det = cls(ert=1000, window_size=W, n_bootstraps=boots, random_state=0, **extra)
    benchmark.pedantic(lambda: det.fit(X), rounds=1, iterations=1)
    line = (f"{cls.__name__} {extra} configuration, n_ref {len(X)}, d {d}, W {W}, {boots} "
            f"streams: {benchmark.stats.stats.min:.2f} s")  # fmt: skip
    RESULTS.append({"line": line})
    print(line)
