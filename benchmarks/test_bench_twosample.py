"""Speed of the Cramér-von Mises, Anderson-Darling, Fisher and energy tests against their
references (docs/toolbox.md quotes these numbers).

At the sizes of the Failing-loudly grid (a test batch of n = 10, 100, 1000 against 1000
references, d = 10 and 32 features): each per-feature detector's ``test`` against the
SciPy reference called once per feature (``cramervonmises_2samp``, ``anderson_ksamp``,
``fisher_exact``), the p-values asserted equal; the energy test (B = 100 permutations,
d = 32) against ``dcor.homogeneity.energy_test`` with as many resamples, where dcor is
importable (a test dependency; importing it compiles numba kernels, ~20 s, not timed).

Run with ``python -m pytest benchmarks/test_bench_twosample.py --benchmark-only -s``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from bench_helpers import RESULTS
from scipy.stats import anderson_ksamp, cramervonmises_2samp, fisher_exact

from dgpbench.detectors import (
    ADShiftDetector,
    CvMShiftDetector,
    EnergyShiftDetector,
    FisherShiftDetector,
)

N_REF = 1000
SIZES = [(n, d) for d in (10, 32) for n in (10, 100, 1000)]


def _best(fn, rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _scipy_cvm(ref, test):
    return np.array(
        [cramervonmises_2samp(ref[:, j], test[:, j]).pvalue for j in range(ref.shape[1])]
    )


def _scipy_ad(ref, test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # capped p-values and the midrank deprecation
        return np.array(
            [
                anderson_ksamp([ref[:, j], test[:, j]], midrank=True).pvalue
                for j in range(ref.shape[1])
            ]
        )


def _scipy_fisher(ref, test):
    n, n_ref = len(test), len(ref)
    out = []
    for j in range(ref.shape[1]):
        a, b = int(test[:, j].sum()), int(ref[:, j].sum())
        out.append(fisher_exact([[a, b], [n - a, n_ref - b]]).pvalue)
    return np.array(out)


CASES = {
    "cvm": (CvMShiftDetector, _scipy_cvm, "cramervonmises_2samp"),
    "ad": (ADShiftDetector, _scipy_ad, "anderson_ksamp"),
    "fisher": (FisherShiftDetector, _scipy_fisher, "fisher_exact"),
}


@pytest.mark.parametrize("test", list(CASES))
@pytest.mark.parametrize(("n", "d"), SIZES)
def test_per_feature_detector_vs_scipy_loop(benchmark, test, n, d):
    detector, reference, name = CASES[test]
    rng = np.random.default_rng(0)
    if test == "fisher":
        ref, batch = rng.random((N_REF, d)) < 0.3, rng.random((n, d)) < 0.35
        ref, batch = ref.astype(float), batch.astype(float)
    else:
        ref, batch = rng.normal(size=(N_REF, d)), rng.normal(0.1, size=(n, d))
    det = detector().fit(ref)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = benchmark.pedantic(lambda: det.test(batch), rounds=5, iterations=1)
    ours = benchmark.stats.stats.min
    expected = reference(ref, batch)
    np.testing.assert_allclose(result.p_val, expected, rtol=1e-12)
    theirs = _best(lambda: reference(ref, batch))
    line = (
        f"{test}: n={n} vs {N_REF} refs, d={d}: ours {ours * 1e3:.2f} ms, scipy {name} per "
        f"feature {theirs * 1e3:.2f} ms: ratio {theirs / ours:.1f}x"
    )
    print("\n" + line)
    RESULTS.append({"line": line})


@pytest.mark.parametrize("n", [100, 1000])
def test_energy_vs_dcor(benchmark, n):
    dcor = pytest.importorskip("dcor")
    rng = np.random.default_rng(1)
    ref, batch = rng.normal(size=(N_REF, 32)), rng.normal(0.05, size=(n, 32))
    det = EnergyShiftDetector(n_permutations=100, random_state=0).fit(ref)
    result = benchmark.pedantic(lambda: det.test(batch), rounds=2, iterations=1)
    ours = benchmark.stats.stats.min
    dcor.homogeneity.energy_test(ref[:20], batch[:20], num_resamples=10)  # compile first
    theirs = _best(
        lambda: dcor.homogeneity.energy_test(ref, batch, num_resamples=100, random_state=0), 2
    )
    assert result.statistic == pytest.approx(dcor.energy_distance(ref, batch), rel=1e-10)
    line = (
        f"energy: n={n} vs {N_REF} refs, d=32, B=100: ours {ours:.3f} s, dcor energy_test "
        f"{theirs:.3f} s: ratio {theirs / ours:.1f}x"
    )
    print("\n" + line)
    RESULTS.append({"line": line})
