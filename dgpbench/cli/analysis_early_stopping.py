"""The command lines of :mod:`dgpbench.analysis.early_stopping`:
`dgpbench analysis early-stopping`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dgpbench.analysis.common import dataset_labels, read_table, write_table
from dgpbench.analysis.early_stopping import (
    DGP_TABLE_PAIRS,
    NP_TABLE_PAIRS,
    early_stopping_differences,
    early_stopping_grid,
    plot_early_stopping_heatmaps,
)
from dgpbench.cli.arguments import out_dir_arg
from dgpbench.io import write_csv
from dgpbench.tables import tex_escape

log = logging.getLogger(__name__)


# Pairs of the early-stopping heatmap figure (fig:appendix:np:earlystopping:heatmap:
# "differences between using accuracy on the validation set and NP, variance, and DGP").
HEATMAP_PAIRS = (("np", "val_accuracy"), ("variance", "val_accuracy"), ("dgp", "val_accuracy"))


def _early_stopping_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curves", required=True, help="curves CSV of `dgpbench analysis curves`")
    p.add_argument("--max-burn-in", type=int, default=25, help="burn-ins 0..N epochs")
    p.add_argument("--max-patience", type=int, default=10, help="patiences 1..N evaluations")
    p.add_argument(
        "--heatmap-where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="runs of the heatmap figure (repeatable; values of one column are OR-ed)",
    )
    out_dir_arg(p)


def _where(frame: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    wanted: dict[str, list[str]] = {}
    for cond in conditions:
        key, sep, value = cond.partition("=")
        if not sep or key not in frame.columns:
            raise ValueError(
                f"--heatmap-where must be COLUMN=VALUE with a curves column, got {cond!r}"
            )
        wanted.setdefault(key, []).append(value)
    mask = np.ones(len(frame), dtype=bool)
    for key, values in wanted.items():
        mask &= frame[key].astype(str).isin(values).to_numpy()
    if not mask.any():
        raise ValueError(f"no run matches --heatmap-where {list(conditions)}")
    return frame[mask]


def _delta_tex(label: object) -> str:
    r"""``Δ_epoch(NP, val)`` -> ``$\Delta_{\text{epoch}}$(NP, val)``."""
    name, _, rest = str(label).partition("(")
    sub = name.removeprefix("Δ_")
    return rf"$\Delta_{{\text{{{sub}}}}}$(" + tex_escape(rest) if rest else tex_escape(label)


def _early_stopping(args: argparse.Namespace) -> None:
    if args.max_burn_in < 0 or args.max_patience < 1:
        raise ValueError(
            f"--max-burn-in must be >= 0 and --max-patience >= 1, "
            f"got {args.max_burn_in} and {args.max_patience}"
        )
    out = Path(args.out_dir)
    curves = read_table(args.curves, "curves", ("run", "epoch", "test_accuracy"))
    last = curves.groupby("run")["epoch"].max().min()
    if args.max_burn_in >= last:
        raise ValueError(f"--max-burn-in {args.max_burn_in} leaves no evaluation of {last} epochs")
    grid = early_stopping_grid(
        curves,
        burn_ins=range(args.max_burn_in + 1),
        patiences=range(1, args.max_patience + 1),
    )
    write_csv(out / "grid.csv.gz", grid, float_format="%.6g")
    grid_labelled = grid.assign(dataset=lambda d: dataset_labels(d["dataset"]))
    n_runs = curves["run"].nunique()
    for name, pairs, label, what in (
        ("table_np", NP_TABLE_PAIRS, "tab:np:earlystopping", "validation, NP or variance"),
        ("table_dgp", DGP_TABLE_PAIRS, "tab:appendix:onp:earlystopping", "DGP vs. the others"),
    ):
        table = early_stopping_differences(grid_labelled, pairs)
        write_table(
            table[sorted(table.columns)],
            out / name,
            title=f"Early stopping: {what} ({n_runs} runs)",
            caption=(
                r"Differences in trained epochs ($\Delta_{\text{epoch}}$) and in test accuracy "
                r"at the point of stopping ($\Delta_{\text{accuracy}}$, in \%) between early "
                r"stopping criteria, averaged over runs, burn-ins 0--"
                rf"{args.max_burn_in} and patiences 1--{args.max_patience}; positive: the "
                r"first criterion's value is higher."
            ),
            label=label,
            row_label=_delta_tex,
        )
    selected = _where(curves, args.heatmap_where)["run"].unique() if args.heatmap_where else None
    heat = grid if selected is None else grid[grid["run"].isin(selected)]
    plot_early_stopping_heatmaps(heat, out / "fig_heatmaps", pairs=HEATMAP_PAIRS)
    log.info("early stopping of %d runs -> %s", n_runs, out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"early-stopping": (_early_stopping_args, _early_stopping)}
