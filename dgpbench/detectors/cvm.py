"""Per-feature two-sample Cramér-von Mises tests with a multiple-test correction.

The statistic and p-value of each feature are ``scipy.stats.cramervonmises_2samp``'s with
its default ``method="auto"`` (Anderson 1962; the exact null distribution of Xiao et al. 2006
when both samples have at most 20 values, the asymptotic one of Csörgő and Faraway 1996
otherwise), in one call over all features: SciPy's implementation is batched along an axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import cramervonmises_2samp

from dgpbench.detectors.per_feature import PerFeatureShiftDetector
from dgpbench.parameters import CVM_RULES, sklearn_constraints

__all__ = ["CvMShiftDetector", "cvm_pvalues"]


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
        ``scipy.stats.cramervonmises_2samp(..., method="auto").pvalue`` of each column.

    Examples
    --------
    >>> t, p = cvm_pvalues(np.arange(6.0)[:, None], np.arange(6.0)[:, None] + 10)
    >>> bool(p[0] < 0.01)
    True
    """
    res = cramervonmises_2samp(X_ref, X, axis=0, method="auto")
    return (
        np.atleast_1d(np.asarray(res.statistic, dtype=np.float64)),
        np.atleast_1d(np.asarray(res.pvalue, dtype=np.float64)),
    )


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
    (SciPy's answer too), and ``test`` warns how many there are, as the KS detector does.

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
        exact = max(len(X_ref), len(X)) <= 20  # SciPy's switch in method="auto"
        return statistic, p_val, {"method": "exact" if exact else "asymptotic"}
