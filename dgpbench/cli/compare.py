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

import pandas as pd

from dgpbench.cli.registry import SUBCOMMANDS

log = logging.getLogger(__name__)

TABLES = ("table2_ablation", "calibration", "bounds", "r2", "early_stopping")
_MODULES = {"table2_ablation": "ablation"}
_N_INPUTS = {"early_stopping": 2}


# The --input each table reads, for the messages of a wrong file.
_INPUT_HINTS = {
    "table2_ablation": "pass the aggregated records, results/aggregate/records.csv.gz",
    "calibration": "pass the aggregated records, results/aggregate/records.csv.gz",
    "bounds": "pass analysis/bounds/study.csv",
    "r2": "pass analysis/np_variance/r2.csv",
    "early_stopping": "pass analysis/early_stopping/table_np.csv and table_dgp.csv",
}
_RECORD_COLUMNS = ("dataset", "method", "corruption", "n", "delta", "rejected")


def _read_csv(path: str, what: str) -> pd.DataFrame:
    from dgpbench.paper.comparisons.core import read_csv_file

    return read_csv_file(path, what)


def _records(path: str, table: str) -> pd.DataFrame:
    from dgpbench.paper.comparisons.core import require_columns

    records = _read_csv(path, "records")
    require_columns(records, _RECORD_COLUMNS, f"records file {path}", _INPUT_HINTS[table])
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
    files = ", ".join(inputs)
    try:
        if table == "table2_ablation":
            return module.reproduced(_records(inputs[0], table), pool_deltas)
        if table == "calibration":
            return module.reproduced(_records(inputs[0], table))
        if table == "early_stopping":
            names = ("early_stopping_np", "early_stopping_dgp")
            return module.reproduced(
                {
                    n: _read_csv(p, "early-stopping table")
                    for n, p in zip(names, inputs, strict=True)
                }
            )
        return module.reproduced(_read_csv(inputs[0], table))
    except KeyError as exc:  # a column the table's code needs: the wrong file
        raise ValueError(
            f"{table}: {files} has no column {exc.args[0]!r}: {_INPUT_HINTS[table]}"
        ) from exc
    except ValueError as exc:
        if any(p in str(exc) for p in inputs):
            raise
        raise ValueError(f"{table}: {files}: {exc} ({_INPUT_HINTS[table]})") from exc


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
