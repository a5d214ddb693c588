"""The command lines of :mod:`dgpbench.analysis.stacked`: `dgpbench analysis train-seeds`."""

from __future__ import annotations

import argparse
import logging

from dgpbench.analysis.stacked import train_analysis_seeds
from dgpbench.cli.analysis_curves import _architecture, _model_args, _optimiser_args, _train_config

log = logging.getLogger(__name__)


def _train_seeds_args(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("--seeds", type=int, nargs="+", required=True, help="model seeds")
    p.add_argument("--out-dirs", nargs="+", required=True, help="one output folder per seed")
    p.add_argument("--runs", nargs="+", default=None, help="run ids (default <dataset>/<dir>)")
    _optimiser_args(p)
    p.add_argument(
        "--checkpoints-per-epoch", type=int, default=4, help="curve evaluations per epoch"
    )
    p.add_argument("--no-curves", action="store_true", help="do not record the curves")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")


def _train_seeds(args: argparse.Namespace) -> None:
    from dgpbench.data.datasets import load_dataset

    if len(args.out_dirs) != len(args.seeds):
        raise ValueError(f"got {len(args.out_dirs)} --out-dirs for {len(args.seeds)} --seeds")
    if args.runs is not None and len(args.runs) != len(args.seeds):
        raise ValueError(f"got {len(args.runs)} --runs for {len(args.seeds)} --seeds")
    if args.runs is not None and len(set(args.runs)) != len(args.runs):
        repeated = sorted({r for r in args.runs if args.runs.count(r) > 1})
        raise ValueError(f"--runs must be distinct, got {repeated} more than once")
    x, y = load_dataset(args.dataset, args.data_root, "train", download=args.download)
    arch = _architecture(args, x)
    config = _train_config(args)
    x_test = y_test = None
    if not args.no_curves:
        x_test, y_test = load_dataset(args.dataset, args.data_root, "test", download=args.download)
    train_analysis_seeds(
        x,
        y,
        arch,
        config,
        args.seeds,
        args.out_dirs,
        dataset=args.dataset,
        x_test=x_test,
        y_test=y_test,
        runs=args.runs,
        curves=not args.no_curves,
        device=args.device,
    )


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"train-seeds": (_train_seeds_args, _train_seeds)}
