"""The command lines of :mod:`dgpbench.analysis.regularisers`: `dgpbench analysis regularisers`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dgpbench.analysis.common import dataset_labels, write_table
from dgpbench.analysis.regularisers import plot_regularisers, regulariser_summary
from dgpbench.cli.arguments import checkpoints_arg, out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _regularisers_args(p: argparse.ArgumentParser) -> None:
    checkpoints_arg(p)
    out_dir_arg(p)


def _regularisers(args: argparse.Namespace) -> None:
    from dgpbench.analysis.variance import model_study

    out = Path(args.out_dir)
    models = model_study(args.checkpoints, dgp=False, progress=False)
    write_csv(out / "models.csv", models, float_format="%.8g")
    summary = regulariser_summary(models).assign(dataset=lambda d: dataset_labels(d["dataset"]))
    write_table(
        summary.set_index(["dataset", "regulariser"]),
        out / "table_summary",
        title="NP and variance of weights per regulariser (KS p-value vs. none)",
        digits=4,
    )
    plot_regularisers(models, out / "fig_regularisers")
    log.info("%d regularised models -> %s", len(models), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"regularisers": (_regularisers_args, _regularisers)}
