"""MMDAgg: the MMD test aggregated over kernels and bandwidths (Schrab et al., JMLR 2023).

Defined as the authors' reference code (``antoninschrab/mmdagg``, ``mmdagg/np.py``) does:

* bandwidths: from the L1 (Laplace) and L2 (Gaussian) distances between the first 500
  rows of each sample, ``lambda_min / 2 * C^r`` (``r = 0..number_bandwidths - 1``) from half
  the smallest distance (the 5% quantile, at least 0.1, when the smallest is below 0.1) to
  twice the largest (at least 0.3);
* kernels ``exp(-|a - b|_1 / lambda)`` (Laplace) and ``exp(-|a - b|_2^2 / lambda^2)``
  (Gaussian); ``"laplace_gaussian"`` uses both collections, each weight divided by 2;
* draws: a wild bootstrap (Rademacher signs on the paired ``h``-statistic) when the samples
  have equal sizes, else permutations (the unbiased MMD^2); ``B1`` draws give each
  kernel's quantiles and p-values, ``B2`` more estimate the level of the aggregated test,
  and the level correction ``u`` is found by ``B3`` steps of bisection;
* decision: reject if some kernel's p-value is at most ``u`` times its weight.

With an int ``random_state`` the draws are the reference code's with ``seed=random_state``
(``numpy.random.RandomState``), so the decision and every per-kernel value match it. The
statistics of every draw come from indicator (or sign) products with each kernel matrix,
which is built once per kernel and shared by the ``B1 + B2 + 1`` draws.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import (
    BatchDecisionMixin,
    ReferenceState,
    ShiftTestResult,
    check_min_samples,
    package_version,
)
from dgpbench.detectors.mmd import BLOCK_BYTES, _statistics
from dgpbench.parameters import MMDAGG_RULES, sklearn_constraints

__all__ = [
    "KERNELS",
    "WEIGHTS",
    "MMDAggShiftDetector",
    "mmdagg_bandwidths",
    "mmdagg_weights",
]

#: The kernel collections: each kernel's name and its distance ("l1" or "l2").
KERNELS: dict[str, tuple[tuple[str, str], ...]] = {
    "laplace": (("laplace", "l1"),),
    "gaussian": (("gaussian", "l2"),),
    "laplace_gaussian": (("laplace", "l1"), ("gaussian", "l2")),
}
#: The weightings of the bandwidths (Section 5.1 of the paper).
WEIGHTS: tuple[str, ...] = ("uniform", "decreasing", "increasing", "centred")
#: Rows of each sample the bandwidth collection looks at (the reference code's ``max_samples``).
BANDWIDTH_ROWS = 500


def mmdagg_bandwidths(distances: np.ndarray, number_bandwidths: int) -> np.ndarray:
    """The reference code's geometric collection of bandwidths for one distance.

    Parameters
    ----------
    distances : ndarray
        Distances between reference and test rows (flattened).
    number_bandwidths : int
        At least 2.

    Returns
    -------
    ndarray of shape (number_bandwidths,)

    Examples
    --------
    >>> mmdagg_bandwidths(np.array([1.0, 4.0]), 3)  # from 1 / 2 to 4 * 2
    array([0.5, 2. , 8. ])
    """
    if np.min(distances) < 0.1:
        d = np.sort(distances)
        lambda_min = np.maximum(d[int(np.floor(len(d) * 0.05))], 0.1)
    else:
        lambda_min = np.min(distances)
    lambda_min = lambda_min / 2
    lambda_max = np.maximum(np.max(distances), 0.3) * 2
    power = (lambda_max / lambda_min) ** (1 / (number_bandwidths - 1))
    return np.array([power**i * lambda_min for i in range(number_bandwidths)])


def mmdagg_weights(number_bandwidths: int, weights_type: str) -> np.ndarray:
    """The weights of the bandwidths, summing to 1 (Section 5.1 of Schrab et al.).

    Parameters
    ----------
    number_bandwidths : int
    weights_type : {"uniform", "decreasing", "increasing", "centred"}

    Returns
    -------
    ndarray of shape (number_bandwidths,)

    Examples
    --------
    >>> mmdagg_weights(4, "uniform")
    array([0.25, 0.25, 0.25, 0.25])
    """
    N = number_bandwidths
    if weights_type == "uniform":
        return np.array([1 / N] * N)
    if weights_type in ("decreasing", "increasing"):
        normaliser = sum(1 / i for i in range(1, N + 1))
        ranks = range(1, N + 1) if weights_type == "decreasing" else range(N, 0, -1)
        return np.array([1 / (i * normaliser) for i in ranks])
    if weights_type == "centred":
        shift = 1 if N % 2 == 1 else 0.5
        normaliser = sum(1 / (abs((N + 1) / 2 - i) + shift) for i in range(1, N + 1))
        return np.array(
            [1 / ((abs((N + 1) / 2 - i) + shift) * normaliser) for i in range(1, N + 1)]
        )
    raise ValueError(f"weights_type must be one of {', '.join(WEIGHTS)}, got {weights_type!r}")


def _kernel_matrix(distances: np.ndarray, kernel: str, bandwidth: float) -> np.ndarray:
    d = distances / bandwidth
    return np.exp(-(d**2)) if kernel == "gaussian" else np.exp(-d)


def _simulated_statistics(
    Z: np.ndarray, m: int, kernels: list, draws: np.ndarray, wild: bool
) -> np.ndarray:
    """MMD estimates of every kernel (rows) and every draw (columns).

    Permutations: the unbiased MMD^2 of the split whose reference rows the indicators mark.
    Wild bootstrap (``m = n``): ``e' H e`` with ``H = Kxx + Kyy - Kxy - Kyx`` off its
    diagonal and ``e`` the signs (all +1: ``n (n - 1)`` times the observed MMD^2 estimate),
    unscaled as the reference code's, so its comparisons see the same numbers.
    """
    from scipy.spatial.distance import cdist

    N = len(Z)
    n = N - m
    out = np.empty((len(kernels), len(draws)))
    rows = max(1, BLOCK_BYTES // (8 * N))
    cache: dict[str, np.ndarray] = {}
    for k, (kernel, metric, bandwidth) in enumerate(kernels):
        if metric not in cache:
            cache.clear()
            cache[metric] = cdist(Z, Z, "cityblock" if metric == "l1" else "euclidean")
        K = _kernel_matrix(cache[metric], kernel, bandwidth)
        if wild:
            Hm = K[:n, :n] + K[n:, n:] - K[:n, n:] - K[n:, :n]
            np.fill_diagonal(Hm, 0.0)
            for start in range(0, len(draws), rows):
                E = draws[start : start + rows].astype(np.float64)
                out[k, start : start + rows] = ((E @ Hm) * E).sum(axis=1)
        else:
            ksum = K.sum(axis=1)
            T = ksum.sum()
            for start in range(0, len(draws), rows):
                U = draws[start : start + rows].astype(np.float64)
                q = ((U @ K) * U).sum(axis=1)
                out[k, start : start + rows] = _statistics(q, U @ ksum, T, m, n)
    return out


def _reference_draws(
    rs: np.random.RandomState, m: int, n: int, B1: int, B2: int, wild: bool
) -> np.ndarray:
    """The reference code's draws, the observed one at row ``B1``: int8 (B1 + B2 + 1, m + n)
    indicators of the rows called "reference" (permutations), or (B1 + B2 + 1, n) Rademacher
    signs (wild bootstrap).
    """
    if wild:
        R = rs.choice([-1.0, 1.0], size=(B1 + B2 + 1, n)).astype(np.int8)
        R[B1] = 1
        return R
    idx = rs.rand(B1 + B2 + 1, m + n).argsort(axis=1)
    U = (idx < m).astype(np.int8)  # their V10: row b's entry p is 1 if idx[b, p] < m
    U[B1] = 0
    U[B1, :m] = 1
    return U


class MMDAggShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """MMDAgg: MMD tests over a collection of kernels and bandwidths, aggregated at level alpha.

    ``fit`` stores a clean reference batch; ``test`` runs the reference code's aggregated
    test (module docstring). ``is_drift`` is its decision; ``p_val`` is the share of the
    ``B2`` level draws whose weighted smallest p-value ``min_l p_l / w_l`` is at most the
    observed one, the quantity the bisection compares with ``alpha``: ``is_drift`` holds
    exactly when ``p_val <= alpha`` (``p_val`` may be 0).

    Parameters
    ----------
    alpha : float, default=0.05
        Level of the aggregated test, in (0, 1).
    kernel : {"laplace_gaussian", "laplace", "gaussian"}, default="laplace_gaussian"
        The kernel collection (the reference code's default is both).
    number_bandwidths : int, default=10
        Bandwidths per kernel (at least 2).
    weights_type : {"uniform", "decreasing", "increasing", "centred"}, default="uniform"
        Weights of the bandwidths.
    n_draws_quantile : int, default=2000
        ``B1``: draws for the quantiles and p-values of each kernel's test.
    n_draws_level : int, default=2000
        ``B2``: draws for the level of the aggregated test.
    n_bisection : int, default=50
        ``B3``: bisection steps for the level correction ``u``.
    permutations_same_sample_size : bool, default=False
        Use permutations also when the samples have equal sizes (else a wild bootstrap).
    random_state : int, RandomState instance or None, default=None
        Seed of the draws; an int gives the reference code's draws with ``seed`` equal to it
        (its default is 42).

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference batch.
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    MMDShiftDetector : One Gaussian kernel with the median bandwidth.

    Notes
    -----
    Cost: one ``N x N`` distance matrix per distance and, per kernel,
    ``O((B1 + B2) N^2)`` in matrix products.

    References
    ----------
    A. Schrab, I. Kim, M. Albert, B. Laurent, B. Guedj, A. Gretton. MMD Aggregated
    Two-Sample Test. JMLR 24(194), 2023.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> det = MMDAggShiftDetector(n_draws_quantile=200, n_draws_level=200, random_state=0)
    >>> det = det.fit(rng.normal(size=(60, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(60, 3)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(MMDAGG_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "mmdagg"

    def __init__(
        self,
        alpha: float = 0.05,
        kernel: str = "laplace_gaussian",
        number_bandwidths: int = 10,
        weights_type: str = "uniform",
        n_draws_quantile: int = 2000,
        n_draws_level: int = 2000,
        n_bisection: int = 50,
        permutations_same_sample_size: bool = False,
        random_state: Any = None,
    ) -> None:
        self.alpha = alpha
        self.kernel = kernel
        self.number_bandwidths = number_bandwidths
        self.weights_type = weights_type
        self.n_draws_quantile = n_draws_quantile
        self.n_draws_level = n_draws_level
        self.n_bisection = n_bisection
        self.permutations_same_sample_size = permutations_same_sample_size
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> MMDAggShiftDetector:
        """Store the clean reference batch.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            At least 2 finite samples.
        y : None
            Ignored.

        Returns
        -------
        self : MMDAggShiftDetector
        """
        X = validate_data(self, X_ref, reset=True, dtype=np.float64, copy=True)
        check_min_samples(len(X), 2, "X_ref", "the unbiased MMD^2 needs 2 per sample")
        self.X_ref_ = X
        return self

    def test(self, X: Any) -> ShiftTestResult:
        """Run the aggregated test of ``X`` against the reference.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 2 finite samples.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = the weighted smallest p-value ``min_l p_l / w_l``, ``p_val`` as
            in the class docstring, ``threshold`` = ``alpha``; ``details`` hold ``u``, the
            ``approximation`` ("wild bootstrap" or "permutations") and, per kernel and
            bandwidth, ``kernels``, ``bandwidths``, ``mmd2`` (the MMD estimates),
            ``p_values`` and ``p_value_thresholds`` (``u`` times the weight).

        Raises
        ------
        ValueError
            If the statistics are not finite (features too large for float64).
        """
        from scipy.spatial.distance import cdist

        check_is_fitted(self)
        Y = validate_data(self, X, reset=False, dtype=np.float64)
        check_min_samples(len(Y), 2, "X", "the unbiased MMD^2 needs 2 per sample")
        Xr = self.X_ref_
        m, n = len(Xr), len(Y)
        wild = m == n and not self.permutations_same_sample_size
        B1, B2, B3 = int(self.n_draws_quantile), int(self.n_draws_level), int(self.n_bisection)
        L = int(self.number_bandwidths)
        collection = KERNELS[self.kernel]
        bandwidths = {
            metric: mmdagg_bandwidths(
                cdist(
                    Xr[:BANDWIDTH_ROWS],
                    Y[:BANDWIDTH_ROWS],
                    "cityblock" if metric == "l1" else "euclidean",
                ).reshape(-1),
                L,
            )
            for metric in {metric for _, metric in collection}
        }
        kernels = [(k, metric, bw) for k, metric in collection for bw in bandwidths[metric]]
        weights = mmdagg_weights(L, self.weights_type) / len(collection)
        all_weights = np.tile(weights, len(collection))
        rs = check_random_state(self.random_state)
        draws = _reference_draws(rs, m, n, B1, B2, wild)
        Z = np.concatenate([Xr, Y])
        M = _simulated_statistics(Z, m, kernels, draws, wild)
        if not np.isfinite(M).all():
            raise ValueError(
                "the MMD statistics are not finite: the features are too large for float64 "
                f"(largest magnitude {np.abs(Z).max():.3g}); rescale them"
            )
        observed = M[:, B1]
        M1 = np.sort(M[:, : B1 + 1], axis=1)  # (K, B1 + 1), the observed draw included
        M2 = M[:, B1 + 1 :]  # (K, B2)

        def quantiles(u: float) -> np.ndarray:
            index = np.ceil((B1 + 1) * (1 - u * all_weights)).astype(np.int64) - 1
            return M1[np.arange(len(kernels)), index]

        u_min, u_max = 0.0, float(np.min(1 / weights))
        for _ in range(B3):
            u = (u_max + u_min) / 2
            level = np.sum(np.max(M2 - quantiles(u)[:, None], axis=0) > 0) / B2
            if level <= self.alpha:
                u_min = u
            else:
                u_max = u
        u = u_min
        p_values = np.mean(M1 - observed[:, None] >= 0, axis=1)
        thresholds = u * all_weights
        reject = bool(np.any(p_values <= thresholds))
        # the level draws' p-values against the quantile draws: #{M1 >= v} / (B1 + 1)
        p_level = np.stack(
            [(B1 + 1) - np.searchsorted(M1[k], M2[k], side="left") for k in range(len(kernels))]
        ) / (B1 + 1)
        weighted_min = float(np.min(p_values / all_weights))
        p_val = float(np.mean(np.min(p_level / all_weights[:, None], axis=0) <= weighted_min))
        return ShiftTestResult(
            is_drift=reject,
            statistic=weighted_min,
            p_val=p_val,
            threshold=float(self.alpha),
            alpha=float(self.alpha),
            n_ref=m,
            n=n,
            name=type(self).__name__,
            version=package_version(),
            details={
                "u": float(u),
                "approximation": "wild bootstrap" if wild else "permutations",
                "kernels": [k for k, _, _ in kernels],
                "bandwidths": [float(bw) for _, _, bw in kernels],
                "mmd2": [float(v) / (n * (n - 1) if wild else 1) for v in observed],
                "p_values": [float(v) for v in p_values],
                "p_value_thresholds": [float(v) for v in thresholds],
            },
        )
