"""Speed and memory of the MMD permutation test (docs/toolbox.md quotes these numbers).

* n = m = 1000, d = 32, B = 1000 permutations on the CPU: the vectorised test (one matrix
  product over all permutations, kernel rows built once) against the per-permutation loop
  that gathers the permuted kernel matrix and recomputes the statistic for each split (the
  pattern of alibi-detect's torch backend), on the same splits; same statistics asserted,
  ratio printed. Where alibi-detect is importable (a separate environment: it is no
  dependency of dgpbench), its ``MMDDrift(backend="pytorch")`` on the same data too.
* Peak resident memory of one test in a fresh process at n + m = 20,000 (B = 1000) and
  40,000 (B = 100), from which the largest n + m that fits in 4 GB follows.

Run with ``python -m pytest benchmarks/test_bench_detectors.py --benchmark-only -s``
(about 5 minutes on 2 cores; the loop baseline is most of it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from bench_helpers import REPO, RESULTS

from dgpbench.detectors import MMDShiftDetector
from dgpbench.detectors.mmd import (
    _median_bandwidth,
    _permutation_mmd2,
    _subsets,
)

N, D, B = 1000, 32, 1000


def _loop_permutation_mmd2(Z: np.ndarray, n: int, sigma: float, subsets: list) -> np.ndarray:
    """The per-permutation baseline: one gather of the permuted kernel matrix per split.

    The pattern of alibi-detect's torch backend (kernel matrix once, then for every
    permutation the statistic recomputed from the permuted matrix), the baseline of
    ``_permutation_mmd2`` on the same splits.
    """
    import torch

    Zt = torch.as_tensor(Z, dtype=torch.float64)
    K = torch.exp(-torch.cdist(Zt, Zt).pow_(2) / (2.0 * sigma * sigma))
    K.fill_diagonal_(1.0)
    N = len(Z)
    m = N - n
    out = []
    for block in subsets:
        for sub in block:
            mask = np.ones(N, dtype=bool)
            mask[sub] = False
            perm = torch.as_tensor(np.concatenate([sub, np.flatnonzero(mask)]))
            Kp = K[perm][:, perm]
            kxx, kyy, kxy = Kp[:n, :n], Kp[n:, n:], Kp[:n, n:]
            out.append(
                float(
                    (kxx.sum() - kxx.diagonal().sum()) / (n * (n - 1))
                    + (kyy.sum() - kyy.diagonal().sum()) / (m * (m - 1))
                    - 2.0 * kxy.sum() / (n * m)
                )
            )
    return np.asarray(out)


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, D)), rng.normal(loc=0.05, size=(N, D))


def test_mmd_vectorised_vs_per_permutation_loop(benchmark):
    X, Y = _data()
    det = MMDShiftDetector(n_permutations=B, random_state=0).fit(X)
    result = benchmark.pedantic(lambda: det.test(Y), rounds=2, iterations=1)
    ours = benchmark.stats.stats.min
    # The loop on the same splits as one vectorised call (kernel rows built once for both).
    Z = np.concatenate([X, Y])
    sigma = _median_bandwidth(Z, np.random.default_rng(1))
    subsets = [np.arange(N)[None], *_subsets(np.random.default_rng(2), 2 * N, N, B, 250)]
    start = time.perf_counter()
    fast = _permutation_mmd2(Z, N, sigma, subsets, "cpu")
    vectorised_s = time.perf_counter() - start
    start = time.perf_counter()
    slow = _loop_permutation_mmd2(Z, N, sigma, subsets)
    loop_s = time.perf_counter() - start
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-12)
    line = (
        f"MMD n=m={N}, d={D}, B={B}, CPU: test {ours:.2f} s (p={result.p_val:.3f}); "
        f"statistics of the same splits vectorised {vectorised_s:.2f} s vs per-permutation "
        f"loop {loop_s:.1f} s: ratio {loop_s / vectorised_s:.0f}x"
    )
    alibi = _alibi_seconds(X, Y)
    if alibi is not None:
        line += f"; alibi-detect MMDDrift(pytorch) {alibi:.1f} s: ratio {alibi / ours:.1f}x"
    else:
        line += "; alibi-detect not importable here (not measured)"
    print("\n" + line)
    RESULTS.append({"line": line})


def _alibi_seconds(X: np.ndarray, Y: np.ndarray) -> float | None:
    try:
        from alibi_detect.cd import MMDDrift
    except ImportError:
        return None
    det = MMDDrift(X.astype(np.float32), backend="pytorch", p_val=0.05, n_permutations=B)
    det.predict(Y[:10].astype(np.float32))  # warm-up
    start = time.perf_counter()
    det.predict(Y.astype(np.float32))
    return time.perf_counter() - start


_CHILD = """
import json, resource, sys, time
import numpy as np
import torch  # imported before the baseline: its libraries alone are most of the RSS
from dgpbench.detectors import MMDShiftDetector
n, b = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
X, Y = rng.normal(size=(n, 32)), rng.normal(size=(n, 32))
det = MMDShiftDetector(n_permutations=b, random_state=0).fit(X)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
p = det.test(Y).p_val
print(json.dumps({"seconds": time.perf_counter() - t, "p": p, "base_kb": base,
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


@pytest.mark.parametrize(("total", "b"), [(20_000, 1000), (40_000, 100)])
def test_mmd_peak_memory(benchmark, total, b):
    def run():
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(total // 2), str(b)],
            capture_output=True, text=True, check=True, cwd=REPO,
        )  # fmt: skip
        return json.loads(out.stdout)

    rec = benchmark.pedantic(run, rounds=1, iterations=1)
    peak_mb = rec["peak_kb"] / 1024
    line = (
        f"MMD n+m={total}, d=32, B={b}: {rec['seconds']:.1f} s, peak RSS {peak_mb:.0f} MB "
        f"(of which {rec['base_kb'] / 1024:.0f} MB before the test: python, torch, the data; "
        f"the test itself {(rec['peak_kb'] - rec['base_kb']) / 1024:.0f} MB)"
    )
    assert peak_mb < 4096
    print("\n" + line)
    RESULTS.append({"line": line})
