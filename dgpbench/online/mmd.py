"""Online MMD over a sliding window, with thresholds for a chosen expected run time.

The statistic at each step is the unbiased MMD^2 (Gaussian kernel, as
:class:`~dgpbench.detectors.MMDShiftDetector`) between a fixed reference sample (``m``
rows) and the last ``W`` stream samples. Running sums make a step cost ``O((m + W) d)``:
the new sample's kernel values against the reference (one number kept per window slot)
and against the window (one row of the window's kernel matrix), instead of the
``O((m + W) W d)`` of a recomputation. The reference's own kernel sum is computed once.

Configuration follows Cobb, Van Looveren and Klaise (AISTATS 2022) and alibi-detect's
``MMDDriftOnline``: ``n_bootstraps`` no-shift streams are simulated by permuting the
reference ``X`` (``n`` rows): each takes ``2W - 1`` rows as its stream and the other
``m = n - 2W + 1`` rows as its reference; the thresholds of steps ``W .. 2W - 1`` follow
the constant-hazard rule (:func:`~dgpbench.online.thresholds.hazard_thresholds`) and the
last is kept afterwards. The detector's own reference is ``m`` rows of ``X`` (the size
the simulation used). Only the row sums of the full kernel matrix and each stream's
``(2W - 1) x (2W - 1)`` block are needed: the configuration costs ``O(n^2 d + B W^2 d)``.

Unlike alibi-detect, the window starts empty and the first alarm can come at step ``W``
(its run time counts from there, as for the Cramér-von Mises detector): alibi-detect
fills the first window with ``W`` reference rows, the same ones for every stream, and a
fixed initial window that happens to sit far from the reference makes every stream stop
at once (measured here: one seed in eight gave a mean run time of 1 for an ERT of 50).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import check_min_samples
from dgpbench.detectors.mmd import BLOCK_BYTES, MEDIAN_MAX_POINTS
from dgpbench.online._kernels import mmd_statistic, mmd_step, mmd_steps
from dgpbench.online.base import OnlineDetector, checked_array
from dgpbench.online.thresholds import MMD_ONLINE_RULES, hazard_thresholds
from dgpbench.parameters import sklearn_constraints

__all__ = ["OnlineMMDDetector", "gaussian_kernel"]


def gaussian_kernel(A: np.ndarray, B: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(-gamma |a - b|^2)`` for every row ``a`` of ``A`` and ``b`` of ``B``.

    Parameters
    ----------
    A, B : ndarray of shape (..., p, d) and (..., q, d)
        Rows to compare (leading axes broadcast).
    gamma : float
        ``1 / (2 sigma^2)``.

    Returns
    -------
    ndarray of shape (..., p, q)

    Examples
    --------
    >>> gaussian_kernel(np.zeros((1, 1)), np.ones((1, 1)), 0.5).round(6)
    array([[0.606531]])
    """
    sa = np.einsum("...ij,...ij->...i", A, A)
    sb = np.einsum("...ij,...ij->...i", B, B)
    d2 = sa[..., :, None] + sb[..., None, :] - 2.0 * (A @ np.swapaxes(B, -1, -2))
    return np.exp(-gamma * np.maximum(d2, 0.0))


def _row_sums(X: np.ndarray, gamma: float) -> np.ndarray:
    """``K 1`` of the kernel matrix of ``X``, built in row blocks of bounded memory."""
    n = len(X)
    rows = max(1, min(n, BLOCK_BYTES // (8 * n)))
    out = np.empty(n)
    for start in range(0, n, rows):
        out[start : start + rows] = gaussian_kernel(X[start : start + rows], X, gamma).sum(1)
    return out


def _offdiag_sum(X: np.ndarray, gamma: float) -> float:
    """``sum_{i != j} k(x_i, x_j)``."""
    return float(_row_sums(X, gamma).sum() - len(X))


def _window_sums(M: np.ndarray, W: int) -> np.ndarray:
    """Sums of the ``W x W`` diagonal blocks ``M[..., t:t+W, t:t+W]`` for t = 0..W-1."""
    C = np.zeros((*M.shape[:-2], M.shape[-2] + 1, M.shape[-1] + 1))
    C[..., 1:, 1:] = M.cumsum(-2).cumsum(-1)
    t = np.arange(W)
    return C[..., t + W, t + W] - C[..., t, t + W] - C[..., t + W, t] + C[..., t, t]


class OnlineMMDDetector(OnlineDetector, BaseEstimator):
    """Sequential Gaussian-kernel MMD detector over a sliding window, calibrated to an ERT.

    Parameters
    ----------
    ert : float, default=1000
        Expected run time under no shift: the mean number of clean samples before a false
        alarm, counted from the first full window (the hazard per step is ``1 / ert``).
        At least 2.
    window_size : int, default=20
        Length ``W`` of the test window. Small windows react fast to large shifts; large
        ones see small shifts. The reference needs at least ``2 W + 1`` rows.
    n_bootstraps : int, default=1000
        Simulated no-shift streams (alibi-detect's default). About ``n_bootstraps / ert``
        of them lie above the last threshold, so the achieved ERT is off by about
        ``sqrt(ert / n_bootstraps)``: 100 x ``ert`` gives about 10%.
    bandwidth : "median" or float, default="median"
        ``sigma`` of ``exp(-|a - b|^2 / (2 sigma^2))``; ``"median"``: the median distance
        between reference rows (a seeded subset of
        :data:`~dgpbench.detectors.mmd.MEDIAN_MAX_POINTS` rows beyond that).
    random_state : int, RandomState instance or None, default=None
        Seed of the reference split and the simulated streams.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref - 2 * window_size + 1, n_features_in_)
        The detector's reference rows.
    thresholds_ : ndarray of shape (window_size,)
        The thresholds of steps ``W .. 2W - 1``; the last is used afterwards.
    bandwidth_ : float
        The kernel's ``sigma``.
    first_step_ : int
        ``window_size``: the first step with a full window.
    n_features_in_ : int
        Number of features.

    See Also
    --------
    dgpbench.detectors.MMDShiftDetector : The batch test.
    OnlineCVMDetector : Per-feature Cramér-von Mises statistics.

    References
    ----------
    O. Cobb, A. Van Looveren, J. Klaise. Sequential Multivariate Change Detection with
    Calibrated and Memoryless False Detection Rates. AISTATS 2022.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> det = OnlineMMDDetector(ert=50, window_size=5, n_bootstraps=200, random_state=0)
    >>> det = det.fit(rng.normal(size=(100, 2)))
    >>> results = det.run(rng.normal(loc=3.0, size=(30, 2)))
    >>> results[-1].is_drift
    True
    """

    #: The name of the test (``dgpbench fit --test``, a detector file's ``info["test"]``).
    test_name = "mmd_online"
    _parameter_constraints: dict = sklearn_constraints(MMD_ONLINE_RULES)

    def __init__(
        self,
        ert: float = 1000,
        window_size: int = 20,
        n_bootstraps: int = 1000,
        bandwidth: str | float = "median",
        random_state: Any = None,
    ) -> None:
        self.ert = ert
        self.window_size = window_size
        self.n_bootstraps = n_bootstraps
        self.bandwidth = bandwidth
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> OnlineMMDDetector:
        """Split the reference, choose the bandwidth and configure the thresholds.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            Clean reference features, at least ``2 * window_size + 1`` finite rows.
        y : None
            Ignored.

        Returns
        -------
        self : OnlineMMDDetector
        """
        X = validate_data(self, X_ref, reset=True, dtype=np.float64)
        W = int(self.window_size)
        check_min_samples(len(X), 2 * W + 1, "X_ref", "2 x window_size - 1 for the simulated "
                          "streams and 2 for the reference")  # fmt: skip
        if (X == X[:1]).all():
            raise ValueError("X_ref is constant (every row is the same point)")
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))
        sigma = self._bandwidth(X, rng)
        gamma = 1.0 / (2.0 * sigma * sigma)
        self.thresholds_ = hazard_thresholds(self._simulate(X, gamma, rng), 1.0 / self.ert)
        perm = rng.permutation(len(X))
        self.bandwidth_ = sigma
        self.X_ref_ = X[perm[2 * W - 1 :]].copy()
        self._prepare()
        return self

    def _bandwidth(self, X: np.ndarray, rng: np.random.Generator) -> float:
        from scipy.spatial.distance import pdist

        if not isinstance(self.bandwidth, str):
            return float(self.bandwidth)
        if len(X) > MEDIAN_MAX_POINTS:
            X = X[np.sort(rng.choice(len(X), MEDIAN_MAX_POINTS, replace=False))]
        sigma = float(np.median(pdist(X)))
        if not sigma > 0:
            raise ValueError("the median distance between reference rows is 0: pass a bandwidth")
        return sigma

    def _simulate(self, X: np.ndarray, gamma: float, rng: np.random.Generator) -> np.ndarray:
        """MMD^2 of ``n_bootstraps`` permuted no-shift streams at steps W..2W-1: (B, W)."""
        n, W, B = len(X), int(self.window_size), int(self.n_bootstraps)
        m, L = n - 2 * W + 1, 2 * W - 1
        rs = _row_sums(X, gamma)
        total = rs.sum()
        stats = np.empty((B, W))
        chunk = max(1, BLOCK_BYTES // (8 * 4 * W * max(2 * W, X.shape[1])))
        for start in range(0, B, chunk):
            b = min(chunk, B - start)
            Q = np.argsort(rng.random((b, n)), axis=1)[:, :L]  # the stream's rows
            Xq = X[Q]
            KQQ = gaussian_kernel(Xq, Xq, gamma)  # (b, L, L)
            s_rr = total - 2.0 * rs[Q].sum(1) + KQQ.sum((1, 2))  # sum over the reference
            cross = rs[Q] - KQQ.sum(1)  # sum_{i in ref} k(x_i, q): (b, L)
            ccum = np.concatenate([np.zeros((b, 1)), cross.cumsum(1)], axis=1)
            t = np.arange(W)
            kxy = ccum[:, t + W] - ccum[:, t]
            kyy = _window_sums(KQQ, W) - W
            stats[start : start + b] = (
                ((s_rr - m) / (m * (m - 1)))[:, None] + kyy / (W * (W - 1)) - 2.0 * kxy / (m * W)
            )
        return stats

    def _prepare(self) -> None:
        """Derived constants: the kernel's gamma and the reference's term of MMD^2."""
        m = len(self.X_ref_)
        self._ref_T = np.ascontiguousarray(self.X_ref_.T)  # the compiled step's layout
        self.gamma_ = 1.0 / (2.0 * self.bandwidth_**2)
        self.kxx_term_ = _offdiag_sum(self.X_ref_, self.gamma_) / (m * (m - 1))
        self.ref_sq_ = np.einsum("ij,ij->i", self.X_ref_, self.X_ref_)
        self.first_step_ = int(self.window_size)

    # the stream ----------------------------------------------------------------------

    def _new_stream(self) -> None:
        W = int(self.window_size)
        self._window = np.zeros((W, self.n_features_in_))
        self._kyy = np.zeros((W, W))  # the window's kernel matrix (0 for empty slots)
        self._kxy = np.zeros(W)  # per slot: sum over the reference of k(x_i, y)
        self._kyy_sum = 0.0  # off-diagonal sum of _kyy
        self._pos = 0
        self._filled = 0

    def _step(self, x: np.ndarray) -> float:
        W, m = int(self.window_size), len(self.X_ref_)
        self._kyy_sum = mmd_step(x, self._ref_T, self.ref_sq_, self.gamma_, self._window,
                                 self._kyy, self._kxy, self._pos, self._filled,
                                 self._kyy_sum)  # fmt: skip
        self._pos = (self._pos + 1) % W
        self._filled = min(W, self._filled + 1)
        if self._filled < W:
            return float("nan")
        return mmd_statistic(self.kxx_term_, self._kyy_sum, self._kxy, m)

    def _steps(self, X: np.ndarray, thresholds: np.ndarray, stop_at_alarm: bool) -> np.ndarray:
        W, out = int(self.window_size), np.empty(len(X))
        fed, self._kyy_sum = mmd_steps(
            X, self._ref_T, self.ref_sq_, self.gamma_, self._window, self._kyy, self._kxy,
            self._pos, self._filled, self._kyy_sum, self.kxx_term_, out, thresholds,
            stop_at_alarm,
        )  # fmt: skip
        self._pos = (self._pos + fed) % W
        self._filled = min(W, self._filled + fed)
        return out[:fed]

    def _stream_arrays(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        state = {"pos": int(self._pos), "filled": int(self._filled),
                 "kyy_sum": float(self._kyy_sum)}  # fmt: skip
        return state, {"window": self._window.copy(), "kyy": self._kyy.copy(),
                       "kxy": self._kxy.copy()}  # fmt: skip

    def _set_stream_arrays(self, state: dict[str, Any], arrays: Any) -> None:
        W, d = int(self.window_size), self.n_features_in_
        pos, filled, kyy_sum = state.get("pos"), state.get("filled"), state.get("kyy_sum")
        for key, value, high in (("pos", pos, W - 1), ("filled", filled, W)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
                raise ValueError(f"stream state: {key} must be in 0..{high}, got {value!r}")
        if not isinstance(kyy_sum, float | int) or not np.isfinite(kyy_sum):
            raise ValueError(f"stream state: kyy_sum must be a finite number, got {kyy_sum!r}")
        self._window = np.ascontiguousarray(checked_array(arrays, "window", (W, d)))
        self._kyy = np.ascontiguousarray(checked_array(arrays, "kyy", (W, W)))
        self._kxy = checked_array(arrays, "kxy", (W,))
        self._kyy_sum = float(kyy_sum)
        self._pos, self._filled = pos, filled

    # the detector file ---------------------------------------------------------------

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state for :func:`dgpbench.saved.save_detector`.

        Returns
        -------
        state : dict
            ``bandwidth_``.
        arrays : dict of str to ndarray
            ``X_ref_``, ``thresholds_``.
        """
        check_is_fitted(self)
        return {"bandwidth_": float(self.bandwidth_)}, {
            "X_ref_": self.X_ref_, "thresholds_": self.thresholds_,
        }  # fmt: skip

    def set_state(self, state: dict[str, Any], arrays: Any) -> OnlineMMDDetector:
        """Restore :meth:`get_state`'s output (checked; the thresholds are not simulated again).

        Parameters
        ----------
        state : dict
            JSON values.
        arrays : mapping of str to ndarray
            The arrays.

        Returns
        -------
        self : OnlineMMDDetector

        Raises
        ------
        dgpbench.state.StateError
            If a value is missing, of the wrong shape, or not finite.
        """
        from dgpbench.state import StateError, check_keys

        try:
            check_keys(state, ("bandwidth_",))
            sigma = state["bandwidth_"]
            if not isinstance(sigma, float | int) or not (np.isfinite(sigma) and sigma > 0):
                raise ValueError(f"bandwidth_ must be a positive number, got {sigma!r}")
            ref = np.asarray(arrays["X_ref_"])
            if ref.ndim != 2 or len(ref) < 2:
                raise ValueError("X_ref_ must be a 2-D array of at least 2 rows")
            W, d = int(self.window_size), ref.shape[1]
            self.X_ref_ = checked_array(arrays, "X_ref_", ref.shape)
            self.thresholds_ = checked_array(arrays, "thresholds_", (W,))
        except (ValueError, KeyError) as exc:
            raise StateError(str(exc)) from exc
        self.bandwidth_ = float(sigma)
        self.n_features_in_ = d
        self._prepare()
        return self
