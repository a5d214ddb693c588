"""Energy-distance two-sample test (Székely and Rizzo) with a permutation p-value.

The statistic is the energy distance between the reference ``X`` (n rows) and the batch
``Y`` (m rows), with V-statistic means (every pair, the zero diagonal included), as
``dcor.energy_distance`` defines it::

    E = 2 mean_{i,j} |x_i - y_j| - mean_{i,j} |x_i - x_j| - mean_{i,j} |y_i - y_j|

In one dimension ``E = 2 * integral (F_n - G_m)^2`` and ``scipy.stats.energy_distance``
returns ``sqrt(E)``; Székely and Rizzo's test statistic ``n m / (n + m) * E`` orders the
splits of one pooled sample as ``E`` does, so both give the same permutation p-value.

Permutations reuse one distance matrix as :mod:`~dgpbench.detectors.mmd` reuses its
kernel matrix: on the pooled sample ``Z`` (distance matrix ``D``, zero diagonal), a split
with reference indicator ``u`` has ``S_xx = u' D u``, ``S_xy = u' D 1 - S_xx`` and
``S_yy = 1' D 1 - 2 u' D 1 + S_xx``, so ``B`` splits cost one product ``U D``, and ``D`` is
built in row blocks of at most :data:`~dgpbench.detectors.mmd.BLOCK_BYTES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial.distance import cdist
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import (
    BatchDecisionMixin,
    ReferenceState,
    ShiftTestResult,
    check_min_samples,
)
from dgpbench.detectors.mmd import BLOCK_BYTES, permutation_result, permutation_splits
from dgpbench.parameters import ENERGY_RULES, sklearn_constraints

__all__ = ["EnergyShiftDetector", "energy_distance"]


def energy_distance(X: Any, Y: Any) -> float:
    """The energy distance ``E`` of two samples (V-statistic means, as ``dcor``).

    The direct formula, kept as the reference the permutation statistics are checked
    against.

    Parameters
    ----------
    X : array-like of shape (n, d)
        First sample.
    Y : array-like of shape (m, d)
        Second sample.

    Returns
    -------
    float
        ``2 mean |x - y| - mean |x - x'| - mean |y - y'|``; in one dimension the square of
        ``scipy.stats.energy_distance``.

    Examples
    --------
    >>> energy_distance(np.zeros((2, 1)), np.ones((3, 1)))
    2.0
    """
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1)
    return float(2.0 * cdist(X, Y).mean() - cdist(X, X).mean() - cdist(Y, Y).mean())


def _permutation_energy(Z: np.ndarray, n: int, subsets: list) -> tuple[np.ndarray, float]:
    """``E`` of every split in ``subsets`` (blocks of index arrays), ``D`` built in row blocks,
    and the mean pooled distance (the scale of the rounding errors).
    """
    N = Z.shape[0]
    m = N - n
    rows = max(1, min(N, BLOCK_BYTES // (8 * N)))
    n_total = sum(len(s) for s in subsets)
    q = np.zeros(n_total)
    dsum = np.zeros(N)  # D 1
    indicators = []
    for sub in subsets:
        u = np.zeros((len(sub), N))
        np.put_along_axis(u, sub, 1.0, axis=1)
        indicators.append(u)
    for start in range(0, N, rows):
        stop = min(N, start + rows)
        d_rows = cdist(Z[start:stop], Z)  # exact Euclidean distances: ties give 0
        dsum[start:stop] = d_rows.sum(axis=1)
        offset = 0
        for u in indicators:
            b = len(u)
            q[offset : offset + b] += ((u @ d_rows.T) * u[:, start:stop]).sum(axis=1)
            offset += b
    total = dsum.sum()
    r = np.concatenate([dsum[sub].sum(axis=1) for sub in subsets])
    s_xy = r - q
    s_yy = total - 2.0 * r + q
    return 2.0 * s_xy / (n * m) - q / (n * n) - s_yy / (m * m), float(total / (N * N))


class EnergyShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """Energy-distance two-sample test with a permutation p-value (Székely and Rizzo).

    ``fit`` stores a clean reference batch; ``test`` computes the energy distance ``E``
    (:func:`energy_distance`, ``dcor.energy_distance``'s definition) between it and a batch,
    and its permutation p-value ``(1 + #{b : E_b >= E}) / (1 + B)``, or the exact share of
    all splits when there are at most ``B`` (tiny samples), as
    :class:`MMDShiftDetector` does; splits within a few rounding errors of the observed
    statistic count as ties.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    n_permutations : int, default=1000
        Number ``B`` of random splits of the pooled sample (all of them when there are at
        most ``B``); at most :data:`~dgpbench.parameters.MAX_PERMUTATIONS`.
    random_state : int, RandomState instance or None, default=None
        Seed of the permutations; an int gives the same p-value on every call.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference batch.
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    MMDShiftDetector : The kernel test with the same permutation scheme.
    scipy.stats.energy_distance : ``sqrt(E)`` in one dimension.

    Notes
    -----
    ``E`` is the V-statistic of ``dcor.energy_distance``; ``scipy.stats.energy_distance``
    is ``sqrt(E)`` (one dimension only) and Székely and Rizzo's test statistic is
    ``n m / (n + m) * E``, a fixed multiple, so the permutation p-value is the same for all
    three. Cost ``O(N^2 d)`` for the distances plus ``O((B + 1) N^2)`` for the products.

    References
    ----------
    G. J. Székely, M. L. Rizzo. Testing for Equal Distributions in High Dimension. InterStat
    5, 2004.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = EnergyShiftDetector(n_permutations=99, random_state=0)
    >>> det = det.fit(rng.normal(size=(50, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(50, 3)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(ENERGY_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "energy"

    def __init__(
        self, alpha: float = 0.05, n_permutations: int = 1000, random_state: Any = None
    ) -> None:
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> EnergyShiftDetector:
        """Store the clean reference batch.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            At least 1 finite sample.
        y : None
            Ignored.

        Returns
        -------
        self : EnergyShiftDetector
        """
        X = validate_data(self, X_ref, reset=True, dtype=np.float64, copy=True)
        self.X_ref_ = X
        return self

    def test(self, X: Any) -> ShiftTestResult:
        """Run the permutation energy test of ``X`` against the reference.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 1 finite sample.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = ``E``, ``p_val`` = permutation p-value, ``threshold`` =
            ``alpha``; ``details`` hold ``n_permutations`` (splits used), ``exact`` (all
            splits enumerated) and ``distance_threshold`` (the permutation
            (1 - alpha)-quantile of ``E``).

        Raises
        ------
        ValueError
            On NaN/inf, a feature-count mismatch, or distances too large for float64.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        check_min_samples(len(X), 1, "X", "the energy distance needs a sample")
        Z = np.concatenate([self.X_ref_, X])
        n, N, B = len(self.X_ref_), len(Z), int(self.n_permutations)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))
        subsets, exact, n_splits = permutation_splits(rng, N, n, B)
        with np.errstate(over="ignore", invalid="ignore"):  # refused just below, with why
            stats, mean_distance = _permutation_energy(Z, n, subsets)
        if not np.isfinite(stats).all():
            raise ValueError(
                "the energy distance is not finite: the features are too large for float64 "
                f"(largest magnitude {np.abs(Z).max():.3g}); rescale them"
            )
        obs = float(stats[0])
        # Rounding: each statistic is a difference of sums of up to N^2 distances; the
        # observed and an equal split (the swapped halves when n = m) are summed in different
        # orders, so errors scale with the distances, not with E itself.
        scale = max(mean_distance, abs(obs))
        at_least = stats >= obs - 8.0 * N * np.finfo(np.float64).eps * scale
        return permutation_result(self, stats, at_least, exact, n_splits, n, N - n, {})
