"""Measure an online detector: run times on clean streams, delays on shifted ones.

What the tests and the benchmarks use to check that a detector configured for an ERT
keeps it (:func:`run_times`, :func:`mean_run_time_interval`) and what it buys
(:func:`detection_delay`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["detection_delay", "mean_run_time_interval", "run_times"]


def run_times(
    detector: Any, draw: Callable[[], Any], n_streams: int, max_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Run times of ``n_streams`` fresh streams, each fed one ``draw()`` per step.

    Parameters
    ----------
    detector : OnlineMMDDetector or OnlineCVMDetector
        A fitted detector (reset before each stream).
    draw : callable
        Returns the next sample (its features); draw from a seeded generator.
    n_streams : int
        Number of streams.
    max_steps : int
        Steps after which a stream without an alarm is stopped (censored).

    Returns
    -------
    times : ndarray of int, shape (n_streams,)
        Each stream's run time at its first alarm (``OnlineResult.run_time``), or the run
        time reached at ``max_steps``.
    censored : ndarray of bool, shape (n_streams,)
        True where no alarm came within ``max_steps``.

    Examples
    --------
    >>> from dgpbench.online import OnlineCVMDetector
    >>> rng = np.random.default_rng(0)
    >>> det = OnlineCVMDetector(ert=20, window_size=5, n_bootstraps=2000, random_state=0)
    >>> det = det.fit(rng.normal(size=(100, 1)))
    >>> times, censored = run_times(det, lambda: rng.normal(size=1), 5, 1000)
    >>> times.shape, bool(censored.any())
    ((5,), False)
    """
    times = np.empty(n_streams, dtype=np.int64)
    censored = np.zeros(n_streams, dtype=bool)
    for k in range(n_streams):
        detector.reset()
        while True:
            result = detector.update(draw())
            if result.is_drift or result.t >= max_steps:
                break
        times[k] = result.run_time
        censored[k] = not result.is_drift
    return times, censored


def mean_run_time_interval(times: Any, level: float = 0.95) -> tuple[float, float]:
    """Confidence interval for the mean run time from uncensored run times.

    Exact for exponential run times (``2 S / mu`` is chi-squared with ``2k`` degrees of
    freedom for the sum ``S`` of ``k`` times); for geometric ones, whose variance
    ``mu (mu - 1)`` is below ``mu^2``, it is conservative (covers at least ``level``
    for a large mean).

    Parameters
    ----------
    times : array-like of int
        Run times, at least 1 each, none censored.
    level : float, default=0.95
        Confidence level in (0, 1).

    Returns
    -------
    (float, float)
        Lower and upper bound.

    Raises
    ------
    ValueError
        If ``times`` is empty, or holds a value below 1, or ``level`` is not in (0, 1).

    Examples
    --------
    >>> low, high = mean_run_time_interval([40, 60, 50, 45, 55], level=0.9)
    >>> bool(low < 50 < high)
    True
    """
    from scipy.stats import chi2

    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or len(times) == 0 or not (times >= 1).all():
        raise ValueError("times must be a non-empty 1-D array of run times of at least 1")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    k, s = len(times), float(times.sum())
    return 2 * s / chi2.ppf((1 + level) / 2, 2 * k), 2 * s / chi2.ppf((1 - level) / 2, 2 * k)


def detection_delay(detector: Any, clean: Any, shifted: Any) -> int | None:
    """Samples from the change to the alarm, on a stream of ``clean`` then ``shifted`` rows.

    Parameters
    ----------
    detector : OnlineMMDDetector or OnlineCVMDetector
        A fitted detector (reset first).
    clean : array-like of shape (n_clean, n_features)
        The samples before the change.
    shifted : array-like of shape (n_shifted, n_features)
        The samples after it.

    Returns
    -------
    int or None
        ``t_alarm - n_clean`` (1 = the first shifted sample raised it); 0 or less for a
        false alarm before the change; None when no alarm came.
    """
    detector.reset()
    stream = np.concatenate([np.asarray(clean, dtype=np.float64),
                             np.asarray(shifted, dtype=np.float64)])  # fmt: skip
    results = detector.run(stream)
    if not results or not results[-1].is_drift:
        return None
    return results[-1].t - len(clean)
