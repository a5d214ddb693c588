"""Normalised NP depends on the matrix size (Appendix C, ~line 985).

For each distribution on [0, 1] and each matrix size ``n x m`` of a grid, ``n_samples``
matrices with iid entries are drawn and their normalised NP averaged; the paper shows the
expectation decreasing with size as heatmaps for Uniform, truncated normal (sigma = 0.5, as
in the text; the figure caption says sigma² = 1/2) and truncated Pareto
distributions with increasing b.

Also here: its figure :func:`plot_size_heatmaps`; its command-line target ``dgpbench analysis
size`` is in :mod:`dgpbench.cli.analysis_size`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dgpbench._validation import check_int
from dgpbench.analysis.common import new_figure, quiet_seaborn, require_columns
from dgpbench.analysis.persistence import batch_neural_persistence
from dgpbench.analysis.synthetic import parse_distribution, sample_matrix
from dgpbench.io import save_figure

__all__ = ["DEFAULT_DISTRIBUTIONS", "expected_np_grid", "plot_size_heatmaps"]

DEFAULT_DISTRIBUTIONS = (
    "uniform",
    "normal(0.5)",
    "pareto(1)",
    "pareto(5)",
    "pareto(10)",
    "pareto(20)",
    "pareto(40)",
    "pareto(60)",
)


def expected_np_grid(
    distributions: Sequence[str] = DEFAULT_DISTRIBUTIONS,
    sizes: Sequence[int] = (50, 100, 200, 300, 400, 500),
    n_samples: int = 100,
    *,
    p: float = 2.0,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Mean normalised NP over a grid of matrix sizes (target 5).

    Parameters
    ----------
    distributions : sequence of str
        Specs for :func:`dgpbench.analysis.synthetic.parse_distribution`.
    sizes : sequence of int
        Values of both n (rows) and m (columns); every pair is evaluated.
    n_samples : int, default=100
        Matrices per (distribution, n, m).
    p : float, default=2
    seed : int, default=0
        Cell (d, i, j) uses its own child of ``SeedSequence(seed)``.
    progress : bool, default=True

    Returns
    -------
    pandas.DataFrame
        ``distribution, label, n_rows, n_cols, mean_np, std_np, n_samples``.
    """
    n_samples = check_int(n_samples, "n_samples")
    dists = [parse_distribution(d) for d in distributions]
    sizes = [check_int(s, "sizes[...]") for s in sizes]
    children = np.random.SeedSequence(seed).spawn(len(dists) * len(sizes) ** 2)
    rows = []
    cells = [(d, n, m) for d in range(len(dists)) for n in sizes for m in sizes]
    for c, (d, n, m) in enumerate(
        tqdm(cells, desc="size grid", disable=None if progress else True)
    ):
        rng = np.random.default_rng(children[c])
        W = sample_matrix(dists[d].frozen(), (n_samples, n, m), rng)
        nps = batch_neural_persistence(W, p)
        rows.append(
            {
                "distribution": distributions[d]
                if isinstance(distributions[d], str)
                else dists[d].family,
                "label": dists[d].label,
                "n_rows": n,
                "n_cols": m,
                "mean_np": float(nps.mean()),
                "std_np": float(nps.std(ddof=1)) if n_samples > 1 else float("nan"),
                "n_samples": n_samples,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------


@quiet_seaborn
def plot_size_heatmaps(grid: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """Expected normalised NP over (rows, columns), one heatmap per distribution.

    Heatmaps have their own colour scales (fig:appendix:matrixshape:*): the trend, not the
    level, is the point.
    """
    import seaborn as sns

    require_columns(grid, ["label", "n_rows", "n_cols", "mean_np"], "grid")
    labels = list(dict.fromkeys(grid["label"]))
    n_cols = min(4, len(labels))
    n_rows = math.ceil(len(labels) / n_cols)
    fig, axes = new_figure(n_rows, n_cols, width=3.4, height=3.0)
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
