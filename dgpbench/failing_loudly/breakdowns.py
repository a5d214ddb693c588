"""Rabanser et al.'s Tables 1(b), 2(a) and 2(b) in their definitions, for every row of ours.

Each pools the data sets of the run, as theirs pool MNIST and CIFAR-10, and breaks Table
1(a)'s accuracy down by one more factor:

- Table 1(b) (:func:`shift_table`): per shift class. Theirs shows the best univariate and
  multivariate rows (BBSDs + KS, UAE + MMD); ours has every row, the best of each dimension
  (highest mean accuracy over the shift classes and n) named first.
- Table 2(a) (:func:`intensity_table`): per shift intensity, their grouping
  (:data:`INTENSITIES`: small = s_gn, s_img, ko; medium = m_gn, m_img, adv; large = l_gn,
  l_img, m_img+ko, oz+m_img).
- Table 2(b) (:func:`fraction_table`): per fraction of the test pool shifted (0.1, 0.5, 1.0).

Every cell is :func:`dgpbench.failing_loudly.reporting.pooled_accuracy_table`'s: its 95%
interval counts the independent (data set, run) units, not the draws. Under ``protocol:
rabanser`` a shift whose pool is too small for the largest n enters it with its largest n's
draws, as their script and our Table 1a do; under ``dgpbench`` it is left out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from dgpbench.failing_loudly.reporting import _inert_frame, pooled_accuracy_table, protocol_of
from dgpbench.io import write_csv, write_text
from dgpbench.tables import to_markdown

__all__ = [
    "INTENSITIES",
    "best_rows",
    "fraction_table",
    "intensity_table",
    "shift_table",
    "write_breakdowns",
]

INTENSITIES: dict[str, tuple[str, ...]] = {
    "small": ("small_gn_shift", "small_image_shift", "ko_shift"),
    "medium": ("medium_gn_shift", "medium_image_shift", "adversarial_shift"),
    "large": (
        "large_gn_shift",
        "large_image_shift",
        "medium_img_shift+ko_shift",
        "only_zero_shift+medium_img_shift",
    ),
}
"""Rabanser et al.'s intensity of each shift class (their Table 2(a))."""


def _carry(records: pd.DataFrame) -> bool:
    """Carry a small pool's largest n forward as Rabanser et al.'s script does: under their
    protocol only, as Table 1a does.
    """
    return protocol_of(records) == "rabanser"


def shift_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 1(b): accuracy per (shift, dimension, row, n), pooled over the data sets.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid.

    Returns
    -------
    pandas.DataFrame
        ``shift, dimension, row, n, k, count, units, rate, ci_low, ci_high``.
    """
    return pooled_accuracy_table(
        records, by=("shift", "dimension", "row", "n"), carry_forward=_carry(records)
    )


def intensity_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 2(a): accuracy per (intensity, dimension, row, n), pooled over the data sets.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid; shifts outside :data:`INTENSITIES` are left out.

    Returns
    -------
    pandas.DataFrame
        ``intensity, dimension, row, n, k, count, units, rate, ci_low, ci_high``, intensities
        in the order small, medium, large.

    Raises
    ------
    ValueError
        If no record is of a shift class of :data:`INTENSITIES`.
    """
    of = {shift: level for level, shifts in INTENSITIES.items() for shift in shifts}
    rec = records[records["shift"].isin(list(of))]
    if rec.empty:
        raise ValueError(f"the records hold no shift of Table 2(a)'s classes {sorted(of)}")
    cells = pooled_accuracy_table(rec.assign(intensity=rec["shift"].map(of)),
                                  by=("intensity", "dimension", "row", "n"),
                                  carry_forward=_carry(records))  # fmt: skip
    order = {level: i for i, level in enumerate(INTENSITIES)}
    return cells.sort_values(["intensity", "dimension", "row", "n"],
                             key=lambda c: c.map(order) if c.name == "intensity" else c,
                             ignore_index=True)  # fmt: skip


def fraction_table(records: pd.DataFrame) -> pd.DataFrame:
    """Table 2(b): accuracy per (fraction, dimension, row, n), pooled over the data sets.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid.

    Returns
    -------
    pandas.DataFrame
        ``fraction, dimension, row, n, k, count, units, rate, ci_low, ci_high``.
    """
    return pooled_accuracy_table(
        records, by=("fraction", "dimension", "row", "n"), carry_forward=_carry(records)
    )


def best_rows(cells: pd.DataFrame) -> dict[str, str]:
    """Per dimension, the row with the highest mean accuracy (ties: by name), over the
    sample sizes every row of the dimension ran (all of them where there is none).

    Parameters
    ----------
    cells : pandas.DataFrame
        A table of this module (``dimension``, ``row``, ``rate``).

    Returns
    -------
    dict
        ``dimension -> row``.
    """
    parts = []
    for _, sub in cells.groupby("dimension", sort=True):
        rows = sub["row"].nunique()
        common = sub.groupby("n")["row"].nunique()
        common = common.index[common == rows]  # sizes every row ran: no row gains by its ns
        parts.append(sub[sub["n"].isin(common)] if len(common) else sub)
    means = pd.concat(parts).groupby(["dimension", "row"])["rate"].mean().reset_index()
    means = means.sort_values(["dimension", "rate", "row"], ascending=[True, False, True])
    return dict(means.groupby("dimension", sort=True)["row"].first())


_TABLES = {
    "table1b_pooled": ("shift", "Table 1(b): detection accuracy (%) per shift class and n"),
    "table2a_intensity": ("intensity", "Table 2(a): detection accuracy (%) per shift intensity "
                          "(small: s_gn, s_img, ko; medium: m_gn, m_img, adv; large: l_gn, l_img, "
                          "m_img+ko, oz+m_img) and n"),
    "table2b_fraction": ("fraction", "Table 2(b): detection accuracy (%) per fraction of the "
                         "test pool shifted and n"),
}  # fmt: skip


def write_breakdowns(
    records: pd.DataFrame, out_dir: str | os.PathLike, *, caption: str
) -> dict[str, Path]:
    """Write Tables 1(b), 2(a) and 2(b), pooled over the data sets, as CSV and Markdown.

    ``fl_<table>.csv`` holds every row's cells; ``fl_<table>.md`` one table per test
    dimension (rows x n), the dimension's best row (:func:`best_rows`) first.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid.
    out_dir : path-like
    caption : str
        What every Markdown caption ends with (the protocol and the intervals).

    Returns
    -------
    dict
        Table name -> path of its CSV.
    """
    out = Path(out_dir)
    written: dict[str, Path] = {}
    builders = {"table1b_pooled": shift_table, "table2a_intensity": intensity_table,
                "table2b_fraction": fraction_table}  # fmt: skip
    datasets = ", ".join(sorted(set(records["dataset"].astype(str))))
    for name, (factor, title) in _TABLES.items():
        try:
            cells = builders[name](records)
        except ValueError as exc:
            write_csv(out / f"fl_{name}.csv", pd.DataFrame(columns=[factor, "dimension", "row"]))
            write_text(out / f"fl_{name}.md", f"{title}: {exc}.\n")
            written[name] = out / f"fl_{name}.csv"
            continue
        write_csv(out / f"fl_{name}.csv", _inert_frame(cells), float_format="%.6g")
        best = best_rows(cells)
        md = []
        for dim, sub in cells.groupby("dimension", sort=True):
            text = [f"{100 * r:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                    for r, lo, hi in zip(sub.rate, sub.ci_low, sub.ci_high, strict=True)]  # fmt: skip
            wide = sub.assign(text=text).pivot(index=["row", factor], columns="n", values="text")
            rows = [best[dim], *sorted(set(sub["row"]) - {best[dim]})]
            levels = list(dict.fromkeys(sub[factor]))  # the table's order (small, medium, ...)
            order = pd.MultiIndex.from_product([rows, levels], names=["row", factor])
            wide = wide.reindex(order.intersection(wide.index, sort=False)).fillna("")
            md.append(to_markdown(_inert_frame(wide), (
                f"{title}, {dim} tests, pooled over {datasets} (best row by mean accuracy: "
                f"{best[dim]}); {caption}"
            )))  # fmt: skip
        write_text(out / f"fl_{name}.md", "\n".join(md))
        written[name] = out / f"fl_{name}.csv"
    return written
