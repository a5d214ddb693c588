"""The two-sample KS test of a batch, on arrays: no estimator, no scikit-learn.

:func:`ks_test` is the whole test of :class:`dgpbench.detectors.KSShiftDetector` once its
inputs are checked: per-feature ``scipy.stats.ks_2samp`` along axis 0, one multiple-test
correction (:func:`_decide`, shared with :mod:`dgpbench.paper.protocol`) and the record
(:class:`KSTestResult`). It lives apart from the estimator so that scoring a saved detector
(:mod:`dgpbench.saved.scoring`) runs the same arithmetic without importing scikit-learn.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import false_discovery_control, ks_2samp

from dgpbench.detectors.base import drift_meta, package_version

__all__ = ["CORRECTIONS", "KSTestResult", "constant_in_both", "ks_test"]

#: Multiple-test corrections of the KS test (``None`` = uncorrected).
CORRECTIONS: tuple[str | None, ...] = ("bonferroni", "fdr", None)


@dataclass(frozen=True, eq=False)
class KSTestResult:
    """Outcome of one batch test; every table cell can be rebuilt from it alone.

    Modelled on alibi-detect's ``concept_drift_dict`` (``data`` + ``meta``); :meth:`to_dict`
    returns that nested layout. Arrays are read-only so the record stays immutable.

    Parameters
    ----------
    is_drift : bool
        Batch decision: ``True`` if the test batch is flagged as shifted.
    distance : ndarray of shape (n_features,)
        Per-feature KS statistics (sup-distance of the two empirical CDFs).
    p_val : ndarray of shape (n_features,)
        Per-feature KS p-values, exactly as returned by ``scipy.stats.ks_2samp``.
    p_val_adjusted : ndarray of shape (n_features,)
        Corrected p-values: ``min(d * p, 1)`` for Bonferroni, Benjamini-Hochberg adjusted
        p-values for ``"fdr"``, ``p_val`` itself for no correction.
    threshold : float
        The cut-off actually applied to the raw ``p_val``: ``alpha / d`` for Bonferroni,
        the Benjamini-Hochberg cut-off ``alpha * k / d`` (``k`` = number of rejected features,
        ``k = 1`` when none is rejected, so always one number: alibi-detect returns the
        whole array of BH steps in that case) for ``"fdr"``, ``alpha`` without correction.
        A feature is rejected iff its ``p_val < threshold``.
    correction : {"bonferroni", "fdr"} or None
        The correction used.
    alpha : float
        Family-wise significance level (Bonferroni) or false discovery rate (``"fdr"``).
    n_ref : int
        Number of reference samples.
    n : int
        Number of test samples.
    name : str, default="KSShiftDetector"
        Detector name, for the ``meta`` block.
    version : str, default=""
        dgpbench version that produced the record.

    See Also
    --------
    KSShiftDetector.test : Produces this record.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> res = ks_test(rng.normal(size=(100, 3)), rng.normal(loc=2.0, size=(100, 3)), 0.05)
    >>> bool(res.is_drift), round(res.threshold, 4)
    (True, 0.0167)
    >>> sorted(res.to_dict()["data"])
    ['distance', 'is_drift', 'p_val', 'p_val_adjusted', 'threshold']
    """

    is_drift: bool
    distance: np.ndarray
    p_val: np.ndarray
    p_val_adjusted: np.ndarray
    threshold: float
    correction: str | None
    alpha: float
    n_ref: int
    n: int
    name: str = "KSShiftDetector"
    version: str = ""

    @property
    def n_features(self) -> int:
        """Number of features (= number of KS tests)."""
        return int(self.p_val.shape[0])

    @property
    def min_p_val_adjusted(self) -> float:
        """Smallest corrected p-value: the batch-level evidence against 'no shift'."""
        return float(self.p_val_adjusted.min())

    @property
    def p_value(self) -> float:
        """The batch-level p-value: the smallest corrected p-value (as for every detector)."""
        return self.min_p_val_adjusted

    @property
    def statistic(self) -> np.ndarray:
        """Per-feature KS statistics (the same array as ``distance``)."""
        return self.distance

    @property
    def meta(self) -> dict[str, Any]:
        """A fresh ``meta`` dict (alibi-detect layout plus the test's settings)."""
        return drift_meta(
            self.name,
            self.version,
            correction=self.correction,
            alpha=self.alpha,
            n_ref=self.n_ref,
            n=self.n,
            n_features=self.n_features,
        )

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Return ``{"data": {...}, "meta": {...}}`` with fresh, writable array copies."""
        return {
            "data": {
                "is_drift": bool(self.is_drift),
                "distance": self.distance.copy(),
                "p_val": self.p_val.copy(),
                "p_val_adjusted": self.p_val_adjusted.copy(),
                "threshold": float(self.threshold),
            },
            "meta": self.meta,
        }


def _decide(
    p_val: np.ndarray, alpha: float, correction: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apply a multiple-test correction along the last axis.

    Parameters
    ----------
    p_val : ndarray of shape (..., d)
        Per-feature p-values; leading axes are independent batches (e.g. bootstrap draws).
    alpha : float
        Significance level.
    correction : {"bonferroni", "fdr"} or None
        The correction.

    Returns
    -------
    is_drift : ndarray of bool, shape (...)
        Batch decisions.
    threshold : ndarray of float, shape (...)
        Cut-off on the raw p-values (see :class:`KSTestResult`).
    p_val_adjusted : ndarray of shape (..., d)
        Corrected p-values.
    """
    p_val = np.asarray(p_val, dtype=np.float64)
    d = p_val.shape[-1]
    if correction == "bonferroni":
        # The paper's rule (Sec. 5): reject if min p < alpha / d. Compared on raw p-values,
        # not on d * p, so rounding cannot flip a decision relative to the paper's formula.
        threshold = np.full(p_val.shape[:-1], alpha / d)
        is_drift = p_val.min(axis=-1) < threshold
        p_adj = np.minimum(p_val * d, 1.0)
    elif correction == "fdr":
        p_adj = false_discovery_control(p_val, axis=-1, method="bh")
        n_rejected = (p_adj < alpha).sum(axis=-1)
        is_drift = n_rejected > 0
        # BH rejects exactly the k smallest p-values, i.e. those below alpha * k / d. With no
        # rejection we report one number, the first step alpha / d (the cut-off the smallest
        # p-value missed); alibi-detect's fdr() returns the whole array alpha * (1..d) / d then.
        threshold = alpha * np.maximum(n_rejected, 1) / d
    elif correction is None:
        threshold = np.full(p_val.shape[:-1], float(alpha))
        is_drift = p_val.min(axis=-1) < threshold
        p_adj = p_val.copy()
    else:  # _parameter_constraints rejects this earlier; never fall through silently
        raise NotImplementedError(f"correction={correction!r} is not implemented")
    return np.asarray(is_drift, dtype=bool), np.asarray(threshold, dtype=np.float64), p_adj


def constant_in_both(X_ref: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Features (columns) that take one and the same value in every row of both samples.

    Their KS statistic is 0 and their p-value 1 (``scipy.stats.ks_2samp``'s answer, which
    the detector and the grid's batched KS both keep): such a feature (a border pixel that
    is 0 in every image, a dead unit) carries no evidence either way.

    Parameters
    ----------
    X_ref, X : ndarray of shape (n_ref, d) and (n, d)
        The two samples.

    Returns
    -------
    ndarray of bool, shape (d,)
    """
    first = X_ref[:1]
    return (X_ref == first).all(axis=0) & (X == first).all(axis=0)


def _warn_constant(constant: np.ndarray) -> None:
    """One warning naming how many features are constant in both samples (p = 1)."""
    k = int(constant.sum())
    if k:
        warnings.warn(
            f"{k} of {constant.size} features are constant in both samples, with the same "
            "value: their KS p-value is 1 (no evidence either way; they still count in the "
            "Bonferroni/FDR correction)",
            UserWarning,
            stacklevel=4,  # the caller of the detector's test
        )


def ks_test(
    X_ref: np.ndarray,
    X: np.ndarray,
    alpha: float,
    correction: str | None = "bonferroni",
    *,
    name: str = "KSShiftDetector",
) -> KSTestResult:
    """Per-feature KS tests of ``X`` against ``X_ref`` and the batch decision.

    The inputs are taken as checked (2-D, finite, at least 2 rows each, the same number of
    columns): :meth:`dgpbench.detectors.KSShiftDetector.test` checks them first.

    Parameters
    ----------
    X_ref : ndarray of shape (n_ref, d)
        The reference sample.
    X : ndarray of shape (n, d)
        The batch under test.
    alpha : float
        Significance level in (0, 1).
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        The multiple-test correction over the ``d`` features.
    name : str, default="KSShiftDetector"
        The detector's name for the record's ``meta``.

    Returns
    -------
    KSTestResult
        Statistics, p-values, corrected p-values, the threshold used and the decision.

    Warns
    -----
    UserWarning
        When features are constant in both samples with one value (their p-value is 1).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> res = ks_test(rng.normal(size=(200, 4)), rng.normal(loc=1.0, size=(200, 4)), 0.05)
    >>> bool(res.is_drift), res.threshold
    (True, 0.0125)
    """
    # One vectorised call over all features, not a Python loop (alibi-detect's habit).
    res = ks_2samp(X_ref, X, axis=0)
    _warn_constant(constant_in_both(X_ref, X))
    distance = np.atleast_1d(np.asarray(res.statistic, dtype=np.float64))
    p_val = np.atleast_1d(np.asarray(res.pvalue, dtype=np.float64))
    is_drift, threshold, p_adj = _decide(p_val, alpha, correction)
    for arr in (distance, p_val, p_adj):
        arr.setflags(write=False)
    return KSTestResult(
        is_drift=bool(is_drift),
        distance=distance,
        p_val=p_val,
        p_val_adjusted=p_adj,
        threshold=float(threshold),
        correction=correction,
        alpha=float(alpha),
        n_ref=int(X_ref.shape[0]),
        n=int(X.shape[0]),
        name=name,
        version=package_version(),
    )
