"""The two-sample Kolmogorov-Smirnov test on arrays: the one KS engine of dgpbench.

Every KS decision in the package runs here, without scikit-learn:

* :func:`ks_test` is the whole test of :class:`dgpbench.detectors.KSShiftDetector` once its
  inputs are checked: per-feature ``scipy.stats.ks_2samp`` along axis 0, the correction
  and the record (:class:`KSTestResult`); scoring a saved detector
  (:mod:`dgpbench.saved.scoring`) calls it too;
* :func:`ks_pvalues` gives the same p-values for many (reference, test) batches at once, bit
  for bit, for the DGP paper's bootstrap protocol (:mod:`dgpbench.paper.protocol`) and the
  Failing-loudly grid (:mod:`dgpbench.failing_loudly.toolbox`);
* :func:`apply_correction` is the decision rule (Bonferroni, Benjamini-Hochberg or none)
  all of them apply;
* :func:`constant_in_both` and :func:`check_no_constant_features` are the two rules for
  constant features: data for a test (p = 1 when constant in both samples), an error in the
  pool the paper's protocol draws its references from.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from dgpbench.detectors.base import drift_meta, package_version

__all__ = [
    "CORRECTIONS",
    "SCIPY_MAX_AUTO_N",
    "KSTestResult",
    "apply_correction",
    "check_no_constant_features",
    "constant_in_both",
    "ks_pvalues",
    "ks_pvalues_at",
    "ks_test",
]

#: Multiple-test corrections of the KS test (``None`` = uncorrected).
CORRECTIONS: tuple[str | None, ...] = ("bonferroni", "fdr", None)
#: ``scipy.stats.ks_2samp(method="auto")`` is exact up to this sample size (its MAX_AUTO_N).
SCIPY_MAX_AUTO_N = 10_000
# n -> (p-value at h = 0..n, which of them are computed): filled by ks_pvalues_at.
_KS_TABLES: dict[int, tuple[np.ndarray, np.ndarray]] = {}


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


def apply_correction(
    p_val: np.ndarray, alpha: float, correction: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apply a multiple-test correction along the last axis and decide.

    Parameters
    ----------
    p_val : ndarray of shape (..., d)
        Per-feature p-values; leading axes are independent batches (e.g. bootstrap draws).
    alpha : float
        Significance level.
    correction : {"bonferroni", "fdr"} or None
        The correction: Bonferroni rejects if ``min p < alpha / d`` (the DGP paper's rule),
        ``"fdr"`` if a Benjamini-Hochberg adjusted p-value is below ``alpha``, ``None`` if
        ``min p < alpha``.

    Returns
    -------
    is_drift : ndarray of bool, shape (...)
        Batch decisions.
    threshold : ndarray of float, shape (...)
        Cut-off on the raw p-values (see :class:`KSTestResult`).
    p_val_adjusted : ndarray of shape (..., d)
        Corrected p-values.

    Raises
    ------
    ValueError
        If ``correction`` is not one of :data:`CORRECTIONS`.

    Examples
    --------
    >>> is_drift, threshold, p_adj = apply_correction(np.array([0.01, 0.5]), 0.05, "bonferroni")
    >>> bool(is_drift), float(threshold), p_adj.tolist()
    (True, 0.025, [0.02, 1.0])
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
        from scipy.stats import false_discovery_control  # here: scipy.stats costs a second

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
    else:  # the callers check parameters first; never fall through silently
        raise ValueError(f"correction must be 'bonferroni', 'fdr' or None, got {correction!r}")
    return np.asarray(is_drift, dtype=bool), np.asarray(threshold, dtype=np.float64), p_adj


def ks_pvalues(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``scipy.stats.ks_2samp(ref, test, axis=1).pvalue``, bit for bit, for many batches at once.

    ``ks_2samp`` loops over columns in Python (~0.25 ms each). With ``method="auto"`` and
    equal sample sizes ``n <= 10000`` (:data:`SCIPY_MAX_AUTO_N`) SciPy computes the exact
    p-value, which depends only on the integer ``h = n * D`` (it rounds ``D * lcm(n1, n2)``
    first). So: ``h`` of every column by integer arithmetic, then the p-value that
    ``ks_2samp`` itself gives at ``h`` (:func:`ks_pvalues_at`). Unequal sizes and larger
    ``n`` go to ``ks_2samp`` directly.

    Parameters
    ----------
    ref : ndarray of shape (c, n, d)
        ``c`` reference batches of ``n`` samples with ``d`` features each.
    test : ndarray of shape (c, m, d)
        ``c`` test batches.

    Returns
    -------
    ndarray of shape (c, d)
        Two-sided KS p-values, per batch and feature.

    Examples
    --------
    >>> from scipy.stats import ks_2samp
    >>> ref = np.arange(10.0).reshape(1, 10, 1)
    >>> p = ks_pvalues(ref, ref + 7.0)
    >>> p.shape, bool(p[0, 0] == ks_2samp(ref[0, :, 0], ref[0, :, 0] + 7.0).pvalue)
    ((1, 1), True)
    """
    n = ref.shape[1]
    if test.shape[1] != n or n > SCIPY_MAX_AUTO_N:  # outside the exact, equal-n regime
        from scipy.stats import ks_2samp

        return np.asarray(ks_2samp(ref, test, axis=1).pvalue, dtype=np.float64)
    return ks_pvalues_at(n, _ks_h(ref, test))


def _ks_h(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``n * D`` (an integer in 0..n) of every batch and feature, ``(c, n, d)`` -> ``(c, d)``."""
    n = ref.shape[1]
    # Pool each column's 2n values contiguously, (c, d, 2n): sorting along the last axis is
    # several times faster than along a strided middle axis.
    values = np.concatenate(
        [np.swapaxes(ref, 1, 2), np.swapaxes(test, 1, 2)], axis=2, dtype=np.result_type(ref, test)
    )
    # Any sort works: within a tie group only the group's last position is read below, and
    # the walk there counts the whole group whatever its internal order.
    order = np.argsort(values, axis=2)
    sorted_values = np.take_along_axis(values, order, axis=2)
    # +1 per reference value, -1 per test value: n * (ECDF_ref - ECDF_test) in integers; with
    # ties only the last position of a tie group counts (right-continuous ECDFs, scipy's
    # searchsorted(side="right")).
    walk = np.cumsum(np.where(order < n, 1, -1).astype(np.int32), axis=2)
    end_of_tie = np.ones(values.shape, dtype=bool)
    end_of_tie[..., :-1] = sorted_values[..., 1:] != sorted_values[..., :-1]
    return np.where(end_of_tie, np.abs(walk), 0).max(axis=2)


def ks_pvalues_at(n: int, h: np.ndarray) -> np.ndarray:
    """``ks_2samp`` p-values of two size-``n`` samples whose KS statistic is ``h / n``.

    Each value is computed once per process by ``ks_2samp`` itself and kept: sample
    ``0..n-1`` against ``h..h+n-1`` has ECDF distance exactly ``h / n``. Only the ``h`` met
    are computed (at n = 10000 all ``n + 1`` values cost ~27 s, the few hundred a grid cell
    meets well under one).

    Parameters
    ----------
    n : int
        Size of each sample, ``2 <= n <= SCIPY_MAX_AUTO_N`` for the exact p-values.
    h : array-like of int
        Statistics times ``n``, in ``0..n``.

    Returns
    -------
    ndarray of float, shape of ``h``

    Examples
    --------
    >>> ks_pvalues_at(10, [0, 10]).tolist()
    [1.0, 1.0825088224469026e-05]
    """
    h = np.asarray(h, dtype=np.int64)
    values, known = _KS_TABLES.setdefault(n, (np.zeros(n + 1), np.zeros(n + 1, dtype=bool)))
    missing = np.unique(h[~known[h]])
    if missing.size:
        from scipy.stats import ks_2samp

        base = np.arange(n, dtype=np.float64)[:, None]
        with warnings.catch_warnings():
            # SciPy falls back to its asymptotic formula for some h (e.g. h = 1 at n = 200)
            # and warns; that value is what ks_2samp returns for such data, so keep it quietly.
            warnings.filterwarnings("ignore", "ks_2samp: Exact calculation unsuccessful")
            res = ks_2samp(
                np.broadcast_to(base, (n, missing.size)), base + missing[None, :], axis=0
            )
        # Guard the construction: the statistics must be exactly h / n.
        if not np.array_equal(np.asarray(res.statistic), missing / n):
            raise RuntimeError(f"KS p-value table for n={n} has unexpected statistics")
        values[missing] = np.asarray(res.pvalue, dtype=np.float64)
        known[missing] = True
    return values[h]


def constant_in_both(X_ref: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Features (columns) that take one and the same value in every row of both samples.

    Their KS statistic is 0 and their p-value 1 (``scipy.stats.ks_2samp``'s answer, which
    the detector and the batched :func:`ks_pvalues` both keep): such a feature (a border
    pixel that is 0 in every image, a dead unit) carries no evidence either way.

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


def check_no_constant_features(X: np.ndarray, name: str) -> None:
    """Raise if a column of ``X`` (shape (n, d)) has all values equal.

    The DGP paper's bootstrap protocol draws its references from ``X``: there a feature
    constant over all rows is a bug of the representation, not data.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The pool of features.
    name : str
        Its name in the message.

    Raises
    ------
    ValueError
        Naming the constant columns.
    """
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
    from scipy.stats import ks_2samp

    res = ks_2samp(X_ref, X, axis=0)
    _warn_constant(constant_in_both(X_ref, X))
    distance = np.atleast_1d(np.asarray(res.statistic, dtype=np.float64))
    p_val = np.atleast_1d(np.asarray(res.pvalue, dtype=np.float64))
    is_drift, threshold, p_adj = apply_correction(p_val, alpha, correction)
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
