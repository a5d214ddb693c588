"""``dgpbench stream`` and ``dgpbench stream-report``: the ``stream`` workflow target's steps.

``stream`` runs the online detectors on clean and shifted streams drawn from features files
(:func:`dgpbench.online.streams.stream_records`) and writes one record per stream;
``stream-report`` pools the records into the table (CSV, Markdown) and the figure
(:mod:`dgpbench.online.stream_report`). ``stream-shifts`` writes Failing loudly's image
shifts of the clean test images (every image altered: row ``i`` is the twin of clean row
``i``) as a `dgpbench corrupt` file, for ``dgpbench features --corrupted``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from dgpbench.cli.arguments import parse_tags, positive_int, require_arrays
from dgpbench.cli.registry import SUBCOMMANDS

log = logging.getLogger("dgpbench")


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _stream_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", required=True, nargs="+",
                   help="features .npz from `dgpbench features` (several: of the same clean "
                   "images, their shifted sets pooled)")  # fmt: skip
    p.add_argument("--detectors", nargs="+", default=["cvm_online"],
                   help="online detectors (mmd_online, cvm_online)")  # fmt: skip
    p.add_argument("--erts", nargs="+", type=positive_int, default=[200, 1000],
                   help="expected run times to configure")  # fmt: skip
    p.add_argument("--shifts", nargs="*", default=[],
                   help="shifted sets of the features file (<corruption>_<intensity>)")  # fmt: skip
    p.add_argument("--n-ref", type=positive_int, default=250, help="reference rows")
    p.add_argument("--window-size", type=positive_int, default=20, help="the detectors' window")
    p.add_argument("--n-streams", type=positive_int, default=200,
                   help="clean streams per detector and ERT")  # fmt: skip
    p.add_argument("--n-shift-streams", type=_nonnegative_int, default=50,
                   help="shifted streams per detector, ERT and shift")  # fmt: skip
    p.add_argument("--change-point", type=_nonnegative_int, default=None,
                   help="clean rows before the change (default: the window size)")  # fmt: skip
    p.add_argument("--max-factor", type=float, default=10.0,
                   help="streams stop after max-factor x ERT steps (censored / a miss)")  # fmt: skip
    p.add_argument("--n-bootstraps", type=positive_int, default=None,
                   help="simulated streams of the threshold configuration (default: the "
                   "detector's own)")  # fmt: skip
    p.add_argument("--bootstraps-per-ert", type=float, default=None,
                   help="instead of --n-bootstraps: this many x the ERT simulated streams per "
                   "ERT (100: the ERT to about 10%%)")  # fmt: skip
    p.add_argument("--cvm-calibration", choices=["reference", "gaussian"], default="reference",
                   help="cvm_online's calibration: reference (permuted reference rows; the ERT "
                   "holds on dependent features) or gaussian (alibi-detect's: independent "
                   "features assumed)")  # fmt: skip
    p.add_argument("--reference-splits", type=positive_int, default=1,
                   help="independent reference splits, each with detectors of its own and "
                   "the given numbers of streams (the units of the ERT's interval)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the splits and the streams")
    p.add_argument("--tag", action="append", default=[], help="key=value column of the records")
    p.add_argument("--out", required=True, help="output CSV, one record per stream")


def _stream(args: argparse.Namespace) -> None:
    from dgpbench.io import load_npz, write_csv
    from dgpbench.online.streams import stream_records

    if not args.max_factor > 0:
        raise ValueError(f"--max-factor must be positive, got {args.max_factor}")
    tags = parse_tags(args.tag)  # a bad tag fails before the run
    feats: dict = {}
    for path in args.features:
        arrays = load_npz(path)
        require_arrays(arrays, path, ["clean"], "features")
        # the same method and model on the same images: equal up to float rounding (threads)
        if feats and not (
            arrays["clean"].shape == feats["clean"].shape
            and np.allclose(arrays["clean"], feats["clean"], rtol=1e-5, atol=1e-6)
        ):
            raise ValueError(f"{path} holds other clean features than {args.features[0]}: "
                             "the files must featurise the same images with the same method")  # fmt: skip
        twice = sorted(set(arrays) & set(feats) - {"clean", "classes"})
        if twice:
            raise ValueError(f"{path}: the shifted set(s) {twice} come in two files")
        feats.update({k: v for k, v in arrays.items() if not (feats and k == "clean")})
    records = stream_records(
        feats,
        detectors=args.detectors,
        erts=args.erts,
        shifts=args.shifts,
        n_ref=args.n_ref,
        window_size=args.window_size,
        n_streams=args.n_streams,
        n_shift_streams=args.n_shift_streams,
        change_point=args.change_point,
        max_factor=args.max_factor,
        n_bootstraps=args.n_bootstraps,
        bootstraps_per_ert=args.bootstraps_per_ert,
        cvm_calibration=args.cvm_calibration,
        reference_splits=args.reference_splits,
        seed=args.seed,
    )
    for i, (key, value) in enumerate(tags.items()):
        records.insert(i, key, value)
    write_csv(args.out, records, index=False, float_format="%.6g")
    log.info("%d stream records -> %s", len(records), args.out)


#: Failing loudly's image shifts ``dgpbench stream-shifts`` writes, by code: the
#: feature keys are ``<code>_<k>``, k = 1, 2, 3 for small, medium, large.
FL_TWIN_CODES: dict[str, str] = {"gn_shift": "FLGN", "image_shift": "FLIMG"}
FL_TWIN_SIZES: dict[str, int] = {"small": 1, "medium": 2, "large": 3}


def fl_twin_key(shift: str) -> tuple[str, int]:
    """``large_gn_shift`` -> ``("FLGN", 3)``: the corruption code and intensity of a shift."""
    size, _, kind = shift.partition("_")
    if size not in FL_TWIN_SIZES or kind not in FL_TWIN_CODES:
        raise ValueError(f"{shift!r} is not one of Failing loudly's image shifts with twins: "
                         "<small|medium|large>_gn_shift or <small|medium|large>_image_shift")  # fmt: skip
    return FL_TWIN_CODES[kind], FL_TWIN_SIZES[size]


def _shifts_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", required=True, help="clean image set of `dgpbench images`")
    p.add_argument("--shifts", nargs="+", required=True,
                   help="<small|medium|large>_gn_shift or _image_shift, all of one kind")  # fmt: skip
    p.add_argument("--seed", type=int, default=112, help="seed of the shifts (default: 112)")
    p.add_argument("--out", required=True,
                   help="output .npz: `corruption` (FLGN or FLIMG) and `intensity_<k>`")  # fmt: skip


def _shifts(args: argparse.Namespace) -> None:
    from dgpbench.io import load_npz, save_npz
    from dgpbench.shifts import apply_shift

    keys = [fl_twin_key(s) for s in args.shifts]
    codes = sorted({code for code, _ in keys})
    if len(codes) > 1:
        raise ValueError(f"--shifts mixes {codes}: one file holds one kind of shift")
    images = load_npz(args.images)
    require_arrays(images, args.images, ["x_test", "y_test"], "images")
    x, y = images["x_test"], np.asarray(images["y_test"]).astype(np.int64)
    arrays = {}
    for shift, (_, level) in zip(args.shifts, keys, strict=True):
        pool = apply_shift(shift, 1.0, x, y, seed=args.seed)  # every image: twins, in order
        arrays[f"intensity_{level}"] = pool.images(x)
    save_npz(args.out, corruption=np.array(codes[0]), **arrays)
    log.info("%s of %d images -> %s", ", ".join(args.shifts), len(x), args.out)


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="+", help="record CSVs of `dgpbench stream`")
    p.add_argument("--out-dir", required=True,
                   help="folder for stream_summary.csv/.md and stream_delays.png/.pdf")  # fmt: skip


def _report(args: argparse.Namespace) -> None:
    import pandas as pd

    from dgpbench.io import write_csv, write_text
    from dgpbench.online.stream_report import plot_streams, stream_markdown, summarise_streams

    records = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in args.records],
                        ignore_index=True)  # fmt: skip
    summary = summarise_streams(records)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "stream_summary.csv", summary, index=False, float_format="%.6g")
    write_text(out / "stream_summary.md", stream_markdown(summary))
    plot_streams(summary, out / "stream_delays")
    log.info("stream summary (%d rows) -> %s", len(summary), out)


SUBCOMMANDS.update(
    {
        "stream": (
            "Run online detectors on clean and shifted streams drawn from a features file.",
            _stream_args,
            _stream,
        ),
        "stream-shifts": (
            "Write Failing loudly's image shifts of the clean test images as a corrupt file.",
            _shifts_args,
            _shifts,
        ),
        "stream-report": (
            "Pool stream records into the run-time and delay table and figure.",
            _report_args,
            _report,
        ),
    }
)
