"""Appendix G.2's early-stopping tables, published vs the run's ``table_np``/``table_dgp``."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from dgpbench.paper.comparisons.core import TableSpec, sign_agrees

__all__ = ["SPEC", "reproduced"]

EPOCHS_WITHIN = 1.0  # epochs
ACCURACY_WITHIN = 0.1  # percentage points of test accuracy
_ROW = re.compile(r"Δ_(epoch|accuracy)\((.+), (.+)\)")
_QUANTITY = {"epoch": "epochs", "accuracy": "accuracy_pct"}


def _within(joined: pd.DataFrame) -> pd.Series:
    limit = np.where(joined["quantity"] == "epochs", EPOCHS_WITHIN, ACCURACY_WITHIN)
    return joined["diff"].abs().round(6) <= limit


SPEC = TableSpec(
    name="early_stopping",
    title="early stopping, mean differences between criteria (Appendix G.2)",
    keys=("table", "quantity", "first", "second", "dataset"),
    value="difference",
    group=("table", "quantity"),
    tolerance=f"|diff| <= {EPOCHS_WITHIN:g} epoch for trained epochs and <= "
    f"{ACCURACY_WITHIN:g} percentage points for test accuracy; sign agrees = the first "
    "criterion stops later / more accurately in both",
    within=_within,
    extra=sign_agrees,
)


def reproduced(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The run's differences in the published layout.

    Parameters
    ----------
    tables : dict of str to pandas.DataFrame
        ``{"early_stopping_np": table_np.csv, "early_stopping_dgp": table_dgp.csv}`` as
        written by ``dgpbench analysis early-stopping``: a ``difference`` column with row
        labels such as ``Δ_epoch(NP, val)``, one column per data set label.

    Returns
    -------
    pandas.DataFrame
        ``table, quantity, first, second, dataset, ours``.
    """
    rows = []
    for name, table in tables.items():
        if "difference" not in table.columns:
            raise ValueError(f"early-stopping table {name} lacks the column 'difference'")
        for _, row in table.iterrows():
            m = _ROW.fullmatch(str(row["difference"]))
            if m is None:
                raise ValueError(f"early-stopping table {name}: unknown row {row['difference']!r}")
            for dataset in table.columns.drop("difference"):
                if pd.notna(row[dataset]):
                    rows.append(
                        {
                            "table": name,
                            "quantity": _QUANTITY[m[1]],
                            "first": m[2],
                            "second": m[3],
                            "dataset": str(dataset),
                            "ours": float(row[dataset]),
                        }
                    )
    return pd.DataFrame(rows, columns=["table", "quantity", "first", "second", "dataset", "ours"])
