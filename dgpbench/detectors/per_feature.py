"""What the per-feature tests with a multiple-test correction share: the record and the estimator.

Cramér-von Mises (:mod:`~dgpbench.detectors.cvm`), Anderson-Darling
(:mod:`~dgpbench.detectors.anderson`) and Fisher's exact test
(:mod:`~dgpbench.detectors.fisher`) run as the KS detector does: one univariate test per
feature, the correction of :func:`~dgpbench.detectors.ks_test.apply_correction`, one batch
decision, and the KS record (:class:`~dgpbench.detectors.ks_test.KSTestResult`) with the
test's by-products added to ``meta``. Each module supplies only its statistic and p-values.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import BatchDecisionMixin, ReferenceState, package_version
from dgpbench.detectors.ks_test import KSTestResult, apply_correction, constant_in_both

__all__ = ["FeatureTestResult", "PerFeatureShiftDetector", "warn_constant"]


@dataclass(frozen=True, eq=False)
class FeatureTestResult(KSTestResult):
    """The KS record of a per-feature test, with the test's by-products in ``meta``.

    Parameters
    ----------
    is_drift, distance, p_val, p_val_adjusted, threshold, correction, alpha, n_ref, n, name, version
        As :class:`~dgpbench.detectors.ks_test.KSTestResult`; ``distance`` holds the test's
        per-feature statistic.
    details : dict, default={}
        Test-specific settings and by-products (for Anderson-Darling, which p-values are
        capped or floored); they go to ``meta``.
    """

    details: dict[str, Any] = field(default_factory=dict)

    @property
    def meta(self) -> dict[str, Any]:
        """A fresh ``meta`` dict: the KS layout plus the test's details."""
        extra = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.details.items()}
        return {**super().meta, **extra}


def warn_constant(constant: np.ndarray, test: str) -> None:
    """One warning naming how many features are constant in both samples (p = 1).

    Parameters
    ----------
    constant : ndarray of bool, shape (d,)
        Which features take one and the same value in both samples.
    test : str
        The test's name in the message.
    """
    k = int(constant.sum())
    if k:
        warnings.warn(
            f"{k} of {constant.size} features are constant in both samples, with the same "
            f"value: their {test} p-value is 1 (no evidence either way; they still count in "
            "the Bonferroni/FDR correction)",
            UserWarning,
            stacklevel=4,  # the caller of the detector's test
        )


class PerFeatureShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """Base of the per-feature tests: fit stores the reference, test corrects and decides.

    Subclasses set ``_test_label`` (the name in warnings) and implement
    ``_statistics(X_ref, X) -> (statistic, p_val, details)`` on checked arrays.
    """

    _test_label: str = ""
    #: dtypes accepted by ``validate_data``.
    _dtype: ClassVar[list] = [np.float64, np.float32]

    def _check(self, X: np.ndarray, name: str) -> np.ndarray:
        """Test-specific checks of a validated sample (binary values for Fisher's test)."""
        return X

    def _statistics(
        self, X_ref: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        raise NotImplementedError

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> PerFeatureShiftDetector:
        """Store the clean reference features.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            Clean features; at least 2 samples, finite. A constant column is allowed.
        y : None
            Ignored; present for scikit-learn API consistency.

        Returns
        -------
        self : object
            The fitted detector.

        Raises
        ------
        ValueError
            On NaN/inf, fewer than 2 samples, or values the test cannot take.
        """
        X = validate_data(
            self, X_ref, reset=True, dtype=self._dtype, ensure_min_samples=2, copy=True
        )
        self.X_ref_ = self._check(X, "X_ref")
        return self

    def test(self, X: Any) -> FeatureTestResult:
        """Run the per-feature tests of ``X`` against the reference and decide.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 2 samples, finite, same number of features as the reference.

        Returns
        -------
        FeatureTestResult
            Statistics (``distance``), p-values, corrected p-values, the threshold used on
            the raw p-values and the decision.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            On NaN/inf, fewer than 2 samples, a feature-count mismatch, or values the test
            cannot take.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=self._dtype, ensure_min_samples=2)
        X = self._check(X, "X")
        X_ref = self.X_ref_
        constant = constant_in_both(X_ref, X)
        warn_constant(constant, self._test_label)
        statistic, p_val, details = self._statistics(X_ref, X)
        statistic = np.atleast_1d(np.asarray(statistic, dtype=np.float64))
        p_val = np.atleast_1d(np.asarray(p_val, dtype=np.float64))
        is_drift, threshold, p_adj = apply_correction(p_val, self.alpha, self.correction)
        for arr in (statistic, p_val, p_adj):
            arr.setflags(write=False)
        return FeatureTestResult(
            is_drift=bool(is_drift),
            distance=statistic,
            p_val=p_val,
            p_val_adjusted=p_adj,
            threshold=float(threshold),
            correction=self.correction,
            alpha=float(self.alpha),
            n_ref=int(X_ref.shape[0]),
            n=int(X.shape[0]),
            name=type(self).__name__,
            version=package_version(),
            details=details,
        )
