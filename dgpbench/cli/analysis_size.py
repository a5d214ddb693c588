"""The command lines of :mod:`dgpbench.analysis.size`: `dgpbench analysis size`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dgpbench.analysis.size import expected_np_grid, plot_size_heatmaps
from dgpbench.cli.arguments import out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _size_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--distributions", nargs="+", required=True, help="e.g. uniform pareto(5)")
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[50, 100, 200, 300, 400, 500],
        help="rows and columns of the matrices",
    )
    p.add_argument("--n-samples", type=int, default=100, help="matrices per size pair")
    p.add_argument("--seed", type=int, default=0, help="seed of the random matrices")
    out_dir_arg(p)


def _size(args: argparse.Namespace) -> None:
    out = Path(args.out_dir)
    grid = expected_np_grid(
        args.distributions, args.sizes, args.n_samples, seed=args.seed, progress=False
    )
    write_csv(out / "grid.csv", grid, float_format="%.8g")
    plot_size_heatmaps(grid, out / "fig_size_heatmaps")
    log.info("%d cells -> %s", len(grid), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"size": (_size_args, _size)}
