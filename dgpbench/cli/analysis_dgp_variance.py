"""The command lines of :mod:`dgpbench.analysis.dgp_variance`: `dgpbench analysis dgp-variance`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dgpbench.analysis.common import dataset_labels, read_table, split_models, write_table
from dgpbench.analysis.dgp_variance import (
    plot_dgp_vs_log_variance,
    plot_training_correlations,
    training_correlations,
)
from dgpbench.cli.arguments import out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _dgp_variance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curves", required=True, help="curves CSV of `dgpbench analysis curves`")
    p.add_argument("--models", required=True, help="models CSV of `dgpbench analysis models`")
    out_dir_arg(p)


def _dgp_variance(args: argparse.Namespace) -> None:
    out = Path(args.out_dir)
    curves = read_table(args.curves, "curves", ("run", "np", "dgp", "variance"))
    models = read_table(args.models, "models", ("dataset", "n_layers", "dgp", "log_variance"))
    corr = training_correlations(curves)
    write_csv(out / "correlations.csv", corr, float_format="%.6g")
    summary = (
        corr.assign(dataset=lambda d: dataset_labels(d["dataset"]))
        .groupby(["dataset", "metric"], sort=True)["tau"]
        .agg(
            runs="size",
            mean_tau="mean",
            median_tau="median",
            share_abs_above_half=lambda t: (t.abs() > 0.5).mean(),
        )
    )
    write_table(
        summary, out / "table_correlations", title="Kendall's τ with the variance over training"
    )
    plot_training_correlations(corr, out / "fig_training_correlations")
    _, deep = split_models(models)
    if len(deep):
        plot_dgp_vs_log_variance(deep, out / "fig_dgp_vs_log_variance")
    log.info("correlations of %d runs -> %s", curves["run"].nunique(), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"dgp-variance": (_dgp_variance_args, _dgp_variance)}
