"""Per-feature two-sample Anderson-Darling tests (Scholz and Stephens 1987), batched.

``anderson_pvalues`` gives ``scipy.stats.anderson_ksamp([ref, test], variant="midrank")``'s
statistic and p-value for every column at once (``anderson_ksamp`` takes one feature per
call). The midrank statistic ``A2akN`` (their eq. 7) sums over the distinct pooled values
``z_j``; per column it is computed on the sorted pooled sample, each tie group read at its
last position (cumulative counts of the reference values give ``M_ij``, the group's start
``B_j``), so no Python loop runs over features.

The p-value is SciPy's: the log of the significance levels 0.25 ... 0.001 interpolated
(quadratic in the standardised statistic) between the critical values of Scholz and
Stephens' Table 2 and capped at 0.25 above, floored at 0.001 below. ``extrapolate=True``
instead extends the quadratic beyond the table (as SciPy did before it capped), held at the
quadratic's minimum (p ~3e-7) where it would turn up: an approximation with no tabulated
support, for when the floor matters: at 0.001, a Bonferroni correction over more than
``alpha / 0.001`` features (50 at ``alpha = 0.05``) can never reject.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dgpbench.detectors.per_feature import PerFeatureShiftDetector
from dgpbench.parameters import AD_RULES, sklearn_constraints

__all__ = ["ADShiftDetector", "anderson_pvalues"]

#: Significance levels of Scholz and Stephens' Table 2 (as ``scipy.stats.anderson_ksamp``).
_SIG = np.array([0.25, 0.1, 0.05, 0.025, 0.01, 0.005, 0.001])
_B0 = np.array([0.675, 1.281, 1.645, 1.96, 2.326, 2.573, 3.085])
_B1 = np.array([-0.245, 0.25, 0.678, 1.149, 1.822, 2.364, 3.615])
_B2 = np.array([-0.105, -0.305, -0.362, -0.391, -0.396, -0.345, -0.154])


def _a2akn(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Midrank ``A2akN`` of every column, ``(n, d)`` and ``(m, d)`` -> ``(d,)``."""
    n, m = ref.shape[0], test.shape[0]
    N = n + m
    values = np.concatenate([ref.T, test.T], axis=1, dtype=np.float64)  # (d, N)
    order = np.argsort(values, axis=1)  # any order within a tie group: groups are read whole
    z = np.take_along_axis(values, order, axis=1)
    pos = np.arange(N)
    start = np.ones(z.shape, dtype=bool)
    start[:, 1:] = z[:, 1:] != z[:, :-1]
    end = np.ones(z.shape, dtype=bool)
    end[:, :-1] = start[:, 1:]
    left = np.maximum.accumulate(np.where(start, pos, 0), axis=1)  # first index of the group
    lj = (pos - left + 1).astype(np.float64)  # the group's size, read at its end
    c_ref = np.zeros((z.shape[0], N + 1), dtype=np.int64)
    np.cumsum(order < n, axis=1, out=c_ref[:, 1:])  # reference values up to each position
    ref_right = c_ref[:, 1:]  # #{ref <= z_j} at the group's end
    ref_in = ref_right - np.take_along_axis(c_ref, left, axis=1)  # f_1j
    test_right = pos + 1 - ref_right
    test_in = lj - ref_in
    bj = left + lj / 2.0
    denom = bj * (N - bj) - N * lj / 4.0
    denom = np.where(end & (denom != 0), denom, 1.0)  # 0 only for one all-tied group
    weight = np.where(end, lj / float(N), 0.0)
    inner_ref = weight * (N * (ref_right - ref_in / 2.0) - bj * n) ** 2 / denom
    inner_test = weight * (N * (test_right - test_in / 2.0) - bj * m) ** 2 / denom
    return (inner_ref.sum(axis=1) / n + inner_test.sum(axis=1) / m) * ((N - 1.0) / N)


def _standardise(a2akn: np.ndarray, n: int, m: int) -> np.ndarray:
    """``(A2akN - (k - 1)) / sigma_N`` with k = 2 (Scholz and Stephens eq. 4), as SciPy."""
    k, N = 2, n + m
    H = 1.0 / n + 1.0 / m
    hs_cs = (1.0 / np.arange(N - 1, 1, -1)).cumsum()
    h = hs_cs[-1] + 1
    g = (hs_cs / np.arange(2, N)).sum()
    a = (4 * g - 6) * (k - 1) + (10 - 6 * g) * H
    b = (2 * g - 4) * k**2 + 8 * h * k + (2 * g - 14 * h - 4) * H - 8 * h + 4 * g - 6
    c = (6 * h + 2 * g - 2) * k**2 + (4 * h - 4 * g + 6) * k + (2 * h - 6) * H + 4 * h
    d = (2 * h + 6) * k**2 - 4 * h * k
    sigmasq = (a * N**3 + b * N**2 + c * N + d) / ((N - 1.0) * (N - 2.0) * (N - 3.0))
    return (a2akn - (k - 1)) / math.sqrt(sigmasq)


def anderson_pvalues(
    X_ref: np.ndarray, X: np.ndarray, *, extrapolate: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-sample midrank Anderson-Darling statistics and p-values of every column.

    Parameters
    ----------
    X_ref : ndarray of shape (n_ref, d)
        Reference sample; ``n_ref + n >= 4``.
    X : ndarray of shape (n, d)
        Test sample.
    extrapolate : bool, default=False
        ``False``: SciPy's p-value, capped at 0.25 and floored at 0.001. ``True``: the
        interpolating quadratic extended beyond the table, clipped to [0, 1] and held at its
        minimum (statistic ~27.7, p ~3e-7) beyond it, so it never grows with the statistic.

    Returns
    -------
    statistic : ndarray of shape (d,)
        The standardised statistic of ``scipy.stats.anderson_ksamp`` (``variant="midrank"``).
    p_val : ndarray of shape (d,)
        Its p-value; 1 for a feature constant in both samples with one value (SciPy refuses
        those: "needs more than one distinct observation").
    capped : ndarray of int, shape (d,)
        ``1`` where the p-value is capped at 0.25, ``-1`` where floored at 0.001, else 0
        (always 0 with ``extrapolate=True`` and for constant features).

    Raises
    ------
    ValueError
        If the pooled sample has fewer than 4 values (the variance of the statistic divides
        by ``(N - 1)(N - 2)(N - 3)``).

    Examples
    --------
    >>> ref = np.arange(10.0)[:, None]
    >>> stat, p, capped = anderson_pvalues(ref, ref + 20.0)
    >>> float(p[0]), int(capped[0])
    (0.001, -1)
    """
    n, m = X_ref.shape[0], X.shape[0]
    if n + m < 4:
        raise ValueError(f"the Anderson-Darling test needs at least 4 pooled values, got {n} + {m}")
    a2 = _standardise(_a2akn(X_ref, X), n, m)
    critical = _B0 + _B1 + _B2  # b0 + b1 / sqrt(k - 1) + b2 / (k - 1) with k = 2
    pf = np.polyfit(critical, np.log(_SIG), 2)
    capped = np.zeros(a2.shape, dtype=np.int64)
    if extrapolate:
        # The quadratic turns up at its vertex (A2 ~ 27.7, p ~ 3e-7): hold it there, so the
        # p-value never grows with the statistic.
        p = np.clip(np.exp(np.polyval(pf, np.minimum(a2, -pf[1] / (2 * pf[0])))), 0.0, 1.0)
    else:
        p = np.exp(np.polyval(pf, a2))
        low, high = a2 < critical.min(), a2 > critical.max()
        p = np.where(low, _SIG.max(), np.where(high, _SIG.min(), p))
        capped[low], capped[high] = 1, -1
    constant = (X_ref == X_ref[:1]).all(axis=0) & (X == X_ref[:1]).all(axis=0)
    p[constant], capped[constant] = 1.0, 0
    return a2, p, capped


class ADShiftDetector(PerFeatureShiftDetector):
    """Per-feature two-sample Anderson-Darling tests with a multiple-test correction.

    ``fit`` stores a clean reference batch; ``test`` runs one k-sample Anderson-Darling test
    (k = 2, midrank version for ties) per feature, with the statistic and p-value of
    ``scipy.stats.anderson_ksamp([ref, test], variant="midrank")``, batched over features,
    and decides as the KS detector does.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        Multiple-test correction over the features
        (:func:`~dgpbench.detectors.ks_test.apply_correction`).
    extrapolate : bool, default=False
        ``False`` (SciPy's p-value): capped at 0.25 and floored at 0.001, the range of the
        tabulated critical values. ``True``: the interpolating quadratic extended beyond
        them (held at its minimum, p ~3e-7), an approximation, so that Bonferroni over more
        than ``alpha / 0.001`` features can still reject.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference features.
    n_features_in_ : int
        Number of features seen during ``fit``.

    See Also
    --------
    scipy.stats.anderson_ksamp : The per-feature test.
    CvMShiftDetector : The Cramér-von Mises test, exact for small samples.

    Notes
    -----
    The record shows the capping: ``meta["p_val_capped"]`` is ``1`` for a feature whose
    p-value is capped at 0.25 (true value larger), ``-1`` where floored at 0.001 (true value
    smaller), else 0. With the default, Bonferroni over ``d`` features never rejects once
    ``alpha / d < 0.001``: ``test`` then warns. A feature constant in both samples with one
    value gets p = 1 (SciPy refuses it) and ``test`` warns, as the KS detector does.

    References
    ----------
    F. W. Scholz, M. A. Stephens. K-Sample Anderson-Darling Tests. JASA 82(399), 1987.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = ADShiftDetector().fit(rng.normal(size=(100, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(100, 3)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(AD_RULES)
    _test_label = "Anderson-Darling"
    #: The test's name in the registry (``fit --test``).
    test_name = "ad"

    def __init__(
        self,
        alpha: float = 0.05,
        correction: str | None = "bonferroni",
        extrapolate: bool = False,
    ) -> None:
        self.alpha = alpha
        self.correction = correction
        self.extrapolate = extrapolate

    def _statistics(
        self, X_ref: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        import warnings

        statistic, p_val, capped = anderson_pvalues(X_ref, X, extrapolate=self.extrapolate)
        d = p_val.shape[0]
        if not self.extrapolate and self.correction == "bonferroni" and self.alpha / d < 0.001:
            warnings.warn(
                f"alpha / d = {self.alpha / d:.3g} is below the Anderson-Darling p-value "
                "floor 0.001: Bonferroni over these features can never reject; pass "
                "extrapolate=True or correction='fdr'",
                UserWarning,
                stacklevel=4,
            )
        return statistic, p_val, {"p_val_capped": capped, "extrapolate": bool(self.extrapolate)}
