"""The percentile bootstrap over independent units of a pooled ratio ``sum(a) / sum(b)``.

A cell of a results table often pools many draws (detections, run times) that are not
independent of each other: the draws of one trained model, or the streams of one fitted
detector, share that model or that reference. The independent units are the models or the
references, and an interval over the draws alone leaves out the spread between them. Every
such interval in dgpbench (Table 1's and Failing loudly's detection ratios, the `stream`
target's mean run times and delays) resamples the units with replacement and recomputes the
pooled ratio: this module is that one computation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP_SEED", "N_BOOTSTRAP", "unit_bootstrap_interval"]

N_BOOTSTRAP = 2000
"""Bootstrap resamples of the independent units per interval."""
BOOTSTRAP_SEED = 20191208
"""Seed of the resampling: the same records give the same intervals."""


def unit_bootstrap_interval(
    sums: Any, counts: Any, confidence: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``sum(sums) / sum(counts)`` over the units.

    Parameters
    ----------
    sums : array-like of shape (n_units,)
        Each unit's total (detections, summed run times).
    counts : array-like of shape (n_units,)
        Each unit's number of draws (all positive).
    confidence : float
        Level of the interval, in (0, 1).
    rng : numpy.random.Generator
        Source of the resamples (:data:`N_BOOTSTRAP` of them).

    Returns
    -------
    (float, float)
        The bounds; NaN, NaN with fewer than 2 units (the bootstrap over units is then
        undefined: the caller keeps the draws' interval alone).

    Raises
    ------
    ValueError
        If the arrays differ in length, a count is not positive, or ``confidence`` is not
        in (0, 1).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> low, high = unit_bootstrap_interval([10, 0, 5], [10, 10, 10], 0.95, rng)
    >>> bool(0.0 <= low < 0.5 < high <= 1.0)
    True
    """
    sums = np.asarray(sums, dtype=np.float64).reshape(-1)
    counts = np.asarray(counts, dtype=np.float64).reshape(-1)
    if sums.shape != counts.shape:
        raise ValueError(f"sums and counts differ in length: {len(sums)} and {len(counts)}")
    if not (counts > 0).all():
        raise ValueError("every unit needs a positive count")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    k = len(sums)
    if k < 2:
        return float("nan"), float("nan")
    weights = rng.multinomial(k, np.full(k, 1.0 / k), size=N_BOOTSTRAP)
    tails = [(1 - confidence) / 2, (1 + confidence) / 2]
    low, high = np.quantile((weights @ sums) / (weights @ counts), tails)
    return float(low), float(high)
