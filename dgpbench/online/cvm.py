"""Online per-feature Cramér-von Mises detector, with thresholds for a chosen expected run time.

For each feature, the statistic at step ``t`` is the two-sample Cramér-von Mises
criterion (Anderson, 1962; :func:`scipy.stats.cramervonmises_2samp`'s ``statistic``)
between the reference (``n`` values) and the last ``W`` stream values::

    T = n W / (n + W)^2 * sum over the pooled points z of (F_n(z) - G_W(z))^2

with ``F_n``, ``G_W`` the two empirical CDFs. An alarm is raised when any feature's ``T``
exceeds the step's threshold. This is alibi-detect's ``CVMDriftOnline`` (after Ross and
Adams, 2012) with one window size.

Why a step is cheap. The detector keeps, per feature and window value, how many reference
values lie below it and at or below it (found by bisection when it enters) and how many
window values lie at or below it (integer counts, each changed by at most one per step).
The window's ECDF is constant between its values' positions among the sorted reference,
so the reference points' sum takes ``W + 1`` differences of (integer) prefix sums of
``n F_n`` and ``(n F_n)^2``: ``O(W d + d log n)`` per step, whatever the reference's size, ties included
(one compiled call per step). The counts are integers, so a resumed
stream gives exactly the same statistics.

Why the thresholds need no data. ``T`` depends only on the ranks, so under no shift its
stream has the same law for every continuous feature: the thresholds are set on simulated
Gaussian streams (as alibi-detect does), from the positions of the stream values among
the reference values alone (:func:`cvm_from_positions`). Each feature is calibrated to
the hazard ``1 - (1 - 1/ert)^(1/d)``, exact for independent features; dependent features
(distances to class means are) raise fewer alarms, a longer run time than ``ert``. Ties
(a ReLU's zeros) break the rank argument: add a small seeded jitter to such features.

The run time counts from the first full window (step ``W``), as alibi-detect's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import check_min_samples
from dgpbench.online._kernels import (
    cvm_reference_maxima,
    cvm_statistics,
    cvm_step,
    cvm_steps,
)
from dgpbench.online.base import OnlineDetector, checked_array
from dgpbench.online.thresholds import CVM_ONLINE_RULES, hazard_thresholds, per_feature_rate
from dgpbench.parameters import sklearn_constraints

__all__ = ["OnlineCVMDetector", "cvm_from_positions"]

#: Simulated streams handled at once when configuring (memory ~ chunk x n floats).
_CHUNK = 256


def cvm_from_positions(a: np.ndarray, n: int) -> np.ndarray:
    """Two-sample Cramér-von Mises ``T`` of windows given only their values' positions.

    For continuous data, ``a_j`` = the number of reference values below window value ``j``
    fixes ``T``: with ``a`` sorted and ``c_i = #{j : a_j < i}`` the window's count at the
    ``i``-th reference value, the reference points give
    ``sum_i (i/n - c_i/W)^2`` and the window points ``sum_j (a_(j)/n - j/W)^2``, both in
    closed form from the sorted ``a`` (``sum_i c_i^2 = sum_{j,k} (n - max(a_j, a_k))``).

    Parameters
    ----------
    a : ndarray of shape (..., W)
        Positions in ``0..n`` of each window value among the reference values.
    n : int
        Number of reference values.

    Returns
    -------
    ndarray of shape (...)

    Examples
    --------
    >>> from scipy.stats import cramervonmises_2samp
    >>> ref, win = np.array([0.1, 0.5, 0.9]), np.array([0.3, 1.2])
    >>> t = cvm_from_positions(np.searchsorted(np.sort(ref), win), 3)
    >>> bool(np.isclose(t, cramervonmises_2samp(ref, win).statistic))
    True
    """
    a = np.sort(np.asarray(a, dtype=np.float64), axis=-1)
    W = a.shape[-1]
    j = np.arange(1, W + 1)
    ref_sq = (n + 1) * (2 * n + 1) / (6.0 * n)  # sum_i (i/n)^2
    cross = (n * (n + 1) / 2.0 * W - (a * (a + 1) / 2.0).sum(-1)) / (n * W)  # sum_i i c_i / (nW)
    c_sq = (n * W * W - (a * (2 * j - 1)).sum(-1)) / (W * W)  # sum_i c_i^2 / W^2
    win = ((a / n - j / W) ** 2).sum(-1)
    return n * W / (n + W) ** 2 * (ref_sq - 2.0 * cross + c_sq + win)


def _ecdf_prefix_sums(sorted_cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums of ``k_i = n F_n`` and ``k_i^2`` down each sorted column: (n + 1, d) each.

    ``k_i`` counts the column's values at or below its ``i``-th (ties: the same count at
    each); summed as integers, so a segment's sum has no rounding error of its own.
    """
    n = len(sorted_cols)
    k = np.stack([np.searchsorted(s, s, side="right") for s in sorted_cols.T], axis=1)
    zero = np.zeros((1, k.shape[1]))
    sq = k * k if n <= 2_000_000 else k.astype(np.float64) ** 2  # n^3 within int64
    return np.concatenate([zero, k.cumsum(0)]), np.concatenate([zero, sq.cumsum(0)])


class OnlineCVMDetector(OnlineDetector, BaseEstimator):
    """Sequential per-feature Cramér-von Mises detector, calibrated to an ERT.

    Meant for low-dimensional features (DGP, TU, MAGDiff distances; BBSD softmax).

    Parameters
    ----------
    ert : float, default=1000
        Expected run time under no shift, counted from the first full window. At least 2.
    window_size : int, default=20
        Length ``W`` of the test window (at least 2).
    n_bootstraps : int, default=10000
        Simulated no-shift streams (alibi-detect's default for this detector).
    random_state : int, RandomState instance or None, default=None
        Seed of the simulated streams.
    calibration : {"gaussian", "reference"}, default="gaussian"
        ``"gaussian"``: alibi-detect's configuration, Gaussian streams and a per-feature
        hazard ``1 - (1 - 1/ert)^(1/d)``, exact for independent continuous features and
        conservative (longer run times) for dependent ones. ``"reference"``: streams of
        permuted reference rows and one threshold on the largest feature statistic, exact
        for dependent features and ties too; the detector then keeps
        ``n_ref - 2 window_size + 1`` rows as its reference, as the simulation did.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_) or (n_ref - 2 W + 1, n_features_in_)
        The reference features (fewer rows with ``calibration="reference"``).
    thresholds_ : ndarray of shape (window_size,)
        The thresholds of steps ``W .. 2W - 1``; the last is used afterwards.
    first_step_ : int
        ``window_size``: the first step with a full window.
    n_features_in_ : int
        Number of features.

    See Also
    --------
    OnlineMMDDetector : One multivariate kernel statistic.
    dgpbench.detectors.KSShiftDetector : The batch per-feature test.

    References
    ----------
    G. J. Ross, N. M. Adams. Two nonparametric control charts for detecting arbitrary
    distribution changes. J. Quality Technology 44(2), 2012. O. Cobb, A. Van Looveren,
    J. Klaise. AISTATS 2022.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> det = OnlineCVMDetector(ert=50, window_size=10, n_bootstraps=500, random_state=0)
    >>> det = det.fit(rng.normal(size=(200, 3)))
    >>> det.run(rng.normal(loc=2.0, size=(40, 3)))[-1].is_drift
    True
    """

    #: The name of the test (``dgpbench fit --test``, a detector file's ``info["test"]``).
    test_name = "cvm_online"
    _parameter_constraints: dict = sklearn_constraints(CVM_ONLINE_RULES)

    def __init__(
        self,
        ert: float = 1000,
        window_size: int = 20,
        n_bootstraps: int = 10000,
        random_state: Any = None,
        calibration: str = "gaussian",
    ) -> None:
        self.ert = ert
        self.window_size = window_size
        self.n_bootstraps = n_bootstraps
        self.random_state = random_state
        self.calibration = calibration

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> OnlineCVMDetector:
        """Store the reference and configure the thresholds on simulated streams.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            Clean reference features, at least 2 finite rows.
        y : None
            Ignored.

        Returns
        -------
        self : OnlineCVMDetector
        """
        X = validate_data(self, X_ref, reset=True, dtype=np.float64, copy=True)
        check_min_samples(len(X), 2, "X_ref", "a reference distribution")
        if (X == X[:1]).all():
            raise ValueError("X_ref is constant (every row is the same point)")
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))
        if self.calibration == "gaussian":
            beta = per_feature_rate(1.0 / self.ert, X.shape[1])
            self.thresholds_ = hazard_thresholds(self._simulate(len(X), rng), beta)
            self.X_ref_ = X
        else:
            W = int(self.window_size)
            check_min_samples(len(X), 2 * W + 1, "X_ref", 'calibration="reference" keeps '
                              "2 x window_size - 1 rows for the simulated streams")  # fmt: skip
            stats = self._simulate_reference(X, rng)
            self.thresholds_ = hazard_thresholds(stats, 1.0 / self.ert)
            self.X_ref_ = X[rng.permutation(len(X))[2 * W - 1 :]].copy()
        self._prepare()
        return self

    def _simulate(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``T`` of Gaussian no-shift streams at steps ``W .. 2W - 1``: (B, W)."""
        W, B = int(self.window_size), int(self.n_bootstraps)
        stats = np.empty((B, W))
        steps = np.arange(W)[:, None] + np.arange(W)[None, :]  # (step, slot) -> stream index
        for start in range(0, B, _CHUNK):
            b = min(_CHUNK, B - start)
            ref = np.sort(rng.standard_normal((b, n)), axis=1)
            stream = rng.standard_normal((b, 2 * W - 1))
            pos = np.stack([np.searchsorted(r, s) for r, s in zip(ref, stream, strict=True)])
            stats[start : start + b] = cvm_from_positions(pos[:, steps], n)
        return stats

    def _simulate_reference(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Largest feature ``T`` of streams of permuted reference rows, steps W..2W-1: (B, W).

        Each stream takes ``2W - 1`` rows of ``X`` as its samples and the other ``m`` rows as
        its reference (the features keep their joint law, ties included); ``T`` follows the
        ECDF definition. Each column of ``X`` is sorted once: a stream's reference ECDF is
        the full one less the stream's own values, so the reference points' sum comes from
        the full column's prefix sums in ``O(W^2)`` per stream and feature
        (:func:`~dgpbench.online._kernels.cvm_reference_maxima`), whatever ``n``.
        """
        n = len(X)
        W, B = int(self.window_size), int(self.n_bootstraps)
        L = 2 * W - 1
        sorted_cols = np.sort(X, axis=0)
        lo = np.stack([np.searchsorted(s, x) for s, x in zip(sorted_cols.T, X.T, strict=True)])
        hi = np.stack([np.searchsorted(s, x, side="right")
                       for s, x in zip(sorted_cols.T, X.T, strict=True)])  # fmt: skip
        cum_k, cum_k2 = _ecdf_prefix_sums(sorted_cols)
        stats = np.empty((B, W))
        for start in range(0, B, _CHUNK):
            b = min(_CHUNK, B - start)
            # a stream is the first L rows of argsort(r): the L smallest r's, in order
            r = rng.random((b, n))
            first = np.argpartition(r, L - 1, axis=1)[:, :L]
            order = np.argsort(np.take_along_axis(r, first, axis=1), axis=1)
            rows = np.take_along_axis(first, order, axis=1)
            cvm_reference_maxima(rows, lo, hi, cum_k, cum_k2, W, stats[start : start + b])
        return stats

    def _prepare(self) -> None:
        # columns contiguous: the compiled step bisects one feature's column at a time
        self.ref_sorted_ = np.asfortranarray(np.sort(self.X_ref_, axis=0))
        self.cum_k_, self.cum_k2_ = _ecdf_prefix_sums(self.ref_sorted_)
        self.first_step_ = int(self.window_size)

    # the stream ----------------------------------------------------------------------

    def _new_stream(self) -> None:
        W, d = int(self.window_size), self.n_features_in_
        self._window = np.zeros((W, d))
        self._a = np.zeros((W, d), dtype=np.int64)  # #{ref <= w}
        self._left = np.zeros((W, d), dtype=np.int64)  # #{ref < w}
        self._cw = np.zeros((W, d), dtype=np.int64)  # #{window <= w}
        self._q = np.zeros(W, dtype=np.int64)  # scratch: one feature's sorted left positions
        self._stats = np.zeros(d)  # the last full window's per-feature statistics
        self._pos = 0
        self._filled = 0

    def _step(self, x: np.ndarray) -> float:
        W = int(self.window_size)
        stat = cvm_step(x, self.ref_sorted_, self.cum_k_, self.cum_k2_, self._window, self._a,
                        self._left, self._cw, self._q, self._pos, self._filled,
                        self._stats)  # fmt: skip
        self._pos = (self._pos + 1) % W
        self._filled = min(W, self._filled + 1)
        return stat

    def _steps(self, X: np.ndarray, thresholds: np.ndarray, stop_at_alarm: bool) -> np.ndarray:
        W, out = int(self.window_size), np.empty(len(X))
        fed = cvm_steps(X, self.ref_sorted_, self.cum_k_, self.cum_k2_, self._window, self._a,
                        self._left, self._cw, self._q, self._pos, self._filled, self._stats,
                        out, thresholds, stop_at_alarm)  # fmt: skip
        self._pos = (self._pos + fed) % W
        self._filled = min(W, self._filled + fed)
        return out[:fed]

    def feature_statistics(self) -> np.ndarray:
        """Each feature's ``T`` over the current (full) window.

        Returns
        -------
        ndarray of shape (n_features_in_,)
            NaN while the window is filling.
        """
        check_is_fitted(self)
        if not hasattr(self, "t_"):
            self.reset()
        stats = np.full(self.n_features_in_, np.nan)
        if self._filled == int(self.window_size):
            cvm_statistics(self.cum_k_, self.cum_k2_, self._a, self._left, self._cw,
                           self._q, stats)  # fmt: skip
        return stats

    def _counts(self, window: np.ndarray, filled: int) -> dict[str, np.ndarray]:
        """The counts of a window whose first ``filled`` slots (all when full) hold values."""
        live = window[:filled]
        a, left, cw = (np.zeros(window.shape, dtype=np.int64) for _ in range(3))
        for j, s in enumerate(self.ref_sorted_.T):
            a[:filled, j] = np.searchsorted(s, live[:, j], side="right")
            left[:filled, j] = np.searchsorted(s, live[:, j], side="left")
        cw[:filled] = (live[None, :, :] <= live[:, None, :]).sum(1)
        cr = (live[None, :, :] <= self.X_ref_[:, None, :]).sum(1)
        return {"a": a, "left": left, "cw": cw, "cr": cr}

    def _stream_arrays(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        # the file keeps the window's counts (the reference's ones, cr, computed here)
        counts = self._counts(self._window, self._filled)
        return {"pos": int(self._pos), "filled": int(self._filled)}, {
            "window": self._window.copy(), "a": self._a.copy(), "cw": self._cw.copy(),
            "cr": counts["cr"],
        }  # fmt: skip

    def _set_stream_arrays(self, state: dict[str, Any], arrays: Any) -> None:
        W, (n, d) = int(self.window_size), self.X_ref_.shape
        pos, filled = state.get("pos"), state.get("filled")
        for key, value, high in (("pos", pos, W - 1), ("filled", filled, W)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
                raise ValueError(f"stream state: {key} must be in 0..{high}, got {value!r}")
        if filled < W and pos != filled:
            raise ValueError(f"stream state: pos must equal filled ({filled}) while the "
                             f"window fills, got {pos}")  # fmt: skip
        window = np.ascontiguousarray(checked_array(arrays, "window", (W, d)))
        stored = {"a": checked_array(arrays, "a", (W, d), "i"),
                  "cw": checked_array(arrays, "cw", (W, d), "i"),
                  "cr": checked_array(arrays, "cr", (n, d), "i")}  # fmt: skip
        if (stored["a"] < 0).any() or (stored["a"] > n).any() or (stored["cw"] < 0).any() or (
            stored["cw"] > W).any() or (stored["cr"] < 0).any() or (stored["cr"] > W).any():  # fmt: skip
            raise ValueError("stream state: a count is out of range")
        counts = self._counts(window, filled)
        if any(not np.array_equal(stored[k], counts[k]) for k in stored):
            raise ValueError("stream state: the counts do not match the window")
        self._window, self._a, self._left, self._cw = (
            window, counts["a"], counts["left"], counts["cw"])  # fmt: skip
        self._pos, self._filled = pos, filled

    # the detector file ---------------------------------------------------------------

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state for :func:`dgpbench.saved.save_detector`.

        Returns
        -------
        state : dict
            Empty.
        arrays : dict of str to ndarray
            ``X_ref_`` and ``thresholds_``.
        """
        check_is_fitted(self)
        return {}, {"X_ref_": self.X_ref_, "thresholds_": self.thresholds_}

    def set_state(self, state: dict[str, Any], arrays: Any) -> OnlineCVMDetector:
        """Restore :meth:`get_state`'s output (checked; the thresholds are not simulated again).

        Parameters
        ----------
        state : dict
            JSON values (empty).
        arrays : mapping of str to ndarray
            The arrays.

        Returns
        -------
        self : OnlineCVMDetector

        Raises
        ------
        dgpbench.state.StateError
            If an array is missing, of the wrong shape, or not finite.
        """
        from dgpbench.state import StateError, check_keys

        check_keys(state, ())
        try:
            ref = np.asarray(arrays["X_ref_"])
            if ref.ndim != 2 or len(ref) < 2:
                raise ValueError("X_ref_ must be a 2-D array of at least 2 rows")
            self.X_ref_ = checked_array(arrays, "X_ref_", ref.shape)
            self.thresholds_ = checked_array(arrays, "thresholds_", (int(self.window_size),))
        except (ValueError, KeyError) as exc:
            raise StateError(str(exc)) from exc
        self.n_features_in_ = ref.shape[1]
        self._prepare()
        return self
