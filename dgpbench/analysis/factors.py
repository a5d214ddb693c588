"""NP as a function of variance and sortedness on synthetic matrices (App. B.2, ~line 937).

For each size in {50, 100, 250} (square matrices), 2000 matrices: the family is drawn
uniformly from {truncated Pareto, truncated normal}; ``b = 60 x``, ``x ~ Beta(1, 2)``; the
Pareto uses shape ``b`` and the normal scale ``sigma = 1 / b``; then the noisy sorting
process with ``log s ~ U[-10, 0]``. A linear regression ``NP ~ log(variance) + sortedness``
is fitted per size (and family); the paper reports R² ≈ 89 %.

As in :mod:`dgpbench.analysis.bounds`, entries are used as sampled (``rescale_max`` divides
by the matrix maximum first).

Also here: its figure :func:`plot_np_factors`; its command-line target ``dgpbench analysis
np-factors`` is in :mod:`dgpbench.cli.analysis_factors`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dgpbench._validation import check_int
from dgpbench.analysis.bounds import draw_study_parameters
from dgpbench.analysis.common import (
    FAMILY_LABELS,
    NP_LABEL,
    new_figure,
    ordered_values,
    quiet_seaborn,
    require_columns,
)
from dgpbench.analysis.sortedness import sortedness
from dgpbench.analysis.synthetic import (
    noisy_sort,
    sample_matrix,
    truncated_normal,
    truncated_pareto,
)
from dgpbench.io import save_figure

__all__ = ["multiple_r2", "np_factors_r2", "np_factors_study", "plot_np_factors"]

FACTOR_FAMILIES = ("pareto", "normal")


def np_factors_study(
    sizes: Sequence[int] = (50, 100, 250),
    n_per_size: int = 2000,
    *,
    families: Sequence[str] = FACTOR_FAMILIES,
    b_scale: float = 60.0,
    b_beta: tuple[float, float] = (1.0, 2.0),
    log_s_range: tuple[float, float] = (-10.0, 0.0),
    p: float = 2.0,
    rescale_max: bool = False,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Sample matrices and record NP, variance and sortedness (target 4).

    Parameters
    ----------
    sizes : sequence of int, default=(50, 100, 250)
        Matrix sizes (``n = m``).
    n_per_size : int, default=2000
    families : sequence of {"pareto", "normal"}
    b_scale, b_beta, log_s_range, p, rescale_max
        See :func:`dgpbench.analysis.bounds.bounds_tightness_study`.
    seed : int, default=0
        Matrix i of size index k uses child ``(k, i)`` of ``SeedSequence(seed)``.
    progress : bool, default=True

    Returns
    -------
    pandas.DataFrame
        One row per matrix: ``size, matrix, family, b, param, s, variance, log_variance,
        np, sortedness`` (``param`` is b for the Pareto, sigma for the normal).
    """
    from dgpbench.topology import neural_persistence

    n_per_size = check_int(n_per_size, "n_per_size")
    unknown = set(families) - set(FACTOR_FAMILIES)
    if unknown or not families:
        raise ValueError(
            f"families must be a non-empty subset of {FACTOR_FAMILIES}, got {families!r}"
        )
    rows = []
    per_size = np.random.SeedSequence(seed).spawn(len(sizes))
    total = len(sizes) * n_per_size
    bar = tqdm(total=total, desc="np factors", disable=None if progress else True)
    for k, size in enumerate(sizes):
        size = check_int(size, "sizes[...]")
        children = per_size[k].spawn(n_per_size)
        for i in range(n_per_size):
            rng = np.random.default_rng(children[i])
            family = str(families[int(rng.integers(len(families)))])
            b, s = draw_study_parameters(
                rng, b_scale=b_scale, b_beta=b_beta, log_s_range=log_s_range
            )
            dist = truncated_pareto(b) if family == "pareto" else truncated_normal(1.0 / b)
            W = noisy_sort(sample_matrix(dist, (size, size), rng), s, rng)
            if rescale_max and W.max() > 0:
                W = W / W.max()
            variance = float(W.var())
            rows.append(
                {
                    "size": size,
                    "matrix": i,
                    "family": family,
                    "b": b,
                    "param": b if family == "pareto" else 1.0 / b,
                    "s": s,
                    "variance": variance,
                    "log_variance": float(np.log(variance)) if variance > 0 else -np.inf,
                    "np": float(neural_persistence(W, p=p, normalize=True)),
                    "sortedness": sortedness(W),
                }
            )
            bar.update(1)
    bar.close()
    return pd.DataFrame(rows)


def multiple_r2(X: np.ndarray, y: np.ndarray) -> float:
    """R² of the least-squares fit ``y ~ 1 + X`` (X of shape (n, k))."""
    X = np.column_stack([np.ones(len(y)), np.asarray(X, dtype=np.float64)])
    y = np.asarray(y, dtype=np.float64)
    if len(y) <= X.shape[1]:
        return float("nan")
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    ss_res = float(np.sum((y - X @ coef) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


def np_factors_r2(
    study: pd.DataFrame,
    *,
    regressors: Sequence[str] = ("log_variance", "sortedness"),
) -> pd.DataFrame:
    """R² of ``NP ~ log-variance + sortedness`` per size and family, and pooled ("all").

    Returns
    -------
    pandas.DataFrame
        ``size, family, n, r2, r2_pct`` (family ``"all"`` pools the families of a size).
    """
    regressors = list(regressors)
    missing = [c for c in ["size", "family", "np", *regressors] if c not in study.columns]
    if missing:
        raise ValueError(f"study lacks columns {missing}")
    finite = study[np.isfinite(study[regressors]).all(axis=1)]
    rows = []
    for size, group in finite.groupby("size", sort=True):
        parts = [(f, g) for f, g in group.groupby("family", sort=True)] + [("all", group)]
        for family, sub in parts:
            r2 = multiple_r2(sub[regressors].to_numpy(), sub["np"].to_numpy())
            rows.append(
                {"size": size, "family": family, "n": len(sub), "r2": r2, "r2_pct": 100 * r2}
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------


@quiet_seaborn
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
    require_columns(study, ["size", "family", "np", "log_variance", "sortedness"], "study")
    sizes = ordered_values(study["size"])
    fig, axes = new_figure(1, len(sizes), width=3.6, height=3.3)
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
