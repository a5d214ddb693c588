"""The command lines of :mod:`dgpbench.analysis.variance`:
`dgpbench analysis models`, `dgpbench analysis np-variance`.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

from dgpbench.analysis.common import dataset_labels, read_table, split_models, write_table
from dgpbench.analysis.variance import (
    model_study,
    np_variance_r2,
    plot_np_vs_log_variance,
    plot_r2_by_epoch,
    r2_by_epoch,
    r2_by_epoch_table,
    r2_table,
)
from dgpbench.cli.arguments import checkpoints_arg, out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _models_args(p: argparse.ArgumentParser) -> None:
    checkpoints_arg(p)
    p.add_argument(
        "--curves",
        nargs="+",
        default=None,
        help="curves CSV of each checkpoint's run (same order): NP, variance, DGP read from them",
    )
    p.add_argument("--out", required=True, help="output CSV")


def _models(args: argparse.Namespace) -> None:
    curves = None
    if args.curves is not None:
        if len(args.curves) != len(args.checkpoints):
            raise ValueError(
                f"--curves needs one file per checkpoint, got {len(args.curves)} for "
                f"{len(args.checkpoints)} checkpoints"
            )
        curves = [read_table(path, "curves", ("epoch", "np")) for path in args.curves]
    models = model_study(args.checkpoints, curves=curves, progress=False)
    write_csv(args.out, models, float_format="%.8g")
    log.info("%d models -> %s", len(models), args.out)


def _np_variance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="models CSV of `dgpbench analysis models`")
    p.add_argument("--figure-layers", type=int, nargs="*", default=[], help="main figure: layers")
    p.add_argument("--figure-hidden", type=int, nargs="*", default=[], help="main figure: widths")
    p.add_argument(
        "--curves",
        default=None,
        help="curves CSV of `dgpbench analysis curves`: also write R² by epoch "
        "(r2_by_epoch.csv, table_r2_by_epoch, fig_r2_by_epoch)",
    )
    out_dir_arg(p)


def _np_variance(args: argparse.Namespace) -> None:
    out = Path(args.out_dir)
    models = read_table(args.models, "models", ("dataset", "n_layers", "np", "log_variance"))
    linear, deep = split_models(models)
    if len(linear):
        r2 = np_variance_r2(linear, by=["dataset"]).assign(
            dataset=lambda d: dataset_labels(d["dataset"])
        )
        write_table(
            r2.set_index("dataset")[["n", "slope", "intercept", "r2_pct"]],
            out / "table_r2_linear",
            title="Linear classifiers: R² (%) of NP ~ log-variance per data set",
        )
        plot_np_vs_log_variance(
            linear, out / "fig_np_vs_log_variance_linear", title="Linear classifiers"
        )
    if len(deep):
        r2 = np_variance_r2(deep)
        write_csv(out / "r2.csv", r2, float_format="%.6g")
        wide = r2_table(r2)
        labels = dataset_labels(wide.columns.get_level_values("dataset"))
        wide.columns = pd.MultiIndex.from_arrays(
            [labels, wide.columns.get_level_values("activation")], names=wide.columns.names
        )
        wide = wide.sort_index(axis=1)
        write_table(
            wide,
            out / "table_r2",
            title="R² (x100) of NP ~ log-variance per architecture",
            digits=1,
            caption=(
                r"$R^2$ score ($\times 100$) of linear regression fits of NP on the "
                r"$\log$-transformed variance of weights, one fit per architecture over its runs."
            ),
            label="tab:appendix:additional:variancevspersistence:full:r2",
        )
        main = deep
        if args.figure_layers:
            main = main[main["n_layers"].isin(args.figure_layers)]
        if args.figure_hidden:
            main = main[main["hidden"].isin(args.figure_hidden)]
        if main.empty:
            raise ValueError(
                f"no DNN with layers in {args.figure_layers} and hidden in {args.figure_hidden}"
            )
        plot_np_vs_log_variance(
            main, out / "fig_np_vs_log_variance_dnn", row="n_layers", hue="hidden", title="DNNs"
        )
        for activation, sub in deep.groupby("activation", sort=True):
            plot_np_vs_log_variance(
                sub,
                out / f"fig_np_vs_log_variance_{activation}",
                row="n_layers",
                hue="hidden",
                title=f"{activation} networks",
            )
    if args.curves is not None:
        _write_r2_by_epoch(read_table(args.curves, "curves", ("run", "epoch")), out)
    log.info("NP vs. log-variance of %d models -> %s", len(models), out)


def _write_r2_by_epoch(curves: pd.DataFrame, out: Path) -> None:
    """``r2_by_epoch.csv``, ``table_r2_by_epoch`` and ``fig_r2_by_epoch`` of the DNNs."""
    r2 = r2_by_epoch(curves)
    if r2.empty:
        raise ValueError("--curves holds no DNN (n_layers > 1): no R² by epoch to fit")
    write_csv(out / "r2_by_epoch.csv", r2, float_format="%.6g")
    write_table(
        r2_by_epoch_table(r2),
        out / "table_r2_by_epoch",
        title="R² (x100) of NP ~ log-variance per architecture, by training epoch",
        digits=1,
    )
    plot_r2_by_epoch(r2, out / "fig_r2_by_epoch")


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"models": (_models_args, _models), "np-variance": (_np_variance_args, _np_variance)}
