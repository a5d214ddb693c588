"""Measure an online detector: run times on clean streams, delays on shifted ones.

What the tests and the benchmarks use to check that a detector configured for an ERT
keeps it (:func:`run_times`, :func:`mean_run_time_interval`) and what it buys
(:func:`detection_delay`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

__all__ = ["detection_delay", "mean_run_time_interval", "run_times"]


# Blocks of a stream: small first (a stream may alarm early), doubling up to a cap that
# bounds the rows drawn past the alarm.
_FIRST_BLOCK, _MAX_BLOCK = 32, 2048


class _Rows(Protocol):
    """The rows of the streams: ``start`` one, ``take`` its next rows, ``give_back`` some."""

    def start(self) -> None: ...

    def take(self, n: int) -> np.ndarray: ...

    def give_back(self, k: int) -> None:
        """The last ``k`` rows of the last ``take`` were not fed (the stream alarmed first)."""


def _stream_run_times(
    detector: Any, rows: _Rows, n_streams: int, max_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Run times of fresh streams, each fed in blocks through ``run`` to an alarm or ``max_steps``.

    The one loop of :func:`run_times` and :func:`dgpbench.online.streams.clean_run_times`.
    The decisions are those of one ``update`` per row (``run`` stops after the first alarm),
    and the rows taken past an alarm are given back.
    """
    times = np.empty(n_streams, dtype=np.int64)
    censored = np.zeros(n_streams, dtype=bool)
    for k in range(n_streams):
        rows.start()
        detector.reset()
        block, t = _FIRST_BLOCK, 0
        while True:
            n = max(1, min(block, max_steps - t))  # at least one row, as one update would
            results = detector.run(rows.take(n))
            last = results[-1]
            if last.is_drift or last.t >= max_steps:
                break
            t, block = last.t, min(2 * block, _MAX_BLOCK)
        if len(results) < n:
            rows.give_back(n - len(results))
        times[k], censored[k] = last.run_time, not last.is_drift
    return times, censored


class _Draws:
    """The rows of ``draw()``, one call each; rows given back start the next stream."""

    def __init__(self, draw: Callable[[], Any]) -> None:
        self.draw = draw
        self._last: list[np.ndarray] = []
        self._pending: list[np.ndarray] = []

    def start(self) -> None:
        pass

    def take(self, n: int) -> np.ndarray:
        rows, self._pending = self._pending[:n], self._pending[n:]
        rows += [np.asarray(self.draw(), dtype=np.float64).reshape(-1)
                 for _ in range(n - len(rows))]  # fmt: skip
        widths = {len(r) for r in rows}
        if len(widths) > 1:
            raise ValueError(f"draw() returned samples of different widths {sorted(widths)}")
        self._last = rows
        return np.array(rows)

    def give_back(self, k: int) -> None:
        self._pending = self._last[len(self._last) - k :] + self._pending


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

    Raises
    ------
    ValueError
        If a sample has the wrong width or a non-finite value.

    Notes
    -----
    The samples are drawn ahead in blocks and fed through the detector's ``run`` (one
    compiled loop); those drawn past a stream's alarm start the next stream, so the streams
    are those of one ``update`` per ``draw()``, the same decisions and run times. Up to
    ``2048`` samples are drawn past the last stream's end.

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
    return _stream_run_times(detector, _Draws(draw), n_streams, max_steps)


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
