"""Per-feature two-sample Cramér-von Mises tests with a multiple-test correction.

The statistic and p-value of each feature are ``scipy.stats.cramervonmises_2samp``'s with
its default ``method="auto"`` (Anderson 1962; the exact null distribution of Xiao et al. 2006
when both samples have at most 20 values, the asymptotic one of Csörgő and Faraway 1996
otherwise), in one call over all features (SciPy's implementation is batched along an axis);
the exact null distribution, which depends on the sample sizes alone, is computed once per
pair of sizes (SciPy's recursion of Xiao et al. 2006, which SciPy reruns per statistic) and
every exact p-value read off it.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy.stats import cramervonmises_2samp

from dgpbench.detectors.per_feature import PerFeatureShiftDetector
from dgpbench.parameters import CVM_RULES, sklearn_constraints

__all__ = ["EXACT_MAX_N", "CvMShiftDetector", "cvm_pvalues"]

#: ``cramervonmises_2samp(method="auto")`` is exact when neither sample is larger.
EXACT_MAX_N = 20


@functools.lru_cache(maxsize=32)
def _exact_null(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact null distribution of Xiao et al.'s (2006) integer statistic for sizes m, n.

    Sorted distinct values ``zeta`` and ``tail[k] = #{splits with value >= zeta[k]}`` (plus
    a 0 past the end). SciPy's ``_pval_cvm_2samp_exact`` runs the same lattice-path recursion
    once per statistic; here it runs once per (m, n) and every p-value is a look-up.
    A path from (0, 0) to (n, m) (u steps along n, v along m) accumulates ``(a v - b u)^2``
    at every point it visits, ``a = lcm / m``, ``b = lcm / n``.
    """
    lcm = math.lcm(m, n)
    a, b = lcm // m, lcm // n
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    # column[v]: (values, counts) of the paths that reach (u - 1, v)
    column = [(np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))] + [empty] * m
    for u in range(n + 1):
        nxt = []
        left = empty
        for v in range(m + 1):
            values = np.concatenate([left[0], column[v][0]])
            counts = np.concatenate([left[1], column[v][1]])
            values, where = np.unique(values, return_inverse=True)
            summed = np.zeros(len(values), dtype=np.int64)
            np.add.at(summed, where.reshape(-1), counts)
            left = (values + (a * v - b * u) ** 2, summed)
            nxt.append(left)
        column = nxt
    values, counts = column[m]
    tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]])
    return values, tail


def _exact_pvalues(X_ref: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``cramervonmises_2samp(..., method="exact").pvalue`` of every column, one look-up each."""
    from scipy.stats import rankdata

    m, n = X_ref.shape[0], X.shape[0]
    z = np.concatenate([np.sort(X_ref, axis=0), np.sort(X, axis=0)], axis=0)
    r = rankdata(z, method="average", axis=0).astype(np.float64)  # midranks, as SciPy
    u = m * ((r[:m] - np.arange(1, m + 1)[:, None]) ** 2).sum(axis=0)
    u += n * ((r[m:] - np.arange(1, n + 1)[:, None]) ** 2).sum(axis=0)
    lcm, mn = math.lcm(m, n), m * n
    # SciPy's zeta of U (floor division of floats, as its code computes it)
    zeta = lcm**2 * (m + n) * (6 * u - mn * (4 * mn - 1)) // (6 * mn**2)
    values, tail = _exact_null(m, n)
    return tail[np.searchsorted(values, zeta, side="left")] / math.comb(m + n, m)


def cvm_pvalues(X_ref: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two-sample Cramér-von Mises statistics and p-values of every column.

    Parameters
    ----------
    X_ref : ndarray of shape (n_ref, d)
        Reference sample.
    X : ndarray of shape (n, d)
        Test sample.

    Returns
    -------
    statistic : ndarray of shape (d,)
        The statistic ``T`` (midranks for ties).
    p_val : ndarray of shape (d,)
        ``scipy.stats.cramervonmises_2samp(..., method="auto").pvalue`` of each column;
        1 for a column constant in both samples with one value (SciPy's exact path gives
        less, its no-ties distribution read at the all-tied statistic).

    Examples
    --------
    >>> t, p = cvm_pvalues(np.arange(6.0)[:, None], np.arange(6.0)[:, None] + 10)
    >>> bool(p[0] < 0.01)
    True
    """
    res = cramervonmises_2samp(X_ref, X, axis=0, method="asymptotic")
    statistic = np.atleast_1d(np.asarray(res.statistic, dtype=np.float64)).copy()
    p_val = np.atleast_1d(np.asarray(res.pvalue, dtype=np.float64)).copy()
    if max(len(X_ref), len(X)) <= EXACT_MAX_N:  # SciPy's switch in method="auto"
        p_val = _exact_pvalues(X_ref, X)
    # A feature constant in both samples (one value): SciPy's exact path reads its all-tied
    # statistic against the no-ties distribution (p < 1); no evidence either way is p = 1.
    constant = (X_ref == X_ref[:1]).all(axis=0) & (X == X_ref[:1]).all(axis=0)
    statistic[constant], p_val[constant] = 0.0, 1.0
    return statistic, p_val


class CvMShiftDetector(PerFeatureShiftDetector):
    """Per-feature two-sample Cramér-von Mises tests with a multiple-test correction.

    ``fit`` stores a clean reference batch; ``test`` runs one Cramér-von Mises test per
    feature (``scipy.stats.cramervonmises_2samp``, ``method="auto"``: exact when both
    samples have at most 20 values) and decides as the KS detector does.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1) (family-wise for Bonferroni, the false discovery rate
        for ``"fdr"``).
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        Multiple-test correction over the features, as
        :func:`~dgpbench.detectors.ks_test.apply_correction` applies it.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference features.
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    KSShiftDetector : The same decision with the KS test.
    scipy.stats.cramervonmises_2samp : The per-feature test.

    Notes
    -----
    A feature constant in both samples with the same value has statistic 0 and p-value 1
    (SciPy's asymptotic answer; its exact path, for samples of at most 20, gives less) and
    ``test`` warns how many there are, as the KS detector does. Other ties use midranks;
    the exact p-value is then SciPy's, from the distribution without ties.

    References
    ----------
    T. W. Anderson. On the Distribution of the Two-Sample Cramér-von Mises Criterion.
    Ann. Math. Statist. 33(3), 1962. alibi-detect's ``CVMDrift``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = CvMShiftDetector().fit(rng.normal(size=(100, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(100, 3)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(CVM_RULES)
    _test_label = "Cramér-von Mises"
    #: The test's name in the registry (``fit --test``).
    test_name = "cvm"

    def __init__(self, alpha: float = 0.05, correction: str | None = "bonferroni") -> None:
        self.alpha = alpha
        self.correction = correction

    def _statistics(
        self, X_ref: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        statistic, p_val = cvm_pvalues(X_ref, X)
        exact = max(len(X_ref), len(X)) <= EXACT_MAX_N
        return statistic, p_val, {"method": "exact" if exact else "asymptotic"}
