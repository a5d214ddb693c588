"""The command lines of :mod:`dgpbench.analysis.factors`: `dgpbench analysis np-factors`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dgpbench.analysis.common import write_table
from dgpbench.analysis.factors import np_factors_r2, np_factors_study, plot_np_factors
from dgpbench.cli.arguments import out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _factors_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sizes", type=int, nargs="+", default=[50, 100, 250], help="square matrix sizes"
    )
    p.add_argument("--n-per-size", type=int, default=2000, help="matrices per size")
    p.add_argument("--seed", type=int, default=0, help="seed of the random matrices")
    out_dir_arg(p)


def _factors(args: argparse.Namespace) -> None:
    out = Path(args.out_dir)
    study = np_factors_study(args.sizes, args.n_per_size, seed=args.seed, progress=False)
    write_csv(out / "study.csv", study, float_format="%.8g")
    r2 = np_factors_r2(study)
    write_table(
        r2.set_index(["size", "family"])[["n", "r2_pct"]],
        out / "table_r2",
        title="R² (%) of NP ~ log-variance + sortedness",
        digits=1,
    )
    plot_np_factors(study, out / "fig_np_factors", r2)
    log.info("NP factors of %d matrices -> %s", len(study), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"np-factors": (_factors_args, _factors)}
