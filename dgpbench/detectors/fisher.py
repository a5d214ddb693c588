"""Per-feature Fisher's exact tests of binary features with a multiple-test correction.

alibi-detect's ``FETDrift`` semantics: each feature is 0/1 (a hard label one-hot encoded, a
thresholded unit, a model's error indicator); its 2 x 2 table is
``[[ones in the batch, ones in the reference], [zeros in the batch, zeros in the
reference]]``, tested by ``scipy.stats.fisher_exact``. Its p-value depends on the two counts
of ones only, so each distinct table is computed once, however many features share it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import fisher_exact

from dgpbench.detectors.per_feature import PerFeatureShiftDetector
from dgpbench.parameters import FISHER_RULES, sklearn_constraints

__all__ = ["ALTERNATIVES", "FisherShiftDetector", "fisher_pvalues"]

#: ``alternative`` of ``scipy.stats.fisher_exact``: "greater" = more ones in the batch.
ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")


def fisher_pvalues(
    X_ref: np.ndarray, X: np.ndarray, alternative: str = "two-sided"
) -> tuple[np.ndarray, np.ndarray]:
    """Fisher's exact test of every binary column: odds ratios and p-values.

    Parameters
    ----------
    X_ref : ndarray of shape (n_ref, d)
        Reference sample of 0/1 values.
    X : ndarray of shape (n, d)
        Test sample of 0/1 values.
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        ``"greater"``: the batch has a larger share of ones than the reference (odds ratio
        above 1); ``"less"``: a smaller share.

    Returns
    -------
    odds_ratio : ndarray of shape (d,)
        ``scipy.stats.fisher_exact``'s statistic (``inf`` or ``nan`` where a count is 0).
    p_val : ndarray of shape (d,)
        Its p-value, equal to ``fisher_exact`` on each column's table.

    Examples
    --------
    >>> ref, test = np.zeros((10, 1)), np.ones((10, 1))
    >>> float(fisher_pvalues(ref, test)[1][0]) < 1e-4
    True
    """
    n, n_ref = X.shape[0], X_ref.shape[0]
    ones_test = X.sum(axis=0).astype(np.int64)
    ones_ref = X_ref.sum(axis=0).astype(np.int64)
    tables, index = np.unique(np.stack([ones_test, ones_ref], axis=1), axis=0, return_inverse=True)
    odds, p = np.empty(len(tables)), np.empty(len(tables))
    for i, (a, b) in enumerate(tables):
        res = fisher_exact([[a, b], [n - a, n_ref - b]], alternative=alternative)
        odds[i], p[i] = res.statistic, res.pvalue
    index = index.reshape(-1)
    return odds[index], p[index]


class FisherShiftDetector(PerFeatureShiftDetector):
    """Per-feature Fisher's exact tests of binary features with a multiple-test correction.

    ``fit`` stores a clean reference batch of 0/1 features; ``test`` runs
    ``scipy.stats.fisher_exact`` on each feature's 2 x 2 table of counts (batch against
    reference) and decides as the KS detector does. Where chi-squared is unreliable (small
    counts), this test is exact.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        Multiple-test correction over the features
        (:func:`~dgpbench.detectors.ks_test.apply_correction`).
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        ``"greater"``: a shift means more ones in the batch (alibi-detect's default, for
        error indicators); ``"less"``: fewer; ``"two-sided"``: either.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference features (0.0 and 1.0).
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    scipy.stats.fisher_exact : The per-feature test.
    ChiSquareShiftDetector : Class frequencies of hard labels, asymptotic.

    Notes
    -----
    The record's ``distance`` is the batch's share of ones minus the reference's (always
    finite); the odds ratios are in ``meta["odds_ratio"]``. Values other than 0 and 1
    (``True``/``False`` are accepted) raise ``ValueError`` naming the features.

    References
    ----------
    R. A. Fisher. On the Interpretation of chi^2 from Contingency Tables. J. R. Stat. Soc.
    85(1), 1922. alibi-detect's ``FETDrift``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = FisherShiftDetector().fit(rng.random((100, 2)) < 0.2)
    >>> det.predict(rng.random((100, 2)) < 0.6)
    True
    """

    _parameter_constraints: dict = sklearn_constraints(FISHER_RULES)
    _test_label = "Fisher exact"
    #: The test's name in the registry (``fit --test``).
    test_name = "fisher"

    def __init__(
        self,
        alpha: float = 0.05,
        correction: str | None = "bonferroni",
        alternative: str = "two-sided",
    ) -> None:
        self.alpha = alpha
        self.correction = correction
        self.alternative = alternative

    def _check(self, X: np.ndarray, name: str) -> np.ndarray:
        bad = np.flatnonzero(((X != 0) & (X != 1)).any(axis=0))
        if bad.size:
            raise ValueError(
                f"{name} has values other than 0 and 1 in features {bad[:10].tolist()}: "
                "Fisher's exact test takes binary features (one-hot labels, indicators)"
            )
        return X

    def _statistics(
        self, X_ref: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        odds, p_val = fisher_pvalues(X_ref, X, self.alternative)
        share = X.mean(axis=0) - X_ref.mean(axis=0)
        return share, p_val, {"alternative": self.alternative, "odds_ratio": odds}
