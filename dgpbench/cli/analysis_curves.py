"""The command lines of :mod:`dgpbench.analysis.curves`:
`dgpbench analysis train`, `dgpbench analysis curves`.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from dgpbench.analysis.common import read_table
from dgpbench.analysis.curves import CurveRecorder, concat_curves
from dgpbench.analysis.weights import run_info, tidy_run_columns
from dgpbench.cli.arguments import out_dir_arg
from dgpbench.io import write_csv

log = logging.getLogger(__name__)


def _model_args(p: argparse.ArgumentParser) -> None:
    """The data set and the MLP's architecture (``analysis train`` and ``train-seeds``)."""
    p.add_argument("--dataset", required=True, help="digits, mnist, fashion-mnist, emnist, ...")
    p.add_argument("--data-root", default=None, help="torchvision data root")
    p.add_argument("--download", action="store_true", help="download missing data (network)")
    p.add_argument("--layers", type=int, required=True, help="linear maps (1: linear classifier)")
    p.add_argument("--hidden", type=int, default=None, help="hidden units (unless --layers 1)")
    p.add_argument("--activation", default="relu", help="relu or tanh")
    p.add_argument("--batchnorm", action="store_true", help="batch norm after hidden maps")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout after hidden activations")


def _optimiser_args(p: argparse.ArgumentParser) -> None:
    """Adam's settings (``analysis train`` and ``train-seeds``)."""
    from dgpbench.models.train import ANALYSIS_LR

    p.add_argument(
        "--lr",
        type=float,
        default=ANALYSIS_LR,
        help="Adam learning rate (default 3e-4, the authors' analysis code; 3e-3: the paper's text)",
    )
    p.add_argument("--epochs", type=int, default=40, help="training epochs")
    p.add_argument("--batch-size", type=int, default=32, help="training batch size")


def _architecture(args: argparse.Namespace, x: Any) -> Any:
    """The ``ArchConfig`` of :func:`_model_args`' options for the training images ``x``."""
    from dgpbench.data.datasets import n_classes
    from dgpbench.models.architectures import ArchConfig

    # A linear classifier has no hidden layer: the stored width is a placeholder.
    hidden = args.hidden if args.hidden is not None or args.layers > 1 else 1
    return ArchConfig(
        n_inputs=int(np.prod(x.shape[1:])),
        hidden=hidden,
        n_layers=args.layers,
        n_classes=n_classes(args.dataset, args.data_root),
        activation=args.activation,
        batchnorm=args.batchnorm,
        dropout=args.dropout,
    )


def _train_config(args: argparse.Namespace, **overrides: Any) -> Any:
    """The ``TrainConfig`` of :func:`_optimiser_args`' options, ``--checkpoints-per-epoch``
    and ``--threads`` (``overrides``: e.g. the model seed).
    """
    from dgpbench.models.train import analysis_config

    return analysis_config(
        args.dataset,
        lr=args.lr,
        epochs=args.epochs,
        batch_size=args.batch_size,
        checkpoints_per_epoch=args.checkpoints_per_epoch,
        keep="last",  # the curves replace the 160 kept checkpoints of the paper's setup
        threads=args.threads,
        **overrides,
    )


def _train_args(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("--seed", type=int, required=True, help="model seed")
    _optimiser_args(p)
    p.add_argument("--checkpoints-per-epoch", type=int, default=4, help="weights saved per epoch")
    p.add_argument("--curves", default=None, help="also write the per-evaluation curves CSV")
    p.add_argument("--run", default=None, help="run id in the curves (default <dataset>/<dir>)")
    out_dir_arg(p)


def _train(args: argparse.Namespace) -> None:
    from dgpbench.data.datasets import load_dataset
    from dgpbench.models.train import train_mlp

    out = Path(args.out_dir)
    x, y = load_dataset(args.dataset, args.data_root, "train", download=args.download)
    arch = _architecture(args, x)
    config = _train_config(args, seed=args.seed)
    recorder = None
    if args.curves:
        x_test, y_test = load_dataset(args.dataset, args.data_root, "test", download=args.download)
        meta = {"arch": dataclasses.asdict(arch), "train_config": dataclasses.asdict(config)}
        info = run_info({**meta, "dataset": args.dataset})
        info.pop("epoch")
        recorder = CurveRecorder(
            x_test, y_test, info={"run": args.run or f"{args.dataset}/{out.name}", **info}
        )
    final = train_mlp(
        x, y, arch, config, out, dataset=args.dataset, progress=True, callback=recorder
    )
    if recorder is not None:
        curves = recorder.frame()
        # epoch 0 is the untrained initialisation (criterion_curves leaves it out too)
        write_csv(args.curves, tidy_run_columns(curves[curves["epoch"] > 0]), float_format="%.8g")
    os.replace(final, out / "model.pt")  # a stable name for the workflow
    log.info("trained %s -> %s", arch, out / "model.pt")


def _curves_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("curves", nargs="+", help="curves CSVs of `dgpbench analysis train`")
    p.add_argument("--out", required=True, help="output CSV (.csv or .csv.gz)")


def _curves(args: argparse.Namespace) -> None:
    frames = [read_table(path, "curves", ("run", "epoch")) for path in sorted(args.curves)]
    curves = concat_curves(frames)
    write_csv(args.out, curves, float_format="%.8g")
    log.info("%d evaluations of %d runs -> %s", len(curves), len(frames), args.out)


# the module's `dgpbench analysis` targets: name -> (add-arguments, run)
COMMANDS = {"train": (_train_args, _train), "curves": (_curves_args, _curves)}
