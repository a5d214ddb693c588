"""Label shift: Rabanser et al.'s "knock-out" as a shift family of its own (code ``KO``).

A knock-out shift removes a fraction of one class from the test distribution (Rabanser et al.,
"Failing loudly", NeurIPS 2019: ``knockout_shift`` removes 10%, 50% or 100% of class 0 for
their small, medium and large shifts). It changes *which* clean images a test batch holds,
not their pixels, so there are no corrupted twins and no features beyond the clean ones.

How it fits the protocol (:mod:`dgpbench.paper.protocol`). The test images of one (seed, class) lose
the first ``ceil(fraction * n_class)`` images of the knocked-out class in a fixed random order
(:func:`knockout_pool`: the removed sets are nested, intensity I inside II ...), leaving the
*pool*. A draw for sample size ``n`` and ratio ``delta`` then takes ``round(delta * n)`` test
images from the pool and the other ``n - round(delta * n)`` from all clean test images, all
distinct, and ``n`` reference images from all clean test images; the per-feature KS test
decides as for the corruptions. So ``delta`` keeps its meaning, the share of the test batch
drawn from the shifted distribution, and cells pool over the same (n, delta) grid as the
corruptions; ``delta = 1`` is Rabanser et al.'s setting. Batches are paired across methods:
the rows of a draw depend on (seed, n, delta, intensity, draw number, class) only.

Intensities (:data:`KNOCKOUT_FRACTIONS`, the fraction of the class removed)::

    intensity     I     II    III   IV    V     VI
    fraction      0.1   0.25  0.5   0.75  0.9   1.0

Rabanser et al.'s small / medium / large knock-outs are I / III / VI. Unlike their code we do
not round the removed count up to an even number, and we remove a random subset (their test
sets are shuffled first, which amounts to the same).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from dgpbench._validation import as_float_array, check_int
from dgpbench.detectors.ks_test import CORRECTIONS, check_no_constant_features
from dgpbench.paper.protocol import (
    DELTAS,
    NS,
    DrawIndices,
    _as_list,
    _check_alpha,
    _check_delta,
    _check_n,
    _delta_key,
    _draw_records,
    _run_draws,
    n_corrupted,
)

__all__ = [
    "KNOCKOUT_FRACTIONS",
    "LABEL_SHIFT_CODE",
    "knockout_draw_indices",
    "knockout_pool",
    "label_shift_detection",
]

LABEL_SHIFT_CODE = "KO"
"""The shift family's code in records and tables."""

KNOCKOUT_FRACTIONS: dict[int, float] = {1: 0.1, 2: 0.25, 3: 0.5, 4: 0.75, 5: 0.9, 6: 1.0}
"""Intensity -> fraction of the knocked-out class removed from the test images."""

DEFAULT_CLASS = 0
"""Rabanser et al. knock out class 0."""

# Separates these streams from the protocol's and the corruptions' (ASCII "KNOC").
_STREAM_TAG = 0x4B4E4F43


def _check_labels(labels: Any, n_rows: int | None = None) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a 1-D integer array, got {y.dtype} of shape {y.shape}")
    if n_rows is not None and len(y) != n_rows:
        raise ValueError(
            f"labels has {len(y)} entries but the features have {n_rows} rows (one label per "
            "clean test image)"
        )
    return y


def _check_intensity(intensity: Any) -> int:
    level = check_int(intensity, "knock-out intensity")
    if level not in KNOCKOUT_FRACTIONS:
        raise ValueError(f"knock-out intensity must be an integer from 1 to 6, got {intensity!r}")
    return level


def knockout_pool(
    labels: Any, intensity: int, *, knocked_class: int = DEFAULT_CLASS, seed: int = 112
) -> np.ndarray:
    """Rows of the test images left after knocking out part of one class.

    Parameters
    ----------
    labels : array-like of int, shape (N,)
        Labels of the clean test images.
    intensity : int
        1 to 6: removes ``ceil(KNOCKOUT_FRACTIONS[intensity] * n_class)`` images of the class.
    knocked_class : int, default=0
        The class to knock out.
    seed : int, default=112
        Seeds the order in which the class's images are removed (the same for every
        intensity, so removed sets are nested).

    Returns
    -------
    ndarray of int64
        Sorted row indices of the pool.

    Raises
    ------
    ValueError
        If the class has no image, or on an invalid intensity or seed.

    Examples
    --------
    >>> y = np.array([0, 1, 0, 1, 0, 2, 0])
    >>> knockout_pool(y, 3).size, knockout_pool(y, 6).tolist()
    (5, [1, 3, 5])
    """
    y = _check_labels(labels)
    level = _check_intensity(intensity)
    seed = check_int(seed, "seed", minimum=0)
    rows = np.flatnonzero(y == knocked_class)
    if rows.size == 0:
        raise ValueError(
            f"knocked-out class {knocked_class!r} has no test image (labels: {np.unique(y).tolist()})"
        )
    rng = np.random.default_rng(np.random.SeedSequence([seed, _STREAM_TAG, int(knocked_class)]))
    removed = rng.permutation(rows)[: math.ceil(KNOCKOUT_FRACTIONS[level] * rows.size)]
    keep = np.ones(len(y), dtype=bool)
    keep[removed] = False
    return np.flatnonzero(keep).astype(np.int64)


def knockout_draw_indices(
    labels: Any,
    n: int,
    delta: float,
    intensity: int,
    *,
    knocked_class: int = DEFAULT_CLASS,
    n_draws: int = 100,
    seed: int = 112,
) -> DrawIndices:
    """Row indices of the knock-out draws for one ``(n, delta, intensity)``.

    Returns
    -------
    DrawIndices
        ``test`` rows (the first ``round(delta * n)`` of each draw from the pool, the rest
        from all rows, all distinct), ``corrupted`` marks the pool positions, ``reference``
        rows drawn from all rows.

    Examples
    --------
    >>> y = np.arange(100) % 10
    >>> idx = knockout_draw_indices(y, 20, 1.0, 6, n_draws=3)
    >>> bool((y[idx.test] != 0).all()), idx.test.shape
    (True, (3, 20))
    """
    y = _check_labels(labels)
    n_rows = len(y)
    n = _check_n(n, n_rows)
    delta = _check_delta(delta)
    level = _check_intensity(intensity)
    n_draws = check_int(n_draws, "n_draws", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    pool = knockout_pool(y, level, knocked_class=knocked_class, seed=seed)
    k = n_corrupted(n, delta)
    if k > pool.size:
        raise ValueError(
            f"a batch of n = {n} with delta = {delta} needs {k} images from the knock-out pool, "
            f"which has {pool.size}"
        )
    test = np.empty((n_draws, n), dtype=np.int64)
    reference = np.empty((n_draws, n), dtype=np.int64)
    corrupted = np.zeros((n_draws, n), dtype=bool)
    corrupted[:, :k] = True
    for i in range(n_draws):
        rng = np.random.default_rng(
            np.random.SeedSequence(
                [seed, _STREAM_TAG, n, _delta_key(delta), level, int(knocked_class), i]
            )
        )
        shifted = pool[rng.choice(pool.size, size=k, replace=False)]
        others = np.setdiff1d(np.arange(n_rows), shifted, assume_unique=True)
        test[i, :k] = shifted
        test[i, k:] = rng.choice(others, size=n - k, replace=False)
        reference[i] = rng.choice(n_rows, size=n, replace=False)
    for arr in (test, corrupted, reference):
        arr.setflags(write=False)
    return DrawIndices(test=test, corrupted=corrupted, reference=reference)


def label_shift_detection(
    F_clean: Any,
    labels: Any,
    *,
    intensities: Iterable[int] = tuple(KNOCKOUT_FRACTIONS),
    ns: Iterable[int] = NS,
    deltas: Iterable[float] = DELTAS,
    knocked_class: int = DEFAULT_CLASS,
    n_draws: int = 100,
    seed: int = 112,
    alpha: float = 0.05,
    correction: str | None = "bonferroni",
) -> pd.DataFrame:
    """Run the protocol's bootstrap draws under knock-out label shift.

    Parameters
    ----------
    F_clean : array-like of shape (N, d)
        Features of the N clean test images.
    labels : array-like of int, shape (N,)
        Their labels.
    intensities : iterable of int, default=(1, ..., 6)
        Knock-out intensities (:data:`KNOCKOUT_FRACTIONS`).
    ns, deltas, n_draws, seed, alpha, correction
        As in :func:`dgpbench.paper.protocol.bootstrap_detection`.
    knocked_class : int, default=0
        The class knocked out.

    Returns
    -------
    pandas.DataFrame
        One row per draw with ``intensity``, ``n``, ``delta``, ``draw``, ``rejected`` and
        ``min_p``.

    Raises
    ------
    ValueError
        On mismatched lengths, NaN/inf, constant features, a class without images, or
        parameters out of range.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.arange(1000) % 5
    >>> F = (y == 0)[:, None] + rng.normal(scale=0.1, size=(1000, 2))  # features see the label
    >>> rec = label_shift_detection(F, y, intensities=[6], ns=[200], deltas=[1.0], n_draws=10)
    >>> bool(rec.rejected.all())
    True
    """
    F_clean = as_float_array(F_clean, "F_clean", ndim=2)
    y = _check_labels(labels, F_clean.shape[0])
    levels = [_check_intensity(i) for i in _as_list(intensities, "intensities")]
    ns = [_check_n(n, F_clean.shape[0]) for n in _as_list(ns, "ns")]
    deltas = [_check_delta(d) for d in _as_list(deltas, "deltas")]
    n_draws = check_int(n_draws, "n_draws", minimum=1)
    alpha = _check_alpha(alpha)
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    check_no_constant_features(F_clean, "F_clean")
    frames = []
    for level in levels:
        for n in ns:
            for delta in deltas:
                idx = knockout_draw_indices(
                    y, n, delta, level, knocked_class=knocked_class, n_draws=n_draws, seed=seed
                )
                # The test rows are clean images: the "corrupted" rows read F_clean too.
                rejected, min_p = _run_draws(F_clean, F_clean, idx, alpha, correction)
                frames.append(_draw_records(rejected, min_p, n=n, delta=delta, intensity=level))
    return pd.concat(frames, ignore_index=True)
