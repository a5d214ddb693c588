"""``dgpbench compare-paper TABLE``: one published table vs what the run computed.

==================  ==========================================================
TABLE               ``--input``
==================  ==========================================================
``table2_ablation``  the aggregated records (``--pool-deltas`` as the tables)
``calibration``      the aggregated records
``bounds``           ``analysis/bounds/study.csv``
``r2``               ``analysis/np_variance/r2.csv``
``early_stopping``   ``analysis/early_stopping/table_np.csv`` and ``table_dgp.csv``
==================  ==========================================================

Writes ``comparison_<TABLE>.csv`` (cells), ``comparison_<TABLE>_summary.csv`` (agreement
shares) and ``comparison_<TABLE>.md`` into ``--out-dir``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from pathlib import Path

import pandas as pd

from dgpbench.cli.registry import SUBCOMMANDS

log = logging.getLogger(__name__)

TABLES = ("table2_ablation", "calibration", "bounds", "r2", "early_stopping")
_MODULES = {"table2_ablation": "ablation"}
_N_INPUTS = {"early_stopping": 2}


def _read_csv(path: str, what: str) -> pd.DataFrame:
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{what} file {path} is empty") from exc


def _records(path: str) -> pd.DataFrame:
    records = _read_csv(path, "records")
    for col in ("dataset", "method", "corruption", "model", "kind"):
        if col in records:
            records[col] = records[col].astype(str)
    return records


def reproduced_cells(table: str, inputs: list[str], pool_deltas=None) -> pd.DataFrame:
    """The run's cells of ``table`` read from the ``inputs`` files (see the module doc)."""
    module = importlib.import_module(f"dgpbench.paper.comparisons.{_MODULES.get(table, table)}")
    needed = _N_INPUTS.get(table, 1)
    if len(inputs) != needed:
        raise ValueError(f"{table} needs {needed} --input file(s), got {len(inputs)}")
    if table == "table2_ablation":
        return module.reproduced(_records(inputs[0]), pool_deltas)
    if table == "calibration":
        return module.reproduced(_records(inputs[0]))
    if table == "early_stopping":
        names = ("early_stopping_np", "early_stopping_dgp")
        return module.reproduced(
            {n: _read_csv(p, "early-stopping table") for n, p in zip(names, inputs, strict=True)}
        )
    return module.reproduced(_read_csv(inputs[0], table))


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", choices=TABLES, help="which published table")
    p.add_argument("--input", nargs="+", required=True, help="the run's file(s) (see -h)")
    p.add_argument(
        "--pool-deltas",
        type=float,
        nargs="+",
        default=None,
        help="table2_ablation: corrupted fractions pooled in a cell (default: all)",
    )
    p.add_argument("--published", default=None, help="a published CSV other than the paper's")
    p.add_argument(
        "--out-dir", required=True, help="folder for the comparison CSV, summary and Markdown"
    )


def _run(args: argparse.Namespace) -> None:
    from dgpbench.paper.comparisons.core import write_comparison

    module = importlib.import_module(
        f"dgpbench.paper.comparisons.{_MODULES.get(args.table, args.table)}"
    )
    ours = reproduced_cells(args.table, args.input, args.pool_deltas)
    comparison, summary, paths = write_comparison(
        module.SPEC, ours, args.out_dir, published_path=args.published
    )
    log.info(
        "%s: %d published cells computed by this run -> %s\n%s",
        args.table,
        len(comparison),
        paths[0],
        summary.to_string(index=False),
    )


SUBCOMMANDS.update(
    {
        "compare-paper": (
            "Compare one more published table (ablation, calibration, bounds, R², early "
            "stopping) with this run's (CSV, Markdown).",
            _args,
            _run,
        )
    }
)
