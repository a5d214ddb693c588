"""Failing loudly's tables and figure, with dgpbench's rows added and intervals throughout.

Records (one row per draw, written by ``dgpbench fl-detect``) carry ``dataset``, ``model``,
``kind``, ``method`` (``representation+test``), ``dimension``, ``shift``, ``fraction``, ``n``,
``draw``, ``rejected``. A table *row* is a method, and for methods that read a classifier
(BBSD, DGP, TU, MAGDiff) the method on one model family: ``bbsds+ks [cnn]``; the models of a
family (widths, depths, seeds) are pooled.

- Table 1a (:func:`accuracy_table`): detection accuracy per row and sample size, pooled over
  shifts, fractions and draws, with Wilson 95% intervals (Rabanser et al.'s Table 1a).
- Table 1b (:func:`best_table`): per shift class, the best univariate and the best
  multivariate row (pooled over fractions, sample sizes and draws), and each topological
  row's accuracy and rank among all rows.
- False positives (:func:`false_positive_table`): per row and ``n``, the share of calibration
  draws (shift ``none``) that rejected, with a Clopper-Pearson 95% interval; a cell whose
  interval lies wholly above alpha is marked and listed in the summary.
- Figure (:func:`accuracy_figure`): accuracy vs ``n`` per row, one panel per shift class.

Wilson intervals count draws as independent; draws pooled over shifts, fractions and models
are (different images), draws of one cell are too; the intervals ignore the variation between
trained models.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from dgpbench.io import save_figure, write_csv, write_text
from dgpbench.tables import to_markdown

log = logging.getLogger(__name__)

__all__ = [
    "TOPOLOGICAL",
    "accuracy_figure",
    "accuracy_table",
    "best_table",
    "false_positive_table",
    "proportion_cells",
    "table_rows",
    "write_report",
]

TOPOLOGICAL: tuple[str, ...] = ("dgp", "dgp_approx", "tu", "magdiff")
"""dgpbench's representations added to Rabanser et al.'s rows."""
CALIBRATION = "none"


def table_rows(records: pd.DataFrame) -> pd.Series:
    """The row label of each record: the method, plus ``[kind]`` where it reads a model."""
    kind = records["kind"].astype(str)
    method = records["method"].astype(str)
    return method.where(records["model"].astype(str) == "none", method + " [" + kind + "]")


def proportion_cells(
    records: pd.DataFrame, by: Sequence[str], method: str = "wilson"
) -> pd.DataFrame:
    """Share of rejected draws per group with a 95% interval of ``binomtest``.

    Parameters
    ----------
    records : pandas.DataFrame
        With a boolean ``rejected`` column and the ``by`` columns.
    by : sequence of str
        Grouping columns.
    method : {"wilson", "exact"}
        ``scipy.stats.binomtest(k, n).proportion_ci(method=...)``; ``exact`` is
        Clopper-Pearson.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns, ``k``, ``count``, ``rate``, ``ci_low``, ``ci_high``.
    """
    if records.empty:
        raise ValueError("no records to aggregate")
    grouped = records.groupby(list(by), sort=True, observed=True)["rejected"]
    cells = grouped.agg(k="sum", count="size").reset_index()
    cells["k"] = cells["k"].astype(np.int64)
    cells["rate"] = cells["k"] / cells["count"]
    bounds = [
        binomtest(int(k), int(c)).proportion_ci(confidence_level=0.95, method=method)
        for k, c in zip(cells["k"], cells["count"], strict=True)
    ]
    cells["ci_low"] = [b.low for b in bounds]
    cells["ci_high"] = [b.high for b in bounds]
    return cells


def _text(rate: float, low: float, high: float) -> str:
    return f"{100 * rate:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def _with_rows(records: pd.DataFrame) -> pd.DataFrame:
    out = records.copy()
    out["row"] = table_rows(out)
    out["rejected"] = out["rejected"].astype(bool)
    return out


def _shifted(records: pd.DataFrame) -> pd.DataFrame:
    return records[records["shift"] != CALIBRATION]


def accuracy_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 1a: accuracy per (dataset, dimension, row, n) with Wilson intervals."""
    cells = proportion_cells(_shifted(_with_rows(records)), ["dataset", "dimension", "row", "n"])
    return cells


def best_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 1b: per (dataset, shift), the best univariate and multivariate rows and the
    topological rows' accuracy and rank (1 = best) among all rows."""
    rec = _with_rows(_shifted(records))
    cells = proportion_cells(rec, ["dataset", "shift", "dimension", "row"])
    out = []
    for (dataset, shift), group in cells.groupby(["dataset", "shift"], sort=True):
        entry: dict[str, object] = {"dataset": dataset, "shift": shift}
        for dim in ("univariate", "multivariate"):
            sub = group[group["dimension"] == dim]
            if sub.empty:
                entry[f"best_{dim}"], entry[f"best_{dim}_accuracy"] = "", np.nan
                entry[f"best_{dim}_text"] = ""
                continue
            best = sub.sort_values(["rate", "row"], ascending=[False, True]).iloc[0]
            entry[f"best_{dim}"] = best["row"]
            entry[f"best_{dim}_accuracy"] = best["rate"]
            entry[f"best_{dim}_text"] = _text(best["rate"], best["ci_low"], best["ci_high"])
        ranks = group["rate"].rank(ascending=False, method="min").astype(int)
        for row, rate, low, high, rank in zip(
            group["row"], group["rate"], group["ci_low"], group["ci_high"], ranks, strict=True
        ):
            if row.split("+")[0] in TOPOLOGICAL:
                entry[row] = f"{_text(rate, low, high)} (#{rank}/{len(group)})"
        out.append(entry)
    return pd.DataFrame(out)


def false_positive_table(records: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """False-positive rate per (dataset, row, n) of the calibration draws, Clopper-Pearson
    intervals, and ``above_alpha`` where the whole interval lies above ``alpha``."""
    rec = _with_rows(records)
    rec = rec[rec["shift"] == CALIBRATION]
    if rec.empty:
        raise ValueError("the records hold no calibration draws (shift 'none')")
    cells = proportion_cells(rec, ["dataset", "dimension", "row", "n"], method="exact")
    cells["above_alpha"] = cells["ci_low"] > alpha
    return cells


def _wide(cells: pd.DataFrame, index: list[str], text: pd.Series) -> pd.DataFrame:
    frame = cells[[*index, "n"]].assign(text=text.to_numpy())
    return frame.pivot(index=index, columns="n", values="text").fillna("")


def accuracy_figure(records: pd.DataFrame, dataset: str, stem: str | os.PathLike) -> list[Path]:
    """Accuracy vs ``n`` (log axis) per row, one panel per shift class, for one data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = _with_rows(_shifted(records[records["dataset"] == dataset]))
    shifts = list(dict.fromkeys(rec["shift"]))
    if not shifts:
        raise ValueError(f"no shifted records of data set {dataset!r}")
    cells = proportion_cells(rec, ["shift", "dimension", "row", "n"])
    ncol = min(3, len(shifts))
    nrow = -(-len(shifts) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.2 * nrow), squeeze=False)
    for ax, shift in zip(axes.flat, shifts, strict=False):
        sub = cells[cells["shift"] == shift]
        for (dim, row), line in sub.groupby(["dimension", "row"], sort=True):
            style = "-o" if dim == "univariate" else "--s"
            (drawn,) = ax.plot(line["n"], line["rate"], style, markersize=3, label=row)
            ax.fill_between(
                line["n"], line["ci_low"], line["ci_high"], color=drawn.get_color(), alpha=0.15
            )
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(shift, fontsize=9)
        ax.set_xlabel("sample size n")
        ax.set_ylabel("detection accuracy")
    for ax in list(axes.flat)[len(shifts) :]:
        ax.set_axis_off()
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Failing loudly's grid on {dataset}: accuracy vs n (95% Wilson bands)")
    fig.tight_layout(rect=(0, 0.04 + 0.02 * (len(labels) // 4), 1, 0.97))
    paths = save_figure(fig, stem)
    plt.close(fig)
    return paths


def write_report(
    records: pd.DataFrame, out_dir: str | os.PathLike, *, alpha: float
) -> dict[str, Path]:
    """Write Tables 1a and 1b, the false-positive table (CSV and Markdown) and the summary.

    Returns
    -------
    dict
        Name -> path of the Markdown/CSV files written.
    """
    out = Path(out_dir)
    written: dict[str, Path] = {}

    acc = accuracy_table(records)
    write_csv(out / "fl_table1a_accuracy.csv", acc, float_format="%.6g")
    md = []
    for (dataset, dim), sub in acc.groupby(["dataset", "dimension"], sort=True):
        text = pd.Series(
            [_text(r, lo, hi) for r, lo, hi in zip(sub.rate, sub.ci_low, sub.ci_high, strict=True)]
        )
        wide = _wide(sub.reset_index(drop=True), ["row"], text)
        md.append(to_markdown(wide, f"{dataset}, {dim} tests: detection accuracy (%) by n"))
    write_text(out / "fl_table1a_accuracy.md", "\n".join(md))
    written["table1a"] = out / "fl_table1a_accuracy.csv"

    best = best_table(records)
    write_csv(out / "fl_table1b_best.csv", best, float_format="%.6g")
    show = best.drop(columns=[c for c in best if c.endswith("_accuracy")]).set_index(
        ["dataset", "shift"]
    )
    write_text(
        out / "fl_table1b_best.md",
        to_markdown(show.fillna(""), "Best univariate and multivariate method per shift class"),
    )
    written["table1b"] = out / "fl_table1b_best.csv"

    fp = false_positive_table(records, alpha)
    write_csv(out / "fl_false_positives.csv", fp, float_format="%.6g")
    text = pd.Series(
        [
            _text(r, lo, hi) + (" **!**" if flag else "")
            for r, lo, hi, flag in zip(fp.rate, fp.ci_low, fp.ci_high, fp.above_alpha, strict=True)
        ]
    )
    md = []
    for dataset, sub in fp.assign(text=text.to_numpy()).groupby("dataset", sort=True):
        wide = _wide(sub.reset_index(drop=True), ["dimension", "row"], sub["text"])
        md.append(
            to_markdown(
                wide,
                f"{dataset}: false-positive rate (%) under no shift, Clopper-Pearson 95% "
                f"(**!**: interval wholly above alpha = {alpha:g})",
            )
        )
    write_text(out / "fl_false_positives.md", "\n".join(md))
    written["false_positives"] = out / "fl_false_positives.csv"

    flagged = fp[fp["above_alpha"]]
    lines = [
        "# Failing loudly's grid: summary",
        "",
        f"- records: {len(records)} draws; data sets: {', '.join(sorted(records.dataset.unique()))}",
        f"- methods: {records['method'].nunique()}; shifts: "
        f"{', '.join(s for s in dict.fromkeys(records['shift']) if s != CALIBRATION)}",
        f"- false-positive cells wholly above alpha = {alpha:g}: {len(flagged)} of {len(fp)}",
    ]
    lines += [
        f"  - {r.dataset}, {r.row}, n = {r.n}: {_text(r.rate, r.ci_low, r.ci_high)} "
        f"({r.k}/{r['count']})"
        for _, r in flagged.iterrows()
    ]
    write_text(out / "fl_summary.md", "\n".join(lines) + "\n")
    written["summary"] = out / "fl_summary.md"
    return written
