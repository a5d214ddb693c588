"""``dgpbench monitor``: feed a stream to an online detector, one sample at a time.

The detector file holds a feature transformer (or none: the stream files then hold the
features themselves) and an online detector (:mod:`dgpbench.online`), whose thresholds
were configured for an expected run time (ERT) under no shift. The stream files are read
in the order given, their rows in order; a JSON line is printed at the first alarm (and
every ``--every`` samples), and the command exits 1 there, or 0 at the stream's end
without one. ``--state`` resumes a stream from a file and writes it back at the end, so
that a stream fed in pieces gives the same decisions as one fed whole.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from dgpbench.cli.arguments import MODEL_HELP
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.registry import SUBCOMMANDS, CommandError

#: Layout tag of a ``monitor`` JSON line.
MONITOR_SCHEMA = "dgpbench-monitor/1"

_ONLINE = ("OnlineMMDDetector", "OnlineCVMDetector")


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _monitor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--detector",
        required=True,
        help="a detector file with an online test (mmd_online, cvm_online), saved by "
        "dgpbench.saved.save_detector or `dgpbench fit`",
    )
    p.add_argument("--model", default=None, help=MODEL_HELP + " (only if the model moved)")
    p.add_argument(
        "stream",
        nargs="+",
        metavar="STREAM.npz",
        help=".npz files with array x, read in this order: images when the detector has a "
        "feature transformer, else rows of features",
    )
    p.add_argument(
        "--every",
        type=_nonnegative_int,
        default=0,
        metavar="K",
        help="also print a JSON line every K samples (default: 0, only at an alarm and at the end)",
    )
    p.add_argument(
        "--state",
        default=None,
        metavar="NPZ",
        help="resume the stream from this file if it exists, and write the stream's state "
        "to it when the run ends (at the alarm or the stream's end)",
    )
    p.add_argument("--threads", type=_positive_int, default=None, help="torch/numba threads")
    p.epilog = (
        "Exit status: 0 = the stream ended without an alarm, 1 = an alarm (shift), 2 = any "
        "error (one line on stderr; the state file is left as it was), 130 = interrupted."
    )


def _check_paths(args: argparse.Namespace) -> list[Path]:
    from dgpbench.npz import check_regular_file

    files = [Path(s) for s in args.stream]
    for path in [Path(args.detector), *files]:
        check_regular_file(path, "input")
        if not path.exists():
            raise CommandError(f"no such file: {path}")
    if args.state is not None:
        state = Path(args.state)
        for path in [Path(args.detector), *files]:
            if state.exists() and os.path.samefile(state, path):
                raise CommandError(f"--state {state} is also the input {path}: choose another path")
        from dgpbench.io import output_problem

        reason = output_problem(state)
        if reason is not None:
            raise CommandError(f"--state {state}: {reason}; nothing was written")
    return files


def _load(args: argparse.Namespace) -> Any:
    from dgpbench.saved import ModelRequiredError, load_detector
    from dgpbench.saved.files import detector_classes

    classes = detector_classes(args.detector)
    if classes is not None and classes[1] not in _ONLINE:
        raise CommandError(
            f"{args.detector} holds a batch test ({classes[1]}), not an online one: score it "
            "with `dgpbench score`, or fit an online detector (mmd_online, cvm_online)"
        )
    try:
        return load_detector(args.detector, model=args.model)
    except ModelRequiredError as exc:
        raise CommandError(f"{exc.reason}: pass --model MODEL") from exc


def _features(fitted: Any, path: Path) -> Any:
    """The stream file's rows as the detector's features (images through the transformer)."""
    import numpy as np

    if fitted.features is not None:
        from dgpbench.data.datasets import load_npz_images
        from dgpbench.features.output import transform_method

        x = load_npz_images(path)
        return transform_method(fitted.features, x, fitted.info.get("method", "?"), str(path))
    from dgpbench.npz import open_npz

    with open_npz(path) as store:
        if "x" not in store:
            raise ValueError(f"{path} has no array x (the stream's features)")
        x = store["x"]
    if x.dtype.kind not in "biuf" or x.ndim != 2:
        raise ValueError(f"{path}: x must be a 2-D array of numbers, got {x.dtype} {x.shape}")
    width = fitted.detector.n_features_in_
    if x.shape[1] != width:
        raise ValueError(f"{path}: x has {x.shape[1]} features, the detector takes {width}")
    if not np.isfinite(x).all():
        raise ValueError(f"{path}: x has a NaN or infinite value")
    return x


def _record(event: str, result: Any, path: Path | None, index: int | None) -> dict[str, Any]:
    out = result.to_dict()
    return {
        "schema": MONITOR_SCHEMA,
        "event": event,
        "shift": bool(result.is_drift),
        "file": None if path is None else str(path),
        "index": index,
        **out,
    }


def _monitor(args: argparse.Namespace) -> int:
    from dgpbench.online import load_stream_state, save_stream_state
    from dgpbench.threads import torch_threads

    files = _check_paths(args)
    with torch_threads(args.threads):
        fitted = _load(args)
        detector = fitted.detector.reset()
        if args.state is not None and Path(args.state).exists():
            load_stream_state(args.state, detector)
        # every file is read and featurised before the first sample is fed: a bad file
        # fails the command before any state changes
        streams = [(path, _features(fitted, path)) for path in files]
    last = None
    for path, rows in streams:
        for index, x in enumerate(rows):
            last = detector.update(x)
            if last.is_drift:
                print(json.dumps(_record("alarm", last, path, index)), flush=True)
                if args.state is not None:
                    save_stream_state(args.state, detector)
                return 1
            if args.every and last.t % args.every == 0:
                print(json.dumps(_record("progress", last, path, index)), flush=True)
    if last is not None:
        print(json.dumps(_record("end", last, None, None)), flush=True)
    if args.state is not None:
        save_stream_state(args.state, detector)
    return 0


SUBCOMMANDS.update(
    {
        "monitor": (
            "Feed a stream to an online detector, sample by sample (exit 0 = no alarm, 1 = alarm).",
            _monitor_args,
            _monitor,
        )
    }
)
