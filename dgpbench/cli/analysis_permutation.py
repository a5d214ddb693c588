"""The command lines of :mod:`dgpbench.analysis.permutation`: `dgpbench analysis permutation`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dgpbench.analysis.common import dataset_labels, split_models, write_table
from dgpbench.analysis.permutation import (
    ks_rejection_summary,
    permutation_ks_tests,
    permutation_study,
    plot_permutation_dnn,
    plot_permutation_linear,
)
from dgpbench.cli.arguments import checkpoints_arg, out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _permutation_args(p: argparse.ArgumentParser) -> None:
    checkpoints_arg(p)
    p.add_argument("--n-permutations", type=int, default=100, help="weight permutations per model")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutations")
    p.add_argument("--sample", default="mean", help="permuted KS sample: mean or all")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the KS tests")
    out_dir_arg(p)


def _permutation(args: argparse.Namespace) -> None:
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    out = Path(args.out_dir)
    perm = permutation_study(
        args.checkpoints, n_permutations=args.n_permutations, seed=args.seed, progress=False
    )
    ks = permutation_ks_tests(perm, sample=args.sample, alpha=args.alpha)
    write_csv(out / "permutation.csv.gz", perm, float_format="%.8g")
    write_csv(out / "ks_tests.csv", ks, float_format="%.6g")
    summary = ks_rejection_summary(ks).assign(dataset=lambda d: dataset_labels(d["dataset"]))
    write_table(
        summary.set_index(["dataset", "layers"]),
        out / "table_ks_rejections",
        title=f"KS tests rejecting 'NP unchanged by permutation' (alpha = {args.alpha})",
    )
    linear, deep = split_models(perm)
    if len(linear):
        plot_permutation_linear(perm, out / "fig_permutation_linear")
    if len(deep):
        plot_permutation_dnn(perm, out / "fig_permutation_dnn")
    log.info("%d KS tests, %d rejected -> %s", len(ks), int(ks["reject"].sum()), out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"permutation": (_permutation_args, _permutation)}
