"""Errors of the NP bounds of Theorem 3.4 (Appendix B.1), published vs the run's study."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgpbench.paper.comparisons.core import TableSpec

__all__ = ["SPEC", "reproduced"]

FACTOR = 3.0  # "of the same order": within a factor of 3 (half a decade) either way


def _same_order(joined: pd.DataFrame) -> pd.Series:
    ratio = joined["ours"] / joined["paper"]
    return (ratio >= 1 / FACTOR) & (ratio <= FACTOR)


SPEC = TableSpec(
    name="bounds",
    title="errors of the NP bounds on synthetic matrices (Appendix B.1)",
    keys=("bound", "statistic"),
    value="value",
    group=("bound",),
    tolerance=f"the error is of the same order, within a factor of {FACTOR:g} either way "
    f"(ours / paper in [1/{FACTOR:g}, {FACTOR:g}]; mean and max errors of random matrices "
    "vary with their number and sizes)",
    within=_same_order,
    ours_columns=("n_matrices",),
)


def reproduced(study: pd.DataFrame) -> pd.DataFrame:
    """The run's bound errors in the published layout.

    Parameters
    ----------
    study : pandas.DataFrame
        ``bounds/study.csv`` (:func:`dgpbench.analysis.bounds.bounds_tightness_study`).

    Returns
    -------
    pandas.DataFrame
        ``bound, statistic, ours, n_matrices``; statistics ``abs_mean, abs_max,
        rel_mean_pct, rel_max_pct`` (relative errors in percent).
    """
    from dgpbench.analysis.bounds import bounds_error_table

    table = bounds_error_table(study)
    rows = []
    for bound, row in table.iterrows():
        for stat, col, scale in (
            ("abs_mean", "abs_mean", 1.0),
            ("abs_max", "abs_max", 1.0),
            ("rel_mean_pct", "rel_mean", 100.0),
            ("rel_max_pct", "rel_max", 100.0),
        ):
            rows.append(
                {
                    "bound": bound,
                    "statistic": stat,
                    "ours": scale * float(row[col]),
                    "n_matrices": int(row["n_matrices"]),
                }
            )
    out = pd.DataFrame(rows)
    out["ours"] = out["ours"].astype(np.float64)
    return out
