"""What the online detectors share: the per-sample result record and the stream loop.

A detector is fitted once on the reference (its thresholds are configured then, by
simulation: :mod:`dgpbench.online.thresholds`); then :meth:`OnlineDetector.update` takes
one sample at a time and says whether the stream has shifted. :meth:`~OnlineDetector.reset`
starts a new stream; :meth:`~OnlineDetector.get_stream_state` and
:meth:`~OnlineDetector.set_stream_state` stop a stream and resume it later with the same
decisions (:mod:`dgpbench.online.state` writes them to a file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dgpbench.detectors.base import package_version
from dgpbench.online._kernels import all_finite, exceeds

# The alarm decision of the compiled loops, run as Python where one step is decided at a time.
_exceeds = exceeds.py_func

__all__ = ["OnlineDetector", "OnlineResult"]


@dataclass(frozen=True)
class OnlineResult:
    """The decision after one stream sample.

    Parameters
    ----------
    t : int
        Number of stream samples seen so far (this one included).
    is_drift : bool
        ``statistic > threshold`` (False while either is NaN): the stream is flagged as
        shifted.
    statistic : float
        The detector's statistic over its window (NaN while the window is filling).
    threshold : float
        The threshold of step ``t`` (NaN while the window is filling).
    run_time : int
        Steps counted towards the expected run time: ``t`` minus the steps before the first
        one that can raise an alarm.
    name : str
        The detector's class name.
    ert : float
        The expected run time under no shift the thresholds were configured for.
    window_size : int
        The test window's length.

    Examples
    --------
    >>> r = OnlineResult(5, False, 0.1, 0.3, 5, "OnlineMMDDetector", 100.0, 10)
    >>> r.to_dict()["data"]["is_drift"]
    False
    """

    t: int
    is_drift: bool
    statistic: float
    threshold: float
    run_time: int
    name: str
    ert: float
    window_size: int

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Return alibi-detect's online layout: ``{"data": {...}, "meta": {...}}``.

        Returns
        -------
        dict
            ``data``: ``is_drift``, ``distance`` (the statistic, None while the window
            fills), ``threshold``, ``time`` (``t``), ``run_time``; ``meta``: ``name``,
            ``version``, ``detector_type``, ``online`` (True), ``ert``, ``window_size``.
        """

        def num(v: float) -> float | None:
            return float(v) if np.isfinite(v) else None

        return {
            "data": {
                "is_drift": bool(self.is_drift),
                "distance": num(self.statistic),
                "threshold": num(self.threshold),
                "time": int(self.t),
                "run_time": int(self.run_time),
            },
            "meta": {
                "name": self.name,
                "version": package_version(),
                "detector_type": "drift",
                "online": True,
                "ert": float(self.ert),
                "window_size": int(self.window_size),
            },
        }


class OnlineDetector:
    """Mixin of the online detectors: threshold lookup, the stream loop, stream state.

    A subclass sets ``thresholds_`` (one per configured step, the last kept afterwards) and
    ``first_step_`` (the first ``t`` that can raise an alarm) in ``fit``, keeps its window in
    ``_window`` (a ring buffer of ``window_size`` rows: ``_pos`` the next slot, ``_filled`` the
    rows held), and supplies ``_new_stream()``, ``_step(x) -> float``, ``_stream_arrays()`` and
    ``_set_stream_arrays(arrays)``.
    """

    thresholds_: np.ndarray
    first_step_: int

    def thresholds_for(self, t0: int, n: int) -> np.ndarray:
        """The thresholds of steps ``t0 + 1 .. t0 + n``: per step, then the last one.

        :meth:`run` compares each row's statistic with these in its compiled loop;
        :meth:`threshold_at` and :meth:`update` look up one step by the same rule.

        Parameters
        ----------
        t0 : int
            Number of stream samples seen before the first of these steps.
        n : int
            Number of steps.

        Returns
        -------
        ndarray of shape (n,)
            NaN before :attr:`first_step_` (no alarm is possible there).

        Examples
        --------
        >>> from dgpbench.online import OnlineCVMDetector
        >>> det = OnlineCVMDetector(ert=50, window_size=3, n_bootstraps=500, random_state=0)
        >>> det = det.fit(np.random.default_rng(0).normal(size=(60, 2)))
        >>> thr = det.thresholds_for(0, 7)
        >>> bool(np.isnan(thr[:2]).all()), bool((thr[2:5] == det.thresholds_).all())
        (True, True)
        >>> bool((thr[5:] == det.thresholds_[-1]).all())
        True
        """
        return self._step_thresholds(np.arange(int(t0) + 1, int(t0) + int(n) + 1))

    def threshold_at(self, t: int) -> float:
        """The threshold of step ``t`` (1-based): per step, then the last one.

        Parameters
        ----------
        t : int
            Number of stream samples seen.

        Returns
        -------
        float
            NaN before :attr:`first_step_`; as :meth:`thresholds_for` gives it.
        """
        return float(self._step_thresholds(t))

    def _step_thresholds(self, t: Any) -> Any:
        """The threshold of each step ``t`` (an int or an array of them): the one rule.

        Entry ``t`` of NaN (steps ``0 .. first_step_ - 1``) followed by ``thresholds_``,
        the last entry for every later step. The table is built once per fitted
        ``thresholds_``: a step's lookup is one ``take``, as cheap for one step (each
        :meth:`update`) as for a block.
        """
        cached = self.__dict__.get("_thresholds_by_step")
        if cached is None or cached[0] is not self.thresholds_ or cached[1] != self.first_step_:
            table = np.concatenate([np.full(self.first_step_, np.nan),
                                    np.asarray(self.thresholds_, dtype=np.float64)])  # fmt: skip
            cached = self._thresholds_by_step = (self.thresholds_, self.first_step_, table)
        return cached[2].take(t, mode="clip")

    def reset(self) -> OnlineDetector:
        """Start a new stream (the window back to its initial state, ``t = 0``).

        Returns
        -------
        self : object
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        self.t_ = 0
        self._new_stream()
        return self

    def window(self) -> np.ndarray:
        """The current test window, oldest sample first (fewer rows while it fills).

        Returns
        -------
        ndarray of shape (min(t, window_size), n_features_in_)
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        if not hasattr(self, "t_"):
            self.reset()
        if self._filled < int(self.window_size):
            return self._window[: self._filled].copy()
        return np.roll(self._window, -self._pos, axis=0)

    def _checked_sample(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.n_features_in_:
            raise ValueError(f"a sample has {x.shape[0]} features, the detector takes "
                             f"{self.n_features_in_}")  # fmt: skip
        if not all_finite(x):
            raise ValueError("a sample has a NaN or infinite feature")
        return x

    def _result(self, t: int, stat: float, thr: float) -> OnlineResult:
        """The record of step ``t`` whose statistic is ``stat`` and threshold ``thr``."""
        if not math.isfinite(thr):
            stat = math.nan
        return OnlineResult(
            t=t,
            is_drift=_exceeds(stat, thr),
            statistic=stat,
            threshold=thr,
            run_time=max(0, t - self.first_step_ + 1),
            name=type(self).__name__,
            ert=float(self.ert),
            window_size=int(self.window_size),
        )

    def update(self, x: Any) -> OnlineResult:
        """Take the next stream sample and decide.

        Parameters
        ----------
        x : array-like of shape (n_features_in_,)
            One sample (its features).

        Returns
        -------
        OnlineResult

        Raises
        ------
        ValueError
            If ``x`` has the wrong width or a non-finite value.
        """
        if not hasattr(self, "t_"):
            self.reset()
        x = self._checked_sample(x)
        self.t_ += 1
        return self._result(self.t_, float(self._step(x)), self.threshold_at(self.t_))

    def run(self, X: Any, *, stop_at_alarm: bool = True) -> list[OnlineResult]:
        """Feed the rows of ``X`` in order (continuing the current stream).

        The rows go through one compiled loop, not one :meth:`update` call each; the
        decisions and the stream state afterwards are :meth:`update`'s.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)
            The stream's next samples.
        stop_at_alarm : bool, default=True
            Stop after the first alarm.

        Returns
        -------
        list of OnlineResult
            One per sample fed.

        Raises
        ------
        ValueError
            If the rows have the wrong width, or when the feeding reaches a row with a
            non-finite value (the rows before it are fed, as :meth:`update` would).
        """
        if not hasattr(self, "t_"):
            self.reset()
        X = np.asarray(X, dtype=np.float64)
        if len(X) == 0:
            return []
        X = np.ascontiguousarray(X.reshape(len(X), -1))
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"a sample has {X.shape[1]} features, the detector takes "
                             f"{self.n_features_in_}")  # fmt: skip
        bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
        good = X[: bad[0]] if len(bad) else X
        t0 = self.t_
        thresholds = self.thresholds_for(t0, len(good))
        stats = self._steps(good, thresholds, stop_at_alarm)
        self.t_ += len(stats)
        steps = zip(stats.tolist(), thresholds[: len(stats)].tolist(), strict=True)
        out = [self._result(t0 + i, s, thr) for i, (s, thr) in enumerate(steps, start=1)]
        if len(bad) and not (stop_at_alarm and out and out[-1].is_drift):
            raise ValueError("a sample has a NaN or infinite feature")
        return out

    def _steps(self, X: np.ndarray, thresholds: np.ndarray, stop_at_alarm: bool) -> np.ndarray:
        """The statistics of the rows of ``X`` fed in order, stopping after an alarm if asked.

        ``thresholds[i]`` is row ``i``'s (:meth:`thresholds_for`). A subclass may replace
        this loop over ``_step`` by a compiled one deciding with the compiled ``exceeds``.
        """
        stats = np.empty(len(X))
        for i, x in enumerate(X):
            stats[i] = self._step(x)
            if stop_at_alarm and _exceeds(stats[i], thresholds[i]):
                return stats[: i + 1]
        return stats

    def get_stream_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The state of the current stream: JSON values and arrays, enough to resume it.

        Returns
        -------
        state : dict
            ``t`` and the detector's scalars.
        arrays : dict of str to ndarray
            The window and its running sums.
        """
        if not hasattr(self, "t_"):
            self.reset()
        state, arrays = self._stream_arrays()
        return {"t": int(self.t_), **state}, arrays

    def set_stream_state(self, state: dict[str, Any], arrays: Any) -> OnlineDetector:
        """Resume a stream from :meth:`get_stream_state`'s output.

        Parameters
        ----------
        state : dict
            JSON values.
        arrays : mapping of str to ndarray
            The arrays.

        Returns
        -------
        self : object

        Raises
        ------
        ValueError
            If a value is missing or does not fit this detector.
        """
        t = state.get("t")
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            raise ValueError(f"stream state: t must be a count, got {t!r}")
        self.reset()
        self._set_stream_arrays(state, arrays)
        self.t_ = t
        return self


def checked_array(arrays: Any, key: str, shape: tuple[int, ...], kind: str = "f") -> np.ndarray:
    """A finite array of the given shape from a state mapping, copied, or ValueError."""
    try:
        a = np.asarray(arrays[key])
    except KeyError:
        raise ValueError(f"state: missing array {key!r}") from None
    if a.dtype.kind not in ("biu" if kind == "i" else "biuf") or a.shape != shape:
        raise ValueError(f"state: {key} must be numbers of shape {shape}, got {a.dtype} {a.shape}")
    if kind == "f" and not np.isfinite(a).all():
        raise ValueError(f"state: {key} has a NaN or infinite value")
    return np.array(a, dtype=np.int64 if kind == "i" else np.float64)
