"""dgpbench's online detectors against alibi-detect 0.13's on the same features and streams.

For the sliding-window MMD (``OnlineMMDDetector`` / ``MMDDriftOnline``, pytorch backend)
and the per-feature Cramér-von Mises (``OnlineCVMDetector`` / ``CVMDriftOnline``), each
configured for the same ERT, window and number of simulated streams:

* threshold-configuration time (alibi-detect configures in its constructor);
* time per sample (one ``update`` / ``predict`` on a clean stream of 300 rows; both warmed
  up first, so that numba's compilation and torch's first call are not counted; the best
  of 5 rounds, ours and theirs interleaved, as the machine's load varies), and ours fed as
  one block through ``run``;
* the ERT achieved: mean run time of clean streams, with its exact chi-squared interval
  (:func:`dgpbench.online.mean_run_time_interval`, the stream as the unit);
* the mean detection delay on streams that switch to shifted rows after the window is full.

The streams come from :mod:`dgpbench.online.streams` (alibi-detect's detector wrapped in
the same ``reset`` / ``update`` / ``run`` interface), so both see the same rows. Features:
``DGPBENCH_STREAM_FEATURES`` (a ``dgpbench features`` file) and ``DGPBENCH_STREAM_SHIFT``
(one of its shifted keys, default ``GN_6``); without them, Gaussian features (d = 10) and a
mean shift of 0.5 in every feature. alibi-detect is no dependency of dgpbench (not open
source since 0.11.5): put it on ``PYTHONPATH`` for this file; skipped otherwise.

Run with ``python -m pytest benchmarks/test_bench_online_alibi.py -s -p no:cacheprovider``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import pytest
from bench_helpers import RESULTS

from dgpbench.online import OnlineCVMDetector, OnlineMMDDetector, mean_run_time_interval
from dgpbench.online.streams import clean_run_times, shift_delays, split_reference

ERT, W, N_REF = 100, 20, 500
# Simulated streams: alibi-detect's CvM needs ~10^4 at ERT 100 (its quantile estimator's floor).
BOOTS = {"mmd": 1000, "cvm": 10000}
N_STREAMS, N_SHIFT, STEPS = 60, 20, 300


@dataclass(frozen=True)
class _Result:
    t: int
    is_drift: bool
    run_time: int


class _Alibi:
    """alibi-detect's online detector behind the interface of dgpbench's evaluation."""

    def __init__(self, detector, first_step: int) -> None:
        self.detector, self.first_step = detector, first_step

    def reset(self) -> _Alibi:
        self.detector.reset_state()
        return self

    def update(self, x: np.ndarray) -> _Result:
        out = self.detector.predict(np.asarray(x, dtype=np.float32), return_test_stat=False)
        t = int(out["data"]["time"])
        return _Result(t, bool(out["data"]["is_drift"]), max(0, t - self.first_step + 1))

    def run(self, X: np.ndarray) -> list[_Result]:
        results = []
        for x in X:
            results.append(self.update(x))
            if results[-1].is_drift:
                break
        return results


def _features() -> tuple[np.ndarray, np.ndarray, str]:
    path = os.environ.get("DGPBENCH_STREAM_FEATURES")
    if path:
        key = os.environ.get("DGPBENCH_STREAM_SHIFT", "GN_6")
        with np.load(path) as f:
            return f["clean"].astype(np.float64), f[key].astype(np.float64), f"{path}:{key}"
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(1500, 10))
    return clean, clean + 0.5, "Gaussian d=10, mean shift 0.5"


def _clean_stream(pool: np.ndarray) -> np.ndarray:
    return pool[np.random.default_rng(1).integers(len(pool), size=STEPS)]


def _per_sample(ours, theirs, stream: np.ndarray, rounds: int = 5) -> dict[str, float]:
    """Best-of-``rounds`` seconds per sample: ours and theirs by ``update``, ours by ``run``."""

    def feed(det) -> float:
        det.reset()
        start = time.perf_counter()
        for x in stream:
            det.update(x)
        return (time.perf_counter() - start) / len(stream)

    def block() -> float:
        ours.reset()
        start = time.perf_counter()
        ours.run(stream, stop_at_alarm=False)
        return (time.perf_counter() - start) / len(stream)

    for det in (ours, theirs):  # warm-up: compilation, caches, first calls
        det.reset()
        for x in stream[: 2 * W]:
            det.update(x)
    block()
    best = {"ours": np.inf, "theirs": np.inf, "run": np.inf}
    for _ in range(rounds):
        best["ours"] = min(best["ours"], feed(ours))
        best["theirs"] = min(best["theirs"], feed(theirs))
        best["run"] = min(best["run"], block())
    return best


def _measure(name: str, det, pool: np.ndarray, shifted: np.ndarray) -> dict:
    times, censored = clean_run_times(det, pool, N_STREAMS, 20 * ERT, seed=2, window_size=W)
    low, high = mean_run_time_interval(times)
    delays = shift_delays(det, pool, shifted, W, N_SHIFT, 20 * ERT, seed=3, window_size=W)
    hit = delays[delays >= 1]
    return {"name": name, "mean_rt": times.mean(), "low": low, "high": high,
            "censored": int(censored.sum()), "delay": hit.mean(),
            "n_detected": len(hit)}  # fmt: skip


def _alibi_cd():
    """``alibi_detect.cd``; where ``transformers`` is absent, a stub of it (alibi-detect
    imports it at import time for its text embeddings, which the online detectors never use)."""
    import importlib.util
    import sys
    import types

    if importlib.util.find_spec("alibi_detect") is None:
        pytest.skip("alibi-detect is not importable (put it on PYTHONPATH)")
    if "transformers" not in sys.modules and importlib.util.find_spec("transformers") is None:
        stub = types.ModuleType("transformers")
        for name in ("AutoConfig", "AutoModel", "AutoTokenizer", "PreTrainedTokenizerBase",
                     "TFAutoModel"):  # fmt: skip
            setattr(stub, name, None)
        sys.modules.setdefault("transformers", stub)
    return pytest.importorskip("alibi_detect.cd")


@pytest.mark.parametrize("kind", ["mmd", "cvm"])
def test_online_against_alibi_detect(kind):
    cd = _alibi_cd()
    clean, shifted_all, source = _features()
    n_ref = min(N_REF, len(clean) // 2)  # digits: 540 test rows
    ref_idx, held = split_reference(len(clean), n_ref, seed=0)
    ref, pool, shifted = clean[ref_idx], clean[held], shifted_all[held]
    ours_cls = OnlineMMDDetector if kind == "mmd" else OnlineCVMDetector
    start = time.perf_counter()
    ours = ours_cls(ert=ERT, window_size=W, n_bootstraps=BOOTS[kind], random_state=0).fit(ref)
    ours_config = time.perf_counter() - start
    start = time.perf_counter()
    if kind == "mmd":
        theirs = _Alibi(cd.MMDDriftOnline(ref.astype(np.float32), ert=ERT, window_size=W,
                                          backend="pytorch", n_bootstraps=BOOTS[kind], verbose=False),
                        first_step=1)  # fmt: skip
    else:
        theirs = _Alibi(cd.CVMDriftOnline(ref.astype(np.float32), ert=ERT, window_sizes=[W],
                                          n_bootstraps=BOOTS[kind], verbose=False),
                        first_step=W)  # fmt: skip
    theirs_config = time.perf_counter() - start
    speed = _per_sample(ours, theirs, _clean_stream(pool))
    rows = [_measure("dgpbench", ours, pool, shifted),
            _measure("alibi-detect", theirs, pool, shifted)]  # fmt: skip
    rows[0]["config"], rows[1]["config"] = ours_config, theirs_config
    rows[0]["per_sample"], rows[1]["per_sample"] = speed["ours"], speed["theirs"]
    lines = [f"{kind} online, {source}, n_ref {n_ref}, W {W}, ERT {ERT}, {BOOTS[kind]} streams, "
             f"load {os.getloadavg()[0]:.1f}"]  # fmt: skip
    for r in rows:
        lines.append(
            f"  {r['name']:12s} config {r['config']:6.2f} s | {r['per_sample'] * 1e6:7.1f} us/sample"
            f" | mean run time {r['mean_rt']:6.1f} [{r['low']:.1f}, {r['high']:.1f}]"
            f" ({N_STREAMS} streams, {r['censored']} censored) | delay {r['delay']:.1f}"
            f" ({r['n_detected']}/{N_SHIFT} detected after the change)"
        )
    ratio = rows[1]["per_sample"] / rows[0]["per_sample"]
    lines.append(f"  per-sample speed-up {ratio:.1f}x (update), "
                 f"{rows[1]['per_sample'] / speed['run']:.1f}x (ours by run: "
                 f"{speed['run'] * 1e6:.1f} us/sample), configuration "
                 f"{rows[1]['config'] / rows[0]['config']:.1f}x")  # fmt: skip
    text = "\n".join(lines)
    RESULTS.append({"line": text})
    print(text)
    assert rows[0]["low"] <= ERT <= rows[0]["high"] or rows[0]["censored"] == 0
