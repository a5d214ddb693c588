"""The command lines of :mod:`dgpbench.analysis.bounds`: `dgpbench analysis bounds`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

from dgpbench.analysis.bounds import (
    bounds_error_table,
    bounds_tightness_study,
    plot_bounds_tightness,
)
from dgpbench.analysis.common import write_table
from dgpbench.cli.arguments import out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _bounds_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-matrices", type=int, default=10_000, help="random matrices drawn")
    p.add_argument(
        "--size-range",
        type=int,
        nargs=2,
        default=[50, 500],
        metavar=("LOW", "HIGH"),
        help="range of the matrices' rows and columns",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random matrices")
    out_dir_arg(p)


def _bounds(args: argparse.Namespace) -> None:
    out = Path(args.out_dir)
    study = bounds_tightness_study(
        args.n_matrices, size_range=tuple(args.size_range), seed=args.seed, progress=False
    )
    write_csv(out / "study.csv", study, float_format="%.8g")
    table = bounds_error_table(study)
    table = table[["abs_mean", "abs_max", "rel_mean", "rel_max"]]
    table.columns = pd.MultiIndex.from_product(
        [["absolute error", "relative error"], ["mean", "max"]]
    )
    write_table(
        table,
        out / "table_bounds",
        title=f"Errors of the NP bounds on {len(study)} synthetic matrices",
        digits=4,
        caption=(
            f"Absolute and relative errors of the upper bound and lower bound estimated on "
            f"{len(study)} synthetic matrices: mean and maximum deviation from the actual NP."
        ),
        label="tab:appendix:tightnessofbounds",
    )
    plot_bounds_tightness(study, out / "fig_bounds_tightness")
    log.info("bounds of %d matrices -> %s", len(study), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"bounds": (_bounds_args, _bounds)}
