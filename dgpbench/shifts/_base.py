"""The record every Failing-loudly shift returns, and the helpers its families share."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dgpbench._validation import as_float_array


@dataclass(frozen=True, eq=False)
class ShiftedPool:
    """A shifted test pool, stored as edits of the clean pool it came from.

    Most of a shifted pool is clean images (a fraction 0.1 changes one image in ten, a
    knock-out only removes images), so it is kept as row indices into the clean pool plus the
    images that changed: features of the unchanged rows are the clean ones.

    Parameters
    ----------
    index : ndarray of int64, shape (M,)
        Row of the clean pool each image of the shifted pool comes from.
    shifted : ndarray of bool, shape (M,)
        ``True`` where the image was altered (its pixels are in ``x_new``).
    x_new : ndarray of float32, shape (shifted.sum(), C, H, W)
        The altered images, in the order of the ``True`` entries of ``shifted``.
    y : ndarray of int64, shape (M,)
        Labels of the shifted pool.
    """

    index: np.ndarray
    shifted: np.ndarray
    x_new: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        m = len(self.index)
        if self.shifted.shape != (m,) or self.y.shape != (m,):
            raise ValueError("index, shifted and y must have the same length")
        if len(self.x_new) != int(self.shifted.sum()):
            raise ValueError(
                f"x_new has {len(self.x_new)} images but {int(self.shifted.sum())} rows are shifted"
            )

    def images(self, x_clean: np.ndarray) -> np.ndarray:
        """The shifted pool's images, given the clean pool ``x_clean``."""
        out = np.array(x_clean[self.index], dtype=np.float32, copy=True)
        out[self.shifted] = self.x_new
        return out

    def features(self, f_clean: np.ndarray, f_new: np.ndarray) -> np.ndarray:
        """The shifted pool's features from clean features and those of ``x_new``."""
        out = np.array(f_clean[self.index], copy=True)
        out[self.shifted] = f_new
        return out


def identity_pool(x: np.ndarray, y: np.ndarray) -> ShiftedPool:
    """The clean pool as a :class:`ShiftedPool` with nothing shifted."""
    n = len(y)
    return ShiftedPool(
        index=np.arange(n, dtype=np.int64),
        shifted=np.zeros(n, dtype=bool),
        x_new=np.empty((0, *x.shape[1:]), dtype=np.float32),
        y=np.asarray(y, dtype=np.int64).copy(),
    )


def n_affected(n: int, fraction: float) -> int:
    """Rows a shift alters at ``fraction``: ``ceil(fraction * n)``, as Rabanser et al.'s
    ``np.random.choice(n, ceil(n * delta))`` (a float product is rounded first, so
    ``0.1 * 10`` counts as exactly 1).

    Examples
    --------
    >>> n_affected(1000, 0.1), n_affected(15, 0.1), n_affected(10, 0.1)
    (100, 2, 1)
    """
    return min(n, math.ceil(round(fraction * n, 9)))


def check_images(x: object, name: str = "x") -> np.ndarray:
    """Images ``(N, C, H, W)`` in [0, 1] as float32."""
    return as_float_array(x, name, ndim=4, dtype=np.float32, min_value=0.0, max_value=1.0)


def check_fraction(fraction: object) -> float:
    """A fraction in (0, 1]."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.floating)):
        raise TypeError(f"fraction must be a number, got {fraction!r}")
    if not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    return float(fraction)


def alter_subset(
    x: np.ndarray, y: np.ndarray, fraction: float, rng: np.random.Generator, alter
) -> ShiftedPool:
    """Alter ``ceil(fraction * N)`` random rows of a pool with ``alter(images, rng)``."""
    n = len(y)
    rows = np.sort(rng.choice(n, size=n_affected(n, fraction), replace=False))
    shifted = np.zeros(n, dtype=bool)
    shifted[rows] = True
    x_new = np.asarray(alter(x[rows], rng), dtype=np.float32)
    return ShiftedPool(
        index=np.arange(n, dtype=np.int64), shifted=shifted, x_new=x_new, y=y.astype(np.int64)
    )
