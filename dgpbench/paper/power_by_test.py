"""Which two-sample test gives a feature method the most power at the same level.

The DGP paper's protocol decides with per-feature KS tests; run on the same draws with
another registered test (:func:`dgpbench.paper.protocol.bootstrap_detection`'s ``test``:
Cramér-von Mises, Anderson-Darling, energy distance, ...), its records carry a ``test``
column (records without one are KS's). :func:`power_table` writes
``table_tests_power``: per method and test, the detection rate at each ``n`` pooled as
Table 1 pools it (MLPs, the paper's four corruptions, every data set, intensity, pooled
delta and draw), and the false-positive rate on clean batches (``delta = 0``: the level),
bold where a test has the largest power of its method at that ``n`` among the tests whose
level is not significantly above ``alpha`` (the Wilson interval's lower end at most
``alpha``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dgpbench.labels import method_label, method_order
from dgpbench.paper.reporting import (
    clean_records,
    detection_cells,
    paper_records,
    pooled_records,
    shift_records,
    write_empty_table,
    write_table,
)

__all__ = ["TEST_LABELS", "power_cells", "power_table"]

#: Display names of the tests (others are shown by their registered name).
TEST_LABELS: dict[str, str] = {
    "ks": "KS",
    "cvm": "CvM",
    "ad": "AD",
    "energy": "Energy",
    "mmd": "MMD",
    "fisher": "Fisher",
}
LEVEL = "clean (level)"
"""The column of the false-positive rate."""


def _with_test(records: pd.DataFrame) -> pd.DataFrame:
    rec = records.copy()
    if "test" not in rec:
        rec["test"] = "ks"
    rec["test"] = rec["test"].fillna("ks").astype(str)
    return rec


def power_cells(
    records: pd.DataFrame, pool_deltas: Sequence[float] | None, alpha: float = 0.05
) -> pd.DataFrame:
    """Power per (method, test, n) and level per (method, test), as one long frame.

    Parameters
    ----------
    records : pandas.DataFrame
        Bootstrap records of one or more tests (a ``test`` column; missing or empty: KS).
    pool_deltas : sequence of float or None
        Corrupted ratios pooled (:func:`dgpbench.paper.reporting.pooled_records`).
    alpha : float, default=0.05
        The records' significance level (which tests' level counts as held).

    Returns
    -------
    pandas.DataFrame
        Columns ``method``, ``test``, ``column`` (``n = ...`` or :data:`LEVEL`), ``n``
        (0 for the level), ``ratio_pct``, ``ci_low_pct``, ``ci_high_pct``, ``n_draws``,
        ``n_rejected``, ``holds_level`` and ``best``.

    Examples
    --------
    >>> rec = pd.DataFrame({"method": "dgp", "test": ["ks", "ks", "cvm", "cvm"],
    ...                     "corruption": ["GN", "none"] * 2, "delta": [0.5, 0.0] * 2,
    ...                     "n": 10, "rejected": [False, False, True, False]})
    >>> cells = power_cells(rec, None)
    >>> cells[cells["best"]][["test", "column"]].values.tolist()
    [['cvm', 'n = 10']]
    """
    rec = _with_test(pooled_records(paper_records(records), pool_deltas))
    shifted, clean = shift_records(rec), clean_records(rec)
    if shifted.empty or clean.empty:
        return pd.DataFrame()
    power = detection_cells(shifted, ["method", "test", "n"])
    level = detection_cells(clean, ["method", "test"])
    holds = level.set_index(["method", "test"])["ci_low"] <= alpha
    power["column"] = "n = " + power["n"].astype(str)
    level["n"] = 0
    level["column"] = LEVEL
    cells = pd.concat([power, level], ignore_index=True)
    cells["holds_level"] = [
        bool(holds.get((m, t), False)) for m, t in zip(cells["method"], cells["test"], strict=True)
    ]
    rounded = cells["ratio_pct"].round(1).where(cells["holds_level"] & (cells["n"] > 0))
    top = rounded.groupby([cells["method"], cells["n"]]).transform("max")
    cells["best"] = rounded.notna() & (rounded == top)
    return cells


def power_table(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    pool_deltas: Sequence[float] | None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Write ``table_tests_power`` (CSV, Markdown, LaTeX, HTML): rows method x test,
    columns n and the level (see the module docstring).

    Parameters
    ----------
    records : pandas.DataFrame
        Bootstrap records of the tests (:func:`power_cells`).
    out_dir : path-like
        Folder of the table files.
    pool_deltas : sequence of float or None
        Corrupted ratios pooled, as in Table 1.
    alpha : float, default=0.05
        The records' significance level.

    Returns
    -------
    pandas.DataFrame
        The cells written (empty, with a note in the files, where there are none).
    """
    title = (
        f"Detection ratio (%) by two-sample test at alpha = {100 * alpha:g}%, pooled as "
        "Table 1, and the false-positive rate on clean batches; bold = most power of the "
        "method at that n among the tests that hold their level"
    )
    stem = Path(out_dir) / "table_tests_power"
    cells = power_cells(records, pool_deltas, alpha)
    if cells.empty:
        write_empty_table(
            stem, title=title, note="No MLP records with the paper's corruptions and clean batches."
        )
        return cells
    order = method_order(cells["method"])
    tests = list(dict.fromkeys(["ks", *sorted(set(cells["test"]) - {"ks"})]))
    tests = [t for t in tests if t in set(cells["test"])]
    cells["Method"] = pd.Categorical(
        cells["method"].map(method_label), [method_label(m) for m in order]
    )
    cells["Test"] = pd.Categorical(
        cells["test"].map(lambda t: TEST_LABELS.get(t, t)), [TEST_LABELS.get(t, t) for t in tests]
    )
    columns = [f"n = {n}" for n in sorted(set(cells["n"]) - {0})] + [LEVEL]
    cells["Batch"] = pd.Categorical(cells["column"], columns)
    cells["star"] = False
    cells = cells.sort_values(["Batch", "Method", "Test"]).reset_index(drop=True)
    write_table(cells, ["Method", "Test"], ["Batch"], stem, title=title, label="tab:tests:power")
    return cells.drop(columns=["Batch"])
