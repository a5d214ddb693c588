"""NP vs. the log-variance of the normalised weights (Sections 4.2-4.3, Appendix G.1).

For trained models, NP is regressed on ``log(variance)`` of the network's normalised
weights (natural log; R² does not depend on the base) by ordinary least squares: per data
set for linear classifiers (Figure "linear: variance", R² ≈ 99 %) and per architecture for
DNNs (table tab:appendix:additional:variancevspersistence:full:r2, ~line 1463).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dgpbench.analysis.weights import load_weights, model_metrics, tidy_run_columns

log = logging.getLogger(__name__)

__all__ = ["linear_fit", "model_study", "np_variance_r2", "r2_table"]


def model_study(
    checkpoints: Sequence[str | os.PathLike[str]],
    *,
    p: float = 2.0,
    dgp: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """NP (network and per layer), variance, log-variance and DGP of trained models.

    Shared by targets 2 (NP vs. variance), 8 (regularisers) and 9 (DGP vs. variance).

    Parameters
    ----------
    checkpoints : sequence of path-like
        Checkpoints of :func:`dgpbench.models.train_mlp` (usually the final ones).
    p : float, default=2
    dgp : bool, default=True
        Also compute DGP.
    progress : bool, default=True

    Returns
    -------
    pandas.DataFrame
        One row per checkpoint: run columns (``dataset, n_layers, hidden, activation,
        batchnorm, dropout, regulariser, seed, epoch, path``), ``np, variance,
        log_variance, np_layer_<i>`` and ``dgp``.
    """
    if len(checkpoints) == 0:
        raise ValueError("checkpoints must not be empty")
    rows = []
    for path in tqdm(checkpoints, desc="models", disable=None if progress else True):
        weights, info = load_weights(path)
        rows.append({**info, **model_metrics(weights, p=p, layers=True, dgp=dgp)})
    return tidy_run_columns(pd.DataFrame(rows))


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least-squares line ``y ≈ slope * x + intercept`` and its R².

    Returns
    -------
    slope, intercept, r2 : float
        ``r2 = 1 - SS_res / SS_tot``; NaN with fewer than 3 points or constant ``y``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    if x.size < 3 or np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    slope, intercept = np.polyfit(x, y, 1)
    ss_res = float(np.sum((y - (slope * x + intercept)) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    return float(slope), float(intercept), r2


def np_variance_r2(
    models: pd.DataFrame,
    *,
    by: Sequence[str] = ("dataset", "activation", "n_layers", "hidden"),
    x: str = "log_variance",
    y: str = "np",
) -> pd.DataFrame:
    """R² of the linear fit ``y ~ x`` per group (by default NP ~ log-variance).

    Parameters
    ----------
    models : pandas.DataFrame
        Output of :func:`model_study`.
    by : sequence of str
        Grouping columns; use ``["dataset"]`` on linear classifiers.
    x, y : str
        Regressor and response columns.

    Returns
    -------
    pandas.DataFrame
        ``*by, n, slope, intercept, r2, r2_pct``.
    """
    by = list(by)
    missing = [c for c in [*by, x, y] if c not in models.columns]
    if missing:
        raise ValueError(f"models lacks columns {missing}")
    rows = []
    for key, group in models.groupby(by, dropna=False, sort=True):
        slope, intercept, r2 = linear_fit(group[x], group[y])
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "n": len(group),
                "slope": slope,
                "intercept": intercept,
                "r2": r2,
                "r2_pct": 100 * r2,
            }
        )
    return pd.DataFrame(rows)


def r2_table(r2: pd.DataFrame) -> pd.DataFrame:
    """The paper's R² table layout (~line 1463).

    Rows: number of hidden layers (``n_layers - 1``) x hidden size; columns: data set x
    activation; cells: R² x 100. Linear classifiers (no hidden layer) are left out.

    Parameters
    ----------
    r2 : pandas.DataFrame
        Output of :func:`np_variance_r2` grouped by ``dataset, activation, n_layers,
        hidden``.

    Returns
    -------
    pandas.DataFrame
        Wide table with a (hidden_layers, hidden) row index and (dataset, activation)
        columns.
    """
    deep = r2[r2["n_layers"] > 1].assign(hidden_layers=lambda d: d["n_layers"].astype(int) - 1)
    deep = deep.assign(hidden=deep["hidden"].astype(int))
    return deep.pivot_table(
        index=["hidden_layers", "hidden"], columns=["dataset", "activation"], values="r2_pct"
    )
