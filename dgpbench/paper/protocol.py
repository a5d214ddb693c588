"""The DGP paper's shift-detection protocol on precomputed per-sample features.

Per model, ``F_clean`` holds the features of N clean test images and ``F_corr`` those of their
corrupted twins for one corruption x intensity (row i of both = the same image). One draw for
sample size ``n`` and corrupted ratio ``delta``:

1. pick ``n`` test indices without replacement and start from their clean features;
2. at ``round(delta * n)`` random positions among the ``n``, use the corrupted twin instead;
3. draw ``n`` clean indices without replacement, independently of step 1, as the reference;
4. run the per-feature KS tests with a multiple-test correction and record the decision.

``delta = 0`` is the calibration run: the false detection rate of the test.

Other tests. ``test=`` swaps KS for another registered test
(:data:`dgpbench.detectors.DETECTORS`) on the same draws: a per-feature one (``cvm``,
``ad``) with the same correction, its draws batched as KS's (the detector's per-feature
p-values of many draws' columns side by side, :func:`dgpbench.detectors.batch.per_feature_pvalues`),
or a multivariate one (``energy``, ...) draw by draw, its permutations seeded from
``SeedSequence([seed, "PRTT", n, delta_key, i])`` (paired across methods as the indices are).
``test="ks"`` is the paper's protocol, unchanged.

Random streams (pairing). The indices of draw ``i`` come from
``default_rng(SeedSequence([seed, _STREAM_TAG, n, delta_key, i]))`` with
``delta_key = round(delta * 1e6)``: they depend on the seed, ``n``, ``delta`` and the draw number
only, never on the features, the feature method, the corruption or its intensity. Every method
(and every corruption/intensity) evaluated with the same seed therefore sees exactly the same
images in every draw, so method comparisons are paired; and draw ``i`` does not depend on
``n_draws`` (a 200-draw run extends a 100-draw run). Pass different seeds to decorrelate.

Rounding. ``round(delta * n)`` is Python's (half to even): for
n = 10, delta = 0.25 that is 2 corrupted rows (not 3), and 12 (not 13) for n = 50. The authors'
exact rule is not published; Rabanser et al.'s code uses ``ceil``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real

import numpy as np
import pandas as pd

from dgpbench._validation import as_float_array, check_int
from dgpbench.detectors.batch import draw_decision, is_per_feature, per_feature_pvalues
from dgpbench.detectors.ks_test import (
    CORRECTIONS,
    apply_correction,
    check_no_constant_features,
    ks_pvalues,
)
from dgpbench.resampling import BOOTSTRAP_SEED, unit_bootstrap_interval

logger = logging.getLogger(__name__)

__all__ = [
    "DELTAS",
    "NS",
    "DrawIndices",
    "bootstrap_detection",
    "calibration",
    "detection_ratio",
    "draw_indices",
    "n_corrupted",
    "wilson_interval",
]

#: The paper's sample sizes and the default corrupted ratios: the authors' evaluation
#: script's set {0.25, 0.5, 1.0}, the one the published Table 1 fits and the workflow's
#: ``report.pool_deltas`` default (the paper's text says {0.25, 0.5, 0.75}; pass
#: ``deltas=`` for it).
NS: tuple[int, ...] = (10, 20, 50, 100, 200)
DELTAS: tuple[float, ...] = (0.25, 0.5, 1.0)

# Separates the protocol's random streams from any other SeedSequence([seed, ...]) in the
# project (e.g. corruption noise drawn with the same data seed). ASCII "PROT".
_STREAM_TAG = 0x50524F54
_TEST_TAG = 0x50525454  # ASCII "PRTT": the seeds of stochastic tests (permutations)
# Upper bound on pooled (reference + test) elements per batched KS evaluation: ~50 MB peak.
_MAX_CHUNK_ELEMENTS = 1_000_000

RECORD_COLUMNS: tuple[str, ...] = ("n", "delta", "draw", "rejected", "min_p")


@dataclass(frozen=True, eq=False)
class DrawIndices:
    """Row indices of ``n_draws`` bootstrap draws for one ``(n, delta)``.

    Parameters
    ----------
    test : ndarray of int64, shape (n_draws, n)
        Rows of the test batch (distinct within a draw).
    corrupted : ndarray of bool, shape (n_draws, n)
        ``True`` where the test row uses the corrupted twin; ``round(delta * n)`` per draw.
    reference : ndarray of int64, shape (n_draws, n)
        Rows of the clean reference batch (distinct within a draw).
    """

    test: np.ndarray
    corrupted: np.ndarray
    reference: np.ndarray


def n_corrupted(n: int, delta: float) -> int:
    """Number of corrupted rows in a test batch of size ``n``: Python's ``round(delta * n)``.

    Parameters
    ----------
    n : int
        Batch size.
    delta : float
        Corrupted ratio in [0, 1].

    Returns
    -------
    int
        ``round(delta * n)`` (half to even), the rule of the authors' evaluation script.

    Examples
    --------
    >>> [n_corrupted(10, d) for d in (0.25, 0.5, 0.75)]
    [2, 5, 8]
    """
    return round(delta * n)


def _delta_key(delta: float) -> int:
    return round(float(delta) * 1_000_000)


def _rng(seed: int, n: int, delta: float, draw: int) -> np.random.Generator:
    return np.random.default_rng(
        np.random.SeedSequence([seed, _STREAM_TAG, n, _delta_key(delta), draw])
    )


def draw_indices(
    n_rows: int, n: int, delta: float, *, n_draws: int = 100, seed: int = 112
) -> DrawIndices:
    """Draw the row indices of the protocol's bootstrap draws for one ``(n, delta)``.

    Parameters
    ----------
    n_rows : int
        Number of available images (rows of ``F_clean``).
    n : int
        Batch size (test and reference), ``2 <= n <= n_rows``.
    delta : float
        Corrupted ratio in [0, 1].
    n_draws : int, default=100
        Number of draws.
    seed : int, default=112
        Data seed (the authors' value); see the module docstring for how streams are keyed.

    Returns
    -------
    DrawIndices
        Test rows, corrupted mask and reference rows, one row per draw (read-only arrays,
        cached: repeated calls with the same arguments return the same object).

    Raises
    ------
    ValueError
        If ``n`` exceeds ``n_rows`` or any argument is out of range.

    Examples
    --------
    >>> idx = draw_indices(1000, 10, 0.5, n_draws=3)
    >>> idx.test.shape, idx.corrupted.sum(axis=1).tolist()
    ((3, 10), [5, 5, 5])
    """
    n_rows = check_int(n_rows, "n_rows", minimum=2)
    return _draw_indices(
        n_rows,
        _check_n(n, n_rows),
        _check_delta(delta),
        check_int(n_draws, "n_draws", minimum=1),
        check_int(seed, "seed", minimum=0),
    )


@functools.lru_cache(maxsize=256)
def _draw_indices(n_rows: int, n: int, delta: float, n_draws: int, seed: int) -> DrawIndices:
    # Cached: every method, corruption and intensity of a model reuses the same draws, so a
    # process that evaluates many of them draws each index set once. Arrays are read-only.
    k = n_corrupted(n, delta)
    test = np.empty((n_draws, n), dtype=np.int64)
    reference = np.empty((n_draws, n), dtype=np.int64)
    corrupted = np.zeros((n_draws, n), dtype=bool)
    for i in range(n_draws):  # one stream per draw: draw i is independent of n_draws
        rng = _rng(seed, n, delta, i)
        test[i] = rng.choice(n_rows, size=n, replace=False)
        corrupted[i, rng.choice(n, size=k, replace=False)] = True
        reference[i] = rng.choice(n_rows, size=n, replace=False)
    for arr in (test, corrupted, reference):
        arr.setflags(write=False)
    return DrawIndices(test=test, corrupted=corrupted, reference=reference)


def bootstrap_detection(
    F_clean: np.ndarray,
    F_corr: np.ndarray | None,
    *,
    ns: Iterable[int] = NS,
    deltas: Iterable[float] = DELTAS,
    n_draws: int = 100,
    seed: int = 112,
    alpha: float = 0.05,
    correction: str | None = "bonferroni",
    test: str = "ks",
    n_permutations: int | None = None,
) -> pd.DataFrame:
    """Run the paper's bootstrap shift-detection protocol on precomputed features.

    Parameters
    ----------
    F_clean : array-like of shape (N, d)
        Features of the N clean test images.
    F_corr : array-like of shape (N, d) or None
        Features of their corrupted twins (same row order). May be ``None`` only if every
        ``delta`` is 0.
    ns : iterable of int, default=(10, 20, 50, 100, 200)
        Batch sizes; each must satisfy ``2 <= n <= N``.
    deltas : iterable of float, default=(0.25, 0.5, 1.0)
        Corrupted ratios in [0, 1]; 0 gives the calibration (false detection) run. The
        default is :data:`DELTAS`, the tables' pooled default (``report.pool_deltas``).
    n_draws : int, default=100
        Draws per ``(n, delta)``.
    seed : int, default=112
        Data seed; the draws depend on ``(seed, n, delta, draw)`` only (paired across methods).
    alpha : float, default=0.05
        Significance level, in (0, 1).
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        Multiple-test correction, as in :class:`dgpbench.detectors.ks.KSShiftDetector`
        (per-feature tests only).
    test : str, default="ks"
        The two-sample test, a name of :data:`dgpbench.detectors.DETECTORS`: ``ks`` (the
        paper's), ``cvm``, ``ad`` (per feature, with ``correction``), ``energy`` or another
        multivariate test (draw by draw).
    n_permutations : int, optional
        Permutations of a test that takes them (``energy``, ``mmd``); None: its default.

    Returns
    -------
    pandas.DataFrame
        One row per draw, ordered by ``ns``, then ``deltas``, then draw, with columns
        ``n`` (int64), ``delta`` (float64), ``draw`` (int64), ``rejected`` (bool) and
        ``min_p`` (float64, the smallest raw per-feature p-value of the draw; a
        multivariate test's p-value).

    Raises
    ------
    ValueError
        On NaN/inf, shape mismatch between ``F_clean`` and ``F_corr``, a missing ``F_corr``
        with ``delta > 0``, ``n`` larger than N, features constant over all of ``F_clean``,
        or parameters out of range.

    See Also
    --------
    calibration : The ``delta = 0`` run.
    detection_ratio : Aggregates the records.
    draw_indices : The index draws used here.

    Notes
    -----
    Each draw's decision equals ``KSShiftDetector(alpha, correction).fit(ref).predict(test)``
    on the same rows. The KS p-values of many draws are computed in one batched pass that
    reproduces ``scipy.stats.ks_2samp`` bit for bit
    (:func:`dgpbench.detectors.ks_test.ks_pvalues`; at d = 10 the paper's grid of 1500 draws
    takes ~0.1 s instead of ~0.9 s through ``ks_2samp``). A feature constant within one
    small reference draw is data, not an error, and is tested as is.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> F = rng.normal(size=(500, 3))
    >>> rec = bootstrap_detection(F, F + 3.0, ns=[20], deltas=[0.5], n_draws=10)
    >>> rec.columns.tolist(), bool(rec.rejected.all())
    (['n', 'delta', 'draw', 'rejected', 'min_p'], True)
    """
    F_clean = as_float_array(F_clean, "F_clean", ndim=2)
    ns = [_check_n(n, F_clean.shape[0]) for n in _as_list(ns, "ns")]
    deltas = [_check_delta(d) for d in _as_list(deltas, "deltas")]
    n_draws = check_int(n_draws, "n_draws", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    alpha = _check_alpha(alpha)
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    per_feature = test == "ks" or is_per_feature(test)  # refuses an unknown test by name
    if n_permutations is not None:
        n_permutations = check_int(n_permutations, "n_permutations", minimum=1)
    if F_corr is not None:
        F_corr = as_float_array(F_corr, "F_corr", ndim=2)
        if F_corr.shape != F_clean.shape:
            raise ValueError(
                f"F_corr must have the shape of F_clean {F_clean.shape} (rows paired by "
                f"index), got {F_corr.shape}"
            )
    elif any(d > 0 for d in deltas):
        raise ValueError(f"F_corr is None but deltas {deltas} include values > 0")
    check_no_constant_features(F_clean, "F_clean")

    frames = []
    for n in ns:
        for delta in deltas:
            idx = draw_indices(F_clean.shape[0], n, delta, n_draws=n_draws, seed=seed)
            if test == "ks":
                rejected, min_p = _run_draws(F_clean, F_corr, idx, alpha, correction)
            elif per_feature:
                rejected, min_p = _run_draws(F_clean, F_corr, idx, alpha, correction, test)
            else:
                states = _test_seeds(seed, n, delta, n_draws)
                rejected, min_p = _run_multivariate(
                    F_clean, F_corr, idx, test, alpha, states, n_permutations
                )
            frames.append(_draw_records(rejected, min_p, n=n, delta=delta))
            logger.debug(
                "n=%d delta=%g: %d/%d draws rejected", n, delta, int(rejected.sum()), n_draws
            )
    return pd.concat(frames, ignore_index=True)


def calibration(
    F_clean: np.ndarray,
    *,
    ns: Iterable[int] = NS,
    n_draws: int = 100,
    seed: int = 112,
    alpha: float = 0.05,
    correction: str | None = "bonferroni",
    test: str = "ks",
    n_permutations: int | None = None,
) -> pd.DataFrame:
    """False detection rate run: the protocol with ``delta = 0`` (clean vs clean batches).

    Identical to the ``delta = 0`` rows of :func:`bootstrap_detection` with the same seed.

    Parameters
    ----------
    F_clean : array-like of shape (N, d)
        Features of the N clean test images.
    ns : iterable of int, default=(10, 20, 50, 100, 200)
        Batch sizes.
    n_draws : int, default=100
        Draws per ``n``.
    seed : int, default=112
        Data seed.
    alpha : float, default=0.05
        Significance level.
    correction : {"bonferroni", "fdr"} or None, default="bonferroni"
        Multiple-test correction.
    test : str, default="ks"
        The two-sample test (see :func:`bootstrap_detection`).
    n_permutations : int, optional
        Permutations of a test that takes them.

    Returns
    -------
    pandas.DataFrame
        Records with the columns of :func:`bootstrap_detection` and ``delta == 0``.

    Examples
    --------
    >>> F = np.random.default_rng(0).normal(size=(500, 3))
    >>> cal = calibration(F, ns=[50], n_draws=20)
    >>> bool(cal.rejected.mean() <= 0.2)
    True
    """
    return bootstrap_detection(
        F_clean,
        None,
        ns=ns,
        deltas=(0.0,),
        n_draws=n_draws,
        seed=seed,
        alpha=alpha,
        correction=correction,
        test=test,
        n_permutations=n_permutations,
    )


def _draw_records(
    rejected: np.ndarray, min_p: np.ndarray, *, n: int, delta: float, **leading: int
) -> pd.DataFrame:
    """One record per draw of one ``(n, delta)`` cell; ``leading`` integer columns first."""
    n_draws = len(rejected)
    columns = {k: np.full(n_draws, v, dtype=np.int64) for k, v in leading.items()}
    columns.update(
        n=np.full(n_draws, n, dtype=np.int64),
        delta=np.full(n_draws, delta, dtype=np.float64),
        draw=np.arange(n_draws, dtype=np.int64),
        rejected=rejected,
        min_p=min_p,
    )
    return pd.DataFrame(columns)


def _run_draws(
    F_clean: np.ndarray,
    F_corr: np.ndarray | None,
    idx: DrawIndices,
    alpha: float,
    correction: str | None,
    test: str = "ks",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature decisions and raw min p-values of all draws, many draws per evaluation."""
    n_draws, n = idx.test.shape
    d = F_clean.shape[1]
    chunk = max(1, _MAX_CHUNK_ELEMENTS // (2 * n * d))
    rejected = np.empty(n_draws, dtype=bool)
    min_p = np.empty(n_draws, dtype=np.float64)
    for start in range(0, n_draws, chunk):
        s = slice(start, start + chunk)
        batch = F_clean[idx.test[s]]  # (c, n, d); fancy indexing copies, F_clean is untouched
        mask = idx.corrupted[s]
        if mask.any():
            batch[mask] = F_corr[idx.test[s][mask]]
        ref = F_clean[idx.reference[s]]
        if test == "ks":
            p_val = ks_pvalues(ref, batch)  # (c, d)
        else:
            p_val = per_feature_pvalues(test, ref, batch)
        rejected[s], _, _ = apply_correction(p_val, alpha, correction)
        min_p[s] = p_val.min(axis=-1)
    return rejected, min_p


def _test_seeds(seed: int, n: int, delta: float, n_draws: int) -> list[int]:
    """The permutation seed of every draw: paired across methods, apart from the indices."""
    return [
        int(np.random.SeedSequence([seed, _TEST_TAG, n, _delta_key(delta), i])
            .generate_state(1, dtype=np.uint32)[0])
        for i in range(n_draws)
    ]  # fmt: skip


def _run_multivariate(
    F_clean: np.ndarray,
    F_corr: np.ndarray | None,
    idx: DrawIndices,
    test: str,
    alpha: float,
    states: Sequence[int],
    n_permutations: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """A multivariate test's decisions and p-values, draw by draw."""
    n_draws = idx.test.shape[0]
    rejected = np.empty(n_draws, dtype=bool)
    p_value = np.empty(n_draws, dtype=np.float64)
    params = {} if n_permutations is None else {"n_permutations": n_permutations}
    for i in range(n_draws):
        batch = F_clean[idx.test[i]]
        mask = idx.corrupted[i]
        if mask.any():
            batch[mask] = F_corr[idx.test[i][mask]]
        rejected[i], p_value[i] = draw_decision(
            test, F_clean[idx.reference[i]], batch, alpha=alpha, random_state=states[i], **params
        )
    return rejected, p_value


_Z_975 = np.float64(1.959963984540054)
"""``scipy.stats.norm.ppf(0.975)`` (95% intervals) bit for bit, known without importing SciPy."""


def _normal_quantile(q: float) -> np.float64:
    """``scipy.stats.norm.ppf(q)`` (``scipy.special.ndtri``, its own routine); SciPy's import
    (most of a second of every table and comparison job) only for an unusual level.
    """
    if q == 0.975:
        return _Z_975
    from scipy.special import ndtri

    return ndtri(q)


def wilson_interval(
    k: int | np.ndarray, n: int | np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score confidence interval for a binomial proportion ``k / n``.

    Parameters
    ----------
    k : int or array-like of int
        Numbers of successes, ``0 <= k <= n``.
    n : int or array-like of int
        Numbers of trials, ``n >= 1``.
    confidence : float, default=0.95
        Confidence level in (0, 1).

    Returns
    -------
    low, high : ndarray of float
        Interval bounds (broadcast shape of ``k`` and ``n``), within [0, 1].

    Examples
    --------
    >>> low, high = wilson_interval(5, 100)
    >>> round(float(low), 4), round(float(high), 4)
    (0.0215, 0.1118)
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    z = _normal_quantile(0.5 + confidence / 2)
    z2 = z * z
    center = (k + z2 / 2) / (n + z2)
    half = z / (n + z2) * np.sqrt(k * (n - k) / n + z2 / 4)
    return np.clip(center - half, 0.0, 1.0), np.clip(center + half, 0.0, 1.0)


def _binomial_interval(
    k: np.ndarray, n: np.ndarray, confidence: float, interval: str
) -> tuple[np.ndarray, np.ndarray]:
    """The draws' interval: Wilson's, or Clopper-Pearson's (``"exact"``, SciPy's beta)."""
    if interval == "wilson":
        return wilson_interval(k, n, confidence)
    if interval != "exact":
        raise ValueError(f"interval must be 'wilson' or 'exact', got {interval!r}")
    from scipy.stats import beta

    tail = (1 - confidence) / 2
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # the k = 0 and k = n ends are set below
        low = np.where(k > 0, beta.ppf(tail, k, n - k + 1), 0.0)
        high = np.where(k < n, beta.ppf(1 - tail, k + 1, n - k), 1.0)
    return low, high


def detection_ratio(
    records: pd.DataFrame,
    by: Sequence[str] = ("n", "delta"),
    confidence: float = 0.95,
    unit: str | None = None,
    interval: str = "wilson",
) -> pd.DataFrame:
    """Aggregate bootstrap records into detection ratios with confidence intervals.

    Parameters
    ----------
    records : pandas.DataFrame
        Output of :func:`bootstrap_detection` (possibly concatenated over models, methods,
        corruptions, ... with extra key columns).
    by : sequence of str, default=("n", "delta")
        Grouping columns. An empty sequence pools all records.
    confidence : float, default=0.95
        Confidence level of the interval.
    unit : str, optional
        The column naming each record's independent unit (a model; a Failing-loudly run).
        The interval is then the hull of the draws' interval and a percentile bootstrap of
        the pooled ratio over a group's units
        (:func:`dgpbench.resampling.unit_bootstrap_interval`, a fixed seed), and ``units``
        counts them. None: the draws' interval alone.
    interval : {"wilson", "exact"}, default="wilson"
        The draws' binomial interval: Wilson's score interval, or Clopper-Pearson's.

    Returns
    -------
    pandas.DataFrame
        One row per group: the ``by`` columns, ``detection_ratio`` (mean of ``rejected``),
        ``n_rejected``, ``count``, ``ci_low`` and ``ci_high`` (and ``units``).

    Notes
    -----
    The draws' interval assumes independent draws. Draws of one model share that model, and
    draws pooled over corruptions or intensities of one model reuse the same indices (paired
    by design), so without ``unit`` the interval of a pooled cell is too narrow: it leaves
    out the spread between models. With one unit in a group the bootstrap is undefined and
    the interval is the draws' alone (``units`` says so).

    Examples
    --------
    >>> rec = pd.DataFrame({"n": [10, 10, 20, 20], "rejected": [True, False, True, True]})
    >>> detection_ratio(rec, by=["n"])[["n", "detection_ratio", "count"]]
        n  detection_ratio  count
    0  10              0.5      2
    1  20              1.0      2
    """
    if not isinstance(records, pd.DataFrame):
        raise TypeError(f"records must be a pandas DataFrame, got {type(records).__name__}")
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [*by, "rejected"] if c not in records.columns]
    if missing:
        raise ValueError(f"records lacks columns {missing}; has {records.columns.tolist()}")
    if records.empty:
        raise ValueError("records is empty")
    rejected = records["rejected"]
    if rejected.isna().any() or not rejected.isin([True, False]).all():
        raise ValueError("records['rejected'] must be boolean without missing values")
    if unit is not None and unit not in records.columns:
        raise ValueError(f"records lacks the unit column {unit!r}")
    frame = records[by].copy()
    frame["_rejected"] = rejected.astype(bool).to_numpy()
    if by:
        agg = frame.groupby(by, sort=True, observed=True, dropna=False)["_rejected"].agg(
            n_rejected="sum", count="size"
        )
        agg = agg.reset_index()
    else:
        agg = pd.DataFrame({"n_rejected": [int(frame["_rejected"].sum())], "count": [len(frame)]})
    agg["n_rejected"] = agg["n_rejected"].astype(np.int64)
    agg["count"] = agg["count"].astype(np.int64)
    agg.insert(len(by), "detection_ratio", agg["n_rejected"] / agg["count"])
    low, high = _binomial_interval(
        agg["n_rejected"].to_numpy(), agg["count"].to_numpy(), confidence, interval
    )
    if unit is not None:
        frame["_unit"] = records[unit].to_numpy()
        units, boot_low, boot_high = _unit_bootstrap(frame, by, confidence)
        assert len(units) == len(agg), "the units' groups follow the groups of `by`"
        agg["units"] = units
        low, high = np.fmin(low, boot_low), np.fmax(high, boot_high)  # NaN: one unit
    agg["ci_low"] = low
    agg["ci_high"] = high
    return agg


def _unit_bootstrap(
    frame: pd.DataFrame, by: list[str], confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group of ``by`` (in sorted order): its units and the percentile bootstrap of the
    pooled ratio over them (NaN where a group has one unit).
    """
    keys = [*by, "_unit"]
    per_unit = frame.groupby(keys, sort=True, observed=True, dropna=False)["_rejected"].agg(
        k="sum", count="size"
    )
    levels = list(range(len(by)))
    groups = per_unit.groupby(level=levels, sort=True, dropna=False) if by else [(None, per_unit)]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    units, lows, highs = [], [], []
    for _, group in groups:
        units.append(len(group))
        low, high = unit_bootstrap_interval(group["k"], group["count"], confidence, rng)
        lows.append(low)
        highs.append(high)
    return np.array(units, dtype=np.int64), np.array(lows), np.array(highs)


def _as_list(values: Iterable, name: str) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be an iterable of numbers, got {values!r}")
    out = list(values)
    if not out:
        raise ValueError(f"{name} must not be empty")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} has duplicates: {out}")
    return out


def _check_n(n: object, n_rows: int) -> int:
    n = check_int(n, "n", minimum=2)
    if n > n_rows:
        raise ValueError(
            f"n={n} is larger than the number of available rows ({n_rows}); draws are "
            "without replacement"
        )
    return n


def _check_delta(delta: object) -> float:
    if isinstance(delta, bool) or not isinstance(delta, Real):
        raise TypeError(f"delta must be a number, got {delta!r}")
    if not 0.0 <= float(delta) <= 1.0:
        raise ValueError(f"delta must be in [0, 1], got {delta!r}")
    return float(delta)


def _check_alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, Real):
        raise TypeError(f"alpha must be a number, got {alpha!r}")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)
