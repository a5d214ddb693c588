"""Failing loudly's combined shifts: one shift applied to the output of another.

- ``medium_img_shift+ko_shift`` at fraction ``f``: the medium image shift on half of the pool
  (``medium_img_shift_0.5``), then the knock-out of ``f`` of class 0 (their
  ``medium_img_shift_0.5+ko_shift_f``).
- ``only_zero_shift+medium_img_shift`` at ``f``: keep class 0 only, then the medium image
  shift on a fraction ``f`` of what is left.
"""

from __future__ import annotations

import numpy as np

from dgpbench.shifts._base import ShiftedPool

__all__ = ["compose"]


def compose(first: ShiftedPool, second: ShiftedPool) -> ShiftedPool:
    """The pool of ``second`` applied to the images of ``first``, as edits of the clean pool.

    Parameters
    ----------
    first : ShiftedPool
        A shift of the clean pool.
    second : ShiftedPool
        A shift of ``first``'s images (its ``index`` points into ``first``'s rows).

    Returns
    -------
    ShiftedPool
        Rows point into the clean pool; a row is shifted where either shift altered it, with
        ``second``'s pixels where both did.
    """
    m = len(first.index)
    # Row r of `first` -> position of its altered image in first.x_new (or -1).
    where_new = np.full(m, -1, dtype=np.int64)
    where_new[first.shifted] = np.arange(int(first.shifted.sum()))
    index = first.index[second.index]
    shifted = first.shifted[second.index] | second.shifted
    shape = (second.x_new if len(second.x_new) else first.x_new).shape[1:]
    x_new = np.empty((int(shifted.sum()), *shape), dtype=np.float32)
    rows = np.flatnonzero(shifted)
    from_second = second.shifted[rows]
    x_new[from_second] = second.x_new
    x_new[~from_second] = first.x_new[where_new[second.index[rows[~from_second]]]]
    return ShiftedPool(index=index, shifted=shifted, x_new=x_new, y=second.y.copy())
