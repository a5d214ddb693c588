"""Failing loudly's tables and figure, with dgpbench's rows added and honest intervals throughout.

Records (one row per draw, written by ``dgpbench fl-detect``) carry ``dataset``, ``model``,
``kind``, ``method`` (``representation+test``), ``dimension``, ``shift``, ``fraction``, ``n``,
``run``, ``draw``, ``rejected``. A table *row* is a method, and for methods that read a
classifier (BBSD, DGP, TU, MAGDiff) the method on one model family: ``bbsds+ks [cnn]``; the
models of a family (widths, depths, seeds) are pooled.

- Table 1a (:func:`accuracy_table`): detection accuracy per row and sample size, pooled over
  shifts, fractions and draws (Rabanser et al.'s Table 1a); under ``protocol: rabanser`` also
  pooled over the data sets, as their table pools MNIST and CIFAR-10
  (:func:`pooled_accuracy_table`).
- Table 1b (:func:`rabanser_table1b`): as theirs, the accuracy of BBSDs + KS and UAE + MMD
  per shift class and ``n``.
- Best per shift class (:func:`best_table`, ``fl_best_per_shift``): per shift class, the best
  univariate and the best multivariate row, and each topological row's accuracy and rank.
- False positives (:func:`false_positive_table`): per row and ``n``, the share of calibration
  draws (shift ``none``) that rejected; a cell whose interval lies wholly above alpha is
  marked and listed in the summary.
- Figure (:func:`accuracy_figure`): accuracy by method and shift class, one heatmap per
  sample size.

Intervals (:func:`proportion_cells`). Draws of one run share its pools, so they are not
independent; runs are (:mod:`dgpbench.failing_loudly.grid`). Every 95% interval is the hull
of two: a percentile bootstrap over the independent units, the (data set, run) pairs
(resampled with replacement, a unit's draws kept together;
:data:`~dgpbench.resampling.N_BOOTSTRAP` resamples from a fixed seed), and the Wilson
interval of the draws (what the draws would give were they independent: no honest
interval is narrower). With one unit the bootstrap part is undefined
and the interval is Wilson's over that unit's draws, flagged by ``units = 1``. The intervals
ignore the variation between trained models.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dgpbench.io import save_figure, write_csv, write_text
from dgpbench.paper.protocol import detection_ratio
from dgpbench.tables import to_markdown

log = logging.getLogger(__name__)

__all__ = [
    "TOPOLOGICAL",
    "accuracy_figure",
    "accuracy_table",
    "best_table",
    "false_positive_table",
    "pooled_accuracy_table",
    "proportion_cells",
    "rabanser_table1b",
    "table_rows",
    "with_rows",
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
    """Share of rejected draws per group with a 95% interval that counts the independent runs.

    The interval is the hull of a percentile bootstrap over the (data set, run) units and the
    draws' binomial interval (module docstring; :func:`dgpbench.paper.protocol.detection_ratio`
    with the units as ``unit``).

    Parameters
    ----------
    records : pandas.DataFrame
        With a boolean ``rejected`` column, the ``by`` columns and, for the bootstrap, ``run``
        (and ``dataset``); records without ``run`` count as one unit.
    by : sequence of str
        Grouping columns.
    method : {"wilson", "exact"}
        The draws' binomial interval; ``exact`` is Clopper-Pearson.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns, ``k``, ``count``, ``units`` (independent runs), ``rate``,
        ``ci_low``, ``ci_high``.
    """
    if records.empty:
        raise ValueError("no records to aggregate")
    by = list(by)
    rec = records.assign(_unit=_units(records), rejected=records["rejected"].astype(bool))
    cells = detection_ratio(rec, by, unit="_unit", interval=method)
    cells = cells.rename(columns={"n_rejected": "k", "detection_ratio": "rate"})
    return cells[[*by, "k", "count", "units", "rate", "ci_low", "ci_high"]]


def _units(records: pd.DataFrame) -> pd.Series:
    """The independent unit of each record: its (data set, run)."""
    run = records["run"].astype(str) if "run" in records else pd.Series("0", index=records.index)
    dataset = records["dataset"].astype(str) if "dataset" in records else ""
    return dataset + "/" + run


def _text(rate: float, low: float, high: float) -> str:
    return f"{100 * rate:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def with_rows(records: pd.DataFrame) -> pd.DataFrame:
    """The records with their table ``row``, ``rejected`` as booleans and a ``test`` column.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid.

    Returns
    -------
    pandas.DataFrame
        A copy; ``test`` is read off ``method`` (its part after the last ``+``) when the
        records lack it.
    """
    out = records.copy()
    out["row"] = table_rows(out)
    out["rejected"] = out["rejected"].astype(bool)
    if "test" not in out:  # records that predate the column
        out["test"] = out["method"].astype(str).str.rpartition("+")[2]
    return out


def _shifted(records: pd.DataFrame) -> pd.DataFrame:
    return records[records["shift"] != CALIBRATION]


def protocol_of(records: pd.DataFrame) -> str:
    """The protocol the records were made under (``dgpbench`` for records that predate it).

    Raises
    ------
    ValueError
        If the records mix protocols.
    """
    if "protocol" not in records:
        return "dgpbench"
    found = sorted(set(records["protocol"].astype(str)))
    if len(found) != 1:
        raise ValueError(f"the records mix protocols {found}: report each on its own")
    return found[0]


def _carry_forward(records: pd.DataFrame) -> pd.DataFrame:
    """Rabanser et al.'s summary script: a shift whose pool is too small for the largest
    ``n`` (only-zero, ~1000 images) enters that ``n`` with its largest ``n``'s draws.
    """
    out = [records]
    for _, group in records.groupby(["dataset", "method", "shift"], sort=False):
        largest = group["n"].max()
        wanted = records.loc[records["method"] == group["method"].iloc[0], "n"].unique()
        for n in wanted[wanted > largest]:
            out.append(group[group["n"] == largest].assign(n=n))
    return pd.concat(out, ignore_index=True)


def accuracy_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 1a: accuracy per (dataset, dimension, row, n) with intervals over runs."""
    rec = _shifted(with_rows(records))
    if protocol_of(records) == "rabanser":
        rec = _carry_forward(rec)
    return proportion_cells(rec, ["dataset", "dimension", "row", "n"])


def pooled_accuracy_table(
    records: pd.DataFrame,
    by: Sequence[str] = ("dimension", "row", "n"),
    *,
    carry_forward: bool = True,
) -> pd.DataFrame:
    """Table 1a pooled over the data sets, as Rabanser et al.'s (MNIST with CIFAR-10):
    accuracy per (dimension, row, n), or per ``by`` (columns of the records with their
    ``row``); the units are the (data set, run) pairs. ``carry_forward``: a shift whose pool
    is too small for the largest n enters it with its largest n's draws (their script).
    """
    rec = _shifted(with_rows(records))
    return proportion_cells(_carry_forward(rec) if carry_forward else rec, list(by))


RABANSER_TABLE1B: tuple[str, ...] = ("bbsds+ks", "uae+mmd")
"""The two methods of Rabanser et al.'s Table 1b (their best univariate and multivariate)."""


def rabanser_table1b(records: pd.DataFrame) -> pd.DataFrame:
    """Table 1b as theirs: accuracy of BBSDs + KS and UAE + MMD per (dataset, shift, row, n),
    pooled over fractions and draws (one row per model family for BBSDs).
    """
    rec = with_rows(_shifted(records))
    rec = rec[rec["method"].isin(RABANSER_TABLE1B)]
    if rec.empty:
        raise ValueError(f"the records hold none of Table 1b's methods {list(RABANSER_TABLE1B)}")
    return proportion_cells(rec, ["dataset", "shift", "row", "n"])


def best_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 1b: per (dataset, shift), the best univariate and multivariate rows and the
    topological rows' accuracy and rank (1 = best) among all rows.
    """
    rec = with_rows(_shifted(records))
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
    """False-positive rate per (dataset, row, n) of the calibration draws, intervals over the
    runs (hull with Clopper-Pearson's of the draws: :func:`proportion_cells`), and
    ``above_alpha`` where the whole interval lies above ``alpha``.
    """
    rec = with_rows(records)
    rec = rec[rec["shift"] == CALIBRATION]
    if rec.empty:
        raise ValueError("the records hold no calibration draws (shift 'none')")
    cells = proportion_cells(rec, ["dataset", "dimension", "row", "n"], method="exact")
    cells["above_alpha"] = cells["ci_low"] > alpha
    return cells


def _wide(cells: pd.DataFrame, index: list[str], text: pd.Series) -> pd.DataFrame:
    frame = cells[[*index, "n"]].assign(text=text.to_numpy())
    return frame.pivot(index=index, columns="n", values="text").fillna("")


FIGURE_NS: tuple[int, ...] = (10, 100, 1000, 10000)
"""Sample sizes the figure shows (those run; else the run's smallest, middle and largest)."""


def accuracy_figure(records: pd.DataFrame, dataset: str, stem: str | os.PathLike) -> list[Path]:
    """Detection accuracy of every row on every shift class, one heatmap per sample size.

    Rows (methods, grouped by test family and sorted by mean accuracy within it) against
    shift classes (pooled over fractions, runs and draws); the cell's number is the accuracy
    in percent; topological rows (DGP, dgp_approx, TU, MAGDiff) are marked with a bullet and
    bold labels. A method not run at a size is blank.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = with_rows(_shifted(records[records["dataset"] == dataset]))
    shifts = list(dict.fromkeys(rec["shift"]))
    if not shifts:
        raise ValueError(f"no shifted records of data set {dataset!r}")
    grouped = rec.groupby(["test", "row", "shift", "n"], sort=True)["rejected"].mean()
    rates = grouped.rename("rate").reset_index()
    ns_run = sorted(rates["n"].unique())
    ns = [n for n in FIGURE_NS if n in ns_run]
    if len(ns) < 2:
        ns = sorted({ns_run[0], ns_run[len(ns_run) // 2], ns_run[-1]})
    family = {"ks": 0, "cvm": 1, "ad": 2, "chi2": 3, "fisher": 4, "classif": 5, "mmd": 6,
              "energy": 7}  # fmt: skip
    order = (
        rates.groupby(["test", "row"])["rate"].mean().reset_index()
        .assign(f=lambda d: d["test"].map(family).fillna(9))
        .sort_values(["f", "rate"], ascending=[True, False])
    )  # fmt: skip
    rows = order["row"].tolist()
    tests = order["test"].tolist()
    fig, axes = plt.subplots(
        1, len(ns), figsize=(2.0 + 0.55 * len(shifts) * len(ns), 1.6 + 0.28 * len(rows)),
        squeeze=False, sharey=True,
    )  # fmt: skip
    image = None
    for ax, n in zip(axes[0], ns, strict=True):
        table = (
            rates[rates["n"] == n].pivot(index="row", columns="shift", values="rate")
            .reindex(index=rows, columns=shifts)
        )  # fmt: skip
        values = table.to_numpy(dtype=float)
        image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=6,
                        color="black" if v > 0.6 else "white")  # fmt: skip
        for i in range(1, len(tests)):  # a line between test families
            if tests[i] != tests[i - 1]:
                ax.axhline(i - 0.5, color="white", linewidth=2)
        ax.set_xticks(range(len(shifts)))
        ax.set_xticklabels([sh.replace("_shift", "") for sh in shifts], rotation=60,
                           ha="right", fontsize=7)  # fmt: skip
        ax.set_title(f"n = {n}", fontsize=9)
    ax0 = axes[0][0]
    ax0.set_yticks(range(len(rows)))
    labels = [("\u2022 " if r.split("+")[0] in TOPOLOGICAL else "") + r for r in rows]
    ax0.set_yticklabels(labels, fontsize=7)
    for tick, row in zip(ax0.get_yticklabels(), rows, strict=True):
        if row.split("+")[0] in TOPOLOGICAL:
            tick.set_fontweight("bold")
    fig.colorbar(image, ax=axes[0].tolist(), fraction=0.02, pad=0.01, label="detection accuracy")
    fig.suptitle(
        f"Failing loudly's grid on {dataset}: detection accuracy (%) by method and shift "
        "class (pooled over fractions and runs; \u2022 bold: topological rows)",
        fontsize=9,
    )
    paths = save_figure(fig, stem, bbox_inches="tight")
    plt.close(fig)
    return paths


POOLED_INTERVALS = (
    "95% intervals: hull of a percentile bootstrap over the independent runs (the (data set, "
    "run) units: every run of every data set) and the Wilson interval of the draws"
)
"""The interval note of the tables pooled over the data sets."""

INTERVALS = (
    "95% intervals: hull of a percentile bootstrap over the independent runs (the (data set, "
    "run) units: {units}) and the {binomial} interval of the draws"
)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _inert(value: object) -> object:
    """A text cell a spreadsheet would run as a formula, made plain text (a leading ``'``)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _inert_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell, index entry and column name made inert (tags such as
    ``--tag dataset==HYPERLINK(...)`` reach the tables as labels).
    """
    out = frame.copy()
    for col in out.columns:
        if _texty(out[col]):
            out[col] = out[col].map(_inert)
    for axis in ("index", "columns"):
        labels = getattr(out, axis)
        if isinstance(labels, pd.MultiIndex):
            levels = [lv.map(_inert) if _texty(lv) else lv for lv in labels.levels]
            setattr(out, axis, labels.set_levels(levels))
        elif _texty(labels):
            setattr(out, axis, labels.map(_inert))
    return out


def _texty(values: pd.Series | pd.Index) -> bool:
    return pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)


def _units_text(cells: pd.DataFrame) -> str:
    lo, hi = int(cells["units"].min()), int(cells["units"].max())
    return f"{lo} per cell" if lo == hi else f"{lo}-{hi} per cell"


def write_report(
    records: pd.DataFrame, out_dir: str | os.PathLike, *, alpha: float
) -> dict[str, Path]:
    """Write Table 1a, Table 1b, the best rows per shift class, the false-positive table (CSV
    and Markdown) and the summary (``dgpbench fl-report`` adds
    :mod:`dgpbench.failing_loudly.breakdowns` and :mod:`dgpbench.failing_loudly.published`).

    Under ``protocol: rabanser`` Table 1a also pools the data sets (rows ``dataset =
    "pooled"``), as Rabanser et al.'s does.

    Returns
    -------
    dict
        Name -> path of the Markdown/CSV files written.
    """
    out = Path(out_dir)
    written: dict[str, Path] = {}
    protocol = protocol_of(records)

    acc = accuracy_table(records)
    if protocol == "rabanser" and records["dataset"].nunique() > 1:
        acc = pd.concat([acc, pooled_accuracy_table(records).assign(dataset="pooled")])
    acc.insert(0, "protocol", protocol)
    write_csv(out / "fl_table1a_accuracy.csv", _inert_frame(acc), float_format="%.6g")
    md = []
    for (dataset, dim), sub in acc.groupby(["dataset", "dimension"], sort=True):
        text = pd.Series(
            [_text(r, lo, hi) for r, lo, hi in zip(sub.rate, sub.ci_low, sub.ci_high, strict=True)]
        )
        wide = _wide(sub.reset_index(drop=True), ["row"], text)
        caption = (
            f"{dataset}, {dim} tests: detection accuracy (%) by n, protocol {protocol}; "
            + INTERVALS.format(units=_units_text(sub), binomial="Wilson")
        )
        md.append(to_markdown(_inert_frame(wide), caption))
    write_text(out / "fl_table1a_accuracy.md", "\n".join(md))
    written["table1a"] = out / "fl_table1a_accuracy.csv"

    try:
        t1b = rabanser_table1b(records)
    except ValueError as exc:
        t1b = pd.DataFrame(columns=["dataset", "shift", "row", "n", "k", "count", "units",
                                    "rate", "ci_low", "ci_high"])  # fmt: skip
        t1b_md = f"Table 1b: {exc}.\n"
    else:
        md = []
        for (dataset, row), sub in t1b.groupby(["dataset", "row"], sort=True):
            text = pd.Series([_text(r, lo, hi) for r, lo, hi
                              in zip(sub.rate, sub.ci_low, sub.ci_high, strict=True)])  # fmt: skip
            wide = _wide(sub.reset_index(drop=True), ["shift"], text)
            md.append(to_markdown(_inert_frame(wide), (
                f"{dataset}, {row}: detection accuracy (%) per shift class and n (Rabanser "
                f"et al.'s Table 1b), protocol {protocol}; "
                + INTERVALS.format(units=_units_text(sub), binomial="Wilson")
            )))  # fmt: skip
        t1b_md = "\n".join(md)
    write_csv(out / "fl_table1b.csv", _inert_frame(t1b), float_format="%.6g")
    write_text(out / "fl_table1b.md", t1b_md)
    written["table1b"] = out / "fl_table1b.csv"

    best = best_table(records)
    write_csv(out / "fl_best_per_shift.csv", _inert_frame(best), float_format="%.6g")
    show = best.drop(columns=[c for c in best if c.endswith("_accuracy")]).set_index(
        ["dataset", "shift"]
    )
    write_text(
        out / "fl_best_per_shift.md",
        to_markdown(
            _inert_frame(show.fillna("")),
            "Best univariate and multivariate method per shift class (dgpbench's table; "
            "pooled over fractions, n and draws); "
            + INTERVALS.format(units="every run of the data set", binomial="Wilson"),
        ),
    )
    written["best_per_shift"] = out / "fl_best_per_shift.csv"

    from dgpbench.failing_loudly.ranks import rank_table

    ranks = rank_table(with_rows(records), alpha=alpha)
    write_csv(out / "fl_ranks.csv", _inert_frame(ranks), float_format="%.6g")
    md = []
    if not ranks.empty:
        for (scope, dim), sub in ranks.groupby(["scope", "dimension"], sort=True):
            ranked = sub[sub["position"].notna()]
            head = ranked.iloc[0]
            table = ranked.set_index("row")[["mean_rank", "p_vs_best", "differs_from_best"]]
            left = sub.loc[sub["position"].isna(), "row"].tolist()
            md.append(to_markdown(_inert_frame(table.round(3)), (
                f"{scope}, {dim} tests: mean rank of detection accuracy over "
                f"{int(head['blocks'])} (shift, fraction, n) blocks (1 = best), protocol "
                f"{protocol}; Friedman chi2 = {head['friedman_chi2']:.2f}, p = "
                f"{head['friedman_p']:.3g}; p_vs_best: Nemenyi's test against the first row"
                + (f"; not ranked (run at fewer sizes): {', '.join(left)}" if left else "")
            )))  # fmt: skip
    write_text(out / "fl_ranks.md", "\n".join(md) or "No ranking: too few methods or blocks.\n")
    written["ranks"] = out / "fl_ranks.csv"

    fp = false_positive_table(records, alpha)
    write_csv(out / "fl_false_positives.csv", _inert_frame(fp), float_format="%.6g")
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
                _inert_frame(wide),
                f"{dataset}: false-positive rate (%) under no shift, protocol {protocol}; "
                + INTERVALS.format(units=_units_text(sub), binomial="Clopper-Pearson")
                + f" (**!**: interval wholly above alpha = {alpha:g})",
            )
        )
    write_text(out / "fl_false_positives.md", "\n".join(md))
    written["false_positives"] = out / "fl_false_positives.csv"

    flagged = fp[fp["above_alpha"]]
    lines = [
        "# Failing loudly's grid: summary",
        "",
        f"- protocol: {protocol}; records: {len(records)} draws in "
        f"{records['run'].nunique() if 'run' in records else 1} independent runs per data set; "
        f"data sets: {', '.join(sorted(records.dataset.unique()))}",
        f"- methods: {records['method'].nunique()}; shifts: "
        f"{', '.join(s for s in dict.fromkeys(records['shift']) if s != CALIBRATION)}",
        f"- false-positive cells wholly above alpha = {alpha:g}: {len(flagged)} of {len(fp)}",
    ]
    lines += [
        f"  - {r.dataset}, {r.row}, n = {r.n}: {_text(r.rate, r.ci_low, r.ci_high)} "
        f"({r.k}/{r['count']} draws, {r.units} runs)"
        for _, r in flagged.iterrows()
    ]
    acc_units = acc[acc["dataset"] != "pooled"]["units"]
    lines.append(
        f"- independent runs per accuracy cell: {int(acc_units.min())}-{int(acc_units.max())}"
        + (" (fewer than 5: intervals rough)" if acc_units.min() < 5 else "")
    )
    if "fallback" in records and records["fallback"].notna().any():
        fb = records[records["fallback"].notna()]
        share = fb.groupby("n")["fallback"].mean().mul(100).round(1)
        lines.append(
            "- chi-squared draws whose p-value is Rabanser et al.'s U(0, 1) fallback (a class "
            "with no prediction in a sample), % by n: "
            + ", ".join(f"n = {n}: {v:g}" for n, v in share.items())
        )
    write_text(out / "fl_summary.md", "\n".join(lines) + "\n")
    written["summary"] = out / "fl_summary.md"
    return written
