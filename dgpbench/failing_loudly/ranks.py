"""Ranks of the Failing-loudly grid's methods with a test of significance.

Methods (table rows: ``bbsds+ks [cnn]``, ...) are ranked over *blocks*: a block is one
(shift class, fraction, n) cell of one data set, or of every data set (``pooled``); a
method's value in a block is its detection accuracy there (over runs and draws). Per scope
(a data set, or pooled) and test dimension (univariate: KS, chi-squared, the domain
classifier and the other per-feature tests, Cramér-von Mises, Anderson-Darling, Fisher's;
multivariate: MMD, energy and the other multivariate tests, whose sample sizes differ), with
the methods run in every block of that scope:

1. Friedman's test (``scipy.stats.friedmanchisquare``) of "all methods rank alike";
2. mean ranks (1 = most accurate; ties share the mean of their ranks);
3. Nemenyi's post-hoc test of every pair (``scikit_posthocs.posthoc_nemenyi_friedman``),
   drawn as a critical-difference diagram
   (``scikit_posthocs.critical_difference_diagram``).

A method missing from some blocks of its dimension (the domain classifier, run at fewer
sizes) is left out of that ranking rather than shrinking every method's blocks; the table
says which. Blocks share the runs' pools (a run's draws feed every cell), so they are not
fully independent: read the p-values as descriptive.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["BLOCK", "block_matrix", "critical_difference_figure", "friedman_ranks", "rank_table"]

BLOCK: tuple[str, ...] = ("shift", "fraction", "n")
"""The columns that make a block within one data set."""
CALIBRATION = "none"


def block_matrix(records: pd.DataFrame, dimension: str, dataset: str | None) -> pd.DataFrame:
    """Accuracy of every row (columns) in every block (index) of one scope and dimension.

    Parameters
    ----------
    records : pandas.DataFrame
        Records with a ``row`` column (:func:`dgpbench.failing_loudly.reporting.table_rows`).
    dimension : {"univariate", "multivariate"}
        The test dimension.
    dataset : str or None
        One data set, or ``None`` for all (blocks then include the data set).

    Returns
    -------
    pandas.DataFrame
        Blocks x rows, complete (rows missing from some block are dropped); ``attrs``
        ``dropped`` lists the rows left out.
    """
    rec = records[(records["shift"] != CALIBRATION) & (records["dimension"] == dimension)]
    if dataset is not None:
        rec = rec[rec["dataset"] == dataset]
    block = ["dataset", *BLOCK]
    acc = rec.groupby([*block, "row"], sort=True)["rejected"].mean().unstack("row")
    if acc.empty:
        return acc
    # Leave out rows absent from many blocks (run at fewer sizes), then incomplete blocks.
    coverage = acc.notna().mean()
    dropped = sorted(coverage.index[coverage < 1.0].tolist())
    keep = coverage.index[coverage == 1.0]
    if len(keep) < 2:  # nothing complete: keep the rows of the most common pattern
        keep = coverage.index[coverage >= coverage.max()]
        dropped = sorted(set(coverage.index) - set(keep))
    out = acc[keep].dropna()
    out.attrs["dropped"] = dropped
    return out


def friedman_ranks(matrix: pd.DataFrame) -> dict:
    """Friedman's test, mean ranks and Nemenyi's pairwise p-values of a blocks x methods matrix.

    Parameters
    ----------
    matrix : pandas.DataFrame
        Blocks (rows) x methods (columns) of accuracies, complete; at least 2 blocks and 3
        methods.

    Returns
    -------
    dict
        ``statistic`` (Friedman's chi-squared), ``p_value``, ``blocks``, ``mean_ranks``
        (Series, 1 = best, sorted), ``nemenyi`` (methods x methods p-values).

    Examples
    --------
    >>> m = pd.DataFrame({"a": [0.9, 0.8, 0.7], "b": [0.5, 0.4, 0.6], "c": [0.1, 0.2, 0.3]})
    >>> out = friedman_ranks(m)
    >>> out["mean_ranks"].to_dict(), round(out["statistic"], 6)
    ({'a': 1.0, 'b': 2.0, 'c': 3.0}, 6.0)
    """
    from scipy.stats import friedmanchisquare

    if matrix.isna().any().any():
        raise ValueError("the block matrix has missing cells")
    b, k = matrix.shape
    if b < 2 or k < 3:
        raise ValueError(f"Friedman's test needs >= 2 blocks and >= 3 methods, got {b} x {k}")
    ranks = matrix.rank(axis=1, ascending=False, method="average")
    stat, p = friedmanchisquare(*(matrix[c].to_numpy() for c in matrix.columns))
    import scikit_posthocs as sp

    nemenyi = sp.posthoc_nemenyi_friedman(matrix.to_numpy())
    nemenyi.index = nemenyi.columns = matrix.columns
    return {
        "statistic": float(stat),
        "p_value": float(p),
        "blocks": b,
        "mean_ranks": ranks.mean().sort_values(kind="stable"),
        "nemenyi": nemenyi,
    }


def _scopes(records: pd.DataFrame) -> list[str | None]:
    datasets = sorted(records["dataset"].astype(str).unique())
    return [*datasets, None] if len(datasets) > 1 else datasets


def rank_table(records: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Mean ranks per (scope, dimension, row) with Friedman's test and Nemenyi's verdicts.

    Parameters
    ----------
    records : pandas.DataFrame
        Records with a ``row`` column.
    alpha : float, default=0.05
        Level of Nemenyi's test against the best-ranked row.

    Returns
    -------
    pandas.DataFrame
        ``scope`` (a data set or ``pooled``), ``dimension``, ``row``, ``mean_rank``,
        ``position``, ``blocks``, ``friedman_chi2``, ``friedman_p``, ``p_vs_best`` (Nemenyi),
        ``differs_from_best``; rows left out of a ranking appear with ``position`` NaN.
    """
    out = []
    for dataset in _scopes(records):
        for dim in ("univariate", "multivariate"):
            matrix = block_matrix(records, dim, dataset)
            if matrix.empty or matrix.shape[0] < 2 or matrix.shape[1] < 3:
                continue
            res = friedman_ranks(matrix)
            best = res["mean_ranks"].index[0]
            for pos, (row, rank) in enumerate(res["mean_ranks"].items(), start=1):
                p_best = float(res["nemenyi"].loc[best, row]) if row != best else 1.0
                out.append({
                    "scope": dataset or "pooled", "dimension": dim, "row": row,
                    "mean_rank": float(rank), "position": pos, "blocks": res["blocks"],
                    "friedman_chi2": res["statistic"], "friedman_p": res["p_value"],
                    "p_vs_best": p_best, "differs_from_best": p_best < alpha,
                })  # fmt: skip
            for row in matrix.attrs.get("dropped", []):
                out.append({"scope": dataset or "pooled", "dimension": dim, "row": row,
                            "position": np.nan, "blocks": 0})  # fmt: skip
    return pd.DataFrame(out)


def critical_difference_figure(
    records: pd.DataFrame, dataset: str, stem: str | os.PathLike, alpha: float = 0.05
) -> list[Path]:
    """Critical-difference diagrams (Nemenyi) of one data set, one panel per test dimension.

    Methods joined by a bar do not differ significantly at ``alpha``; the axis is the mean
    rank over the (shift class, fraction, n) blocks (1 = most accurate).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import scikit_posthocs as sp

    from dgpbench.io import save_figure

    panels, sizes = [], []
    for dim in ("univariate", "multivariate"):
        matrix = block_matrix(records, dim, dataset)
        sizes.append(f"{dim}: {matrix.shape[1]} methods x {matrix.shape[0]} blocks")
        if matrix.shape[0] >= 2 and matrix.shape[1] >= 3:
            panels.append((dim, matrix, friedman_ranks(matrix)))
    if not panels:  # a small run: say so in the figure rather than fail the workflow
        fig, ax = plt.subplots(figsize=(7, 1.6))
        ax.axis("off")
        ax.text(0.5, 0.5, f"No ranking of {dataset}: a critical-difference diagram needs at "
                "least 3 methods of one test family\nover at least 2 (shift, fraction, n) "
                f"blocks; this run has {'; '.join(sizes)}.", ha="center", va="center",
                fontsize=8)  # fmt: skip
        paths = save_figure(fig, stem, bbox_inches="tight")
        plt.close(fig)
        return paths
    heights = [0.6 + 0.22 * len(m.columns) for _, m, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(heights) + 0.8),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for ax, (dim, matrix, res) in zip(axes[:, 0], panels, strict=True):
        sp.critical_difference_diagram(res["mean_ranks"], res["nemenyi"], ax=ax, alpha=alpha,
                                       label_props={"fontsize": 7})  # fmt: skip
        ax.set_title(
            f"{dim}: {res['blocks']} blocks, Friedman chi2 = {res['statistic']:.1f}, "
            f"p = {res['p_value']:.2g}"
            + (f"; left out: {', '.join(matrix.attrs['dropped'])}" if matrix.attrs.get("dropped")
               else ""),
            fontsize=8,
            pad=22,
        )  # fmt: skip
    fig.suptitle(
        f"Failing loudly's grid on {dataset}: mean rank of detection accuracy over "
        f"(shift, fraction, n) blocks;\nbars join methods Nemenyi does not separate "
        f"(alpha = {alpha:g})",
        fontsize=9,
        y=1.0 + 0.5 / (sum(heights) + 0.8),
    )
    paths = save_figure(fig, stem, bbox_inches="tight")
    plt.close(fig)
    return paths
