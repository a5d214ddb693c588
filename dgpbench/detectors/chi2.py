"""Chi-squared test of homogeneity for hard labels (BBSDh in "Failing loudly").

The reference and the test batch are each an ``(n, 1)`` column of integer class labels (the
predicted classes :class:`~dgpbench.features.BBSDhFeatures` returns); the test
compares their class frequencies in a 2 x k contingency table with
``scipy.stats.chi2_contingency``. Classes absent from both samples are not in the table (they
would be all-zero columns, for which the expected counts are 0).

The test itself is two functions the estimator and the Failing-loudly grid share:
:func:`class_counts` (the table) and :func:`chi2_homogeneity` (its p-value, with Rabanser et
al.'s zero-count rule as a variant).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import chi2_contingency
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.detectors.base import (
    BatchDecisionMixin,
    ReferenceState,
    ShiftTestResult,
    check_min_samples,
    package_version,
)
from dgpbench.parameters import CHI2_RULES, sklearn_constraints

__all__ = ["ZERO_COUNTS", "ChiSquareShiftDetector", "chi2_homogeneity", "class_counts"]

#: Rules for a table with a zero count: test the table as it is, or a U(0, 1) p-value.
ZERO_COUNTS: tuple[str, ...] = ("observed", "uniform")


def class_counts(
    y_ref: np.ndarray, y: np.ndarray, n_classes: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The 2 x k contingency table of two samples of integer class labels.

    Parameters
    ----------
    y_ref, y : ndarray of int, shape (n_ref,) and (n,)
        The two samples' labels, taken as checked (non-negative, below ``n_classes``).
    n_classes : int, optional
        ``None``: one column per class seen in either sample; else one per class
        ``0..n_classes - 1``, seen or not.

    Returns
    -------
    classes : ndarray of int, shape (k,)
        The class of each column.
    table : ndarray of int64, shape (2, k)
        Counts of the reference (row 0) and of the test sample (row 1).

    Examples
    --------
    >>> classes, table = class_counts(np.array([0, 2, 2]), np.array([2, 5]))
    >>> classes.tolist(), table.tolist()
    ([0, 2, 5], [[1, 2, 0], [0, 1, 1]])
    """
    if n_classes is not None:
        table = np.stack(
            [np.bincount(y_ref, minlength=n_classes), np.bincount(y, minlength=n_classes)]
        )
        return np.arange(n_classes), table
    classes, inverse = np.unique(np.concatenate([y_ref, y]), return_inverse=True)
    n_ref = len(y_ref)
    table = np.stack(
        [
            np.bincount(inverse[:n_ref], minlength=len(classes)),
            np.bincount(inverse[n_ref:], minlength=len(classes)),
        ]
    )
    return classes, table


def chi2_homogeneity(
    table: np.ndarray, *, zero_counts: str = "observed", rng: np.random.Generator | None = None
) -> tuple[float, float, int]:
    """Chi-squared test of equal class frequencies in the two rows of ``table``.

    Parameters
    ----------
    table : ndarray of int, shape (2, k)
        Class counts (:func:`class_counts`).
    zero_counts : {"observed", "uniform"}, default="observed"
        ``"observed"``: ``scipy.stats.chi2_contingency`` of the table (a table of one class
        has no evidence of shift: statistic 0, p-value 1). ``"uniform"``: Rabanser et al.'s
        rule (their ``shift_tester.py``, ``p_val = random.uniform(0, 1)``): where a count is
        0, a p-value drawn from U(0, 1) by ``rng`` (statistic NaN, 0 degrees of freedom).
    rng : numpy.random.Generator, optional
        Source of the uniform p-value (``zero_counts="uniform"``).

    Returns
    -------
    statistic : float
    p_val : float
    dof : int

    Examples
    --------
    >>> stat, p, dof = chi2_homogeneity(np.array([[10, 0], [0, 10]]))
    >>> dof, bool(p < 0.001)
    (1, True)
    """
    if zero_counts not in ZERO_COUNTS:
        raise ValueError(f"zero_counts must be 'observed' or 'uniform', got {zero_counts!r}")
    if zero_counts == "uniform" and (table == 0).any():
        if rng is None:
            raise ValueError("zero_counts='uniform' needs rng")
        return math.nan, float(rng.uniform(0.0, 1.0)), 0
    if table.shape[1] < 2:
        return 0.0, 1.0, 0
    res = chi2_contingency(table)
    return float(res.statistic), float(res.pvalue), int(res.dof)


def _label_column(est: BaseEstimator, X: Any, *, reset: bool, name: str) -> np.ndarray:
    """Validate an ``(n, 1)`` (or 1-D) column of integer labels; return it as int64 (n,)."""
    arr = np.asarray(X) if not hasattr(X, "iloc") else X
    if getattr(arr, "ndim", 2) == 1:
        arr = np.asarray(arr).reshape(-1, 1)
    arr = validate_data(est, arr, reset=reset, dtype=None, ensure_min_samples=1)
    if arr.shape[1] != 1:  # reset=True: a wide array is the wrong representation
        raise ValueError(
            f"{name} has {arr.shape[1]} columns; the chi-squared test takes one column of "
            "class labels (the (n, 1) output of bbsdh)"
        )
    if not np.issubdtype(arr.dtype, np.integer):
        values = arr.astype(np.float64)
        if not np.array_equal(values, np.round(values)):
            raise ValueError(
                f"{name} holds non-integer values: the chi-squared test takes class labels "
                "(the predicted class of bbsdh), not continuous features"
            )
        arr = values
    return arr[:, 0].astype(np.int64)


class ChiSquareShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """Chi-squared test of equal class frequencies in the reference and the test labels.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).

    Attributes
    ----------
    y_ref_ : ndarray of shape (n_ref,)
        The reference labels (int64).
    n_features_in_ : int
        Always 1.

    See Also
    --------
    scipy.stats.chi2_contingency : The test (Yates' correction when there are two classes).

    Notes
    -----
    "Failing loudly" falls back to a goodness-of-fit ``chisquare`` when a class is missing
    from one sample; the contingency table is well defined then too (its expected counts
    stay positive as long as the class occurs in one of the two samples), so one test is used
    throughout. When both samples hold a single, identical class, there is no evidence of
    shift: statistic 0, p-value 1.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = ChiSquareShiftDetector().fit(rng.integers(0, 3, size=(300, 1)))
    >>> det.predict(rng.integers(0, 3, size=(300, 1)))
    False
    >>> det.predict(rng.integers(1, 3, size=(300, 1)))  # class 0 knocked out
    True
    """

    _parameter_constraints: dict = sklearn_constraints(CHI2_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "chi2"
    _reference_attribute = "y_ref_"  # hard labels, one column

    def __init__(self, alpha: float = 0.05) -> None:
        self.alpha = alpha

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> ChiSquareShiftDetector:
        """Store the reference labels.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, 1) or (n_ref,)
            Integer class labels; at least 2.
        y : None
            Ignored.

        Returns
        -------
        self : ChiSquareShiftDetector
        """
        labels = _label_column(self, X_ref, reset=True, name="X_ref")
        check_min_samples(len(labels), 2, "X_ref", "a frequency needs samples")
        self.y_ref_ = labels
        return self

    def test(self, X: Any) -> ShiftTestResult:
        """Compare the class frequencies of ``X`` with the reference's.

        Parameters
        ----------
        X : array-like of shape (n, 1) or (n,)
            Integer class labels; at least 2.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = chi-squared, ``p_val`` its p-value; ``details`` hold ``dof``,
            ``classes`` and the two rows of counts.
        """
        check_is_fitted(self)
        labels = _label_column(self, X, reset=False, name="X")
        check_min_samples(len(labels), 2, "X", "a frequency needs samples")
        classes, table = class_counts(self.y_ref_, labels)
        stat, p_val, dof = chi2_homogeneity(table)
        n_ref = len(self.y_ref_)
        return ShiftTestResult(
            is_drift=bool(p_val < self.alpha),
            statistic=stat,
            p_val=p_val,
            threshold=float(self.alpha),
            alpha=float(self.alpha),
            n_ref=n_ref,
            n=len(labels),
            name=type(self).__name__,
            version=package_version(),
            details={"dof": dof, "classes": classes.tolist(), "counts": table.tolist()},
        )
