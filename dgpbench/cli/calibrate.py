"""``dgpbench calibrate``: measure a saved detector's false alarms on clean batches and record
them in its file (:mod:`dgpbench.saved.calibration`); ``dgpbench score`` then prints them in
every record.

Exit status: 0 when the file was calibrated (warnings, if any, on stderr), 2 on any error
(bad input, too little clean data, overlap refused), with the detector file left as it was.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dgpbench._device import DEVICE_OPTIONS
from dgpbench.cli.arguments import MODEL_HELP
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.monitor import _set_device, _sha256, calibration_line
from dgpbench.cli.registry import SUBCOMMANDS, CommandError


def _seed(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    from dgpbench.saved.calibration import MIN_BATCHES, OVERLAP

    p.add_argument("--detector", required=True, help="a detector saved by `dgpbench fit`")
    p.add_argument(
        "--clean",
        required=True,
        help=".npz with images x: clean data not used in fitting, cut into disjoint batches",
    )
    p.add_argument(
        "--batch-size",
        required=True,
        type=_positive_int,
        help="images per calibration batch: the size of the batches you will score",
    )
    p.add_argument(
        "--n-batches",
        type=_positive_int,
        default=None,
        help=f"how many batches (default: as many disjoint batches as --clean holds; at "
        f"least {MIN_BATCHES})",
    )
    p.add_argument(
        "--seed", type=_seed, default=0, help="seed of the draw of the batches (default: 0)"
    )
    p.add_argument(
        "--overlap",
        default="drop",
        choices=OVERLAP,
        help="clean images whose features are rows of the detector's reference sample: "
        "drop them (counted in n_overlap) or refuse (exit 2)",
    )
    p.add_argument("--model", default=None, help=MODEL_HELP + " (only if the model moved)")
    p.add_argument(
        "--out",
        default=None,
        help="write the calibrated detector here (default: update --detector in place)",
    )
    p.add_argument("--threads", type=_positive_int, default=None, help="torch/numba threads")
    p.add_argument(
        "--device", default="cpu", choices=DEVICE_OPTIONS, help="forward pass (auto: GPU if any)"
    )
    p.add_argument("--json", action="store_true", help="print the calibration block as JSON")
    p.epilog = "Exit status: 0 = calibrated, 2 = any error (the detector file is left as it was)."


def _calibrate(args: argparse.Namespace) -> int:
    from dgpbench.data.datasets import load_npz_images
    from dgpbench.npz import check_regular_file
    from dgpbench.saved import ModelRequiredError
    from dgpbench.saved.calibration import MIN_BATCHES, calibrate, write_calibration
    from dgpbench.saved.scoring import load_scorer
    from dgpbench.threads import torch_threads

    for option, path in (("--detector", args.detector), ("--clean", args.clean)):
        check_regular_file(path, option)
        if not Path(path).exists():
            raise CommandError(f"{option}: no such file: {path}")
    if args.n_batches is not None and args.n_batches < MIN_BATCHES:
        raise CommandError(f"--n-batches must be at least {MIN_BATCHES}, got {args.n_batches}")
    before = _sha256(args.detector)
    clean_sha = _sha256(args.clean)
    with torch_threads(args.threads):
        try:
            fitted = load_scorer(args.detector, model=args.model)
        except ModelRequiredError as exc:
            raise CommandError(
                f"{exc.reason}: pass --model MODEL (the network it was fitted with)"
            ) from exc
        _set_device(fitted, args.device)
        minimum = 4 if fitted.info.get("test") == "classif" else 2  # the tests' own minimum
        if args.batch_size < minimum:
            raise CommandError(
                f"--batch-size must be at least {minimum} for the {fitted.info.get('test')} "
                f"test, got {args.batch_size}"
            )
        x = load_npz_images(args.clean)
        try:
            block = calibrate(
                fitted,
                x,
                args.batch_size,
                n_batches=args.n_batches,
                seed=args.seed,
                overlap=args.overlap,
            )
        except ValueError as exc:
            raise CommandError(f"--clean {args.clean}: {exc}") from exc
    block["clean"] = str(args.clean)
    block["clean_sha256"] = clean_sha
    if _sha256(args.detector) != before:
        raise CommandError(
            f"--detector {args.detector} changed while it was being calibrated; nothing written"
        )
    block = write_calibration(args.detector, block, out=args.out)
    for warning in block["warnings"]:
        print(f"dgpbench calibrate: warning: {warning}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(block), flush=True)
    else:
        print(f"{calibration_line(block)}; recorded in {args.out or args.detector}", flush=True)
    return 0


SUBCOMMANDS.update(
    {
        "calibrate": (
            "Measure a saved detector's false alarms on clean batches and record them in it.",
            _calibrate_args,
            _calibrate,
        ),
    }
)
