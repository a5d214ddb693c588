"""R² of NP ~ log-variance per architecture (Appendix G.1), published vs the run's fits.

The paper's "#Layers" (1-3) counts hidden layers: its models have 2-4 linear maps (Section
4.1) and the table's layout comment reads "number of hidden layers {1,2,3}". A published
row ``layers = k`` is therefore the workflow's ``n_layers = k + 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dgpbench.paper.comparisons.core import TableSpec, share_paper_in_ci

__all__ = ["SPEC", "reproduced", "sign_test"]

WITHIN = 2.0  # points of R² x 100
TABLE = "r2_np_logvar"


SIGN_ALPHA = 0.05  # level of the sign test over a group's cells


def sign_test(diff: Any, *, alpha: float = SIGN_ALPHA) -> dict[str, float]:
    """Exact two-sided sign test of whether a group's cells lie above and below the paper at random.

    A 2-point tolerance judges each cell alone; 12 of 12 cells below the paper are not noise
    (p = 2 x 2^-12) however many of them lie within it. Under the null each non-tied cell is
    above or below with probability 1/2 (:func:`scipy.stats.binomtest`); the test is exact,
    so it rejects at most ``alpha`` of the time, and never with 5 cells or fewer at 0.05.

    Parameters
    ----------
    diff : array-like
        ``ours - paper`` per cell (NaN left out; values that round to 0 at 6 decimals are
        ties, left out as well).
    alpha : float, default=0.05

    Returns
    -------
    dict
        ``n_below, n_above`` (cells below / above the paper), ``sign_test_p`` (NaN without a
        non-tied cell) and ``one_sided``: 1.0 when ``sign_test_p < alpha`` (the cells lie
        on one side more than chance allows), else 0.0 (NaN without a p-value).

    Examples
    --------
    >>> out = sign_test([-1.0] * 12)
    >>> out["n_below"], round(out["sign_test_p"], 6), out["one_sided"]
    (12, 0.000488, 1.0)
    """
    from scipy.stats import binomtest

    d = np.asarray(diff, dtype=float)
    d = np.round(d[~np.isnan(d)], 6)
    below, above = int((d < 0).sum()), int((d > 0).sum())
    if below + above == 0:
        return {"n_below": below, "n_above": above, "sign_test_p": np.nan, "one_sided": np.nan}
    p = float(binomtest(below, below + above, 0.5, alternative="two-sided").pvalue)
    return {"n_below": below, "n_above": above, "sign_test_p": p, "one_sided": float(p < alpha)}


def paper_in_interval(cells: pd.DataFrame) -> dict[str, float]:
    """Share of cells whose published R² lies in the run's 95% bootstrap interval over its
    runs (NaN where the run has no intervals), and the sign test over the cells
    (:func:`sign_test`).
    """
    return {**share_paper_in_ci(cells), **sign_test(cells["diff"] if "diff" in cells else [])}


SPEC = TableSpec(
    name="r2",
    title="R² (x100) of NP ~ log-variance per architecture (Appendix G.1)",
    keys=("table", "dataset", "activation", "layers", "hidden"),
    value="r2_pct",
    int_keys=("layers", "hidden"),
    group=("dataset", "activation"),
    tolerance=f"|diff| <= {WITHIN:g} points of R² x 100 (layers = hidden layers, the "
    "workflow's linear maps - 1); ci_low, ci_high: the run's 95% bootstrap interval of R² over "
    "its runs (BCa), share_paper_in_ci: the share of published values inside it; n_below, "
    "n_above, sign_test_p: the exact two-sided sign test over a group's cells (one_sided = yes "
    f"when p < {SIGN_ALPHA:g}: the cells lie on one side of the paper beyond chance)",
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
