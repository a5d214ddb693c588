"""Batch-level covariate-shift detection with per-feature two-sample Kolmogorov-Smirnov tests.

The detector follows Rabanser et al. (2019), as used in the DGP paper (Sec. 5): one KS test per
feature dimension between a clean reference batch and a test batch, combined by a multiple-test
correction; the batch is flagged as shifted if at least one corrected test rejects.

The decision rule lives in :func:`_decide`, a pure vectorised function shared with
:mod:`dgpbench.paper.protocol`, so the bootstrap protocol and the estimator cannot drift apart.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
from scipy.stats import false_discovery_control, ks_2samp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import Interval, StrOptions, _fit_context
from dgpbench.detectors.base import drift_meta, package_version

logger = logging.getLogger(__name__)

__all__ = ["CORRECTIONS", "KSShiftDetector", "KSTestResult", "constant_in_both"]

#: Multiple-test corrections understood by :class:`KSShiftDetector` (``None`` = uncorrected).
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
    >>> det = KSShiftDetector().fit(rng.normal(size=(100, 3)))
    >>> res = det.test(rng.normal(loc=2.0, size=(100, 3)))
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


def _check_no_constant_features(X: np.ndarray, name: str) -> None:
    """Raise if a column of the reference ``X`` (shape (n, d)) has all values equal (the
    paper's bootstrap protocol keeps this check: there a constant feature is a bug)."""
    constant = np.flatnonzero((X == X[:1]).all(axis=0))
    if constant.size:
        raise ValueError(
            f"{name} has constant features at indices {constant.tolist()}: a constant "
            "reference gives the KS test no distribution to compare against; drop these "
            "features or use a more varied reference."
        )


def _warn_constant(constant: np.ndarray) -> None:
    """One warning naming how many features are constant in both samples (p = 1)."""
    k = int(constant.sum())
    if k:
        warnings.warn(
            f"{k} of {constant.size} features are constant in both samples, with the same "
            "value: their KS p-value is 1 (no evidence either way; they still count in the "
            "Bonferroni/FDR correction)",
            UserWarning,
            stacklevel=3,
        )


def _package_version() -> str:
    return package_version()


class KSShiftDetector(BaseEstimator):
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
    (:func:`dgpbench.failing_loudly.toolbox.ks_batch`): a feature constant in both samples
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

    _parameter_constraints: dict = {  # noqa: RUF012 (scikit-learn's convention)
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "correction": [StrOptions({"bonferroni", "fdr"}), None],
    }

    def __init__(self, alpha: float = 0.05, correction: str | None = "bonferroni") -> None:
        self.alpha = alpha
        self.correction = correction

    @_fit_context(prefer_skip_nested_validation=True)
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
        # One vectorised call over all features, not a Python loop (alibi-detect's habit).
        res = ks_2samp(self.X_ref_, X, axis=0)
        _warn_constant(constant_in_both(self.X_ref_, X))
        distance = np.atleast_1d(np.asarray(res.statistic, dtype=np.float64))
        p_val = np.atleast_1d(np.asarray(res.pvalue, dtype=np.float64))
        is_drift, threshold, p_adj = _decide(p_val, self.alpha, self.correction)
        for arr in (distance, p_val, p_adj):
            arr.setflags(write=False)
        return KSTestResult(
            is_drift=bool(is_drift),
            distance=distance,
            p_val=p_val,
            p_val_adjusted=p_adj,
            threshold=float(threshold),
            correction=self.correction,
            alpha=float(self.alpha),
            n_ref=int(self.X_ref_.shape[0]),
            n=int(X.shape[0]),
            name=type(self).__name__,
            version=_package_version(),
        )

    def predict(self, X: Any) -> bool:
        """Return the batch decision: ``True`` if ``X`` is flagged as shifted.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch.

        Returns
        -------
        bool
            One decision for the whole batch (not one per sample).
        """
        return self.test(X).is_drift

    def p_value(self, X: Any) -> float:
        """Return the smallest corrected p-value of ``X`` against the reference.

        For Bonferroni and no correction, ``predict(X)`` equals ``p_value(X) < alpha`` up to
        floating-point rounding at the boundary (``predict`` compares raw p-values with
        ``alpha / d``, as the paper does); for ``"fdr"`` the two agree exactly.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch.

        Returns
        -------
        float
            ``min`` of the corrected p-values, in [0, 1].
        """
        return self.test(X).min_p_val_adjusted
