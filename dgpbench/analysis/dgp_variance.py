"""DGP vs. the variance of weights (Appendix G.4, ~line 1564).

Over training, Kendall's tau between the variance of the normalised weights and DGP (and,
for comparison, between the variance and NP) is computed per run from the quarter-epoch
curves (:mod:`dgpbench.analysis.curves`); for final models, DGP is plotted against the
log-variance (use :func:`dgpbench.analysis.variance.model_study` rows).

Also here: its figures :func:`plot_dgp_vs_log_variance`, :func:`plot_training_correlations`;
its command-line target ``dgpbench analysis dgp-variance`` is in
:mod:`dgpbench.cli.analysis_dgp_variance`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from dgpbench.analysis.common import (
    new_figure,
    ordered_values,
    quiet_seaborn,
    require_columns,
)
from dgpbench.io import save_figure

__all__ = ["plot_dgp_vs_log_variance", "plot_training_correlations", "training_correlations"]


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


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


@quiet_seaborn
def plot_dgp_vs_log_variance(
    models: pd.DataFrame, stem: str | os.PathLike[str], *, hue: str = "hidden"
) -> list[Path]:
    """DGP of final models against the log-variance, per data set (fig:dnp:dnpvsvariance)."""
    from dgpbench.analysis.variance import plot_np_vs_log_variance

    return plot_np_vs_log_variance(
        models, stem, col="dataset", hue=hue, y="dgp", title="DGP vs. variance of weights"
    )


@quiet_seaborn
def plot_training_correlations(
    correlations: pd.DataFrame, stem: str | os.PathLike[str]
) -> list[Path]:
    """Histograms of Kendall's tau with the variance over training (fig:dnp:...:correlation).

    Left: NP vs. variance, right: DGP vs. variance.
    """
    import seaborn as sns

    require_columns(correlations, ["metric", "tau"], "correlations")
    metrics = ordered_values(correlations["metric"], ["np", "dgp"])
    fig, axes = new_figure(1, len(metrics), width=3.6, height=3.0, sharey=True)
    for ax, metric in zip(axes[0], metrics, strict=True):
        sub = correlations[(correlations["metric"] == metric) & correlations["tau"].notna()]
        hue = "dataset" if "dataset" in sub and sub["dataset"].nunique() > 1 else None
        sns.histplot(
            data=sub,
            x="tau",
            hue=hue,
            ax=ax,
            bins=np.linspace(-1, 1, 21),
            multiple="stack",
            palette="Set2" if hue else None,
            color=None if hue else "#3182bd",
        )
        ax.set_xlim(-1, 1)
        name = {"np": "NP", "dgp": "DGP"}.get(metric, metric)
        ax.set_title(f"{name} vs. variance over training")
        ax.set_xlabel(f"Kendall's τ ({name}, variance)")
        ax.set_ylabel("number of training runs")
    return save_figure(fig, stem)
