"""Many draws of a registered test at once: the per-feature tests' columns side by side.

A per-feature test's p-value of a column depends on that column alone (KS, Cramér-von
Mises, Anderson-Darling, Fisher's exact test), so ``c`` draws of ``d`` features are ``c * d``
columns of one call: :func:`per_feature_pvalues` runs the registered detector once on the
draws' columns side by side and returns the ``(c, d)`` p-values it would give draw by draw;
:func:`~dgpbench.detectors.ks_test.apply_correction` then decides each draw. KS uses its
batched engine (:func:`~dgpbench.detectors.ks_test.ks_pvalues`) directly. A multivariate test
(MMD, energy, ...) runs draw by draw (:func:`draw_decision`). The Failing-loudly grid and
the DGP paper's protocol both call these.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np

__all__ = ["draw_decision", "is_per_feature", "per_feature_pvalues"]

_LABEL_TESTS = frozenset({"chi2", "classif"})  # one decision from labels or a classifier


def is_per_feature(test: str) -> bool:
    """Whether a registered test runs one univariate test per feature (and takes a correction).

    Parameters
    ----------
    test : str
        A name of :data:`dgpbench.detectors.DETECTORS`.

    Returns
    -------
    bool
        ``True`` for ``ks`` and every
        :class:`~dgpbench.detectors.per_feature.PerFeatureShiftDetector` (``cvm``, ``ad``,
        ``fisher``).

    Raises
    ------
    ValueError
        If ``test`` is not registered.

    Examples
    --------
    >>> is_per_feature("cvm"), is_per_feature("energy")
    (True, False)
    """
    from dgpbench.detectors.registry import DETECTORS

    if test not in DETECTORS:
        raise ValueError(f"unknown test {test!r}; choose from {', '.join(DETECTORS)}")
    if test in _LABEL_TESTS:
        return False
    if test == "ks":  # answered by name: KS's batched engine needs no detector class
        return True
    from dgpbench.detectors.per_feature import PerFeatureShiftDetector  # scikit-learn

    return issubclass(DETECTORS[test], PerFeatureShiftDetector)


def per_feature_pvalues(test: str, ref: np.ndarray, x: np.ndarray, **params: Any) -> np.ndarray:
    """Raw per-feature p-values of many draws of a per-feature test.

    Parameters
    ----------
    test : str
        A per-feature test (:func:`is_per_feature`).
    ref, x : ndarray of shape (c, n_ref, d), (c, n, d)
        ``c`` draws of reference and test rows.
    **params
        Detector parameters that change the p-values (``alternative``, ``extrapolate``).

    Returns
    -------
    ndarray of float64, shape (c, d)
        What the detector's ``test(...).p_val`` gives draw by draw (1 for a feature
        constant in both samples of a draw).

    Raises
    ------
    ValueError
        If ``test`` is not a per-feature test or the draws do not pair.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = per_feature_pvalues("cvm", rng.normal(size=(4, 20, 3)), rng.normal(size=(4, 20, 3)))
    >>> p.shape
    (4, 3)
    """
    from dgpbench.detectors.ks_test import ks_pvalues
    from dgpbench.detectors.registry import make_detector

    if not is_per_feature(test):
        raise ValueError(f"{test!r} is not a per-feature test")
    ref, x = np.asarray(ref), np.asarray(x)
    if ref.ndim != 3 or x.ndim != 3 or ref.shape[0] != x.shape[0] or ref.shape[2] != x.shape[2]:
        raise ValueError(f"draws of shapes {ref.shape} and {x.shape} do not pair")
    if test == "ks":
        return ks_pvalues(ref, x)
    c, d = ref.shape[0], ref.shape[2]

    def side(a: np.ndarray) -> np.ndarray:  # (c, rows, d) -> (rows, c * d)
        return np.moveaxis(a, 0, 1).reshape(a.shape[1], c * d)

    det = make_detector(test, **params)
    with warnings.catch_warnings():  # constant features: p = 1, which the detector warns of
        warnings.simplefilter("ignore", UserWarning)
        p_val = det.fit(side(ref)).test(side(x)).p_val
    return np.asarray(p_val, dtype=np.float64).reshape(c, d)


def draw_decision(
    test: str, ref: np.ndarray, x: np.ndarray, *, alpha: float, random_state: int, **params: Any
) -> tuple[bool, float]:
    """One draw of a registered test: the decision and its (smallest corrected) p-value.

    Parameters
    ----------
    test : str
        A name of :data:`dgpbench.detectors.DETECTORS`.
    ref, x : ndarray
        Reference and test samples.
    alpha : float
        Significance level.
    random_state : int
        The draw's seed, given to a test that takes one (permutations, training).
    **params
        Further detector parameters; ``correction``, ``n_permutations`` and ``random_state``
        are dropped where the detector does not take them.

    Returns
    -------
    rejected : bool
    p_value : float

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> draw_decision("energy", rng.normal(size=(30, 2)), rng.normal(2, 1, size=(30, 2)),
    ...               alpha=0.05, random_state=0, n_permutations=99)[0]
    True
    """
    from dgpbench.detectors.registry import DETECTORS, make_detector

    if test not in DETECTORS:
        raise ValueError(f"unknown test {test!r}; choose from {', '.join(DETECTORS)}")
    accepted = inspect.signature(DETECTORS[test].__init__).parameters
    kw = {k: v for k, v in {**params, "random_state": random_state}.items()
          if k not in ("correction", "n_permutations", "random_state") or k in accepted}  # fmt: skip
    result = make_detector(test, alpha=alpha, **kw).fit(ref).test(x)
    p = getattr(result, "p_val_adjusted", None)
    if p is None:
        p = result.p_val
    return bool(result.is_drift), float(np.min(p))
