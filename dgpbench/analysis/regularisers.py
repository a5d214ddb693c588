"""NP and variance of weights for models trained with different regularisers (App. G.3).

Replicates Section 4.1 of Rieck et al. (2019) as the paper does (~line 1534): 3 hidden
layers of 650 ReLU units (``n_layers=4``) trained without regulariser, with batch
normalisation, or with dropout 0.5, on MNIST and Fashion-MNIST; the distributions of NP and
of the variance of the normalised weights are compared per regulariser. Use
:func:`dgpbench.analysis.variance.model_study` on the final checkpoints to get the
per-model values, then :func:`regulariser_summary` for the table.

Also here: its figure :func:`plot_regularisers`; its command-line target ``dgpbench analysis
regularisers`` is in :mod:`dgpbench.cli.analysis_regularisers`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from scipy import stats

from dgpbench.analysis.common import (
    NP_LABEL,
    new_figure,
    ordered_values,
    quiet_seaborn,
    require_columns,
)
from dgpbench.io import save_figure
from dgpbench.labels import dataset_label

__all__ = ["REGULARISER_ORDER", "plot_regularisers", "regulariser_summary"]

REGULARISER_ORDER = ("none", "batchnorm", "dropout")


def regulariser_summary(
    models: pd.DataFrame,
    *,
    by: Sequence[str] = ("dataset",),
    metrics: Sequence[str] = ("np", "variance"),
) -> pd.DataFrame:
    """Per data set and regulariser: mean, std and the KS p-value against "none".

    Parameters
    ----------
    models : pandas.DataFrame
        :func:`dgpbench.analysis.variance.model_study` rows with a ``regulariser`` column.
    by : sequence of str, default=("dataset",)
    metrics : sequence of str, default=("np", "variance")

    Returns
    -------
    pandas.DataFrame
        ``*by, regulariser, n_models, <metric>_mean, <metric>_std, <metric>_ks_pvalue``
        (two-sample KS p-value of the metric vs. the unregularised models of the same
        group; NaN for "none" itself or when there are none).
    """
    by = list(by)
    missing = [c for c in [*by, "regulariser", *metrics] if c not in models.columns]
    if missing:
        raise ValueError(f"models lacks columns {missing}")
    rows = []
    for key, group in models.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        reference = group[group["regulariser"] == "none"]
        order = [r for r in REGULARISER_ORDER if r in set(group["regulariser"])]
        order += sorted(set(group["regulariser"]) - set(order))
        for reg in order:
            sub = group[group["regulariser"] == reg]
            row = {**dict(zip(by, key, strict=True)), "regulariser": reg, "n_models": len(sub)}
            for metric in metrics:
                row[f"{metric}_mean"] = sub[metric].mean()
                row[f"{metric}_std"] = sub[metric].std(ddof=1) if len(sub) > 1 else float("nan")
                row[f"{metric}_ks_pvalue"] = (
                    float(stats.ks_2samp(sub[metric], reference[metric]).pvalue)
                    if reg != "none" and len(reference) and len(sub)
                    else float("nan")
                )
            rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------


@quiet_seaborn
def plot_regularisers(models: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """NP and variance of weights per regulariser, one row per data set (App. G.3 figures)."""
    import seaborn as sns

    require_columns(models, ["dataset", "regulariser", "np", "variance"], "models")
    datasets = ordered_values(models["dataset"])
    order = ordered_values(models["regulariser"], REGULARISER_ORDER)
    fig, axes = new_figure(len(datasets), 2, width=3.6, height=3.0)
    for i, dataset in enumerate(datasets):
        sub = models[models["dataset"] == dataset]
        for j, (metric, label) in enumerate(
            (("np", NP_LABEL), ("variance", "variance of normalised weights"))
        ):
            ax = axes[i, j]
            sns.boxplot(
                data=sub,
                x="regulariser",
                y=metric,
                order=order,
                hue="regulariser",
                hue_order=order,
                ax=ax,
                showfliers=False,
                palette="Set2",
                legend=False,
            )
            sns.stripplot(
                data=sub,
                x="regulariser",
                y=metric,
                order=order,
                ax=ax,
                color="k",
                size=2.5,
                alpha=0.6,
            )
            ax.set_title(f"{dataset_label(dataset)}: {'NP' if metric == 'np' else 'variance'}")
            ax.set_xlabel("regulariser")
            ax.set_ylabel(label)
    return save_figure(fig, stem)
