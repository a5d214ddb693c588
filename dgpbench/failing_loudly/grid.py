"""Rabanser et al.'s ("Failing loudly") grid on precomputed features: independent runs of paired draws.

Per data set, the images no model trained on (the validation images the models held out and
the test split) form the *unseen set*. The unit of independence is Rabanser et al.'s *run*
(their pipeline's ``random_runs``): run ``r`` reshuffles the unseen set into a fresh
*reference pool* (their ``X_val``) and *test pool* (their ``X_te``)
(:func:`run_split`), and the shift (:mod:`dgpbench.shifts`) is re-applied to that run's test
pool at each fraction, from streams keyed by ``(seed, run)``; the calibration cell (shift
``none``, fraction 0) keeps the test pool clean. Runs share no random stream, so what they
measure is independent given the trained models. One draw of a cell of run ``r`` for
sample size ``n``:

1. ``n`` rows of the run's (shifted) test pool, without replacement: the test sample;
2. ``R = max(n, m)`` rows of the run's reference pool, without replacement, in random order:
   the first ``n`` are the reference sample of the univariate tests (KS, chi-squared, the
   domain classifier), the first ``m`` that of MMD (``m = multivariate_ref``; Rabanser et
   al.'s code compares against ``m = n`` reference rows, ``X_tr_red[:self.sample]``);
3. the test decides at level alpha.

Draws within a run are paired, not independent: they share the run's pools. At a sample size
that takes every row of both pools, all draws of a run would be the same samples in another
order (the same decision): such a cell gets one draw per run. Tables count runs, not draws
(:mod:`dgpbench.failing_loudly.reporting`).

Pairing. The rows of draw ``i`` of run ``r`` come from
``default_rng(SeedSequence([seed, 0x464C4744, shift_id, round(fraction * 1e6), n, r, i]))``
(``shift_id``: 0 for ``none``, else 1 + the position in :data:`dgpbench.shifts.SHIFTS`) and
depend on nothing else: every representation, test and model sees the same images in draw
``(r, i)`` of a cell, so their detection rates are paired; draws do not depend on the number
of draws or runs (6 draws extend 3). Stochastic tests (MMD's permutations, the domain
classifier's training) get ``random_state`` from the same key, so they too are paired.

Sample sizes larger than a pool are capped: ``n_eff = min(n, cap, pool sizes)`` with ``cap``
the shift's ``top_n`` (Rabanser et al. use 9000 instead of 10000 for the knock-outs) and the
pool sizes the smallest over runs (a knock-out's pool size varies with the run's class
counts); a nominal ``n`` whose ``n_eff`` equals the previous one's is skipped (no cell
counted twice).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dgpbench.failing_loudly.toolbox import (
    decide,
    dimension_of,
    grid_tests,
    ks_batch,
    per_feature_batch,
)
from dgpbench.progress import Progress
from dgpbench.shifts import SHIFTS

log = logging.getLogger(__name__)

__all__ = [
    "CALIBRATION",
    "MULTIVARIATE_TESTS",
    "NS_MULTIVARIATE",
    "NS_UNIVARIATE",
    "GridIndices",
    "Method",
    "RunPools",
    "Unit",
    "effective_ns",
    "grid_indices",
    "method_records",
    "parse_method",
    "run_cell",
    "run_split",
    "zero_count_draws",
]

NS_UNIVARIATE: tuple[int, ...] = (10, 20, 50, 100, 200, 500, 1000, 10000)
"""Rabanser et al.'s sample sizes of the univariate tests."""
NS_MULTIVARIATE: tuple[int, ...] = (10, 20, 50, 100, 200, 500, 1000)
"""Theirs for the multivariate test (MMD)."""
MULTIVARIATE_TESTS: frozenset[str] = frozenset({"mmd"})
"""Rabanser et al.'s multivariate test; any registered test's side: :attr:`Method.dimension`."""
CALIBRATION = "none"
"""The shift name of the calibration cells (fraction 0)."""
Unit = tuple[str, float, int]
"""A unit of :func:`method_records`, ``(shift, fraction, run)``: the draws of one cell of one
run."""

_STREAM_TAG = 0x464C4744  # ASCII "FLGD"
_SPLIT_TAG = 0x464C5350  # ASCII "FLSP": the runs' pool splits
_MAX_CHUNK_ELEMENTS = 4_000_000  # pooled values per batched KS call (~100 MB peak)


@dataclass(frozen=True)
class Method:
    """A (representation, test) pair of the grid, written ``representation+test``."""

    representation: str
    test: str

    @property
    def name(self) -> str:
        """``representation+test`` (``classif`` alone for the domain classifier)."""
        return "classif" if self.test == "classif" else f"{self.representation}+{self.test}"

    @property
    def dimension(self) -> str:
        """``multivariate`` for MMD, energy, ..., else ``univariate`` (Rabanser et al.'s split,
        :func:`~dgpbench.failing_loudly.toolbox.dimension_of`).
        """
        if self.test in MULTIVARIATE_TESTS:
            return "multivariate"
        return dimension_of(self.test)


def parse_method(spec: str) -> Method:
    """``"pca+mmd"`` -> ``Method("pca", "mmd")``; ``"classif"`` is the domain classifier.

    The test is any registered one (:func:`~dgpbench.failing_loudly.toolbox.grid_tests`):
    ``pca+cvm``, ``bbsds+ad``, ``uae+energy``, ``bbsdh+fisher``, ...

    Examples
    --------
    >>> parse_method("bbsdh+chi2").name, parse_method("classif").representation
    ('bbsdh+chi2', 'classif')
    >>> parse_method("uae+energy").dimension
    'multivariate'
    """
    if spec == "classif":
        return Method("classif", "classif")
    rep, sep, test = spec.partition("+")
    tests = [t for t in grid_tests() if t != "classif"]
    if not sep or not rep or test not in tests:
        raise ValueError(
            f"method {spec!r} must be 'representation+test' with test in {tests}, or 'classif'"
        )
    return Method(rep, test)


def shift_id(shift: str) -> int:
    """0 for the calibration cell, else 1 + the shift's position in ``SHIFTS``."""
    if shift == CALIBRATION:
        return 0
    if shift not in SHIFTS:
        raise ValueError(f"unknown shift {shift!r}; choose from {[CALIBRATION, *SHIFTS]}")
    return 1 + SHIFTS.index(shift)


def _key(seed: int, shift: str, fraction: float, n: int, run: int, draw: int) -> list[int]:
    return [
        int(seed), _STREAM_TAG, shift_id(shift), round(float(fraction) * 1e6), int(n), run, draw,
    ]  # fmt: skip


def run_split(
    n_unseen: int, n_ref_pool: int, n_test_pool: int, *, seed: int, run: int
) -> tuple[np.ndarray, np.ndarray]:
    """The reference and test pools of one run: disjoint rows of the unseen set.

    Parameters
    ----------
    n_unseen : int
        Size of the unseen set (held-out validation images and the test split).
    n_ref_pool, n_test_pool : int
        Pool sizes; their sum must not exceed ``n_unseen``.
    seed : int
        The pools' seed.
    run : int
        The run (``>= 0``); each has its own stream ``SeedSequence([seed, "FLSP", run])``.

    Returns
    -------
    ref, test : ndarray of int64
        Rows of the unseen set, in random order.

    Examples
    --------
    >>> ref, test = run_split(30, 10, 20, seed=0, run=0)
    >>> sorted(set(ref) | set(test)) == list(range(30))
    True
    >>> bool((run_split(30, 10, 20, seed=0, run=1)[0] != ref).any())
    True
    """
    if run < 0:
        raise ValueError(f"run must be >= 0, got {run}")
    if n_ref_pool < 1 or n_test_pool < 1 or n_ref_pool + n_test_pool > n_unseen:
        raise ValueError(
            f"pools of {n_ref_pool} + {n_test_pool} rows do not fit in {n_unseen} unseen images"
        )
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _SPLIT_TAG, int(run)]))
    order = rng.permutation(n_unseen).astype(np.int64)
    return order[:n_ref_pool], order[n_ref_pool : n_ref_pool + n_test_pool]


@dataclass(frozen=True, eq=False)
class GridIndices:
    """Rows of ``n_draws`` draws of one cell.

    Attributes
    ----------
    reference : ndarray of int64, shape (n_draws, R)
        Reference-pool rows in random order (prefixes are the samples).
    test : ndarray of int64, shape (n_draws, n)
        Test-pool rows.
    random_state : ndarray of int64, shape (n_draws,)
        Seeds for stochastic tests.
    """

    reference: np.ndarray
    test: np.ndarray
    random_state: np.ndarray


def grid_indices(
    n_ref_pool: int,
    n_test_pool: int,
    n: int,
    ref_size: int,
    *,
    seed: int,
    shift: str,
    fraction: float,
    n_draws: int,
    run: int = 0,
) -> GridIndices:
    """Draw the rows of one cell of one run (see the module docstring for the streams).

    Examples
    --------
    >>> a = grid_indices(100, 80, 10, 20, seed=0, shift="ko_shift", fraction=0.5, n_draws=3)
    >>> b = grid_indices(100, 80, 10, 20, seed=0, shift="ko_shift", fraction=0.5, n_draws=5)
    >>> bool((a.test == b.test[:3]).all()), a.reference.shape
    (True, (3, 20))
    """
    if not 1 <= n <= n_test_pool:
        raise ValueError(f"n={n} must be in [1, {n_test_pool}] (the test pool's size)")
    if not n <= ref_size <= n_ref_pool:
        raise ValueError(f"reference size {ref_size} must be in [{n}, {n_ref_pool}]")
    if run < 0:
        raise ValueError(f"run must be >= 0, got {run}")
    return _grid_indices(n_ref_pool, n_test_pool, n, ref_size, seed, shift, fraction, n_draws, run)


@functools.lru_cache(maxsize=128)
def _grid_indices(
    n_ref_pool: int,
    n_test_pool: int,
    n: int,
    ref_size: int,
    seed: int,
    shift: str,
    fraction: float,
    n_draws: int,
    run: int,
) -> GridIndices:
    reference = np.empty((n_draws, ref_size), dtype=np.int64)
    test = np.empty((n_draws, n), dtype=np.int64)
    states = np.empty(n_draws, dtype=np.int64)
    for i in range(n_draws):
        seq = np.random.SeedSequence(_key(seed, shift, fraction, n, run, i))
        rng = np.random.default_rng(seq)
        test[i] = rng.choice(n_test_pool, size=n, replace=False)
        reference[i] = rng.choice(n_ref_pool, size=ref_size, replace=False)
        states[i] = int(seq.generate_state(1, dtype=np.uint32)[0])
    for arr in (reference, test, states):
        arr.setflags(write=False)
    return GridIndices(reference=reference, test=test, random_state=states)


def effective_ns(
    ns: Iterable[int], n_test_pool: int, n_ref_pool: int, cap: int | None = None
) -> list[tuple[int, int]]:
    """``(nominal n, n_eff)`` pairs: sizes capped by the pools and ``cap``, no repeats.

    Examples
    --------
    >>> effective_ns([10, 1000, 10000], 9020, 12000, cap=9000)
    [(10, 10), (1000, 1000), (10000, 9000)]
    >>> effective_ns([10, 500, 1000], 980, 12000)
    [(10, 10), (500, 500), (1000, 980)]
    >>> effective_ns([10, 500, 1000], 400, 12000)
    [(10, 10), (500, 400)]
    """
    out: list[tuple[int, int]] = []
    limit = min(n_test_pool, n_ref_pool, cap if cap is not None else n_test_pool)
    for n in sorted(ns):
        n_eff = min(int(n), limit)
        if n_eff < 2 or (out and n_eff <= out[-1][1]):
            continue
        out.append((int(n), n_eff))
    return out


def run_cell(
    f_ref: np.ndarray,
    f_test: np.ndarray,
    method: Method,
    indices: GridIndices,
    *,
    n_ref: int,
    params: Mapping[str, Any],
    image_shape: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Decisions and p-values of every draw of one cell.

    Parameters
    ----------
    f_ref, f_test : ndarray of shape (N_ref, d), (N_test, d)
        Features of the reference pool and of the (shifted) test pool.
    method : Method
        The representation and test.
    indices : GridIndices
        The draws.
    n_ref : int
        Reference sample size (``n`` for univariate tests, ``m`` for MMD).
    params : mapping
        The test's parameters (``alpha``, ``correction``, ``n_permutations``, ...), and the
        protocol's choices the toolbox applies (:func:`dgpbench.failing_loudly.toolbox.decide`):
        ``kernel="rabanser"`` (MMD), ``zero_counts="uniform"`` with ``n_classes`` (chi-squared).
    image_shape : tuple of int, optional
        ``(C, H, W)``: the domain classifier's rows are flattened images.

    Returns
    -------
    rejected : ndarray of bool, shape (n_draws,)
    p_value : ndarray of float, shape (n_draws,)
    """
    n_draws, n = indices.test.shape
    ref_rows = indices.reference[:, :n_ref]
    if n_ref == n and _batched(method.test):
        rejected = np.empty(n_draws, dtype=bool)
        p_value = np.empty(n_draws)
        d = f_ref.shape[1] * (int(params.get("n_classes") or 1) if f_ref.shape[1] == 1 else 1)
        chunk = max(1, _MAX_CHUNK_ELEMENTS // (2 * n * d))
        for s in range(0, n_draws, chunk):
            sl = slice(s, s + chunk)
            ref, test = f_ref[ref_rows[sl]], f_test[indices.test[sl]]
            if method.test == "ks":
                rejected[sl], p_value[sl] = ks_batch(
                    ref, test, alpha=params.get("alpha", 0.05),
                    correction=params.get("correction", "bonferroni"),
                )  # fmt: skip
            else:
                rejected[sl], p_value[sl] = per_feature_batch(method.test, ref, test, **params)
        return rejected, p_value
    rejected = np.empty(n_draws, dtype=bool)
    p_value = np.empty(n_draws)
    for i in range(n_draws):
        ref, test = f_ref[ref_rows[i]], f_test[indices.test[i]]
        if image_shape is not None:
            ref = ref.reshape(len(ref), *image_shape)
            test = test.reshape(len(test), *image_shape)
        rejected[i], p_value[i] = decide(
            method.test, ref, test, random_state=int(indices.random_state[i]), **params
        )
    return rejected, p_value


def _batched(test: str) -> bool:
    """Whether a cell's draws of ``test`` run in one call: KS and the per-feature tests."""
    if test == "ks":
        return True
    if test in ("chi2", "classif") or dimension_of(test) != "univariate":
        return False
    return True


def zero_count_draws(
    f_ref: np.ndarray, f_test: np.ndarray, indices: GridIndices, n_ref: int, n_classes: int
) -> np.ndarray:
    """Per draw, whether a class has no prediction in the reference or the test sample (where
    Rabanser et al.'s chi-squared test returns a U(0, 1) p-value).

    Examples
    --------
    >>> idx = GridIndices(np.array([[0, 1]]), np.array([[0, 1]]), np.array([0]))
    >>> zero_count_draws(np.array([[0], [1]]), np.array([[0], [0]]), idx, 2, 2).tolist()
    [True]
    """
    out = np.empty(len(indices.test), dtype=bool)
    for i, (ref_rows, test_rows) in enumerate(zip(indices.reference, indices.test, strict=True)):
        ref = np.bincount(np.asarray(f_ref[ref_rows[:n_ref]]).astype(np.int64).ravel(),
                          minlength=n_classes)  # fmt: skip
        test = np.bincount(np.asarray(f_test[test_rows]).astype(np.int64).ravel(),
                           minlength=n_classes)  # fmt: skip
        out[i] = bool((ref == 0).any() or (test == 0).any())
    return out


@dataclass(frozen=True, eq=False)
class RunPools:
    """Features of one run's pools.

    Attributes
    ----------
    reference : ndarray of shape (N_ref, d)
        The run's reference pool.
    pools : mapping (shift, fraction) -> ndarray of shape (M, d)
        The run's test pools: ``("none", 0.0)`` the clean one (calibration), the others
        shifted (built lazily by the caller if it likes).
    """

    reference: np.ndarray
    pools: Mapping[tuple[str, float], np.ndarray]


def method_records(
    runs: Sequence[RunPools],
    method: Method,
    *,
    ns: Iterable[int],
    n_draws: int,
    seed: int,
    params: Mapping[str, Any],
    multivariate_ref: int | None = None,
    top_n: Mapping[str, int] | None = None,
    image_shape: tuple[int, ...] | None = None,
    pool_sizes: Mapping[tuple[str, float], int] | None = None,
    progress: bool = False,
    finished: Mapping[Unit, pd.DataFrame] | None = None,
    on_unit: Callable[[Unit, pd.DataFrame], None] | None = None,
    resumed_from: str = "earlier records",
) -> pd.DataFrame:
    """Every draw of one method over the cells and runs of ``runs``.

    Parameters
    ----------
    runs : sequence of RunPools
        One entry per independent run (run ``r`` is ``runs[r]``); every run has the same
        cells.
    method : Method
        The representation and test.
    ns : iterable of int
        Nominal sample sizes.
    n_draws : int
        Draws per cell and run (one where a draw takes every row of both pools).
    seed : int
        The grid's seed (pairs the draws).
    params : mapping
        The test's parameters (see :func:`run_cell`).
    multivariate_ref : int or None, default=None
        Reference size ``m`` of MMD (capped by the reference pool); ``None``: ``m = n``
        (Rabanser et al.'s code).
    top_n : mapping shift -> int, optional
        Per-shift cap on ``n`` (e.g. ``{"ko_shift": 9000}``).
    image_shape : tuple of int, optional
        For the domain classifier.
    pool_sizes : mapping (shift, fraction) -> int, optional
        The smallest test pool of each cell over the runs; computed from ``runs`` if not
        given (which builds every pool once more).
    progress : bool, default=False
        A bar over the (cell, run) units on a terminal, one log line per unit elsewhere
        (a domain-classifier job trains a network per draw for most of an hour).
    finished : mapping Unit -> DataFrame, optional
        Records of units computed before (by an interrupted job with the same inputs and
        settings): these units are not run again and their records are used as given. A
        unit's records depend only on the unit (its draws are keyed by cell and run), so the
        result is the uninterrupted one.
    on_unit : callable, optional
        Called with each unit computed here and its records (a frame without rows where no
        sample size fits the unit's pools), e.g. to keep them in a checkpoint.
    resumed_from : str, default="earlier records"
        Where ``finished`` came from, for the log line that says how many units it holds.

    Returns
    -------
    pandas.DataFrame
        Columns ``shift``, ``fraction``, ``n``, ``n_eff``, ``n_ref``, ``run``, ``draw``,
        ``rejected``, ``p_value``; and ``fallback`` for chi-squared with
        ``zero_counts="uniform"`` (:func:`zero_count_draws`).
    """
    if not runs:
        raise ValueError("no runs to draw from")
    top_n = dict(top_n or {})
    cells = list(runs[0].pools)
    if any(list(r.pools) != cells for r in runs[1:]):
        raise ValueError("every run must hold the same cells")
    n_ref_pool = min(len(r.reference) for r in runs)
    if pool_sizes is None:
        pool_sizes = {c: min(len(r.pools[c]) for r in runs) for c in cells}
    finished = finished or {}
    frames = []
    units = len(cells) * len(runs)
    bar = Progress(units, method.name, enabled=progress, unit="cell")
    done = sum((s, float(f), r) in finished for s, f in cells for r in range(len(runs)))
    if done:
        bar.update(done)
        bar.logger.info("%s: resuming: %d of %d units from %s", bar.desc, done, units,
                        resumed_from)  # fmt: skip
    for shift, fraction in cells:
        sizes = effective_ns(ns, pool_sizes[(shift, fraction)], n_ref_pool, top_n.get(shift))
        for r, run in enumerate(runs):
            unit = (shift, float(fraction), r)
            if unit in finished:
                if len(finished[unit]):
                    frames.append(finished[unit])
                continue
            unit_frames = []
            f_test = run.pools[(shift, fraction)]
            for n, n_eff in sizes:
                if method.dimension == "multivariate" and multivariate_ref is not None:
                    n_ref = min(max(n_eff, int(multivariate_ref)), n_ref_pool)
                else:
                    n_ref = n_eff
                # One reference draw serves both kinds of test: R = max(n, m) (paired).
                ref_size = min(max(n_eff, int(multivariate_ref or 0)), n_ref_pool)
                # A draw that takes every row of both pools is the same in every draw.
                whole = n_eff == len(f_test) and ref_size == len(run.reference)
                idx = grid_indices(
                    len(run.reference), len(f_test), n_eff, ref_size, seed=seed, shift=shift,
                    fraction=fraction, n_draws=1 if whole else n_draws, run=r,
                )  # fmt: skip
                rejected, p_value = run_cell(
                    run.reference, f_test, method, idx, n_ref=n_ref, params=params,
                    image_shape=image_shape,
                )  # fmt: skip
                extra = {}
                if method.test == "chi2" and params.get("zero_counts") == "uniform":
                    extra["fallback"] = zero_count_draws(
                        run.reference, f_test, idx, n_ref, int(params["n_classes"])
                    )
                unit_frames.append(
                    pd.DataFrame(
                        {
                            "shift": shift,
                            "fraction": float(fraction),
                            "n": n,
                            "n_eff": n_eff,
                            "n_ref": n_ref,
                            "run": r,
                            "draw": np.arange(len(rejected)),
                            "rejected": rejected,
                            "p_value": p_value,
                            **extra,
                        }
                    )
                )
                log.debug("%s %s@%g run %d n=%d: %d/%d", method.name, shift, fraction, r, n_eff,
                          int(rejected.sum()), len(rejected))  # fmt: skip
            frames.extend(unit_frames)
            if on_unit is not None:
                on_unit(unit, pd.concat(unit_frames, ignore_index=True) if unit_frames
                        else pd.DataFrame())  # fmt: skip
            done += 1
            bar.update()
            bar.log("%s@%g run %d done (%d of %d)", shift, fraction, r, done, units)
    bar.close()
    return pd.concat(frames, ignore_index=True)
