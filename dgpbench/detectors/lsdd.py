"""Least-squares density difference (LSDD) two-sample test with a permutation p-value.

Bu, Ruan, Wang and Lu (2016) estimate ``integral (p(x) - q(x))^2 dx`` by fitting the
difference ``p - q`` with a Gaussian-kernel model centred on a few reference points. The test
follows alibi-detect's ``LSDDDrift`` (0.13, ``cd/pytorch/lsdd.py`` and
``utils/pytorch/distance.permed_lsdds``):

* the features are standardised by the reference's mean and standard deviation (``ddof=1``,
  plus ``1e-12``);
* ``sigma`` of ``k(a, b) = exp(-|a - b|^2 / (2 sigma^2))`` is the median heuristic on the
  standardised reference: ``sqrt(d2 / 2)`` with ``d2`` the lower median of the squared
  distances between distinct reference pairs;
* ``n_kernel_centers`` (default ``max(n_ref // 20, 1)``) random reference rows are the
  centres ``c``; the other reference rows are the "effective" reference the test uses;
* ``h`` is the mean of ``k(x, c)`` over the effective reference minus its mean over the
  test batch, ``H = exp(-|c - c'|^2 / (4 sigma^2))`` (the ``(pi sigma^2)^(d/2)`` factor is
  left out, as theirs: the statistic is ``LSDD (pi sigma^2)^(d/2)``, same p-values);
* ``lambda`` is the largest of ``4^-i`` (``i = 0..9``) whose mean relative difference
  ``1 - w'Hw / h'w`` (``w = (H + lambda I)^-1 h``) over the permuted ``h`` is below
  ``lambda_rd_max``; the statistic is ``h' (2 A - A H A) h`` with ``A = (H + lambda I)^-1``.

Permutations are cheap: the kernel values between every pooled row and the centres are
computed once (an ``N x C`` matrix), and a split's ``h`` is one indicator product.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import (
    BatchDecisionMixin,
    ShiftTestResult,
    check_min_samples,
)
from dgpbench.detectors.mmd import (
    MEDIAN_MAX_POINTS,
    _tie_tolerance,
    permutation_result,
    permutation_splits,
)
from dgpbench.parameters import LSDD_RULES, sklearn_constraints

__all__ = ["LAMBDAS", "LSDDShiftDetector", "lsdd_statistics", "median_sigma_alibi"]

#: The regularisation candidates, largest first (alibi-detect's ``1 / 4**i``, i = 0..9).
LAMBDAS: tuple[float, ...] = tuple(1.0 / 4**i for i in range(10))

#: The standard deviation's guard against constant features (alibi-detect's ``eps``).
_EPS = 1e-12


def _sq_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances, clamped at 0 against rounding."""
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * (A @ B.T)
    return np.maximum(d2, 0.0)


def median_sigma_alibi(X: np.ndarray, rng: np.random.Generator | None = None) -> float:
    """alibi-detect's median-heuristic ``sigma`` of a sample against itself.

    ``sigma_median`` sorts all ``n^2`` squared distances (the ``n`` zeros of the diagonal
    first) and takes ``sqrt(d2 / 2)`` at index ``n + (n^2 - n) // 2 - 1``: the lower median
    of the squared distances between distinct pairs. Above
    :data:`~dgpbench.detectors.mmd.MEDIAN_MAX_POINTS` rows a seeded subset is used.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        At least 2 rows.
    rng : numpy Generator, optional
        Draws the subset of a large sample.

    Returns
    -------
    float

    Examples
    --------
    >>> round(median_sigma_alibi(np.array([[0.0], [1.0], [3.0]])) ** 2 * 2, 12)  # pairs 1, 4, 9
    4.0
    """
    from scipy.spatial.distance import pdist

    if len(X) > MEDIAN_MAX_POINTS:
        rng = np.random.default_rng(0) if rng is None else rng
        X = X[np.sort(rng.choice(len(X), MEDIAN_MAX_POINTS, replace=False))]
    n = len(X)
    d2 = np.sort(pdist(X, "sqeuclidean"))
    # index k of the list with every distinct pair twice is pair k // 2 of the sorted pairs
    return float(np.sqrt(0.5 * d2[((n * n - n) // 2 - 1) // 2]))


def lsdd_statistics(
    h: np.ndarray, H: np.ndarray, lambda_rd_max: float = 0.2, h_lambda: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """LSDD estimates ``h' (2 A - A H A) h`` of rows of ``h``, with the regularisation chosen.

    Parameters
    ----------
    h : ndarray of shape (b, C)
        Mean kernel values to the centres, reference minus test, one row per split.
    H : ndarray of shape (C, C)
        The centres' kernel matrix with bandwidth ``sqrt(2) sigma``.
    lambda_rd_max : float, default=0.2
        Largest mean relative difference a ``lambda`` may cause.
    h_lambda : ndarray of shape (b', C), optional
        The rows the choice of ``lambda`` averages over (default: ``h``); alibi-detect uses
        the permuted splits only.

    Returns
    -------
    lsdd : ndarray of shape (b,)
    lam : float
        The chosen ``lambda``.

    Raises
    ------
    ValueError
        If no candidate meets ``lambda_rd_max`` (typically many repeated rows).
    """
    C = H.shape[0]
    g = h if h_lambda is None else h_lambda
    eye = np.eye(C)
    for lam in LAMBDAS:
        A = np.linalg.inv(H + lam * eye)
        w = g @ A.T  # (b, C): A h per row (A symmetric up to rounding; as theirs: A h)
        with np.errstate(divide="ignore", invalid="ignore"):
            rd = np.mean(1.0 - np.einsum("bk,kj,bj->b", w, H, w) / np.einsum("bj,bj->b", g, w))
        if rd < lambda_rd_max:
            H_lam_inv = 2.0 * A - A.T @ H @ A
            return np.einsum("bj,jk,bk->b", h, H_lam_inv, h), lam
    raise ValueError(
        "no regularisation lambda in 1, 1/4, ..., 1/4^9 keeps the LSDD's relative difference "
        f"below lambda_rd_max={lambda_rd_max}: too many repeated rows (try the MMD test), or "
        "raise lambda_rd_max"
    )


class LSDDShiftDetector(BatchDecisionMixin, BaseEstimator):
    """Least-squares density difference two-sample test with a permutation p-value.

    ``fit`` standardises the reference, sets the bandwidth and draws the kernel centres;
    ``test`` computes the LSDD between the effective reference (the reference rows that are
    not centres) and a batch, and its permutation p-value
    ``(1 + #{b : LSDD_b >= LSDD}) / (1 + B)`` (alibi-detect's
    ``mean(LSDD <= LSDD_b)`` leaves the observed statistic out). When there are at most
    ``B`` splits, all are enumerated and the p-value is exact.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    n_permutations : int, default=1000
        Number ``B`` of random splits (alibi-detect's default is 100).
    bandwidth : "median" or float, default="median"
        ``sigma`` of the Gaussian kernel on the standardised features; ``"median"``:
        :func:`median_sigma_alibi` of the standardised reference.
    n_kernel_centers : int or None, default=None
        Reference rows used as kernel centres; ``None``: ``max(n_ref // 20, 1)``.
    lambda_rd_max : float, default=0.2
        Largest relative difference the regularisation may cause (Bu et al.'s 0.2).
    random_state : int, RandomState instance or None, default=None
        Seed of the centres (in ``fit``) and of the permutations (in ``test``).

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference batch.
    n_features_in_ : int
        Number of features seen during ``fit``.
    mean_, scale_ : ndarray of shape (n_features_in_,)
        The standardisation (``scale_`` includes the ``1e-12``).
    bandwidth_ : float
        The kernel's ``sigma``.
    center_index_ : ndarray of int, shape (n_centers,)
        The reference rows that are centres.
    centers_ : ndarray of shape (n_centers, n_features_in_)
        The standardised centres (jittered by ``1e-6`` noise when some coincide, as
        alibi-detect does).

    See Also
    --------
    MMDShiftDetector : The kernel two-sample test on the same permutation scheme.

    References
    ----------
    L. Bu, C. Alippi, D. Zhao. A pdf-Free Change Detection Test Based on Density Difference
    Estimation. IEEE TNNLS 29(2), 2016. M. Sugiyama et al. Density-difference estimation.
    Neural Computation 25(10), 2013.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> det = LSDDShiftDetector(n_permutations=99, random_state=0).fit(rng.normal(size=(200, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(50, 3)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(LSDD_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "lsdd"

    def __init__(
        self,
        alpha: float = 0.05,
        n_permutations: int = 1000,
        bandwidth: str | float = "median",
        n_kernel_centers: int | None = None,
        lambda_rd_max: float = 0.2,
        random_state: Any = None,
    ) -> None:
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.bandwidth = bandwidth
        self.n_kernel_centers = n_kernel_centers
        self.lambda_rd_max = lambda_rd_max
        self.random_state = random_state

    def _rng(self, stream: int) -> np.random.Generator:
        seed = check_random_state(self.random_state).randint(2**31 - 1)
        return np.random.default_rng([seed, stream])

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> LSDDShiftDetector:
        """Standardise the reference, set the bandwidth and draw the kernel centres.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            At least 2 finite samples (a centre and an effective reference row), not all
            equal.
        y : None
            Ignored.

        Returns
        -------
        self : LSDDShiftDetector
        """
        X = validate_data(self, X_ref, reset=True, dtype=np.float64, copy=True)
        n = len(X)
        check_min_samples(n, 2, "X_ref", "the standard deviation needs 2")
        c = max(n // 20, 1) if self.n_kernel_centers is None else int(self.n_kernel_centers)
        if c >= n:
            raise ValueError(
                f"n_kernel_centers={c} leaves no effective reference of the {n} reference rows"
            )
        rng = self._rng(0)
        index = rng.permutation(n)[:c]
        return self._fit_centres(X, index, None, rng)

    def _fit_centres(
        self,
        X: np.ndarray,
        index: np.ndarray,
        centres: np.ndarray | None,
        rng: np.random.Generator | None,
    ) -> LSDDShiftDetector:
        """The fitted state from a reference and its centre rows (and centres, when loaded)."""
        if len(X) and (X == X[:1]).all():
            raise ValueError(
                "X_ref is constant (every row is the same point): the median-heuristic "
                "bandwidth is 0 and a kernel test has nothing to compare"
            )
        mean = X.mean(axis=0)
        scale = X.std(axis=0, ddof=1) + _EPS
        Xn = (X - mean) / scale
        if isinstance(self.bandwidth, str):
            sigma = median_sigma_alibi(Xn, np.random.default_rng(0))
            if not sigma > 0:
                raise ValueError(
                    "the median distance between reference points is 0 (more than half of "
                    "the pairs coincide): pass a positive bandwidth"
                )
        else:
            sigma = float(self.bandwidth)
        if centres is None:
            centres = Xn[index]
            if len(np.unique(centres, axis=0)) < len(centres):
                centres = centres + rng.standard_normal(centres.shape) * 1e-6
        self.X_ref_ = X
        self.mean_, self.scale_, self.bandwidth_ = mean, scale, sigma
        self.center_index_ = np.asarray(index, dtype=np.int64)
        self.centers_ = centres
        return self

    def _kernel(self, A: np.ndarray, B: np.ndarray, sigma: float) -> np.ndarray:
        return np.exp(-_sq_distances(A, B) / (2.0 * sigma * sigma))

    def test(self, X: Any) -> ShiftTestResult:
        """Run the permutation LSDD test of ``X`` against the reference.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 1 finite sample.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = LSDD (times ``(pi sigma^2)^(d/2)``, as alibi-detect's),
            ``p_val`` = permutation p-value; ``details`` hold ``bandwidth``, ``lambda``,
            ``n_kernel_centers``, ``n_permutations``, ``exact`` and ``distance_threshold``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        check_min_samples(len(X), 1, "X", "the test batch's mean kernel value needs 1")
        sigma = self.bandwidth_
        keep = np.ones(len(self.X_ref_), dtype=bool)
        keep[self.center_index_] = False
        Xn_ref = (self.X_ref_[keep] - self.mean_) / self.scale_
        Xn = (X - self.mean_) / self.scale_
        Z = np.concatenate([Xn_ref, Xn])
        if not np.isfinite(Z).all():
            raise ValueError("the standardised features are not finite: rescale them")
        K = self._kernel(Z, self.centers_, sigma)  # (N, C): every pooled row vs the centres
        H = self._kernel(self.centers_, self.centers_, math.sqrt(2.0) * sigma)
        n, N, B = len(Xn_ref), len(Z), int(self.n_permutations)
        m = N - n
        subsets, exact, n_splits = permutation_splits(self._rng(1), N, n, B)
        colsum = K.sum(axis=0)
        h = []
        for sub in subsets:
            ref_sum = K[sub].sum(axis=1)  # (b, C)
            h.append(ref_sum / n - (colsum - ref_sum) / m)
        h = np.concatenate(h)
        stats, lam = lsdd_statistics(h, H, self.lambda_rd_max, h if exact else h[1:])
        obs = float(stats[0])
        at_least = stats >= obs - _tie_tolerance(N, obs)
        settings = {
            "bandwidth": float(sigma),
            "lambda": float(lam),
            "n_kernel_centers": len(self.centers_),
        }
        return permutation_result(
            self, stats, at_least, exact, n_splits, len(self.X_ref_), m, settings
        )

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state: the reference sample, the centre rows and the centres.

        Returns
        -------
        state : dict
            Empty.
        arrays : dict of str to ndarray
            ``X_ref_``, ``center_index_`` and ``centers_``.
        """
        from dgpbench.state import check_attributes

        keys = {"X_ref_", "center_index_", "centers_"}
        check_attributes(self, keys | {"n_features_in_", "mean_", "scale_", "bandwidth_"})
        return {}, {k: np.asarray(getattr(self, k)) for k in sorted(keys)}

    def set_state(self, state: dict[str, Any], arrays: Any) -> LSDDShiftDetector:
        """Restore the state :meth:`get_state` gave (checked as untrusted input).

        Parameters
        ----------
        state : dict
            Empty.
        arrays : mapping of str to ndarray
            ``X_ref_``, ``center_index_`` and ``centers_``.

        Returns
        -------
        self : LSDDShiftDetector

        Raises
        ------
        dgpbench.state.StateError
            If an array is missing, of the wrong kind or shape, or the reference fails
            ``fit``'s checks.
        """
        from dgpbench.state import StateError, check_keys, state_array

        check_keys(state, ())
        X = state_array(arrays["X_ref_"], "X_ref_", kinds="biuf", ndim=2)
        index = state_array(arrays["center_index_"], "center_index_", kinds="iu", ndim=1)
        centres = state_array(arrays["centers_"], "centers_", ndim=2)
        n = len(X)
        if (
            not 1 <= len(index) < n
            or index.min() < 0
            or index.max() >= n
            or len(np.unique(index)) != len(index)
            or centres.shape != (len(index), X.shape[1])
        ):
            raise StateError(
                "center_index_ must be distinct rows of X_ref_ (not all) and centers_ one "
                "row per centre"
            )
        try:
            X = validate_data(self, X, reset=True, dtype=np.float64, copy=True)
            check_min_samples(len(X), 2, "X_ref", "the standard deviation needs 2")
            self._fit_centres(X, index, centres.astype(np.float64), None)
        except (ValueError, TypeError) as exc:
            raise StateError(f"its reference sample X_ref_ is invalid: {exc}") from exc
        return self
