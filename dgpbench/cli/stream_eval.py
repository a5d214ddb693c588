"""``dgpbench stream`` and ``dgpbench stream-report``: the ``stream`` workflow target's steps.

``stream`` runs the online detectors on clean and shifted streams drawn from one features
file (:func:`dgpbench.online.streams.stream_records`) and writes one record per stream;
``stream-report`` pools the records into the table (CSV, Markdown) and the figure
(:mod:`dgpbench.online.stream_report`).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

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
    p.add_argument("--features", required=True, help="features .npz from `dgpbench features`")
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
    p.add_argument("--cvm-calibration", choices=["reference", "gaussian"], default="reference",
                   help="cvm_online's calibration: reference (permuted reference rows; the ERT "
                   "holds on dependent features) or gaussian (alibi-detect's: independent "
                   "features assumed)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the split and the streams")
    p.add_argument("--tag", action="append", default=[], help="key=value column of the records")
    p.add_argument("--out", required=True, help="output CSV, one record per stream")


def _stream(args: argparse.Namespace) -> None:
    from dgpbench.io import load_npz, write_csv
    from dgpbench.online.streams import stream_records

    if not args.max_factor > 0:
        raise ValueError(f"--max-factor must be positive, got {args.max_factor}")
    tags = parse_tags(args.tag)  # a bad tag fails before the run
    feats = load_npz(args.features)
    require_arrays(feats, args.features, ["clean"], "features")
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
        cvm_calibration=args.cvm_calibration,
        seed=args.seed,
    )
    for i, (key, value) in enumerate(tags.items()):
        records.insert(i, key, value)
    write_csv(args.out, records, index=False, float_format="%.6g")
    log.info("%d stream records -> %s", len(records), args.out)


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
        "stream-report": (
            "Pool stream records into the run-time and delay table and figure.",
            _report_args,
            _report,
        ),
    }
)
