"""Kernel two-sample test: Gaussian-kernel MMD with a permutation p-value (Gretton et al., 2012).

The statistic is the unbiased estimate of the squared maximum mean discrepancy between the
reference ``X`` (n rows) and the test batch ``Y`` (m rows), as in "Failing loudly"'s MMD test
(``torch_two_sample.MMDStatistic``) and alibi-detect's ``MMDDrift``::

    MMD^2_u = sum_{i != j} k(x_i, x_j) / (n (n - 1)) + sum_{i != j} k(y_i, y_j) / (m (m - 1))
              - 2 sum_{i, j} k(x_i, y_j) / (n m)

with ``k(a, b) = exp(-|a - b|^2 / (2 sigma^2))``.

Why permutations are cheap here. On the pooled sample ``Z`` (N = n + m rows, kernel matrix
``K``, ``K_ii = 1``), a split is an indicator vector ``u`` of the rows called "reference".
Every term of ``MMD^2_u`` is a function of ``q = u' K u`` and ``r = u' K 1`` (plus the
constant ``T = 1' K 1``): ``S_xx = q``, ``S_xy = r - q``, ``S_yy = T - 2 r + q``. So ``B``
permutations cost one matrix product ``U K`` (U: B x N indicators) instead of ``B`` gathers
of a permuted N x N matrix. ``K`` is never held whole: it is built in row blocks, each used
for every permutation before the next is built, so memory stays bounded by
:data:`BLOCK_BYTES` per buffer whatever N.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench._device import resolve_device
from dgpbench.detectors.base import (
    BatchDecisionMixin,
    ReferenceState,
    ShiftTestResult,
    check_min_samples,
    package_version,
)
from dgpbench.parameters import MMD_RULES, sklearn_constraints

__all__ = [
    "BLOCK_BYTES",
    "MEDIAN_MAX_POINTS",
    "MMDShiftDetector",
    "cross_median_bandwidth",
    "mmd2_unbiased",
]

#: Largest buffer (bytes) of one kernel row block or one block of permutation indicators.
BLOCK_BYTES = 128 * 2**20
#: The median heuristic uses all pairs of up to this many pooled points (else a seeded subset).
MEDIAN_MAX_POINTS = 4000


def _median_bandwidth(Z: np.ndarray, rng: np.random.Generator) -> float:
    """Median Euclidean distance over distinct pairs of the pooled sample ``Z``.

    It depends on the pooled multiset only (not on which rows are "reference"), so every
    permutation sees the same kernel and the permutation p-value stays exact. Above
    :data:`MEDIAN_MAX_POINTS` rows the pairs of a seeded random subset are used.
    """
    from scipy.spatial.distance import pdist

    if len(Z) > MEDIAN_MAX_POINTS:
        Z = Z[np.sort(rng.choice(len(Z), MEDIAN_MAX_POINTS, replace=False))]
    return float(np.median(pdist(Z, "euclidean")))


def cross_median_bandwidth(ref: np.ndarray, test: np.ndarray) -> float:
    """``sigma`` of ``exp(-d^2 / (2 sigma^2))`` that gives Rabanser et al.'s kernel.

    Their kernel is ``exp(-d^2 / med)`` (``torch_two_sample.MMDStatistic`` with
    ``alphas=[1 / med]``) with ``med`` the median Euclidean distance over the
    ``len(ref) * len(test)`` cross pairs (not over pooled pairs, as the detector's
    ``"median"``): ``sigma = sqrt(med / 2)``. The kernel is fixed by the observed split and
    kept for every permutation, as theirs; pass it as ``MMDShiftDetector(bandwidth=...)``.

    Parameters
    ----------
    ref, test : array-like of shape (n, ...) and (m, ...)
        The two samples (rows flattened).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the median distance is 0 or not finite.

    Examples
    --------
    >>> ref, test = np.zeros((2, 1)), np.array([[1.0], [3.0], [3.0]])
    >>> round(cross_median_bandwidth(ref, test) ** 2 * 2, 12)  # med = median(1, 3, 3, 1, 3, 3)
    3.0
    """
    from scipy.spatial.distance import cdist

    ref = np.asarray(ref, dtype=np.float64).reshape(len(ref), -1)
    test = np.asarray(test, dtype=np.float64).reshape(len(test), -1)
    med = float(np.median(cdist(ref, test, "euclidean")))
    if not (np.isfinite(med) and med > 0):
        raise ValueError(
            f"the median distance between reference and test rows is {med}: Rabanser et "
            "al.'s kernel exp(-d^2 / med) is undefined (identical or non-finite features)"
        )
    return float(np.sqrt(med / 2.0))


def mmd2_unbiased(K: np.ndarray, n: int) -> float:
    """Unbiased MMD^2 from a pooled kernel matrix ``K`` whose first ``n`` rows are the reference.

    The direct O(N^2) formula (sums of the three blocks without their diagonals), kept as
    the reference the tests check the vectorised permutation statistics against.

    Parameters
    ----------
    K : ndarray of shape (n + m, n + m)
        Kernel matrix of the pooled sample.
    n : int
        Number of reference rows (the first ``n``).

    Returns
    -------
    float

    Examples
    --------
    >>> K = np.eye(4)
    >>> mmd2_unbiased(K, 2)
    0.0
    """
    K = np.asarray(K, dtype=np.float64)
    m = K.shape[0] - n
    kxx, kyy, kxy = K[:n, :n], K[n:, n:], K[:n, n:]
    return float(
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
        - 2.0 * kxy.sum() / (n * m)
    )


def _subsets(rng: np.random.Generator, N: int, n: int, B: int, block: int):
    """Yield blocks of random reference subsets: int arrays (b, n) of pooled row indices.

    One stream of draws shared by the vectorised test and the per-permutation baseline, so
    both see the same permutations.
    """
    done = 0
    while done < B:
        b = min(block, B - done)
        keys = rng.random((b, N))
        yield np.argpartition(keys, n - 1, axis=1)[:, :n]
        done += b


def _all_subsets(N: int, n: int, block: int):
    """Yield every reference subset of ``n`` of ``N`` pooled rows, in blocks (int arrays
    (b, n)), in lexicographic order: the first is ``0..n-1``, the observed split.
    """
    from itertools import combinations, islice

    splits = combinations(range(N), n)
    while chunk := list(islice(splits, block)):
        yield np.asarray(chunk, dtype=np.int64)


def _kernel_gamma(sigma: float) -> float:
    """``1 / (2 sigma^2)``, refused when float64 cannot hold it (a kernel of 0s or 1s)."""
    gamma = 1.0 / (2.0 * sigma * sigma) if sigma * sigma > 0 else math.inf
    if not (math.isfinite(gamma) and gamma > 0):
        raise ValueError(
            f"bandwidth {sigma:g} is out of float64's range for the Gaussian kernel "
            "exp(-|a - b|^2 / (2 bandwidth^2)) (every kernel value would be 0 or 1): pass a "
            'bandwidth on the scale of the distances between the features, or "median"'
        )
    return gamma


def _tie_tolerance(N: int, observed: float) -> float:
    """Splits whose statistic is within this of the observed one count as ties.

    The statistic is a difference of averages of kernel values in [0, 1], each a sum over
    up to N terms per row: rounding moves it by a few N float64 epsilons, and the observed
    and a permuted split (say, the swapped halves when n = m, mathematically equal) are
    summed in different orders. Counting near-ties as ties keeps the p-value valid.
    """
    return 8.0 * N * np.finfo(np.float64).eps * max(1.0, abs(observed))


def permutation_splits(
    rng: np.random.Generator, N: int, n: int, B: int
) -> tuple[list[np.ndarray], bool, int]:
    """The splits of a permutation test of ``n`` reference rows among ``N`` pooled ones.

    Every split, the observed one first, when there are at most ``B`` (the exact test);
    otherwise the observed split and ``B`` random ones, the observed one in the first block so
    that it is summed exactly as the permutations are. Blocks hold at most ``BLOCK_BYTES`` of
    float64 rows.

    Returns
    -------
    subsets : list of ndarray
        Blocks of splits, each of shape ``(b, n)`` (the reference rows of each split).
    exact : bool
        Whether every split is listed.
    n_splits : int
        The number of distinct splits, ``comb(N, n)``.
    """
    block = max(1, min(B, BLOCK_BYTES // (8 * N)))
    n_splits = math.comb(N, n)
    exact = n_splits <= B
    if exact:
        return list(_all_subsets(N, n, block)), True, n_splits
    subsets = list(_subsets(rng, N, n, B, block))
    subsets[0] = np.concatenate([np.arange(n)[None, :], subsets[0]])
    return subsets, False, n_splits


def permutation_result(
    detector: Any,
    stats: np.ndarray,
    at_least: np.ndarray,
    exact: bool,
    n_splits: int,
    n_ref: int,
    n: int,
    details: dict[str, Any],
) -> ShiftTestResult:
    """The record of a permutation test whose ``stats[0]`` is the observed split's.

    The p-value is the share of splits at least as extreme (``at_least``): over every split
    when ``exact``, else over the observed split and the ``detector.n_permutations`` random
    ones. ``details`` (the test's own settings) come first, then the permutations, ``exact``
    and the null's ``1 - alpha`` quantile.
    """
    B = int(detector.n_permutations)
    if exact:
        perm, p_val = stats, np.count_nonzero(at_least) / n_splits
    else:
        perm, p_val = stats[1:], np.count_nonzero(at_least) / (1.0 + B)
    return ShiftTestResult(
        is_drift=bool(p_val < detector.alpha),
        statistic=float(stats[0]),
        p_val=float(p_val),
        threshold=float(detector.alpha),
        alpha=float(detector.alpha),
        n_ref=n_ref,
        n=n,
        name=type(detector).__name__,
        version=package_version(),
        details={
            **details,
            "n_permutations": n_splits if exact else B,
            "exact": exact,
            "distance_threshold": float(np.quantile(perm, 1.0 - detector.alpha)),
        },
    )


def _statistics(q, r, T, n: int, m: int):
    """``MMD^2_u`` of splits with ``q = u' K u``, ``r = u' K 1`` (K with unit diagonal)."""
    s_xx = q - n
    s_xy = r - q
    s_yy = T - 2.0 * r + q - m
    return s_xx / (n * (n - 1)) + s_yy / (m * (m - 1)) - 2.0 * s_xy / (n * m)


def _permutation_mmd2(Z, n: int, sigma: float, subsets: list, device) -> np.ndarray:
    """MMD^2_u of every split in ``subsets`` (blocks of index arrays), K built in row blocks."""
    import torch

    N = Z.shape[0]
    m = N - n
    Zt = torch.as_tensor(Z, dtype=torch.float64, device=device)
    sq = (Zt * Zt).sum(dim=1)
    rows = max(1, min(N, BLOCK_BYTES // (8 * N)))
    gamma = _kernel_gamma(sigma)
    n_total = sum(len(s) for s in subsets)
    q = torch.zeros(n_total, dtype=torch.float64, device=device)
    ksum = torch.zeros(N, dtype=torch.float64, device=device)  # K 1
    idx = [torch.as_tensor(s, device=device) for s in subsets]
    for start in range(0, N, rows):
        stop = min(N, start + rows)
        d2 = sq[start:stop, None] + sq[None, :] - 2.0 * (Zt[start:stop] @ Zt.T)
        d2.clamp_(min=0.0)
        diag = torch.arange(start, stop, device=device)
        d2[diag - start, diag] = 0.0  # k(z, z) = 1 exactly, whatever the rounding
        k_rows = torch.exp_(d2.mul_(-gamma))  # (rows, N), in place: one buffer
        ksum[start:stop] = k_rows.sum(dim=1)
        offset = 0
        for sub in idx:
            b = len(sub)
            u = torch.zeros((b, N), dtype=torch.float64, device=device)
            u.scatter_(1, sub, 1.0)
            # q += sum_{i in block} u_i (K u)_i, with (K u)_i for the block's rows i
            q[offset : offset + b] += ((u @ k_rows.T) * u[:, start:stop]).sum(dim=1)
            offset += b
        del d2, k_rows
    T = ksum.sum()
    r = torch.cat(
        [ksum[sub].sum(dim=1) for sub in idx]
    )  # u' K 1: sum of the row sums of the subset
    return _statistics(q, r, T, n, m).cpu().numpy()


def _check_no_constant_rows(X: np.ndarray, name: str) -> None:
    if len(X) and (X == X[:1]).all():
        raise ValueError(
            f"{name} is constant (every row is the same point): the median-heuristic "
            "bandwidth is 0 and a kernel test has nothing to compare"
        )


class MMDShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """Gaussian-kernel MMD two-sample test with an exact permutation p-value.

    ``fit`` stores a clean reference batch; ``test`` computes the unbiased MMD^2 between it
    and a new batch and its permutation p-value ``(1 + #{b : MMD^2_b >= MMD^2}) / (1 + B)``,
    which counts the observed statistic (so it is valid at any ``B`` and never below
    ``1 / (B + 1)``; alibi-detect's leaves it out, its issue #960). When the pooled sample
    has at most ``B`` splits (``C(n + m, n) <= B``, tiny samples) every split is enumerated
    and the p-value is the exact share of splits at least as extreme as the observed one.
    The observed statistic is summed in the same block as the permutations, and splits
    within a few rounding errors of it count as ties (:func:`_tie_tolerance`), so equal
    statistics (the swapped halves when ``n = m``) are never lost to rounding.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    n_permutations : int, default=1000
        Number ``B`` of random splits of the pooled sample (all of them, exactly, when
        there are at most ``B``); at most
        :data:`~dgpbench.parameters.MAX_PERMUTATIONS` (100000).
    bandwidth : "median" or float, default="median"
        Kernel width ``sigma`` of ``exp(-|a - b|^2 / (2 sigma^2))``. ``"median"``: the
        median Euclidean distance between distinct points of the pooled sample (Gretton et
        al.'s heuristic; label-free, so the permutation test stays exact).
    random_state : int, RandomState instance or None, default=None
        Seed of the permutations (and of the subset the median uses beyond
        :data:`MEDIAN_MAX_POINTS` points). An int gives the same p-value on every call.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where torch computes the kernel blocks and the permutation products.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference batch.
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    KSShiftDetector : Per-feature univariate tests.
    mmd2_unbiased : The direct O(N^2) statistic.

    Notes
    -----
    Cost: ``O(N^2 d)`` for the kernel rows plus ``O((B + 1) N^2)`` in matrix products;
    memory ``O(N d + B n)`` plus a few buffers of at most :data:`BLOCK_BYTES` (the kernel's
    rows are built block by block). Measured at ``n + m = 20,000``, ``B = 1000``: 654 MB
    for the test on top of the process (docs/toolbox.md).

    References
    ----------
    A. Gretton, K. M. Borgwardt, M. J. Rasch, B. Schölkopf, A. Smola. A Kernel Two-Sample
    Test. JMLR 13, 2012. S. Rabanser, S. Günnemann, Z. C. Lipton. Failing Loudly. NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = MMDShiftDetector(n_permutations=99, random_state=0).fit(rng.normal(size=(50, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(50, 3)))
    True
    >>> det.p_value(rng.normal(size=(50, 3))) >= 0.01
    True
    """

    _parameter_constraints: dict = sklearn_constraints(MMD_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "mmd"

    def __init__(
        self,
        alpha: float = 0.05,
        n_permutations: int = 1000,
        bandwidth: str | float = "median",
        random_state: Any = None,
        device: str = "cpu",
    ) -> None:
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.bandwidth = bandwidth
        self.random_state = random_state
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> MMDShiftDetector:
        """Store the clean reference batch.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            At least 2 finite samples, not all equal.
        y : None
            Ignored.

        Returns
        -------
        self : MMDShiftDetector
        """
        X = validate_data(self, X_ref, reset=True, dtype=np.float64, copy=True)
        check_min_samples(len(X), 2, "X_ref", "the unbiased MMD^2 needs 2 per sample")
        _check_no_constant_rows(X, "X_ref")
        self.X_ref_ = X
        return self

    def _prepare(self, X: Any) -> tuple[np.ndarray, float, np.random.Generator]:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        check_min_samples(len(X), 2, "X", "the unbiased MMD^2 needs 2 per sample")
        Z = np.concatenate([self.X_ref_, X])
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))
        if isinstance(self.bandwidth, str):
            sigma = _median_bandwidth(Z, rng)
            if not sigma > 0:
                raise ValueError(
                    "the median distance between pooled points is 0 (more than half of the "
                    "pairs coincide): pass a positive bandwidth"
                )
        else:
            sigma = float(self.bandwidth)
        return Z, sigma, rng

    def test(self, X: Any) -> ShiftTestResult:
        """Run the permutation MMD test of ``X`` against the reference.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 2 finite samples.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = unbiased MMD^2, ``p_val`` = permutation p-value,
            ``threshold`` = ``alpha``; ``details`` hold ``bandwidth``, ``n_permutations``
            (the number of splits used), ``exact`` (all splits enumerated) and
            ``distance_threshold`` (the permutation (1 - alpha)-quantile of MMD^2).

        Raises
        ------
        ValueError
            If the bandwidth is out of float64's range for the kernel, or the statistic is
            not finite (features too large for float64).
        """
        Z, sigma, rng = self._prepare(X)
        if not np.isfinite(np.einsum("ij,ij->i", Z, Z)).all():
            raise ValueError(
                "the MMD statistic is not finite: the features are too large for float64 "
                f"(largest magnitude {np.abs(Z).max():.3g}); rescale them"
            )
        _kernel_gamma(sigma)
        n, N, B = len(self.X_ref_), len(Z), int(self.n_permutations)
        subsets, exact, n_splits = permutation_splits(rng, N, n, B)
        stats = _permutation_mmd2(Z, n, sigma, subsets, resolve_device(self.device))
        if not np.isfinite(stats).all():
            raise ValueError(
                "the MMD statistic is not finite: the features are too large for float64 "
                f"(largest magnitude {np.abs(Z).max():.3g}); rescale them"
            )
        obs = float(stats[0])
        at_least = stats >= obs - _tie_tolerance(N, obs)  # the observed split included
        return permutation_result(
            self, stats, at_least, exact, n_splits, n, N - n, {"bandwidth": sigma}
        )
