"""The Failing-loudly grid's one door to the detector and representation families.

The grid (:mod:`dgpbench.failing_loudly.grid`) names tests (``ks``, ``mmd``, ``chi2``, ``classif``) and
representations (``noredu``, ``pca``, ..., ``dgp``); this module turns the names into
objects: tests from :func:`dgpbench.detectors.make_detector`, representations from
:func:`dgpbench.features.registry.make_features`, and ``classif`` (the images themselves, for the
domain classifier, stored flattened) from the small transformer below.

The KS test of the grid runs batched (:func:`ks_batch`): per-feature two-sample KS with
equal sample sizes and a Bonferroni (or FDR, or no) correction, identical to
``KSShiftDetector(alpha, correction).fit(ref).test(test)`` draw by draw but many draws per
call, and indifferent to constant features (a pixel that is 0 in every image gets p = 1, as
``scipy.stats.ks_2samp`` gives it, where the detector refuses constant references).

:func:`decide` is the one call the grid makes per draw; it applies the protocol's choices
where Rabanser et al.'s code differs from dgpbench's detectors (``protocol: rabanser``,
docs/failing-loudly.md "Protocols"):

- MMD's kernel ``exp(-|a - b|^2 / med)`` with ``med`` the median Euclidean distance between
  the reference and the test rows (their ``shift_tester.py``: ``distance.cdist(X_tr, X_te)``,
  ``alphas=[1 / median_dist]`` of ``torch_two_sample.MMDStatistic``, whose kernel is
  ``exp(-alpha d^2)``): :func:`rabanser_bandwidth` turns it into the detector's
  ``exp(-d^2 / (2 sigma^2))`` with ``sigma = sqrt(med / 2)``;
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
    "rabanser_bandwidth",
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


def rabanser_bandwidth(ref: np.ndarray, test: np.ndarray) -> float:
    """``sigma`` of the detector's ``exp(-d^2 / (2 sigma^2))`` that gives Rabanser et al.'s kernel.

    Their kernel is ``exp(-d^2 / med)`` with ``med`` the median Euclidean distance over the
    ``len(ref) * len(test)`` cross pairs (not over pooled pairs): ``sigma = sqrt(med / 2)``.
    The kernel is fixed by the observed split and kept for every permutation, as theirs.

    Examples
    --------
    >>> ref, test = np.zeros((2, 1)), np.array([[1.0], [3.0], [3.0]])
    >>> round(rabanser_bandwidth(ref, test) ** 2 * 2, 12)  # med = median(1, 3, 3, 1, 3, 3)
    3.0
    """
    from scipy.spatial.distance import cdist

    ref = np.asarray(ref, dtype=np.float64).reshape(len(ref), -1)
    test = np.asarray(test, dtype=np.float64).reshape(len(test), -1)
    med = float(np.median(cdist(ref, test, "euclidean")))
    if not (np.isfinite(med) and med > 0):
        raise ValueError(
            f"the median distance between reference and test rows is {med}: Rabanser et "
            "al.'s kernel exp(-d^2 / med) is undefined (identical or non-finite features)"
        )
    return float(np.sqrt(med / 2.0))


def rabanser_chi2(
    ref: np.ndarray, test: np.ndarray, n_classes: int, rng: np.random.Generator
) -> float:
    """Rabanser et al.'s chi-squared p-value of two samples of predicted classes.

    ``scipy.stats.chi2_contingency`` of the 2 x ``n_classes`` table of counts, except where
    a class has a zero count in either sample: then a p-value drawn from U(0, 1) (their
    ``shift_tester.py``, ``p_val = random.uniform(0, 1)``), here from ``rng``.

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
    from scipy.stats import chi2_contingency

    counts = []
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
        counts.append(np.bincount(x, minlength=n_classes))
    table = np.array(counts)
    if (table == 0).any():
        return float(rng.uniform(0.0, 1.0))
    return float(chi2_contingency(table)[1])


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
        MMD's bandwidth: the detector's pooled median heuristic, or :func:`rabanser_bandwidth`.
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
        kw["bandwidth"] = rabanser_bandwidth(ref, x)
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
    """Per-feature KS decisions of many draws at once (equal sample sizes).

    The p-values are ``scipy.stats.ks_2samp``'s (``method="auto"``), computed as
    :func:`dgpbench.paper.protocol._ks_2samp_pvalues` does (the exact p-value depends only on
    ``h = n * D``), but the table of p-values is filled only for the ``h`` that occur: at
    n = 10000 the whole table costs ~27 s, the few hundred ``h`` a cell meets well under one.

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
    n = ref.shape[1]
    if test.shape[1] != n or n > _SCIPY_MAX_AUTO_N:
        from scipy.stats import ks_2samp

        p_val = np.asarray(ks_2samp(ref, test, axis=1).pvalue, dtype=np.float64)
    else:
        h = _ks_h(ref, test)
        p_val = _ks_pvalues(n, h)
    return _decide(p_val, alpha, correction)


def _decide(p_val: np.ndarray, alpha: float, correction: str | None) -> tuple[np.ndarray, ...]:
    """Batch decisions and smallest corrected p-values, as ``KSShiftDetector`` decides:
    Bonferroni rejects if ``min p < alpha / d``, FDR if a Benjamini-Hochberg adjusted
    p-value is below ``alpha``, none if ``min p < alpha``."""
    d = p_val.shape[-1]
    if correction == "bonferroni":
        return p_val.min(axis=-1) < alpha / d, np.minimum(p_val.min(axis=-1) * d, 1.0)
    if correction == "fdr":
        from scipy.stats import false_discovery_control

        p_adj = false_discovery_control(p_val, axis=-1, method="bh")
        return (p_adj < alpha).any(axis=-1), p_adj.min(axis=-1)
    if correction is None:
        return p_val.min(axis=-1) < alpha, p_val.min(axis=-1)
    raise ValueError(f"correction must be 'bonferroni', 'fdr' or None, got {correction!r}")


_SCIPY_MAX_AUTO_N = 10_000  # ks_2samp(method="auto") is exact up to this n
_KS_TABLES: dict[int, dict[int, float]] = {}


def _ks_h(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``n * D`` (an integer) of every draw and feature, ``(c, n, d)`` -> ``(c, d)``."""
    n = ref.shape[1]
    values = np.concatenate(
        [np.swapaxes(ref, 1, 2), np.swapaxes(test, 1, 2)], axis=2, dtype=np.result_type(ref, test)
    )
    order = np.argsort(values, axis=2)
    sorted_values = np.take_along_axis(values, order, axis=2)
    # +1 per reference value, -1 per test value: n * (ECDF_ref - ECDF_test) in integers; with
    # ties only the last position of a tie group counts (right-continuous ECDFs).
    walk = np.cumsum(np.where(order < n, 1, -1).astype(np.int32), axis=2)
    end_of_tie = np.ones(values.shape, dtype=bool)
    end_of_tie[..., :-1] = sorted_values[..., 1:] != sorted_values[..., :-1]
    return np.where(end_of_tie, np.abs(walk), 0).max(axis=2)


def _ks_pvalues(n: int, h: np.ndarray) -> np.ndarray:
    """``ks_2samp`` p-values of two size-``n`` samples at statistics ``h / n``, cached per h."""
    import warnings

    from scipy.stats import ks_2samp

    table = _KS_TABLES.setdefault(n, {})
    missing = np.array(sorted(set(np.unique(h).tolist()) - set(table)), dtype=np.int64)
    if missing.size:
        # Sample 0..n-1 against h..h+n-1 has ECDF distance exactly h / n.
        base = np.arange(n, dtype=np.float64)[:, None]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "ks_2samp: Exact calculation unsuccessful")
            res = ks_2samp(
                np.broadcast_to(base, (n, missing.size)), base + missing[None, :], axis=0
            )
        if not np.array_equal(np.asarray(res.statistic), missing / n):
            raise RuntimeError(f"KS p-value table for n={n} has unexpected statistics")
        table.update(
            zip(missing.tolist(), np.asarray(res.pvalue, dtype=float).tolist(), strict=True)
        )
    lookup = np.vectorize(table.__getitem__, otypes=[np.float64])
    return lookup(h) if h.size else np.empty(h.shape)
