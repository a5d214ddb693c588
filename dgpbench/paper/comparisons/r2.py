"""R² of NP ~ log-variance per architecture (Appendix G.1), published vs the run's fits.

The paper's "#Layers" (1-3) counts hidden layers: its models have 2-4 linear maps (Section
4.1) and the table's layout comment reads "number of hidden layers {1,2,3}". A published
row ``layers = k`` is therefore the workflow's ``n_layers = k + 1``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgpbench.paper.comparisons.core import TableSpec

__all__ = ["SPEC", "reproduced"]

WITHIN = 2.0  # points of R² x 100
TABLE = "r2_np_logvar"


def paper_in_interval(cells: pd.DataFrame) -> dict[str, float]:
    """Share of cells whose published R² lies in the run's 95% bootstrap interval over its
    runs (NaN where the run has no intervals)."""
    if cells.empty or "ci_low" not in cells or cells["ci_low"].isna().all():
        return {"share_paper_in_ci": np.nan}
    cells = cells.dropna(subset=["ci_low", "ci_high"])
    inside = cells["paper"].between(cells["ci_low"], cells["ci_high"])
    return {"share_paper_in_ci": float(inside.mean())}


SPEC = TableSpec(
    name="r2",
    title="R² (x100) of NP ~ log-variance per architecture (Appendix G.1)",
    keys=("table", "dataset", "activation", "layers", "hidden"),
    value="r2_pct",
    int_keys=("layers", "hidden"),
    group=("dataset", "activation"),
    tolerance=f"|diff| <= {WITHIN:g} points of R² x 100 (layers = hidden layers, the "
    "workflow's linear maps - 1); ci_low, ci_high: the run's 95% bootstrap interval of R² over "
    "its runs (BCa), share_paper_in_ci: the share of published values inside it",
    within=lambda j: j["diff"].abs().round(6) <= WITHIN,
    extra=paper_in_interval,
    ours_columns=("n_runs", "ci_low", "ci_high"),
)


def reproduced(r2: pd.DataFrame) -> pd.DataFrame:
    """The run's R² cells in the published layout.

    Parameters
    ----------
    r2 : pandas.DataFrame
        ``np_variance/r2.csv``: ``dataset, activation, n_layers, hidden, n, r2_pct``.

    Returns
    -------
    pandas.DataFrame
        ``table, dataset, activation, layers, hidden, ours, n_runs`` and, where the fits
        have them (``r2_ci_low_pct, r2_ci_high_pct``), ``ci_low, ci_high`` (DNNs only).
    """
    from dgpbench.labels import dataset_label

    missing = [c for c in ("dataset", "activation", "n_layers", "hidden", "r2_pct") if c not in r2]
    if missing:
        raise ValueError(f"R² table lacks columns {missing}")
    deep = r2[r2["n_layers"] > 1].dropna(subset=["r2_pct"])
    return pd.DataFrame(
        {
            "table": TABLE,
            "dataset": deep["dataset"].astype(str).map(dataset_label),
            "activation": deep["activation"].astype(str),
            "layers": deep["n_layers"].astype("int64") - 1,
            "hidden": deep["hidden"].astype("int64"),
            "ours": deep["r2_pct"].astype(float),
            "n_runs": deep["n"] if "n" in deep else pd.NA,
            "ci_low": deep["r2_ci_low_pct"] if "r2_ci_low_pct" in deep else np.nan,
            "ci_high": deep["r2_ci_high_pct"] if "r2_ci_high_pct" in deep else np.nan,
        }
    ).reset_index(drop=True)
