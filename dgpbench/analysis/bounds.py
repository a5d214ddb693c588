"""Tightness of the bounds of Theorem 1 on synthetic matrices (Appendix B.1, ~line 879).

Each matrix: size ``n x m`` with n and m drawn independently and uniformly from
{50, ..., 500}; entries iid truncated Pareto with ``b = 60 x``, ``x ~ Beta(1, 2)``; then the
noisy sorting process with noise level ``s``, ``log s ~ U[-10, 0]``. For each matrix the
normalised NP, the bounds L and U (normalised by the same constant), the sortedness and the
variance of the entries are recorded.

Choices where the paper is silent:

* entries are used as sampled (they already lie in [0, 1]); ``rescale_max=True`` divides
  each matrix by its maximum first, as the normalisation of trained weights would;
* the *error* of a bound is ``|bound - NP|`` (absolute) and ``|bound - NP| / NP``
  (relative), both on normalised values; the table reports their mean and maximum;
* U uses the reading of ``B_notA`` of the paper's prose and proof (a column is matched when
  its maximal entry is also its row's maximum, ``np_bounds(matching="mutual")``). The
  theorem's displayed formula (a column is matched when it is the argmax of any row) gives
  a looser bound, recorded as ``upper_argmax`` and reported in its own row, and so is
  the same formula with rows and columns exchanged (``upper_argmax_t``, the argmax
  reading on ``W.T``). The displayed formula's U errs about 6x more on average than the
  mutual reading's (see docs/choices.md); the noisy sorting, the sampling of ``b`` and ``s``,
  and computing every quantity on the sorted matrix ``W_sort`` follow Appendix E.1.

Also here: its figure :func:`plot_bounds_tightness`; its command-line target ``dgpbench
analysis bounds`` is in :mod:`dgpbench.cli.analysis_bounds`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dgpbench._validation import check_int
from dgpbench.analysis.common import (
    new_figure,
    quiet_seaborn,
    require_columns,
)
from dgpbench.analysis.sortedness import sortedness
from dgpbench.analysis.synthetic import noisy_sort, sample_matrix, truncated_pareto
from dgpbench.io import save_figure

__all__ = [
    "bounds_error_table",
    "bounds_tightness_study",
    "draw_study_parameters",
    "plot_bounds_tightness",
]

# b is drawn as b_scale * Beta; Beta can return values this small, where truncpareto's
# normalising constant 1 - 2^-b underflows in relative precision: floor b here.
_MIN_B = 1e-6


def draw_study_parameters(
    rng: np.random.Generator,
    *,
    b_scale: float = 60.0,
    b_beta: tuple[float, float] = (1.0, 2.0),
    log_s_range: tuple[float, float] = (-10.0, 0.0),
) -> tuple[float, float]:
    """One draw of ``(b, s)``: ``b = b_scale * Beta(*b_beta)``, ``log s ~ U(log_s_range)``."""
    b = max(_MIN_B, b_scale * float(rng.beta(*b_beta)))
    s = math.exp(float(rng.uniform(*log_s_range)))
    return b, s


def bounds_tightness_study(
    n_matrices: int = 10_000,
    *,
    size_range: tuple[int, int] = (50, 500),
    b_scale: float = 60.0,
    b_beta: tuple[float, float] = (1.0, 2.0),
    log_s_range: tuple[float, float] = (-10.0, 0.0),
    p: float = 2.0,
    rescale_max: bool = False,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Sample matrices and compute NP, its bounds and the sortedness (target 3).

    Parameters
    ----------
    n_matrices : int, default=10000
    size_range : (int, int), default=(50, 500)
        Inclusive range of the number of rows and (independently) of columns.
    b_scale : float, default=60
    b_beta : (float, float), default=(1, 2)
        Beta parameters of ``b / b_scale``.
    log_s_range : (float, float), default=(-10, 0)
        Range of the natural log of the noise level.
    p : float, default=2
    rescale_max : bool, default=False
        Divide each matrix by its maximum before everything else.
    seed : int, default=0
        Matrix i uses the i-th child of ``SeedSequence(seed)``.
    progress : bool, default=True

    Returns
    -------
    pandas.DataFrame
        One row per matrix: ``matrix, n_rows, n_cols, b, s, np, lower, upper,
        upper_argmax, upper_argmax_t, sortedness, variance`` (``upper``: the mutual reading
        of ``B_notA``; ``upper_argmax``: the theorem's displayed formula; ``upper_argmax_t``:
        that formula on ``W.T``; see :func:`np_bounds`).
    """
    from dgpbench.topology import neural_persistence, np_bounds

    n_matrices = check_int(n_matrices, "n_matrices")
    lo, hi = (int(v) for v in size_range)
    if not 1 <= lo <= hi:
        raise ValueError(f"size_range must satisfy 1 <= low <= high, got {size_range!r}")
    rows = []
    children = np.random.SeedSequence(seed).spawn(n_matrices)
    for i in tqdm(range(n_matrices), desc="bounds", disable=None if progress else True):
        rng = np.random.default_rng(children[i])
        n, m = (int(v) for v in rng.integers(lo, hi, endpoint=True, size=2))
        b, s = draw_study_parameters(rng, b_scale=b_scale, b_beta=b_beta, log_s_range=log_s_range)
        W = noisy_sort(sample_matrix(truncated_pareto(b), (n, m), rng), s, rng)
        if rescale_max and W.max() > 0:
            W = W / W.max()
        lower, upper = np_bounds(W, p=p, normalize=True, matching="mutual")
        upper_argmax = np_bounds(W, p=p, normalize=True, matching="argmax")[1]
        upper_argmax_t = np_bounds(W.T, p=p, normalize=True, matching="argmax")[1]
        rows.append(
            {
                "matrix": i,
                "n_rows": n,
                "n_cols": m,
                "b": b,
                "s": s,
                "np": float(neural_persistence(W, p=p, normalize=True)),
                "lower": float(lower),
                "upper": float(upper),
                "upper_argmax": float(upper_argmax),
                "upper_argmax_t": float(upper_argmax_t),
                "sortedness": sortedness(W),
                "variance": float(W.var()),
            }
        )
    return pd.DataFrame(rows)


def bounds_error_table(study: pd.DataFrame) -> pd.DataFrame:
    """Absolute and relative errors of the bounds (table tab:appendix:tightnessofbounds).

    Parameters
    ----------
    study : pandas.DataFrame
        Output of :func:`bounds_tightness_study`.

    Returns
    -------
    pandas.DataFrame
        Index ``["Lower bound", "Upper bound"]``, plus ``"Upper bound (argmax reading)"``
        and ``"Upper bound (argmax reading, transposed)"`` when the study has their
        columns; columns ``abs_mean, abs_max, rel_mean,
        rel_max, n_matrices``.
    """
    missing = [c for c in ("np", "lower", "upper") if c not in study.columns]
    if missing:
        raise ValueError(f"study lacks columns {missing}")
    rows = {}
    for label, col in (
        ("Lower bound", "lower"),
        ("Upper bound", "upper"),
        ("Upper bound (argmax reading)", "upper_argmax"),
        ("Upper bound (argmax reading, transposed)", "upper_argmax_t"),
    ):
        if col not in study.columns:  # optional: older studies lack it
            continue
        err = (study[col] - study["np"]).abs()
        rel = err / study["np"]
        rows[label] = {
            "abs_mean": err.mean(),
            "abs_max": err.max(),
            "rel_mean": rel.mean(),
            "rel_max": rel.max(),
            "n_matrices": len(study),
        }
    return pd.DataFrame(rows).T.rename_axis("bound")


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------


@quiet_seaborn
def plot_bounds_tightness(study: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """Bounds vs. NP (fig:appendix:additional:bounds:tightness).

    Lower bounds as cyan circles, upper bounds as crosses coloured by sortedness, the
    diagonal in orange.
    """
    require_columns(study, ["np", "lower", "upper", "sortedness"], "study")
    fig, axes = new_figure(1, 1, width=5.4, height=4.6)
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
