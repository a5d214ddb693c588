"""Figures of the NP analyses: each function takes a result table and writes PNG + PDF.

Every function has the signature ``plot_x(table, stem, **options) -> list[Path]`` and
writes ``<stem>.png`` and ``<stem>.pdf`` atomically. Figures are built on
``matplotlib.figure.Figure`` with the Agg canvas (no pyplot state, no backend switch), with
seaborn's axes-level functions; every axis is labelled and every hue has a legend.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dgpbench.analysis.early_stopping import CRITERION_LABELS, NP_TABLE_PAIRS
from dgpbench.analysis.regularisers import REGULARISER_ORDER
from dgpbench.analysis.variance import linear_fit
from dgpbench.io import save_figure
from dgpbench.labels import dataset_label

__all__ = [
    "plot_bounds_tightness",
    "plot_dgp_vs_log_variance",
    "plot_early_stopping_heatmaps",
    "plot_fitted_parameters",
    "plot_np_factors",
    "plot_np_vs_log_variance",
    "plot_permutation_dnn",
    "plot_permutation_linear",
    "plot_regularisers",
    "plot_size_heatmaps",
    "plot_training_correlations",
    "plot_win_rates",
    "save_figure",
]

FAMILY_LABELS = {
    "beta": "Beta",
    "exponential": "Trunc. exponential",
    "normal": "Trunc. normal",
    "pareto": "Trunc. Pareto",
}
NP_LABEL = "neural persistence (normalised)"
LOGVAR_LABEL = "log-variance of normalised weights"


PARAMETER_LABELS = {
    "pareto_b": "fitted truncated-Pareto b",
    "normal_sigma": "fitted truncated-normal \u03c3",
    "exponential_lam": "fitted truncated-exponential \u03bb",
    "beta_a": "fitted Beta \u03b1",
    "beta_b": "fitted Beta \u03b2",
}


def _quiet(plot: Callable) -> Callable:
    """Silence seaborn 0.13's deprecation chatter under matplotlib >= 3.11 (not ours to fix)."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
            warnings.filterwarnings("ignore", message="vert: bool was deprecated")
            return plot(*args, **kwargs)

    return wrapper


def _fmt(value: object) -> str:
    """Integral floats without the ".0" (hidden sizes, burn-ins)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _figure(n_rows: int, n_cols: int, *, width: float = 3.2, height: float = 2.7, **kw):
    fig = Figure(figsize=(width * n_cols, height * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False, **kw)
    return fig, axes


def _require(table: pd.DataFrame, columns: Sequence[str], name: str = "table") -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name} lacks columns {missing}")
    if table.empty:
        raise ValueError(f"{name} is empty")


def _order(values: pd.Series, preferred: Sequence[str] = ()) -> list:
    present = list(dict.fromkeys(values.dropna().tolist()))
    first = [v for v in preferred if v in present]
    return first + sorted(v for v in present if v not in first)


# --------------------------------------------------------------------------------------------
# 1. permutation test
# --------------------------------------------------------------------------------------------
@_quiet
def plot_permutation_linear(perm: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """NP Δ (permuted - original) of linear classifiers per data set (fig:np:linear:spatial).

    Parameters
    ----------
    perm : pandas.DataFrame
        :func:`dgpbench.analysis.permutation.permutation_study` rows; only ``n_layers == 1``
        are drawn.
    stem : path-like
        Output path without suffix.
    """
    _require(perm, ["dataset", "n_layers", "delta", "model"], "perm")
    linear = perm[perm["n_layers"] == 1].assign(Dataset=lambda d: d["dataset"].map(dataset_label))
    _require(linear, ["delta"], "perm (linear classifiers)")
    fig, axes = _figure(1, 1, width=4.2, height=3.2)
    ax = axes[0, 0]
    order = [dataset_label(d) for d in _order(linear["dataset"])]
    sns.boxplot(
        data=linear, x="Dataset", y="delta", order=order, ax=ax, color="#9ecae1", showfliers=False
    )
    per_model = linear.groupby(["Dataset", "model"], as_index=False)["delta"].mean()
    sns.stripplot(
        data=per_model,
        x="Dataset",
        y="delta",
        order=order,
        ax=ax,
        color="#08519c",
        size=3,
        label="per-model mean",
    )
    ax.axhline(0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("data set")
    ax.set_ylabel("NP Δ (permuted \u2212 original)")
    ax.set_title("Linear classifiers: permuted weights")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles[:1], labels[:1], loc="best", fontsize="small")
    return save_figure(fig, stem)


@_quiet
def plot_permutation_dnn(perm: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """NP Δ of DNN layers by data set and layer index (fig:np:dnn:permute).

    Columns: data sets; x: layer index (1 = connected to the inputs); hue: number of layers.
    """
    _require(perm, ["dataset", "n_layers", "layer", "delta"], "perm")
    deep = perm[perm["n_layers"] > 1].assign(
        **{"layer index": lambda d: d["layer"] + 1, "layers": lambda d: d["n_layers"].astype(int)}
    )
    _require(deep, ["delta"], "perm (DNNs)")
    datasets = _order(deep["dataset"])
    fig, axes = _figure(1, len(datasets), width=3.6, height=3.2, sharey=True)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = deep[deep["dataset"] == dataset]
        sns.boxplot(
            data=sub,
            x="layer index",
            y="delta",
            hue="layers",
            ax=ax,
            showfliers=False,
            palette="crest",
        )
        ax.axhline(0, color="grey", lw=0.8, ls="--")
        ax.set_title(dataset_label(dataset))
        ax.set_xlabel("layer index")
        ax.set_ylabel("NP Δ (permuted \u2212 original)")
        if ax.get_legend() is not None:
            ax.get_legend().set_title("number of layers")
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------
# 2. NP vs. log-variance (and 9: DGP vs. log-variance)
# --------------------------------------------------------------------------------------------
def _scatter_with_fits(ax, data, x, y, hue, palette, annotate):
    groups = [(None, data)] if hue is None else list(data.groupby(hue, sort=True))
    colors = sns.color_palette(palette, max(1, len(groups)))
    for color, (key, group) in zip(colors, groups, strict=True):
        slope, intercept, r2 = linear_fit(group[x], group[y])
        label = "models" if key is None else _fmt(key)
        if annotate and not math.isnan(r2):
            label += f" (R²={100 * r2:.0f}%)"
        ax.scatter(group[x], group[y], s=12, color=color, alpha=0.8, label=label)
        if not math.isnan(slope):
            xs = np.linspace(group[x].min(), group[x].max(), 2)
            ax.plot(xs, slope * xs + intercept, color=color, lw=1)
    ax.legend(fontsize="x-small", loc="best", title=hue)


@_quiet
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
    _require(models, ["log_variance", y] + [c for c in (col, row, hue) if c], "models")
    rows = _order(models[row]) if row else [None]
    cols = _order(models[col]) if col else [None]
    fig, axes = _figure(len(rows), len(cols), sharex=False, sharey=False)
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
                f"{row}={_fmt(r)}" if r is not None else None,
                dataset_label(c)
                if col == "dataset"
                else (f"{col}={_fmt(c)}" if c is not None else None),
            ]
            ax.set_title(", ".join(p for p in parts if p), fontsize="small")
            ax.set_xlabel(LOGVAR_LABEL)
            ax.set_ylabel(NP_LABEL if y == "np" else ("DGP" if y == "dgp" else y))
    if title:
        fig.suptitle(title)
    return save_figure(fig, stem)


@_quiet
def plot_dgp_vs_log_variance(
    models: pd.DataFrame, stem: str | os.PathLike[str], *, hue: str = "hidden"
) -> list[Path]:
    """DGP of final models against the log-variance, per data set (fig:dnp:dnpvsvariance)."""
    return plot_np_vs_log_variance(
        models, stem, col="dataset", hue=hue, y="dgp", title="DGP vs. variance of weights"
    )


# --------------------------------------------------------------------------------------------
# 3. bounds tightness, 4. NP factors, 5. size heatmaps
# --------------------------------------------------------------------------------------------
@_quiet
def plot_bounds_tightness(study: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """Bounds vs. NP (fig:appendix:additional:bounds:tightness).

    Lower bounds as cyan circles, upper bounds as crosses coloured by sortedness, the
    diagonal in orange.
    """
    _require(study, ["np", "lower", "upper", "sortedness"], "study")
    fig, axes = _figure(1, 1, width=5.4, height=4.6)
    ax = axes[0, 0]
    ax.scatter(
        study["np"],
        study["lower"],
        s=10,
        facecolors="none",
        edgecolors="c",
        label="lower bound L",
        linewidths=0.7,
    )
    points = ax.scatter(
        study["np"],
        study["upper"],
        s=14,
        marker="x",
        c=study["sortedness"],
        cmap="viridis",
        vmin=min(0.0, study["sortedness"].min()),
        vmax=1.0,
        label="upper bound U",
        linewidths=0.8,
    )
    lim = [0.0, max(1.0, float(study[["np", "lower", "upper"]].to_numpy().max()))]
    ax.plot(lim, lim, color="orange", lw=1.2, label="NP = bound")
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    ax.set_xlabel("neural persistence (normalised)")
    ax.set_ylabel("bound (normalised)")
    ax.set_title(f"Tightness of bounds ({len(study)} matrices)")
    fig.colorbar(points, ax=ax, label="sortedness of W (upper bounds)")
    ax.legend(loc="upper left", fontsize="small")
    return save_figure(fig, stem)


@_quiet
def plot_np_factors(
    study: pd.DataFrame, stem: str | os.PathLike[str], r2: pd.DataFrame | None = None
) -> list[Path]:
    """NP vs. log-variance coloured by sortedness, one panel per size (fig:np:variance:vs:np).

    Parameters
    ----------
    study : pandas.DataFrame
        :func:`dgpbench.analysis.factors.np_factors_study` rows.
    stem : path-like
    r2 : pandas.DataFrame, optional
        :func:`dgpbench.analysis.factors.np_factors_r2` output, shown in the titles.
    """
    _require(study, ["size", "family", "np", "log_variance", "sortedness"], "study")
    sizes = _order(study["size"])
    fig, axes = _figure(1, len(sizes), width=3.6, height=3.3)
    markers = {"pareto": "o", "normal": "^"}
    for ax, size in zip(axes[0], sizes, strict=True):
        sub = study[(study["size"] == size) & np.isfinite(study["log_variance"])]
        points = None
        for family, group in sub.groupby("family", sort=True):
            points = ax.scatter(
                group["log_variance"],
                group["np"],
                c=group["sortedness"],
                cmap="viridis",
                vmin=0,
                vmax=1,
                s=6,
                alpha=0.8,
                marker=markers.get(family, "o"),
                label=FAMILY_LABELS.get(family, family),
            )
        title = f"{size} \u00d7 {size}"
        if r2 is not None:
            pooled = r2[(r2["size"] == size) & (r2["family"] == "all")]
            if len(pooled):
                title += f"  (R²={pooled['r2_pct'].iloc[0]:.0f}%)"
        ax.set_title(title)
        ax.set_xlabel("log-variance of entries")
        ax.set_ylabel(NP_LABEL)
        ax.legend(fontsize="x-small", loc="best", title="distribution")
    if points is not None:
        fig.colorbar(points, ax=axes[0, -1], label="sortedness")
    return save_figure(fig, stem)


@_quiet
def plot_size_heatmaps(grid: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """Expected normalised NP over (rows, columns), one heatmap per distribution.

    Heatmaps have their own colour scales (fig:appendix:matrixshape:*): the trend, not the
    level, is the point.
    """
    _require(grid, ["label", "n_rows", "n_cols", "mean_np"], "grid")
    labels = list(dict.fromkeys(grid["label"]))
    n_cols = min(4, len(labels))
    n_rows = math.ceil(len(labels) / n_cols)
    fig, axes = _figure(n_rows, n_cols, width=3.4, height=3.0)
    for k, ax in enumerate(axes.flat):
        if k >= len(labels):
            ax.set_axis_off()
            continue
        sub = grid[grid["label"] == labels[k]]
        table = sub.pivot_table(index="n_rows", columns="n_cols", values="mean_np")
        sns.heatmap(
            table,
            ax=ax,
            cmap="rocket",
            cbar_kws={"label": "mean normalised NP"},
            annot=table.shape[0] <= 6,
            fmt=".2f",
            annot_kws={"fontsize": 6},
        )
        ax.invert_yaxis()
        ax.set_title(labels[k], fontsize="small")
        ax.set_xlabel("number of columns m")
        ax.set_ylabel("number of rows n")
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------
# 6. weight distributions
# --------------------------------------------------------------------------------------------
@_quiet
def plot_win_rates(rates: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """Stacked win rates per data set, depth and layer (fig:weightdistributions:winrates).

    Parameters
    ----------
    rates : pandas.DataFrame
        :func:`dgpbench.analysis.distributions.win_rates` grouped by ``dataset, n_layers,
        layer``.
    """
    _require(rates, ["dataset", "n_layers", "layer", "family", "win_rate"], "rates")
    datasets = _order(rates["dataset"])
    families = _order(rates["family"], ["pareto", "normal", "exponential", "beta"])
    colors = dict(zip(families, sns.color_palette("Set2", len(families)), strict=True))
    fig, axes = _figure(
        1,
        len(datasets),
        width=max(3.6, 0.35 * rates.groupby(["n_layers", "layer"]).ngroups + 1.5),
        height=3.4,
        sharey=True,
    )
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = rates[rates["dataset"] == dataset]
        wide = sub.pivot_table(
            index=["n_layers", "layer"], columns="family", values="win_rate", fill_value=0.0
        ).reindex(columns=families, fill_value=0.0)
        xs = np.arange(len(wide))
        bottom = np.zeros(len(wide))
        for family in families:
            ax.bar(
                xs,
                wide[family],
                bottom=bottom,
                color=colors[family],
                label=FAMILY_LABELS.get(family, family),
                width=0.8,
            )
            bottom += wide[family].to_numpy()
        ax.set_xticks(
            xs,
            [f"{int(n)}L:{int(layer) + 1}" for n, layer in wide.index],
            rotation=90,
            fontsize="x-small",
        )
        ax.set_title(dataset_label(dataset))
        ax.set_xlabel("layers in model : layer index")
        ax.set_ylabel("win rate (lowest NLL)")
        ax.set_ylim(0, 1)
    axes[0, -1].legend(
        fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="family"
    )
    return save_figure(fig, stem)


@_quiet
def plot_fitted_parameters(
    fits: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    parameter: str = "pareto_b",
    label: str | None = None,
    log_scale: bool = True,
) -> list[Path]:
    """Distribution of a fitted parameter by data set, depth and layer.

    ``parameter="pareto_b"`` gives fig:weightdistribution:parameters:pareto and
    ``"normal_sigma"`` fig:weightdistribution:parameters:normal.
    """
    _require(fits, ["dataset", "n_layers", "layer", parameter], "fits")
    data = fits.assign(**{"layer index": fits["layer"] + 1, "layers": fits["n_layers"].astype(int)})
    datasets = _order(data["dataset"])
    fig, axes = _figure(1, len(datasets), width=3.8, height=3.2, sharey=True)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = data[data["dataset"] == dataset]
        sns.boxplot(
            data=sub,
            x="layers",
            y=parameter,
            hue="layer index",
            ax=ax,
            palette="flare",
            showfliers=False,
            log_scale=log_scale,
        )
        ax.set_title(dataset_label(dataset))
        ax.set_xlabel("number of layers")
        ax.set_ylabel(label or PARAMETER_LABELS.get(parameter, parameter))
        if ax.get_legend() is not None:
            ax.get_legend().set_title("layer index")
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------
# 7. early stopping
# --------------------------------------------------------------------------------------------
@_quiet
def plot_early_stopping_heatmaps(
    grid: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    pairs: Sequence[tuple[str, str]] = NP_TABLE_PAIRS,
    run_columns: Sequence[str] = ("run",),
) -> list[Path]:
    """Mean differences over (burn-in, patience), Rieck et al.'s Figure 4 style.

    Top row: Δ epochs, bottom row: Δ test accuracy (percentage points), one column per
    criterion pair (fig:appendix:np:earlystopping:heatmap).
    """
    _require(
        grid,
        [*run_columns, "criterion", "burn_in", "patience", "stop_epoch", "test_accuracy"],
        "grid",
    )
    keys = list(dict.fromkeys([*run_columns, "burn_in", "patience"]))
    wide = grid.pivot_table(index=keys, columns="criterion", values=["stop_epoch", "test_accuracy"])
    fig, axes = _figure(2, len(pairs), width=3.6, height=3.0)
    for j, (a, b) in enumerate(pairs):
        for i, (quantity, scale, name) in enumerate(
            (("stop_epoch", 1.0, "Δ epochs"), ("test_accuracy", 100.0, "Δ test accuracy (pp)"))
        ):
            diff = (scale * (wide[(quantity, a)] - wide[(quantity, b)])).rename("diff")
            table = diff.groupby(level=["burn_in", "patience"]).mean().unstack("patience")
            table.index = [_fmt(v) for v in table.index]
            table.columns = [_fmt(v) for v in table.columns]
            ax = axes[i, j]
            lim = float(np.nanmax(np.abs(table.to_numpy()))) or 1.0
            sns.heatmap(
                table, ax=ax, cmap="vlag", center=0, vmin=-lim, vmax=lim, cbar_kws={"label": name}
            )
            ax.invert_yaxis()
            la, lb = CRITERION_LABELS.get(a, a), CRITERION_LABELS.get(b, b)
            ax.set_title(f"{name}: {la} \u2212 {lb}", fontsize="small")
            ax.set_xlabel("patience (evaluations)")
            ax.set_ylabel("burn-in (epochs)")
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------
# 8. regularisers, 9. training correlations
# --------------------------------------------------------------------------------------------
@_quiet
def plot_regularisers(models: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """NP and variance of weights per regulariser, one row per data set (App. G.3 figures)."""
    _require(models, ["dataset", "regulariser", "np", "variance"], "models")
    datasets = _order(models["dataset"])
    order = _order(models["regulariser"], REGULARISER_ORDER)
    fig, axes = _figure(len(datasets), 2, width=3.6, height=3.0)
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


@_quiet
def plot_training_correlations(
    correlations: pd.DataFrame, stem: str | os.PathLike[str]
) -> list[Path]:
    """Histograms of Kendall's tau with the variance over training (fig:dnp:...:correlation).

    Left: NP vs. variance, right: DGP vs. variance.
    """
    _require(correlations, ["metric", "tau"], "correlations")
    metrics = _order(correlations["metric"], ["np", "dgp"])
    fig, axes = _figure(1, len(metrics), width=3.6, height=3.0, sharey=True)
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
