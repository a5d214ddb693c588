"""Per-feature two-sample Cramér-von Mises tests with a multiple-test correction.

The statistic and p-value of each feature are ``scipy.stats.cramervonmises_2samp``'s with
its default ``method="auto"`` (Anderson 1962; the exact null distribution of Xiao et al. 2006
when both samples have at most 20 values, the asymptotic one of Csörgő and Faraway 1996
otherwise), in one call over all features (SciPy's implementation is batched along an axis);
the exact p-value, a function of the statistic alone, is computed once per distinct value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import cramervonmises_2samp

from dgpbench.detectors.per_feature import PerFeatureShiftDetector
from dgpbench.parameters import CVM_RULES, sklearn_constraints

__all__ = ["EXACT_MAX_N", "CvMShiftDetector", "cvm_pvalues"]

#: ``cramervonmises_2samp(method="auto")`` is exact when neither sample is larger.
EXACT_MAX_N = 20


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
        # The exact p-value depends on the statistic alone (a function of the integer U):
        # compute it once per distinct statistic, on a column that has it.
        _, first, inverse = np.unique(statistic, return_index=True, return_inverse=True)
        exact = cramervonmises_2samp(X_ref[:, first], X[:, first], axis=0, method="exact")
        p_val = np.atleast_1d(np.asarray(exact.pvalue, dtype=np.float64))[inverse.reshape(-1)]
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
