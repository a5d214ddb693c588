"""DGP vs. the variance of weights (Appendix G.4, ~line 1564).

Over training, Kendall's tau between the variance of the normalised weights and DGP (and,
for comparison, between the variance and NP) is computed per run from the quarter-epoch
curves (:mod:`dgpbench.analysis.curves`); for final models, DGP is plotted against the
log-variance (use :func:`dgpbench.analysis.variance.model_study` rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["training_correlations"]


def training_correlations(
    curves: pd.DataFrame,
    *,
    run_columns: Sequence[str] = ("run",),
    against: str = "variance",
    metrics: Sequence[str] = ("np", "dgp"),
    keep_columns: Sequence[str] = ("dataset", "n_layers", "hidden", "activation"),
) -> pd.DataFrame:
    """Kendall's tau between ``against`` and each metric over each training run.

    Parameters
    ----------
    curves : pandas.DataFrame
        One row per (run, evaluation) (see :func:`dgpbench.analysis.curves.criterion_curves`).
    run_columns : sequence of str, default=("run",)
    against : str, default="variance"
    metrics : sequence of str, default=("np", "dgp")
    keep_columns : sequence of str
        Constant-per-run columns copied to the output when present.

    Returns
    -------
    pandas.DataFrame
        Tidy: one row per (run, metric) with ``n_evaluations, tau, pvalue``. Note that NP
        rises when the variance falls, so "NP tracks the variance" shows as tau near -1.
    """
    run_columns = list(run_columns)
    missing = [c for c in [*run_columns, against, *metrics] if c not in curves.columns]
    if missing:
        raise ValueError(f"curves lacks columns {missing}")
    keep = [c for c in keep_columns if c in curves.columns and c not in run_columns]
    rows = []
    for key, run in curves.groupby(run_columns, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        base = {**dict(zip(run_columns, key, strict=True)), **run[keep].iloc[0].to_dict()}
        for metric in metrics:
            if len(run) < 2 or np.ptp(run[metric]) == 0 or np.ptp(run[against]) == 0:
                tau, pvalue = float("nan"), float("nan")
            else:
                res = stats.kendalltau(run[against], run[metric])
                tau, pvalue = float(res.statistic), float(res.pvalue)
            rows.append(
                {**base, "metric": metric, "n_evaluations": len(run), "tau": tau, "pvalue": pvalue}
            )
    return pd.DataFrame(rows)
