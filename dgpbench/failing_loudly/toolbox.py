"""The Failing-loudly grid's one door to the detector and representation families.

The grid (:mod:`dgpbench.failing_loudly.grid`) names tests (``ks``, ``mmd``, ``chi2``, ``classif``) and
representations (``noredu``, ``pca``, ..., ``dgp``); this module turns the names into
objects: tests from :func:`dgpbench.detectors.make_detector`, representations from
:func:`dgpbench.features.registry.make_features`, and ``classif`` (the images themselves, for the
domain classifier, stored flattened) from the small transformer below.

Beyond Rabanser et al.'s four tests (:data:`TESTS`), every test of the detector registry
(:data:`dgpbench.detectors.DETECTORS`) is a grid test by its registered name
(:func:`grid_tests`): per-feature tests (KS, chi-squared on hard labels, the
:class:`~dgpbench.detectors.per_feature.PerFeatureShiftDetector` family: Cramér-von Mises,
Anderson-Darling, Fisher's exact test) are *univariate*, the others *multivariate*, as MMD
(:func:`dimension_of`). A newly registered detector joins the grid with a config change.
Each receives the grid-wide parameters its constructor names (:data:`GRID_PARAMS`).

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
    "GRID_PARAMS",
    "MODEL_FREE",
    "TESTS",
    "decide",
    "dimension_of",
    "grid_tests",
    "indicators",
    "ks_batch",
    "make_detector",
    "make_representation",
    "per_feature_batch",
    "rabanser_chi2",
]

TESTS: tuple[str, ...] = ("ks", "mmd", "chi2", "classif")
"""Rabanser et al.'s two-sample tests (the grid takes every registered test: :func:`grid_tests`)."""

GRID_PARAMS: frozenset[str] = frozenset({"correction", "n_permutations", "random_state"})
"""Parameters the grid sets for every test; each detector receives those its constructor names."""

_UNIVARIATE = frozenset({"ks", "chi2", "classif"})  # Rabanser et al.'s "univariate" side

MODEL_FREE: frozenset[str] = frozenset({"noredu", "pca", "srp", "uae", "tae", "classif"})
"""Representations that do not read the classifier (one per data set, model id ``none``)."""


def grid_tests() -> tuple[str, ...]:
    """Every test the grid can run: the names of the detector registry.

    Returns
    -------
    tuple of str
        :data:`dgpbench.detectors.DETECTORS`' keys, in their order.

    Examples
    --------
    >>> {"ks", "mmd", "cvm", "energy"} <= set(grid_tests())
    True
    """
    from dgpbench.detectors import DETECTORS

    return tuple(DETECTORS)


def dimension_of(test: str) -> str:
    """``univariate`` for a per-feature or label test, else ``multivariate``.

    Parameters
    ----------
    test : str
        A registered test (:func:`grid_tests`).

    Returns
    -------
    {"univariate", "multivariate"}
        ``univariate``: KS, chi-squared, the domain classifier and every
        :class:`~dgpbench.detectors.per_feature.PerFeatureShiftDetector`; ``multivariate``:
        the others (MMD, energy, ...), which run at ``ns_multivariate`` against ``m`` rows.

    Raises
    ------
    ValueError
        If ``test`` is not registered.

    Examples
    --------
    >>> dimension_of("cvm"), dimension_of("energy")
    ('univariate', 'multivariate')
    """
    from dgpbench.detectors.batch import is_per_feature

    if is_per_feature(test) or test in _UNIVARIATE:  # refuses an unknown test by name
        return "univariate"
    return "multivariate"


def _accepted(test: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` less the grid-wide ones the test's constructor does not name."""
    import inspect

    from dgpbench.detectors import DETECTORS

    names = inspect.signature(DETECTORS[test].__init__).parameters
    return {k: v for k, v in params.items() if k not in GRID_PARAMS or k in names}


def make_detector(test: str, **params: Any) -> Any:
    """An unfitted detector for ``test`` (``fit(X_ref)``, ``test(X)`` -> result).

    Parameters
    ----------
    test : str
        A registered test (:func:`grid_tests`).
    **params
        Its parameters (``alpha``, ``n_permutations``, ...); those of :data:`GRID_PARAMS`
        its constructor does not name are dropped.

    Raises
    ------
    ValueError
        If ``test`` is unknown.
    """
    from dgpbench.detectors import DETECTORS
    from dgpbench.detectors import make_detector as _make

    if test not in DETECTORS:
        raise ValueError(f"unknown test {test!r}; choose from {list(DETECTORS)}")
    return _make(test, **_accepted(test, params))


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
    test : str
        A registered test (:func:`grid_tests`).
    ref, x : ndarray
        Reference and test samples.
    random_state : int
        The draw's seed (permutations, the classifier's training, the chi-squared
        fallback), given to the tests that take one.
    alpha : float
        Significance level.
    kernel : {"median", "rabanser"}
        MMD's bandwidth: the detector's pooled median heuristic, or Rabanser et al.'s
        (:func:`dgpbench.detectors.mmd.cross_median_bandwidth`).
    zero_counts : {"observed", "uniform"}
        Chi-squared with a class absent from a sample: ``chi2_contingency`` on the observed
        classes (the detector), or a U(0, 1) p-value (:func:`rabanser_chi2`).
    n_classes : int, optional
        The classifier's number of classes: for ``zero_counts="uniform"``, and for another
        test one column of hard labels becomes its class indicators (:func:`indicators`).
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
    kw = dict(params, alpha=alpha, random_state=random_state)  # dropped where not taken
    if n_classes is not None and test != "chi2":  # chi-squared takes the labels themselves
        ref, x = indicators(ref, n_classes), indicators(x, n_classes)
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


def indicators(x: np.ndarray, n_classes: int) -> np.ndarray:
    """One column of hard labels as its ``n_classes`` 0/1 class indicators; else ``x`` as is.

    Fisher's exact test takes binary features: the predicted class of ``bbsdh`` one-hot
    encoded, one 2 x 2 table per class (alibi-detect's ``FETDrift`` on one-hot labels).

    Parameters
    ----------
    x : ndarray of shape (..., n, 1) or (..., n, d)
        Labels in ``[0, n_classes)`` (one column), or features (more columns: unchanged).
    n_classes : int
        Number of classes.

    Returns
    -------
    ndarray of float64, shape (..., n, n_classes), or ``x``

    Examples
    --------
    >>> indicators(np.array([[0], [2]]), 3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    x = np.asarray(x)
    if x.shape[-1] != 1:
        return x
    labels = x[..., 0]
    if not np.all(labels == np.round(labels)) or labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"hard labels must be integers in [0, {n_classes})")
    return (labels[..., None] == np.arange(n_classes)).astype(np.float64)


def per_feature_batch(
    test: str,
    ref: np.ndarray,
    x: np.ndarray,
    *,
    alpha: float = 0.05,
    correction: str | None = "bonferroni",
    n_classes: int | None = None,
    **params: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Decisions of a per-feature test on many draws at once.

    The per-feature p-values of every draw in one call
    (:func:`dgpbench.detectors.batch.per_feature_pvalues`: equal to the detector's draw by
    draw), then :func:`dgpbench.detectors.ks_test.apply_correction` corrects each draw's
    ``d`` p-values and decides, as the detector does.

    Parameters
    ----------
    test : str
        A univariate registered test whose detector reports per-feature ``p_val``
        (``cvm``, ``ad``, ``fisher``, ``ks``).
    ref, x : ndarray of shape (c, n_ref, d), (c, n, d)
        ``c`` draws of reference and test rows.
    alpha : float
        Significance level.
    correction : {"bonferroni", "fdr"} or None
        Multiple-test correction over the ``d`` features.
    n_classes : int, optional
        One column of hard labels becomes its class indicators (:func:`indicators`).
    **params
        Further detector parameters (``alternative``, ``extrapolate``).

    Returns
    -------
    rejected : ndarray of bool, shape (c,)
    p_value : ndarray of float, shape (c,)
        The smallest corrected p-value of each draw.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ref, x = rng.normal(size=(3, 30, 2)), rng.normal(2.0, 1.0, size=(3, 30, 2))
    >>> per_feature_batch("cvm", ref, x)[0].tolist()
    [True, True, True]
    """
    from dgpbench.detectors.batch import per_feature_pvalues
    from dgpbench.detectors.ks_test import apply_correction

    if n_classes is not None:
        ref, x = indicators(ref, n_classes), indicators(x, n_classes)
    own = {k: v for k, v in params.items() if k not in GRID_PARAMS}
    p_val = per_feature_pvalues(test, ref, x, **own)
    rejected, _, p_adj = apply_correction(p_val, alpha, correction)
    return rejected, p_adj.min(axis=-1)
