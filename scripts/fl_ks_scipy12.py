"""Did Rabanser et al.'s KS tests run on SciPy 1.2's p-values? (docs/failing-loudly.md)

SciPy before 1.3 (May 2019) computed ``ks_2samp``'s two-sided p-value from the asymptotic
Kolmogorov distribution with Stephens' correction, ``kstwobign.sf((en + 0.12 + 0.11 / en) *
D)``, ``en = sqrt(n m / (n + m))``; since 1.3 it is exact for samples up to 10,000, and so is
the grid's KS engine (:mod:`dgpbench.detectors.ks_test`, SciPy's own values). Their code was
published in February 2019, and the ``requirements.txt`` they added in March 2020 first pinned
SciPy 1.2.0 (then, 54 minutes later, 1.4.1). At n = 10 the two differ where it matters: with
a Bonferroni correction over 32 features the exact test needs D >= 0.9, SciPy 1.2's D >= 0.8.

This script runs ``dgpbench fl-detect`` with every KS p-value SciPy 1.2's: it replaces
:func:`dgpbench.detectors.ks_test.ks_pvalues_at` (the p-value of two size-``n`` samples at
distance ``h / n``, through which every grid KS draw with m = n <= 10,000 passes) for its own
process. The draws, and every other test, are the grid's. Report its records with ``dgpbench
fl-report`` into a directory of their own.

    python scripts/fl_ks_scipy12.py fl-detect --features F.npz --method pca+ks ... --out R.csv
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from scipy.stats import kstwobign

import dgpbench.detectors.ks_test as ks_test
from dgpbench.cli.main import main as dgpbench_main


def scipy12_pvalues_at(n: int, h: np.ndarray) -> np.ndarray:
    """SciPy 1.2's ``ks_2samp`` p-value of two size-``n`` samples at KS distance ``h / n``."""
    d = np.asarray(h, dtype=np.float64) / n
    en = np.sqrt(n / 2.0)  # sqrt(n m / (n + m)) with m = n
    return np.minimum(1.0, kstwobign.sf((en + 0.12 + 0.11 / en) * d))


@contextmanager
def scipy12() -> Iterator[None]:
    """Within the block, the grid's KS p-values are SciPy 1.2's."""
    exact = ks_test.ks_pvalues_at
    ks_test.ks_pvalues_at = scipy12_pvalues_at
    try:
        yield
    finally:
        ks_test.ks_pvalues_at = exact


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "fl-detect":
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    with scipy12():
        return dgpbench_main(argv)


if __name__ == "__main__":
    sys.exit(main())
