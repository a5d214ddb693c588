"""NP and variance of weights for models trained with different regularisers (App. G.3).

Replicates Section 4.1 of Rieck et al. (2019) as the paper does (~line 1534): 3 hidden
layers of 650 ReLU units (``n_layers=4``) trained without regulariser, with batch
normalisation, or with dropout 0.5, on MNIST and Fashion-MNIST; the distributions of NP and
of the variance of the normalised weights are compared per regulariser. Use
:func:`dgpbench.analysis.variance.model_study` on the final checkpoints to get the
per-model values, then :func:`regulariser_summary` for the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from scipy import stats

__all__ = ["REGULARISER_ORDER", "regulariser_summary"]

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
