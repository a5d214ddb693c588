"""The grid's results per cell: detections and draws, enough to recompute every table.

A *cell* is one (data set, row, shift, fraction, n, run) of the grid: every column of the
records (``dgpbench fl-detect``) but the draw's own (:data:`PER_DRAW`: ``draw``, ``rejected``,
``p_value``, ``fallback``). :func:`to_cells` counts each cell's rejecting draws (``rejected``)
and its draws (``draws``), and where the records say which draws took the chi-squared
fallback, how many did (``fallbacks``). Compressed, the file is about a tenth of the
records' size (40 kB against 0.41 MB for 11,260 cells of 6 draws).

Every table of ``dgpbench fl-report`` is a function of these counts: each is a share of
rejecting draws per group with the hull of a bootstrap over the (data set, run) units (which
resamples each unit's summed detections and draws) and the draws' binomial interval; the
ranks read the share per block; the summary counts draws, runs, methods and the fallback's
share by n. None reads a p-value or which draw rejected. :func:`from_cells` expands the counts
back into draws (a cell's first ``rejected`` draws reject, its first ``fallbacks`` took the
fallback) in the cells' order, so the report of the expanded draws equals the report of the
records, byte for byte. The cells keep the records' order (each cell where its first draw
is): the summary lists the shift classes in the order the records first name them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["COUNTS", "PER_DRAW", "from_cells", "is_cells", "to_cells"]

PER_DRAW: tuple[str, ...] = ("draw", "rejected", "p_value", "fallback")
"""Columns of a record that belong to the draw, not to its cell."""
COUNTS: tuple[str, ...] = ("rejected", "draws", "fallbacks")
"""Columns of a cell that count its draws (``fallbacks`` only where the records have it)."""


def is_cells(columns: pd.Index | list[str]) -> bool:
    """Whether a table with these columns holds cells (counts) rather than draws.

    Parameters
    ----------
    columns : pandas.Index or list of str
        The table's columns.

    Returns
    -------
    bool
        True where it has ``draws`` and no ``draw``.
    """
    return "draws" in columns and "draw" not in columns


def to_cells(records: pd.DataFrame) -> pd.DataFrame:
    """Count each cell's rejecting draws and draws.

    Parameters
    ----------
    records : pandas.DataFrame
        One row per draw, with a boolean ``rejected``; every column but :data:`PER_DRAW`
        names the cell; a ``fallback`` column (True/False per chi-squared draw, empty for
        the others) is counted too.

    Returns
    -------
    pandas.DataFrame
        One row per cell, in the order of each cell's first draw: the cell's columns,
        ``rejected`` (count), ``draws`` and, where the records have ``fallback``,
        ``fallbacks`` (count; missing for cells whose draws have none).

    Raises
    ------
    ValueError
        If there are no records, ``rejected`` is not boolean, or a cell's draws disagree
        on whether they record the fallback.

    Examples
    --------
    >>> rec = pd.DataFrame({"n": [10, 10, 20], "draw": [0, 1, 0],
    ...                     "rejected": [True, False, True]})
    >>> to_cells(rec)
        n  rejected  draws
    0  10         1      2
    1  20         1      1
    """
    if records.empty:
        raise ValueError("no records to count")
    rejected = records["rejected"]
    if rejected.isna().any() or not rejected.isin([True, False]).all():
        raise ValueError("records['rejected'] must be boolean without missing values")
    key = [c for c in records if c not in PER_DRAW]
    frame = records[key].assign(_rejected=rejected.astype(bool).to_numpy())
    fallback = "fallback" in records
    if fallback:
        flags = records["fallback"].map({True: 1.0, False: 0.0, "True": 1.0, "False": 0.0})
        if (flags.isna() != records["fallback"].isna()).any():
            raise ValueError("records['fallback'] must be True, False or empty")
        frame["_fallback"] = flags.to_numpy()
    grouped = frame.groupby(key, sort=False, dropna=False)
    cells = grouped["_rejected"].agg(rejected="sum", draws="size")
    if fallback:
        noted = grouped["_fallback"].count()
        if ((noted != 0) & (noted != cells["draws"])).any():
            raise ValueError("a cell's draws disagree on whether they record the fallback")
        cells["fallbacks"] = grouped["_fallback"].sum().astype("int64").astype("Int64")
        cells.loc[noted == 0, "fallbacks"] = pd.NA
    cells = cells.reset_index()
    cells["rejected"] = cells["rejected"].astype("int64")
    cells["draws"] = cells["draws"].astype("int64")
    return cells


def from_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Expand cells into draws: the records their tables are computed from.

    Parameters
    ----------
    cells : pandas.DataFrame
        As :func:`to_cells` writes them.

    Returns
    -------
    pandas.DataFrame
        One row per draw, cells in their order: the cell's columns, ``draw`` (0, 1, ...),
        ``rejected`` (the cell's first ``rejected`` draws) and, with ``fallbacks``,
        ``fallback`` (the first ``fallbacks`` draws; empty where the cell has none). No
        ``p_value``: the cells do not keep it.

    Raises
    ------
    ValueError
        If ``rejected`` or ``draws`` is missing, or a count is not a whole number between 0
        and the cell's draws (``draws`` at least 1).

    Examples
    --------
    >>> cells = pd.DataFrame({"n": [10, 20], "rejected": [1, 0], "draws": [2, 1]})
    >>> from_cells(cells)
        n  draw  rejected
    0  10     0      True
    1  10     1     False
    2  20     0     False
    """
    missing = [c for c in ("rejected", "draws") if c not in cells]
    if missing:
        raise ValueError(f"the cells lack the column(s) {missing}")
    if cells.empty:
        raise ValueError("no cells to expand")
    draws = _counts(cells["draws"], "draws", minimum=1)
    counts = {"rejected": _counts(cells["rejected"], "rejected")}
    if "fallbacks" in cells:
        counts["fallbacks"] = _counts(cells["fallbacks"], "fallbacks", missing=True)
    for name, values in counts.items():
        if (values > draws).any():
            raise ValueError(f"a cell counts more {name} than draws")
    key = [c for c in cells if c not in COUNTS]
    out = cells.loc[cells.index.repeat(draws), key].reset_index(drop=True)
    starts = np.repeat(np.cumsum(draws) - draws, draws)
    draw = np.arange(int(draws.sum()), dtype=np.int64) - starts
    out["draw"] = draw
    out["rejected"] = draw < np.repeat(counts["rejected"], draws)
    if "fallbacks" in counts:
        fallbacks = np.repeat(counts["fallbacks"], draws)
        flag = pd.Series(draw < fallbacks)
        # as a CSV reads back: booleans, or objects where some draws record none
        out["fallback"] = (
            flag if (fallbacks >= 0).all() else flag.astype(object).where(fallbacks >= 0, np.nan)
        )
    return out


def _counts(values: pd.Series, name: str, minimum: int = 0, missing: bool = False) -> np.ndarray:
    """Whole counts of a cells column (``-1`` for a missing one where ``missing``)."""
    numbers = pd.to_numeric(values, errors="coerce")
    absent = numbers.isna() & values.isna() if missing else pd.Series(False, index=values.index)
    whole = numbers.notna() & (numbers == np.floor(numbers)) & (numbers >= minimum)
    if not (whole | absent).all():
        raise ValueError(f"cells[{name!r}] must hold whole numbers of at least {minimum}")
    return numbers.where(~absent, -1).to_numpy(dtype=np.int64)
