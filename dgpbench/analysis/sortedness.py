"""Sortedness of a matrix: the spatial-concentration proxy of Appendix E.2 (~line 1200).

For a total order on the positions of a matrix, ``sortedness = 2 * Omega - 1`` where
``Omega = 1 - 2 |Inv| / (|I| (|I| - 1))`` and ``Inv`` are the position pairs whose order
disagrees with the order of their values. This equals Kendall's tau between the positions'
ranks in the order and the values, so it is computed with ``scipy.stats.kendalltau``
(tau-b, which equals the paper's definition when values are distinct).

The practical measure (:func:`sortedness`) first permutes rows and columns so that their
means ascend, then takes the maximum over three position orders: row-major ("index"),
column-major (the index order of the transpose) and anti-diagonals ("diagonal": by
``i + j``, ties by row ``i``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dgpbench._validation import as_float_array

__all__ = ["ORDERS", "kendall_sortedness", "presort_by_means", "sortedness"]

ORDERS = ("index", "transpose", "diagonal")


def _flatten(W: np.ndarray, order: str) -> np.ndarray:
    """Entries of ``W`` listed in the given total order on positions."""
    if order == "index":
        return W.ravel()
    if order == "transpose":
        return W.T.ravel()
    if order == "diagonal":
        n, m = W.shape
        rows, cols = np.indices((n, m))
        # lexsort: last key is primary -> sort by i + j, then by i (Definition, ~line 1284).
        positions = np.lexsort((rows.ravel(), (rows + cols).ravel()))
        return W.ravel()[positions]
    raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


def kendall_sortedness(W, order: str = "index") -> float:
    """``2 * Omega(W) - 1`` for one total order on positions (Appendix E.2, eq. omega).

    Parameters
    ----------
    W : array-like of shape (n, m)
        The matrix, used as is (no presorting, no absolute values).
    order : {"index", "transpose", "diagonal"}, default="index"
        Order on positions: row-major, column-major, or anti-diagonals then rows.

    Returns
    -------
    float
        In [-1, 1]: 1 for entries ascending along the order, -1 for descending (up to
        floating-point rounding in scipy's tau-b). NaN if all entries are equal (Kendall's
        tau is undefined for a constant sequence).

    Raises
    ------
    ValueError
        If ``W`` is not a finite 2-D array with at least two entries, or ``order`` is unknown.

    Examples
    --------
    >>> round(kendall_sortedness(np.arange(6.0).reshape(2, 3)), 12)
    1.0
    >>> round(kendall_sortedness(np.arange(6.0)[::-1].reshape(2, 3)), 12)
    -1.0
    """
    W = as_float_array(W, "W", ndim=2)
    if W.size < 2:
        raise ValueError(f"W must have at least two entries, got shape {W.shape}")
    from scipy import stats  # here, not at module level: keeps `dgpbench` CLI start-up fast

    values = _flatten(W, order)
    # x = positions in the order (already 0..N-1): tau counts concordant minus discordant.
    return float(stats.kendalltau(np.arange(values.size), values).statistic)


def presort_by_means(W) -> np.ndarray:
    """Permute columns, then rows, of ``W`` so that their means ascend (stable sorts).

    Parameters
    ----------
    W : array-like of shape (n, m)

    Returns
    -------
    numpy.ndarray of shape (n, m)
        A row- and column-permuted copy of ``W``.
    """
    W = as_float_array(W, "W", ndim=2)
    W = W[:, np.argsort(W.mean(axis=0), kind="stable")]
    return W[np.argsort(W.mean(axis=1), kind="stable")]


def sortedness(
    W,
    *,
    presort: bool = True,
    absolute: bool = True,
    orders: Sequence[str] = ORDERS,
) -> float:
    """The paper's ``sortedness(W)`` (Appendix E.2, last paragraphs, ~line 1276).

    Parameters
    ----------
    W : array-like of shape (n, m)
        Weight matrix.
    presort : bool, default=True
        Sort rows and columns by ascending mean first, making the measure invariant to row
        and column permutations (large entries concentrated on *some* rows or columns count,
        wherever they are).
    absolute : bool, default=True
        Use ``|W|``: the paper measures the concentration of large *normalised absolute*
        weights. Dividing by the maximum, as the paper's normalisation does, would not change
        the ranks, so it is skipped.
    orders : sequence of str, default=("index", "transpose", "diagonal")
        Position orders to evaluate; the maximum over them is returned.

    Returns
    -------
    float
        In [-1, 1]; 1 for a matrix sorted ascending along one of the orders.

    Examples
    --------
    >>> W = np.arange(12.0).reshape(3, 4)
    >>> round(sortedness(W), 12), round(sortedness(W[::-1, ::-1]), 12)  # presorting undoes reversal
    (1.0, 1.0)
    """
    W = as_float_array(W, "W", ndim=2)
    if not orders:
        raise ValueError("orders must name at least one of " + ", ".join(ORDERS))
    if absolute:
        W = np.abs(W)
    if presort:
        W = presort_by_means(W)
    return max(kendall_sortedness(W, order) for order in orders)
