"""Published vs reproduced: the paper's Table 1 next to this run's detection ratios.

The published table (``dgpbench/resources/paper_table1.csv``, or any CSV with the columns
``dataset, corruption, n, method, detection_ratio_pct`` in the paper's labels) is joined
with this run's Table 1 cells on (data set, corruption, n, method). Only cells the run
computed appear: a published cell without a reproduced value is left out, never filled.

Per cell: the paper's value, ours with its 95% interval, and ``diff = ours - paper``
(percentage points). The interval counts the cell's independent units, its trained models
(``n_models``): the hull of a percentile bootstrap over the models and the draws' Wilson
interval (:func:`dgpbench.paper.protocol.detection_ratio`); the draws alone would leave out
the spread between models. Per data set:

* ``share_within_5``: the share of cells with ``|diff| <= 5`` points;
* ``share_best_agrees``: over the (corruption, n) groups with at least two compared
  methods, the share where the best method agrees: the sets of methods attaining the
  group's maximum (values rounded to the paper's two decimals) share a method;
* ``share_dgp_vs_tu_agrees``: over the groups where both DGP and TU were compared, the
  share where ``sign(DGP - TU)`` (rounded to two decimals, so a tie is 0) is the same in
  the paper and here.

Which deltas a reproduced cell pools is the caller's choice (``deltas``): the paper's text
says {0.25, 0.5, 0.75}, the authors' evaluation script pools {0.25, 0.5, 1.0}.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from dgpbench.io import write_csv, write_text
from dgpbench.labels import DATASET_LABELS, METHOD_LABELS, dataset_label, method_label
from dgpbench.paper.reporting import (
    CORRUPTION_ORDER,
    model_cells,
    paper_records,
    shift_records,
)
from dgpbench.tables import to_markdown

log = logging.getLogger(__name__)

__all__ = [
    "PUBLISHED_COLUMNS",
    "compare_table1",
    "load_published_table",
    "reproduced_cells",
    "summarize_comparison",
    "write_comparison",
    "write_comparisons",
]

PUBLISHED_COLUMNS = ("dataset", "corruption", "n", "method", "detection_ratio_pct")
KEYS = ["dataset", "corruption", "n", "method"]
WITHIN = 5.0  # percentage points
_DECIMALS = 2  # the published table's precision


def load_published_table(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """Read a published Table 1 (default: the paper's, shipped with dgpbench).

    Parameters
    ----------
    path : path-like, optional
        A CSV with the columns ``dataset, corruption, n, method, detection_ratio_pct``
        (data sets and methods in the paper's labels, e.g. ``Fashion-MNIST``, ``DGP``).
        None reads ``dgpbench/resources/paper_table1.csv``.

    Returns
    -------
    pandas.DataFrame
        The five columns; ``n`` integer, ``detection_ratio_pct`` float.

    Raises
    ------
    ValueError
        If a column is missing, a value is not a number (or outside [0, 100]), or a cell
        appears twice; the message names the file.

    Examples
    --------
    >>> table = load_published_table()
    >>> len(table), sorted(table["method"].unique())
    (240, ['DGP', 'MAGDiff', 'Softmax', 'TU'])
    """
    if path is None:
        source = resources.files("dgpbench.resources").joinpath("paper_table1.csv")
        name = "dgpbench/resources/paper_table1.csv"
        with source.open("r", encoding="utf-8") as handle:
            table = pd.read_csv(handle, dtype=str)
    else:
        name = str(path)
        try:
            table = pd.read_csv(path, dtype=str)
        except pd.errors.EmptyDataError:
            raise ValueError(
                f"published table {name} is empty; expected a CSV with the columns "
                f"{', '.join(PUBLISHED_COLUMNS)}"
            ) from None
        except pd.errors.ParserError as exc:
            raise ValueError(f"published table {name} is not a readable CSV: {exc}") from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in PUBLISHED_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(
            f"published table {name} lacks columns {missing}; has {table.columns.tolist()}"
        )
    table = table[list(PUBLISHED_COLUMNS)].copy()
    # Labels as the tables write them: `dgp`, `DGP ` and `Dgp` all mean DGP.
    for col, canonical in (
        ("dataset", DATASET_LABELS),
        ("method", METHOD_LABELS),
        ("corruption", {c: c for c in CORRUPTION_ORDER}),
    ):
        spelled = {k.casefold(): v for k, v in canonical.items()}
        spelled.update({v.casefold(): v for v in canonical.values()})
        stripped = table[col].fillna("").str.strip()
        table[col] = stripped.map(lambda v, spelled=spelled: spelled.get(v.casefold(), v))
    for col, kind in (("n", "an integer"), ("detection_ratio_pct", "a number")):
        values = pd.to_numeric(table[col], errors="coerce")
        bad = table.loc[values.isna(), col]
        if len(bad):
            raise ValueError(
                f"published table {name}: column {col} needs {kind}, got {bad.iloc[0]!r} "
                f"(row {bad.index[0] + 2})"
            )
        table[col] = values
    if (table["n"] != table["n"].round()).any():
        raise ValueError(f"published table {name}: column n holds a non-integer")
    table["n"] = table["n"].astype("int64")
    out_of_range = ~table["detection_ratio_pct"].between(0, 100)
    if out_of_range.any():
        row = table[out_of_range].iloc[0]
        raise ValueError(
            f"published table {name}: detection_ratio_pct must lie in [0, 100], got "
            f"{row['detection_ratio_pct']} for {tuple(row[KEYS])}"
        )
    duplicated = table.duplicated(KEYS)
    if duplicated.any():
        raise ValueError(
            f"published table {name}: cell {tuple(table[duplicated].iloc[0][KEYS])} appears twice"
        )
    return table.reset_index(drop=True)


def reproduced_cells(records: pd.DataFrame, deltas: Iterable[float] | None = None) -> pd.DataFrame:
    """The run's Table 1 cells (percent, 95% interval over the models), labelled as in the paper.

    Parameters
    ----------
    records : pandas.DataFrame
        Bootstrap records (``dataset, method, corruption, n, delta, rejected`` at least).
    deltas : iterable of float, optional
        Pool only these corrupted fractions (None: every delta > 0 in ``records``).

    Returns
    -------
    pandas.DataFrame
        ``dataset, corruption, n, method`` (paper labels), ``ratio_pct, ci_low_pct,
        ci_high_pct, n_draws, n_models``.

    Raises
    ------
    ValueError
        If a requested delta has no record.
    """
    rec = shift_records(records)
    if deltas is not None:
        deltas = sorted({float(d) for d in deltas})
        present = set(np.round(rec["delta"].astype(float), 9))
        absent = [d for d in deltas if round(d, 9) not in present]
        if absent:
            raise ValueError(
                f"deltas {absent} have no records (the run computed {sorted(present)})"
            )
        rec = rec[np.isin(np.round(rec["delta"].astype(float), 9), np.round(deltas, 9))]
    rec = paper_records(rec)  # MLPs and the paper's corruptions only (no CNNs, no new shifts)
    rec = rec[rec["method"].isin(METHOD_LABELS)]  # never a custom method against a published row
    columns = [*KEYS, "ratio_pct", "ci_low_pct", "ci_high_pct", "n_draws", "n_models"]
    if rec.empty:
        return pd.DataFrame(columns=columns)
    cells = model_cells(rec, KEYS)
    cells["dataset"] = cells["dataset"].map(dataset_label)
    cells["method"] = cells["method"].map(method_label)
    return cells[columns]


def compare_table1(published: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Join published and reproduced cells; only cells present in both are kept.

    Parameters
    ----------
    published : pandas.DataFrame
        Output of :func:`load_published_table`.
    cells : pandas.DataFrame
        Output of :func:`reproduced_cells`.

    Returns
    -------
    pandas.DataFrame
        ``dataset, corruption, n, method, paper_pct, ours_pct, ci_low_pct, ci_high_pct,
        diff_pct, within_5, paper_in_ci, n_draws, n_models``, sorted by data set, corruption, n and
        the paper's method order.
    """
    ours = cells.rename(columns={"ratio_pct": "ours_pct"})
    paper = published.rename(columns={"detection_ratio_pct": "paper_pct"})
    joined = paper.merge(ours, on=KEYS, how="inner", validate="one_to_one")
    joined["diff_pct"] = joined["ours_pct"] - joined["paper_pct"]
    # rounded first: a difference of exactly 5 points must not fail on float noise
    joined["within_5"] = joined["diff_pct"].abs().round(6) <= WITHIN
    joined["paper_in_ci"] = joined["paper_pct"].between(joined["ci_low_pct"], joined["ci_high_pct"])
    method_order = {m: i for i, m in enumerate(dict.fromkeys(published["method"]))}
    corruption_order = {c: i for i, c in enumerate(CORRUPTION_ORDER)}
    joined = joined.sort_values(
        KEYS,
        key=lambda col: (
            col.map(method_order)
            if col.name == "method"
            else col.map(corruption_order).fillna(len(corruption_order))
            if col.name == "corruption"
            else col
        ),
        kind="stable",
    )
    cols = [
        *KEYS,
        "paper_pct",
        "ours_pct",
        "ci_low_pct",
        "ci_high_pct",
        "diff_pct",
        "within_5",
        "paper_in_ci",
        "n_draws",
        "n_models",
    ]
    return joined[cols].reset_index(drop=True)


def _best_agrees(group: pd.DataFrame) -> bool:
    paper = group["paper_pct"].round(_DECIMALS)
    ours = group["ours_pct"].round(_DECIMALS)
    best_paper = set(group.loc[paper == paper.max(), "method"])
    best_ours = set(group.loc[ours == ours.max(), "method"])
    return bool(best_paper & best_ours)


def _dgp_vs_tu_agrees(group: pd.DataFrame) -> bool | None:
    by_method = group.set_index("method")
    if not {"DGP", "TU"} <= set(by_method.index):
        return None
    signs = [
        np.sign(round(by_method.at["DGP", col] - by_method.at["TU", col], _DECIMALS))
        for col in ("paper_pct", "ours_pct")
    ]
    return bool(signs[0] == signs[1])


def summarize_comparison(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per data set: the agreement shares of a comparison (see the module docstring).

    Parameters
    ----------
    comparison : pandas.DataFrame
        Output of :func:`compare_table1`.

    Returns
    -------
    pandas.DataFrame
        One row per data set: ``dataset, n_cells, share_within_5, mean_diff_pct,
        mean_abs_diff_pct, n_groups, share_best_agrees, n_dgp_tu_groups,
        share_dgp_vs_tu_agrees, share_paper_in_ci, n_models`` (a share is NaN when it has no
        group; ``n_models``: the fewest models a cell rests on).
    """
    rows = []
    for dataset, cells in comparison.groupby("dataset", sort=False):
        groups = [g for _, g in cells.groupby(["corruption", "n"], sort=False)]
        best = [_best_agrees(g) for g in groups if len(g) >= 2]
        pair = [a for a in (_dgp_vs_tu_agrees(g) for g in groups) if a is not None]
        rows.append(
            {
                "dataset": dataset,
                "n_cells": len(cells),
                "share_within_5": float(cells["within_5"].mean()),
                "mean_diff_pct": float(cells["diff_pct"].mean()),
                "mean_abs_diff_pct": float(cells["diff_pct"].abs().mean()),
                "n_groups": len(best),
                "share_best_agrees": float(np.mean(best)) if best else np.nan,
                "n_dgp_tu_groups": len(pair),
                "share_dgp_vs_tu_agrees": float(np.mean(pair)) if pair else np.nan,
                "share_paper_in_ci": float(cells["paper_in_ci"].mean()),
                "n_models": int(cells["n_models"].min()),
            }
        )
    columns = [
        "dataset",
        "n_cells",
        "share_within_5",
        "mean_diff_pct",
        "mean_abs_diff_pct",
        "n_groups",
        "share_best_agrees",
        "n_dgp_tu_groups",
        "share_dgp_vs_tu_agrees",
        "share_paper_in_ci",
        "n_models",
    ]
    return pd.DataFrame(rows, columns=columns)


def _deltas_text(deltas: Sequence[float]) -> str:
    return "{" + ", ".join(f"{d:g}" for d in deltas) + "}"


def _markdown(
    comparison: pd.DataFrame, summary: pd.DataFrame, deltas: Sequence[float], source: str
) -> str:
    head = (
        f"Published Table 1 ({source}) vs this run, pooling delta in {_deltas_text(deltas)}. "
        f"diff = ours - paper (points); within 5 = |diff| <= 5; best agrees = the best method "
        f"of a (corruption, n) group is the same; DGP vs TU agrees = the same sign of "
        f"DGP - TU; 95% CI: over the trained models (a bootstrap of the models hulled with "
        f"the draws' Wilson interval). Cells this run did not compute are left out."
    )
    if comparison.empty:
        return f"### Published vs reproduced\n\n{head}\n\nNo published cell was computed by this run.\n"
    pct = lambda v: "" if pd.isna(v) else f"{100 * v:.0f}%"  # noqa: E731
    shares = summary.set_index("dataset")
    shares = pd.DataFrame(
        {
            "cells": shares["n_cells"].astype(str),
            "within 5": shares["share_within_5"].map(pct),
            "mean diff": shares["mean_diff_pct"].map(lambda v: f"{v:+.1f}"),
            "mean abs diff": shares["mean_abs_diff_pct"].map(lambda v: f"{v:.1f}"),
            "models": shares["n_models"].astype(str),
            "paper in CI": shares["share_paper_in_ci"].map(pct),
            "best agrees": [
                f"{pct(s)} of {k}"
                for s, k in zip(shares["share_best_agrees"], shares["n_groups"], strict=True)
            ],
            "DGP vs TU agrees": [
                f"{pct(s)} of {k}"
                for s, k in zip(
                    shares["share_dgp_vs_tu_agrees"], shares["n_dgp_tu_groups"], strict=True
                )
            ],
        }
    )
    cells = comparison.copy()
    cells["paper"] = cells["paper_pct"].map(lambda v: f"{v:.1f}")
    cells["ours (95% CI)"] = [
        f"{o:.1f} ({lo:.1f}-{hi:.1f})"
        for o, lo, hi in zip(
            cells["ours_pct"], cells["ci_low_pct"], cells["ci_high_pct"], strict=True
        )
    ]
    cells["diff"] = cells["diff_pct"].map(lambda v: f"{v:+.1f}")
    cells = cells.set_index(KEYS)[["paper", "ours (95% CI)", "diff"]]
    return (
        to_markdown(shares, "Published vs reproduced: agreement per data set")
        + f"\n{head}\n\n"
        + to_markdown(cells, "Published vs reproduced: cells")
    )


def write_comparison(
    records: pd.DataFrame,
    out_stem: str | os.PathLike,
    *,
    deltas: Sequence[float],
    published: pd.DataFrame | None = None,
    source: str = "the paper",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write ``<stem>.csv`` (one row per compared cell) and ``<stem>.md`` (shares + cells).

    Parameters
    ----------
    records : pandas.DataFrame
        Bootstrap records of the run.
    out_stem : path-like
        Output path without suffix.
    deltas : sequence of float
        The corrupted fractions pooled in a reproduced cell (all must have records).
    published : pandas.DataFrame, optional
        The published table (default: the paper's).
    source : str, default="the paper"
        Where the published table comes from, for the Markdown text.

    Returns
    -------
    (comparison, summary) : pandas.DataFrame
        The outputs of :func:`compare_table1` and :func:`summarize_comparison`.
    """
    published = load_published_table() if published is None else published
    comparison = compare_table1(published, reproduced_cells(records, deltas))
    summary = summarize_comparison(comparison)
    stem = Path(out_stem)
    out = comparison.copy()
    for col in ("ours_pct", "ci_low_pct", "ci_high_pct", "diff_pct"):
        out[col] = out[col].round(4)
    write_csv(stem.with_suffix(".csv"), out)
    write_text(stem.with_suffix(".md"), _markdown(comparison, summary, deltas, source))
    return comparison, summary


def _check_overlap(published: pd.DataFrame, cells: pd.DataFrame, source: str) -> None:
    """Refuse a user's published table none of whose cells this run computed (a spelling
    that matches nothing would otherwise give an empty comparison and exit 0).
    """
    if cells.empty or not published.merge(cells[KEYS], on=KEYS).empty:
        return
    ours = cells.iloc[0]
    theirs = published.iloc[0] if len(published) else None
    raise ValueError(
        f"published table {source} matches no cell this run computed: e.g. this run has "
        f"({', '.join(f'{k}={ours[k]!r}' for k in KEYS)})"
        + (
            f", the table ({', '.join(f'{k}={theirs[k]!r}' for k in KEYS)})"
            if theirs is not None
            else ", the table has no rows"
        )
        + "; use the paper's labels (e.g. MNIST, GN, DGP)"
    )


def write_comparisons(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    *,
    pool_deltas: Sequence[float],
    delta_sets: Mapping[str, Sequence[float]] | None = None,
    published_path: str | os.PathLike | None = None,
    name: str = "comparison_table1",
) -> pd.DataFrame:
    """The comparison for the pooled deltas and for every labelled delta set the run has.

    Writes ``<name>.{csv,md}`` for ``pool_deltas``, ``<name>_<label>.{csv,md}`` for each
    set of ``delta_sets`` whose deltas all have records (a set with an uncomputed delta is
    skipped, with a log message), and ``<name>_summary.csv``: the per-data-set shares of
    every written comparison, with a ``delta_set`` column (``pool`` or the label) and the
    deltas pooled.

    Parameters
    ----------
    records : pandas.DataFrame
        Bootstrap records of the run.
    out_dir : path-like
        Output directory.
    pool_deltas : sequence of float
        The deltas of the main comparison (the run's tables pool the same set).
    delta_sets : mapping of str to sequence of float, optional
        Further labelled sets (labels: letters, digits, ``_`` and ``-``).
    published_path : path-like, optional
        A published table other than the paper's (see :func:`load_published_table`).
    name : str, default="comparison_table1"
        File-name stem.

    Returns
    -------
    pandas.DataFrame
        The summary table written to ``<name>_summary.csv``.

    Raises
    ------
    ValueError
        If a pooled delta has no record, a label is not a plain file-name word, or a
        published table given by path matches none of this run's cells.
    """
    published = load_published_table(published_path)
    source = "the paper" if published_path is None else str(published_path)
    out = Path(out_dir)
    computed = set(np.round(shift_records(records)["delta"].astype(float), 9))
    runs: list[tuple[str, str, Sequence[float]]] = [("pool", name, list(pool_deltas))]
    for label, deltas in (delta_sets or {}).items():
        if not label or not all(c.isalnum() or c in "_-" for c in label):
            raise ValueError(f"delta set label {label!r} must be letters, digits, _ or -")
        if not {round(float(d), 9) for d in deltas} <= computed:
            log.info("delta set %s %s not computed by this run: skipped", label, list(deltas))
            continue
        runs.append((label, f"{name}_{label}", list(deltas)))
    if published_path is not None:
        _check_overlap(published, reproduced_cells(records, pool_deltas), source)
    summaries = []
    for label, stem, deltas in runs:
        _, summary = write_comparison(
            records, out / stem, deltas=deltas, published=published, source=source
        )
        summary.insert(0, "deltas", _deltas_text(sorted(float(d) for d in deltas)))
        summary.insert(0, "delta_set", label)
        summaries.append(summary)
        log.info("comparison (%s, deltas %s) -> %s", label, deltas, out / stem)
    summary = pd.concat(summaries, ignore_index=True)
    write_csv(out / f"{name}_summary.csv", summary.round(6))
    return summary
