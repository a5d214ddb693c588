"""Batch-level covariate-shift detection with per-feature two-sample Kolmogorov-Smirnov tests.

The detector follows Rabanser et al. (2019), as used in the DGP paper (Sec. 5): one KS test per
feature dimension between a clean reference batch and a test batch, combined by a multiple-test
correction; the batch is flagged as shifted if at least one corrected test rejects.

The test itself (:func:`~dgpbench.detectors.ks_test.ks_test`) lives in
:mod:`dgpbench.detectors.ks_test`, the KS engine every KS decision of the package runs
through, without scikit-learn; this module adds the estimator: parameters and input checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import BatchDecisionMixin, ReferenceState
from dgpbench.detectors.ks_test import KSTestResult, ks_test
from dgpbench.parameters import KS_RULES, sklearn_constraints

__all__ = ["KSShiftDetector"]


class KSShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """Per-feature two-sample KS tests with a multiple-test correction (Rabanser et al., 2019).

    ``fit`` stores a clean reference batch; ``test`` compares a new batch with it, one KS test
    per feature (``scipy.stats.ks_2samp`` along axis 0, default ``method="auto"``: exact
    p-values for small samples), and ``predict`` returns the single batch decision.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1): the family-wise level for Bonferroni, the false discovery
        rate for ``"fdr"``, the per-feature level without correction.
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        Multiple-test correction over the ``d`` features. ``"bonferroni"`` rejects if
        ``min p < alpha / d`` (the DGP paper's rule); ``"fdr"`` rejects if any
        Benjamini-Hochberg adjusted p-value (``scipy.stats.false_discovery_control``) is below
        ``alpha``; ``None`` rejects if ``min p < alpha`` (no correction: anti-conservative).

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the clean reference features passed to ``fit``.
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    scipy.stats.ks_2samp : The per-feature test.
    scipy.stats.false_discovery_control : Benjamini-Hochberg adjustment used for ``"fdr"``.
    dgpbench.paper.protocol.bootstrap_detection : The paper's evaluation protocol, same decision rule.

    Notes
    -----
    Input checks (all ``ValueError``): NaN or inf; fewer than 2 samples in the reference or the
    test batch; a test batch whose number of features differs from the reference. Constant
    features are allowed, with one rule for the detector and the grid's batched KS
    (:func:`dgpbench.detectors.ks_test.ks_pvalues`): a feature constant in both samples
    with the same value gets ``p = 1``, as ``scipy.stats.ks_2samp`` gives it, and ``test``
    warns how many there are (they still count in ``d``, the Bonferroni divisor). A
    constant reference with a test batch that varies, or constant at another value, is
    evidence of shift, tested as any feature. So NoRed + KS runs on MNIST (its border
    pixels are 0 in every image) and an autoencoder code unit that never fires is no error.

    ``predict`` and ``test`` have no side effects (unlike alibi-detect's ``update_x_ref``).

    References
    ----------
    S. Rabanser, S. Günnemann, Z. C. Lipton. Failing Loudly: An Empirical Study of Methods
    for Detecting Dataset Shift. NeurIPS 2019. https://arxiv.org/abs/1810.11953

    Examples
    --------
    >>> import numpy as np
    >>> from dgpbench.detectors import KSShiftDetector
    >>> rng = np.random.default_rng(0)
    >>> det = KSShiftDetector(alpha=0.05).fit(rng.normal(size=(200, 4)))
    >>> det.predict(rng.normal(size=(200, 4)))
    False
    >>> det.predict(rng.normal(loc=1.0, size=(200, 4)))
    True
    >>> det.test(rng.normal(loc=1.0, size=(200, 4))).threshold
    0.0125
    """

    _parameter_constraints: dict = sklearn_constraints(KS_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "ks"

    def __init__(self, alpha: float = 0.05, correction: str | None = "bonferroni") -> None:
        self.alpha = alpha
        self.correction = correction

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> KSShiftDetector:
        """Store the clean reference features.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            Clean (in-distribution) features; at least 2 samples, finite. A constant column
            is allowed (see Notes).
        y : None
            Ignored; present for scikit-learn API consistency.

        Returns
        -------
        self : KSShiftDetector
            The fitted detector.

        Raises
        ------
        ValueError
            On NaN/inf or fewer than 2 samples.
        """
        X = validate_data(
            self,
            X_ref,
            reset=True,
            dtype=[np.float64, np.float32],
            ensure_min_samples=2,
            copy=True,  # never alias the caller's array: it may be mutated afterwards
        )
        self.X_ref_ = X
        return self

    def test(self, X: Any) -> KSTestResult:
        """Run the per-feature KS tests of ``X`` against the reference.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 2 samples, finite, same number of features as the reference.

        Returns
        -------
        KSTestResult
            Statistics, p-values, corrected p-values, the threshold used and the decision.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            On NaN/inf, fewer than 2 samples, or a feature-count mismatch.
        """
        check_is_fitted(self)
        X = validate_data(
            self, X, reset=False, dtype=[np.float64, np.float32], ensure_min_samples=2
        )
        return ks_test(self.X_ref_, X, self.alpha, self.correction, name=type(self).__name__)
