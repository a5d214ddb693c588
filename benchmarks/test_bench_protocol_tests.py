"""Speed of the protocol with the other tests (batched per feature) against one detector per draw.

The cell of ``test_bench_protocol.py`` (1000 clean images and their corrupted twins, d = 10,
n in {10, 20, 50, 100, 200}, delta in DELTAS, 100 draws each), decided by Cramér-von Mises
and Anderson-Darling: ``bootstrap_detection(test=...)`` (every draw's columns through the
detector in one call) against the same draws through ``make_detector(test).fit(ref).test(x)``
one at a time. Same decisions asserted, ratio printed. Energy (multivariate) runs draw by
draw in both, so only its time per cell is printed (B = 200 permutations).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from bench_helpers import RESULTS

from dgpbench.detectors import make_detector
from dgpbench.paper.protocol import DELTAS, NS, bootstrap_detection, draw_indices

N_DRAWS = 100


def _features(d: int = 10) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(1000, d))
    return clean, clean + rng.normal(0.1, 1.0, size=clean.shape)


def _baseline(test: str, clean: np.ndarray, corr: np.ndarray) -> int:
    rejected = 0
    for n in NS:
        for delta in DELTAS:
            idx = draw_indices(len(clean), n, delta, n_draws=N_DRAWS, seed=112)
            for i in range(N_DRAWS):
                batch = clean[idx.test[i]].copy()
                batch[idx.corrupted[i]] = corr[idx.test[i][idx.corrupted[i]]]
                det = make_detector(test).fit(clean[idx.reference[i]])
                rejected += det.test(batch).is_drift
    return rejected


@pytest.mark.parametrize("test", ["cvm", "ad"])
def test_protocol_cell_per_feature_test(benchmark, test):
    clean, corr = _features()

    def run():
        return bootstrap_detection(clean, corr, ns=NS, deltas=DELTAS, n_draws=N_DRAWS, test=test)

    records = benchmark.pedantic(run, rounds=3, iterations=1)
    start = time.perf_counter()
    baseline_rejected = _baseline(test, clean, corr)
    baseline_s = time.perf_counter() - start
    ours = benchmark.stats.stats.min
    assert int(records["rejected"].sum()) == baseline_rejected
    line = (
        f"protocol with {test}, one grid cell ({len(records)} draws, d=10): {ours:.3f} s, "
        f"baseline (detector per draw) {baseline_s:.2f} s, ratio {baseline_s / ours:.0f}x"
    )
    print("\n" + line)
    RESULTS.append({"line": line})


def test_protocol_cell_energy(benchmark):
    clean, corr = _features()

    def run():
        return bootstrap_detection(clean, corr, ns=NS, deltas=DELTAS, n_draws=N_DRAWS,
                                   test="energy", n_permutations=200)  # fmt: skip

    records = benchmark.pedantic(run, rounds=1, iterations=1)
    line = (
        f"protocol with energy (B=200), one grid cell ({len(records)} draws, d=10): "
        f"{benchmark.stats.stats.min:.2f} s"
    )
    print("\n" + line)
    RESULTS.append({"line": line})
