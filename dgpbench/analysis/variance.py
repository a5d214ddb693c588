"""NP vs. the log-variance of the normalised weights (Sections 4.2-4.3, Appendix G.1).

For trained models, NP is regressed on ``log(variance)`` of the network's normalised
weights (natural log; R² does not depend on the base) by ordinary least squares: per data
set for linear classifiers (Figure "linear: variance", R² ≈ 99 %) and per architecture for
DNNs (table tab:appendix:additional:variancevspersistence:full:r2, ~line 1463).

Also here: its figure :func:`plot_np_vs_log_variance`; its command-line targets ``dgpbench
analysis models`` and ``dgpbench analysis np-variance`` are in
:mod:`dgpbench.cli.analysis_variance`.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dgpbench.analysis.common import (
    LOGVAR_LABEL,
    NP_LABEL,
    dataset_labels,
    new_figure,
    ordered_values,
    quiet_seaborn,
    require_columns,
    short_number,
)
from dgpbench.analysis.weights import layer_nps, load_weights, model_metrics, tidy_run_columns
from dgpbench.io import save_figure
from dgpbench.labels import dataset_label

__all__ = [
    "linear_fit",
    "model_study",
    "np_variance_r2",
    "plot_np_vs_log_variance",
    "plot_r2_by_epoch",
    "r2_by_epoch",
    "r2_by_epoch_table",
    "r2_table",
    "table_epochs",
]


def model_study(
    checkpoints: Sequence[str | os.PathLike[str]],
    *,
    curves: Sequence[pd.DataFrame] | None = None,
    p: float = 2.0,
    dgp: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """NP (network and per layer), variance, log-variance and DGP of trained models.

    Shared by targets 2 (NP vs. variance), 8 (regularisers) and 9 (DGP vs. variance).

    Parameters
    ----------
    checkpoints : sequence of path-like
        Checkpoints of :func:`dgpbench.models.train.train_mlp` (usually the final ones).
    curves : sequence of pandas.DataFrame, optional
        The training curves of each checkpoint's run, in the same order
        (:class:`dgpbench.analysis.curves.CurveRecorder` rows). Their last evaluation is the
        checkpoint, so NP, variance, log-variance and DGP are read from it instead of
        recomputed; only the per-layer NP comes from the weights (and their mean must match
        the curve's NP, which catches curves of another run).
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
    if curves is not None and len(curves) != len(checkpoints):
        raise ValueError(
            f"curves must have one frame per checkpoint, got {len(curves)} for "
            f"{len(checkpoints)} checkpoints"
        )
    rows = []
    for i, path in enumerate(tqdm(checkpoints, desc="models", disable=None if progress else True)):
        weights, info = load_weights(path)
        if curves is None:
            rows.append({**info, **model_metrics(weights, p=p, layers=True, dgp=dgp)})
        else:
            rows.append({**info, **_final_metrics(curves[i], weights, info, p=p, dgp=dgp)})
    return tidy_run_columns(pd.DataFrame(rows))


def _final_metrics(
    curve: pd.DataFrame, weights: list[np.ndarray], info: dict, *, p: float, dgp: bool
) -> dict[str, float]:
    """``model_metrics`` of a checkpoint, NP / variance / DGP read from its run's curve."""
    path = info["path"]
    needed = ["epoch", "np", "variance", "log_variance"] + (["dgp"] if dgp else [])
    missing = [c for c in needed if c not in curve.columns]
    if missing:
        raise ValueError(f"curves of {path} lack columns {missing}")
    if curve.empty:
        raise ValueError(f"curves of {path} have no rows")
    last = curve.loc[curve["epoch"].idxmax()]
    epoch = info.get("epoch")
    if epoch is not None and not math.isclose(float(last["epoch"]), float(epoch), abs_tol=1e-6):
        raise ValueError(
            f"curves of {path} end at epoch {last['epoch']}, the checkpoint is from epoch {epoch}"
        )
    per_layer = layer_nps(weights, p=p)
    # the curves keep 8 significant digits
    if not math.isclose(float(np.mean(per_layer)), float(last["np"]), rel_tol=1e-6):
        raise ValueError(
            f"curves do not belong to {path}: their final NP is {last['np']}, the "
            f"checkpoint's {np.mean(per_layer)}"
        )
    out = {c: float(last[c]) for c in ("np", "variance", "log_variance")}
    out.update({f"np_layer_{i}": v for i, v in enumerate(per_layer)})
    if dgp:
        out["dgp"] = float(last["dgp"])
    return out


def _paired_points(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as float64 vectors of one length (the points of a fit)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    return x, y


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least-squares line ``y ≈ slope * x + intercept`` and its R².

    Returns
    -------
    slope, intercept, r2 : float
        ``r2 = 1 - SS_res / SS_tot``; NaN with fewer than 3 points or constant ``y``.
    """
    x, y = _paired_points(x, y)
    if x.size < 3 or np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    slope, intercept = np.polyfit(x, y, 1)
    ss_res = float(np.sum((y - (slope * x + intercept)) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    return float(slope), float(intercept), r2


def _squared_correlation(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """R² of the least-squares line ``y ~ x`` (the squared Pearson correlation), along
    ``axis`` (vectorised for :func:`scipy.stats.bootstrap`).
    """
    xc = x - x.mean(axis=axis, keepdims=True)
    yc = y - y.mean(axis=axis, keepdims=True)
    sxy = (xc * yc).sum(axis=axis)
    sxx, syy = (xc * xc).sum(axis=axis), (yc * yc).sum(axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return sxy * sxy / (sxx * syy)


def r2_interval(
    x: Any, y: Any, *, confidence: float = 0.95, n_resamples: int = 9999, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap confidence interval of the R² of ``y ~ x`` over the points (runs).

    The points are resampled in pairs (:func:`scipy.stats.bootstrap`, BCa). With 20 runs
    per architecture, as in the paper, an R² is a noisy statistic: the interval says which
    published values a run of other seeds is compatible with.

    Parameters
    ----------
    x, y : array-like of shape (n,)
    confidence : float, default=0.95
    n_resamples : int, default=9999
    seed : int, default=0
        Seeds the resampling.

    Returns
    -------
    low, high : float
        NaN with fewer than 3 points, a constant ``x`` or ``y``, or a degenerate bootstrap
        distribution.
    """
    from scipy import stats

    x, y = _paired_points(x, y)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    with warnings.catch_warnings():
        # a resample of tied points has no R²; BCa then reports NaN, which we pass on
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(
            (x, y),
            _squared_correlation,
            paired=True,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="BCa",
            random_state=np.random.default_rng(seed),  # `rng` only from scipy 1.15
        )
    low, high = res.confidence_interval
    return float(low), float(high)


def np_variance_r2(
    models: pd.DataFrame,
    *,
    by: Sequence[str] = ("dataset", "activation", "n_layers", "hidden"),
    x: str = "log_variance",
    y: str = "np",
    confidence: float | None = 0.95,
    seed: int = 0,
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
    confidence : float or None, default=0.95
        Level of each group's bootstrap interval (:func:`r2_interval`); None: no interval.
    seed : int, default=0
        Seeds the bootstrap (the same stream for every group).

    Returns
    -------
    pandas.DataFrame
        ``*by, n, slope, intercept, r2, r2_pct`` and, with ``confidence``,
        ``r2_ci_low_pct, r2_ci_high_pct``.
    """
    by = list(by)
    missing = [c for c in [*by, x, y] if c not in models.columns]
    if missing:
        raise ValueError(f"models lacks columns {missing}")
    rows = []
    for key, group in models.groupby(by, dropna=False, sort=True):
        slope, intercept, r2 = linear_fit(group[x], group[y])
        row = {
            **dict(zip(by, key, strict=True)),
            "n": len(group),
            "slope": slope,
            "intercept": intercept,
            "r2": r2,
            "r2_pct": 100 * r2,
        }
        if confidence is not None:
            low, high = r2_interval(group[x], group[y], confidence=confidence, seed=seed)
            row.update(r2_ci_low_pct=100 * low, r2_ci_high_pct=100 * high)
        rows.append(row)
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


R2_BY = ("dataset", "activation", "n_layers", "hidden")


def r2_by_epoch(curves: pd.DataFrame, *, by: Sequence[str] = R2_BY) -> pd.DataFrame:
    """R² of NP ~ log-variance of each architecture at every evaluation of training.

    The R² table fits the final models (epoch 40); the cells are sensitive to how long the
    models trained, so this fits the same line over the runs at every evaluation of their
    curves (:mod:`dgpbench.analysis.curves`). Its last epoch is the R² table's fit: the
    models table takes NP and the variance from each run's last curve row.

    Parameters
    ----------
    curves : pandas.DataFrame
        Rows of ``dgpbench analysis curves`` (one per run and evaluation): ``by`` columns,
        ``run, epoch, np, log_variance``. Linear classifiers (``n_layers == 1``) are left
        out, as in the R² table.
    by : sequence of str
        The columns of an architecture.

    Returns
    -------
    pandas.DataFrame
        ``*by, epoch, n, slope, intercept, r2, r2_pct`` (no bootstrap interval: one per
        evaluation would take minutes), sorted by architecture and epoch.

    Raises
    ------
    ValueError
        If a column is missing, or a run has two rows at one epoch.
    """
    require_columns(curves, [*by, "run", "epoch", "np", "log_variance"], "curves")
    deep = curves[curves["n_layers"] > 1]
    repeated = deep.duplicated(["run", "epoch"])
    if repeated.any():
        run, epoch = deep.loc[repeated, ["run", "epoch"]].iloc[0]
        raise ValueError(f"curves hold run {run!r} twice at epoch {epoch}: one row per evaluation")
    out = np_variance_r2(deep, by=[*by, "epoch"], confidence=None)
    return out.sort_values([*by, "epoch"]).reset_index(drop=True)


def table_epochs(epochs: Sequence[float]) -> list[float]:
    """Whole epochs shown in the R² by epoch table: 1-5, every 5th and the last.

    Examples
    --------
    >>> table_epochs([0.25 * k for k in range(1, 161)])
    [1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
    """
    whole = sorted({float(e) for e in epochs if float(e).is_integer() and e > 0})
    if not whole:
        return sorted({float(e) for e in epochs})[-1:]
    keep = [e for e in whole if e <= 5 or e % 5 == 0]
    return keep if keep[-1] == whole[-1] else [*keep, whole[-1]]


def r2_by_epoch_table(r2: pd.DataFrame, epochs: Sequence[float] | None = None) -> pd.DataFrame:
    """Wide R² (x100) by epoch: rows dataset, activation, hidden layers, width; columns the
    ``epochs`` (default :func:`table_epochs`).
    """
    epochs = table_epochs(r2["epoch"]) if epochs is None else [float(e) for e in epochs]
    sub = r2[r2["epoch"].astype(float).isin(epochs)]
    sub = sub.assign(
        dataset=dataset_labels(sub["dataset"]),
        hidden_layers=sub["n_layers"].astype(int) - 1,
        hidden=sub["hidden"].astype(int),
        epoch=sub["epoch"].astype(float).map(short_number),
    )
    wide = sub.pivot_table(
        index=["dataset", "activation", "hidden_layers", "hidden"],
        columns="epoch",
        values="r2_pct",
        sort=False,
    )
    return wide[[short_number(e) for e in epochs if short_number(e) in wide.columns]]


@quiet_seaborn
def plot_r2_by_epoch(
    r2: pd.DataFrame, stem: str | os.PathLike[str], *, paper: pd.DataFrame | None = None
) -> list[Path]:
    """R² (%) of NP ~ log-variance against the epoch, one panel per data set, activation and
    depth, one line per width (and, with ``paper``, the published value at the last epoch
    as a marker: ``dataset, activation, n_layers, hidden, r2_pct``).
    """
    import seaborn as sns

    require_columns(r2, [*R2_BY, "epoch", "r2_pct"], "R² by epoch")
    panels = list(r2.groupby(["dataset", "activation", "n_layers"], sort=True))
    n_cols = min(3, len(panels))
    n_rows = math.ceil(len(panels) / n_cols)
    fig, axes = new_figure(n_rows, n_cols, sharex=True, sharey=False)
    widths = ordered_values(r2["hidden"])
    colors = dict(zip(widths, sns.color_palette("viridis", len(widths)), strict=True))
    for ax, ((dataset, activation, layers), sub) in zip(axes.flat, panels, strict=False):
        last = sub["epoch"].max()
        for width, line in sub.groupby("hidden", sort=True):
            ax.plot(line["epoch"], line["r2_pct"], color=colors[width], lw=1, label=str(width))
            if paper is not None:
                pub = paper[
                    (paper["dataset"] == dataset)
                    & (paper["activation"] == activation)
                    & (paper["n_layers"] == layers)
                    & (paper["hidden"] == width)
                ]
                if len(pub):
                    ax.scatter([last], pub["r2_pct"].iloc[:1], color=colors[width], marker="x")
        ax.set_title(
            f"{dataset_label(dataset)}, {activation}, {int(layers) - 1} hidden", fontsize="small"
        )
        ax.set_xlabel("epoch")
        ax.set_ylabel("R² (%) of NP ~ log-variance")
        ax.legend(fontsize="x-small", title="width", loc="lower right")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_axis_off()
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------


def _scatter_with_fits(ax, data, x, y, hue, palette, annotate):
    import seaborn as sns

    groups = [(None, data)] if hue is None else list(data.groupby(hue, sort=True))
    colors = sns.color_palette(palette, max(1, len(groups)))
    for color, (key, group) in zip(colors, groups, strict=True):
        slope, intercept, r2 = linear_fit(group[x], group[y])
        label = "models" if key is None else short_number(key)
        if annotate and not math.isnan(r2):
            label += f" (R²={100 * r2:.0f}%)"
        ax.scatter(group[x], group[y], s=12, color=color, alpha=0.8, label=label)
        if not math.isnan(slope):
            xs = np.linspace(group[x].min(), group[x].max(), 2)
            ax.plot(xs, slope * xs + intercept, color=color, lw=1)
    ax.legend(fontsize="x-small", loc="best", title=hue)


@quiet_seaborn
def plot_np_vs_log_variance(
    models: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    col: str | None = "dataset",
    row: str | None = None,
    hue: str | None = None,
    y: str = "np",
    title: str | None = None,
) -> list[Path]:
    """Scatter of NP against the log-variance with a least-squares line per group.

    Parameters
    ----------
    models : pandas.DataFrame
        :func:`dgpbench.analysis.variance.model_study` rows (filter them first: e.g. linear
        classifiers with ``col="dataset"``; DNNs with 3-4 layers and hidden 250/650; or
        one activation with ``row="n_layers", col="dataset", hue="hidden"`` for the appendix
        figures).
    stem : path-like
    col, row, hue : str, optional
        Facet and colour columns.
    y : str, default="np"
        Response column (``"dgp"`` for Appendix G.4).
    title : str, optional
    """
    require_columns(models, ["log_variance", y] + [c for c in (col, row, hue) if c], "models")
    rows = ordered_values(models[row]) if row else [None]
    cols = ordered_values(models[col]) if col else [None]
    fig, axes = new_figure(len(rows), len(cols), sharex=False, sharey=False)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i, j]
            sub = models
            if r is not None:
                sub = sub[sub[row] == r]
            if c is not None:
                sub = sub[sub[col] == c]
            if sub.empty:
                ax.set_axis_off()
                continue
            _scatter_with_fits(ax, sub, "log_variance", y, hue, "viridis", annotate=True)
            parts = [
                f"{row}={short_number(r)}" if r is not None else None,
                dataset_label(c)
                if col == "dataset"
                else (f"{col}={short_number(c)}" if c is not None else None),
            ]
            ax.set_title(", ".join(p for p in parts if p), fontsize="small")
            ax.set_xlabel(LOGVAR_LABEL)
            ax.set_ylabel(NP_LABEL if y == "np" else ("DGP" if y == "dgp" else y))
    if title:
        fig.suptitle(title)
    return save_figure(fig, stem)
