"""The Failing-loudly grid's one door to the detector and representation families.

The grid (:mod:`dgpbench.failing_loudly.grid`) names tests (``ks``, ``mmd``, ``chi2``, ``classif``) and
representations (``noredu``, ``pca``, ..., ``dgp``); this module turns the names into
objects: tests from :func:`dgpbench.detectors.make_detector`, representations from
:func:`dgpbench.features.registry.make_features`, and ``classif`` (the images themselves, for the
domain classifier, stored flattened) from the small transformer below.

The KS test of the grid runs batched (:func:`ks_batch`, on the KS engine
:mod:`dgpbench.detectors.ks_test`): per-feature two-sample KS and a Bonferroni (or FDR, or
no) correction, identical to ``KSShiftDetector(alpha, correction).fit(ref).test(test)``
draw by draw but many draws per call (a pixel that is 0 in every image gets p = 1, as
``scipy.stats.ks_2samp`` gives it).

:func:`decide` is the one call the grid makes per draw; it applies the protocol's choices
where Rabanser et al.'s code differs from dgpbench's detectors (``protocol: rabanser``,
docs/failing-loudly.md "Protocols"):

- MMD's kernel ``exp(-|a - b|^2 / med)`` with ``med`` the median Euclidean distance between
  the reference and the test rows (their ``shift_tester.py``: ``distance.cdist(X_tr, X_te)``,
  ``alphas=[1 / median_dist]`` of ``torch_two_sample.MMDStatistic``, whose kernel is
  ``exp(-alpha d^2)``): :func:`dgpbench.detectors.mmd.cross_median_bandwidth` turns it
  into the detector's ``exp(-d^2 / (2 sigma^2))`` with ``sigma = sqrt(med / 2)``;
- the chi-squared test's zero-count rule (:func:`rabanser_chi2`): where a class has no
  prediction in either sample, their ``test_chi2_shift`` returns ``random.uniform(0, 1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "MODEL_FREE",
    "TESTS",
    "decide",
    "ks_batch",
    "make_detector",
    "make_representation",
    "rabanser_chi2",
]

TESTS: tuple[str, ...] = ("ks", "mmd", "chi2", "classif")
"""The two-sample tests the grid knows."""

MODEL_FREE: frozenset[str] = frozenset({"noredu", "pca", "srp", "uae", "tae", "classif"})
"""Representations that do not read the classifier (one per data set, model id ``none``)."""


def make_detector(test: str, **params: Any) -> Any:
    """An unfitted detector for ``test`` (``fit(X_ref)``, ``test(X)`` -> result).

    Parameters
    ----------
    test : {"ks", "mmd", "chi2", "classif"}
        The test.
    **params
        Its parameters (``alpha``, ``correction``, ``n_permutations``, ``random_state``, ...).

    Raises
    ------
    ValueError
        If ``test`` is unknown.
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose from {list(TESTS)}")
    from dgpbench.detectors import make_detector as _make

    return _make(test, **params)


def rabanser_chi2(
    ref: np.ndarray, test: np.ndarray, n_classes: int, rng: np.random.Generator
) -> float:
    """Rabanser et al.'s chi-squared p-value of two samples of predicted classes.

    :func:`dgpbench.detectors.chi2.chi2_homogeneity` of the 2 x ``n_classes`` table of
    counts with ``zero_counts="uniform"``: where a class has a zero count in either sample,
    a p-value drawn from U(0, 1) (their ``shift_tester.py``, ``p_val = random.uniform(0,
    1)``), here from ``rng``.

    Parameters
    ----------
    ref, test : array-like of int, shape (n,) or (n, 1)
        Predicted classes (``bbsdh`` features).
    n_classes : int
        The classifier's number of classes (their ``nb_classes``).
    rng : numpy.random.Generator
        Source of the uniform fallback.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = rabanser_chi2([0, 1, 1], [0, 0, 1], 3, rng)  # class 2 never predicted: U(0, 1)
    >>> 0.0 <= p <= 1.0 and p != rabanser_chi2([0, 1, 1], [0, 0, 1], 3, rng)
    True
    """
    from dgpbench.detectors.chi2 import chi2_homogeneity, class_counts

    labels = []
    for name, x in (("reference", ref), ("test", test)):
        x = np.asarray(x).reshape(-1)
        if x.size == 0:
            raise ValueError(f"the {name} sample is empty")
        if not np.issubdtype(x.dtype, np.integer):
            if not np.all(np.isfinite(x)) or np.any(x != np.round(x)):
                raise ValueError(f"the {name} sample holds non-integer class labels")
            x = x.astype(np.int64)
        if x.min() < 0 or x.max() >= n_classes:
            raise ValueError(f"the {name} sample has labels outside [0, {n_classes})")
        labels.append(x)
    _, table = class_counts(*labels, n_classes=n_classes)
    return chi2_homogeneity(table, zero_counts="uniform", rng=rng)[1]


def decide(
    test: str,
    ref: np.ndarray,
    x: np.ndarray,
    *,
    random_state: int,
    alpha: float = 0.05,
    kernel: str = "median",
    zero_counts: str = "observed",
    n_classes: int | None = None,
    **params: Any,
) -> tuple[bool, float]:
    """One test's decision and p-value on one draw, under the protocol's choices.

    Parameters
    ----------
    test : {"ks", "mmd", "chi2", "classif"}
        The test.
    ref, x : ndarray
        Reference and test samples.
    random_state : int
        The draw's seed (MMD's permutations, the classifier's training, the chi-squared
        fallback).
    alpha : float
        Significance level.
    kernel : {"median", "rabanser"}
        MMD's bandwidth: the detector's pooled median heuristic, or Rabanser et al.'s
        (:func:`dgpbench.detectors.mmd.cross_median_bandwidth`).
    zero_counts : {"observed", "uniform"}
        Chi-squared with a class absent from a sample: ``chi2_contingency`` on the observed
        classes (the detector), or a U(0, 1) p-value (:func:`rabanser_chi2`).
    n_classes : int, optional
        The classifier's number of classes (``zero_counts="uniform"``).
    **params
        Further detector parameters (``correction``, ``n_permutations``, ``alternative``).

    Returns
    -------
    rejected : bool
    p_value : float
    """
    if test == "chi2" and zero_counts == "uniform":
        if n_classes is None:
            raise ValueError("zero_counts='uniform' needs n_classes")
        p = rabanser_chi2(ref, x, int(n_classes), np.random.default_rng(random_state))
        return p < alpha, p
    if zero_counts not in ("observed", "uniform"):
        raise ValueError(f"zero_counts must be 'observed' or 'uniform', got {zero_counts!r}")
    kw = dict(params, alpha=alpha)
    if test in ("mmd", "classif"):
        kw["random_state"] = random_state
    if test == "mmd" and kernel == "rabanser":
        from dgpbench.detectors.mmd import cross_median_bandwidth

        kw["bandwidth"] = cross_median_bandwidth(ref, x)
    elif kernel != "median":
        raise ValueError(f"kernel must be 'median' or 'rabanser', got {kernel!r}")
    result = make_detector(test, **kw).fit(ref).test(x)
    p = float(np.min(getattr(result, "p_value", getattr(result, "p_val", np.nan))))
    return bool(result.is_drift), p


class _Flatten:
    """The images, flattened: the domain classifier's input (it trains on them itself)."""

    def fit(self, X: Any, y: Any = None) -> _Flatten:
        return self

    def transform(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float32)
        return X.reshape(len(X), -1)


def make_representation(name: str, model: Any, **params: Any) -> Any:
    """An unfitted representation (``fit(X, y)``, ``transform(X)``) by name.

    Parameters
    ----------
    name : str
        ``noredu``, ``pca``, ``srp``, ``uae``, ``tae``, ``bbsds``, ``bbsdh``, ``dgp_approx``,
        ``dgp``, ``tu``, ``magdiff``, ``softmax`` (and the other :data:`dgpbench.features.registry.METHODS`),
        or ``classif`` (the images, for the domain classifier).
    model : torch.nn.Module, path-like or None
        The classifier; ignored by the :data:`MODEL_FREE` representations (``None`` will do).
    **params
        Constructor parameters (``batch_size``, ``n_jobs``, ``device``, ``random_state``);
        each representation receives those its constructor names
        (:func:`dgpbench.features.registry.make_features`).

    Raises
    ------
    ValueError
        If ``name`` is unknown (the message lists the known ones).
    """
    if name == "classif":
        return _Flatten()
    from dgpbench.features.registry import make_features

    return make_features(name, model, **params)


def ks_batch(
    ref: np.ndarray, test: np.ndarray, *, alpha: float = 0.05, correction: str | None = "bonferroni"
) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature KS decisions of many draws at once.

    The p-values are ``scipy.stats.ks_2samp``'s (``method="auto"``), from the batched
    :func:`dgpbench.detectors.ks_test.ks_pvalues`, and the decision is
    :func:`dgpbench.detectors.ks_test.apply_correction`'s: the detector's, draw by draw.

    Parameters
    ----------
    ref, test : ndarray of shape (c, n, d)
        ``c`` draws of ``n`` reference and ``n`` test rows.
    alpha : float
        Significance level.
    correction : {"bonferroni", "fdr"} or None
        Multiple-test correction over the ``d`` features.

    Returns
    -------
    rejected : ndarray of bool, shape (c,)
    p_value : ndarray of float, shape (c,)
        The smallest corrected p-value of each draw (Bonferroni: ``min(1, d * min p)``).
    """
    from dgpbench.detectors.ks_test import apply_correction, ks_pvalues

    rejected, _, p_adj = apply_correction(ks_pvalues(ref, test), alpha, correction)
    return rejected, p_adj.min(axis=-1)
