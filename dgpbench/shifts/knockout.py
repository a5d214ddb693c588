"""Failing loudly's knock-out shift (``ko_shift``) and its ``only_zero_shift``.

``knockout_shift(x, y, 0, fraction)`` of Rabanser et al. removes the first
``ceil(fraction * n_0)`` images of class 0 (rounded up to an even count) from the shuffled
test set, so the pool shrinks and class 0 is under-represented; ``only_zero_shift`` removes
every other class entirely (a pool of class 0 alone). Images are never altered.

dgpbench's ``KO`` code (:mod:`dgpbench.paper.label_shift`) is the same removal arranged for the
paper's protocol (six intensities, a share ``delta`` of each batch from the knocked-out pool,
no even rounding); this module is Rabanser et al.'s own, with their rounding.
"""

from __future__ import annotations

import math

import numpy as np

from dgpbench.shifts._base import ShiftedPool

__all__ = ["knockout_shift", "only_class_shift"]


def _keep(y: np.ndarray, keep: np.ndarray) -> ShiftedPool:
    index = np.flatnonzero(keep).astype(np.int64)
    return ShiftedPool(
        index=index,
        shifted=np.zeros(len(index), dtype=bool),
        x_new=np.empty((0, 1, 1, 1), dtype=np.float32),
        y=y[index].astype(np.int64),
    )


def knockout_shift(
    y: np.ndarray, fraction: float, rng: np.random.Generator, *, knocked_class: int = 0
) -> ShiftedPool:
    """Remove ``ceil(fraction * n_c)`` (rounded up to even) random images of one class.

    Parameters
    ----------
    y : ndarray of shape (N,)
        Labels of the clean pool.
    fraction : float
        Share of the class removed, in (0, 1].
    rng : numpy.random.Generator
        Picks the removed images (Rabanser et al. take the first ones of a shuffled set).
    knocked_class : int, default=0
        The class knocked out.

    Returns
    -------
    ShiftedPool
        Nothing altered; ``x_new`` is empty (its image shape is a placeholder).
    """
    members = np.flatnonzero(y == knocked_class)
    count = math.ceil(round(fraction * len(members), 9))
    count = min(len(members), count + (count % 2))
    removed = rng.permutation(members)[:count]
    keep = np.ones(len(y), dtype=bool)
    keep[removed] = False
    return _keep(y, keep)


def only_class_shift(y: np.ndarray, *, kept_class: int = 0) -> ShiftedPool:
    """Keep the images of one class only (``only_zero_shift`` for class 0)."""
    return _keep(y, y == kept_class)
