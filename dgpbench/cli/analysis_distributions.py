"""The command lines of :mod:`dgpbench.analysis.distributions`: `dgpbench analysis weights`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dgpbench.analysis.common import dataset_labels, write_table
from dgpbench.analysis.distributions import (
    plot_fitted_parameters,
    plot_win_rates,
    weight_distribution_study,
    win_rates,
)
from dgpbench.cli.arguments import checkpoints_arg, out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _weights_args(p: argparse.ArgumentParser) -> None:
    checkpoints_arg(p)
    out_dir_arg(p)


def _weights(args: argparse.Namespace) -> None:
    out = Path(args.out_dir)
    fits = weight_distribution_study(args.checkpoints, progress=False)
    write_csv(out / "fits.csv", fits, float_format="%.8g")
    rates = win_rates(fits, by=("dataset", "n_layers", "layer"))
    wide = rates.assign(dataset=lambda d: dataset_labels(d["dataset"])).pivot_table(
        index=["dataset", "n_layers", "layer"], columns="family", values="win_rate"
    )
    write_table(wide, out / "table_win_rates", title="Win rates (lowest NLL) per layer")
    plot_win_rates(rates, out / "fig_win_rates")
    plot_fitted_parameters(fits, out / "fig_pareto_b", parameter="pareto_b")
    plot_fitted_parameters(fits, out / "fig_normal_sigma", parameter="normal_sigma")
    log.info("fits of %d matrices -> %s", len(fits), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"weights": (_weights_args, _weights)}
