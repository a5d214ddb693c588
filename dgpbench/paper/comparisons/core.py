"""What every published-vs-reproduced comparison shares: spec, join, shares, files.

A :class:`TableSpec` names a published table's join keys and value column and says when a
reproduced cell agrees with the published one. :func:`compare` joins the published table
with the reproduced cells (inner join: cells the run did not compute are left out),
:func:`summarize` gives per group the share of agreeing cells, and :func:`write_comparison`
writes ``comparison_<name>.csv`` (cells), ``comparison_<name>_summary.csv`` (shares) and
``comparison_<name>.md`` (both, under a caption that states the tolerance).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from dgpbench.io import write_csv, write_text
from dgpbench.tables import to_markdown

__all__ = ["TableSpec", "compare", "load_published", "summarize", "write_comparison"]


@dataclass(frozen=True)
class TableSpec:
    """One published table and how its cells are compared.

    Attributes
    ----------
    name : str
        File stem: ``dgpbench/resources/paper_<name>.csv``, ``comparison_<name>.*``.
    title : str
        What the table is (Markdown heading).
    keys : tuple of str
        Columns that identify a cell (the paper's labels).
    value : str
        The published value's column.
    int_keys : tuple of str
        Key columns holding integers (``n``, ``hidden``, ...).
    group : tuple of str
        Columns of the summary's groups.
    tolerance : str
        The agreement rule in words (for the caption).
    within : callable
        ``within(joined) -> bool Series``: does the cell agree (``joined`` has ``paper,
        ours, diff`` and the keys)?
    extra : callable, optional
        ``extra(group_frame) -> dict``: further shares per summary group.
    """

    name: str
    title: str
    keys: tuple[str, ...]
    value: str
    group: tuple[str, ...]
    tolerance: str
    within: Callable[[pd.DataFrame], pd.Series]
    int_keys: tuple[str, ...] = ()
    extra: Callable[[pd.DataFrame], dict] | None = None
    ours_columns: tuple[str, ...] = field(default=())


def read_csv_file(path: str | os.PathLike, what: str, **kwargs) -> pd.DataFrame:
    """Read a CSV (or ``.csv.gz``) file we are given, with one clear error per bad input.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for the messages (``"records"``, ``"published table"``).
    **kwargs
        Passed to ``pandas.read_csv``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If ``path`` is a folder, empty, binary or not parseable as CSV (naming the file).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} file {path} is a folder: pass the CSV file itself")
    if not path.is_file():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    try:
        table = pd.read_csv(path, **kwargs)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{what} file {path} is empty") from exc
    except (UnicodeDecodeError, pd.errors.ParserError, EOFError, OSError) as exc:
        raise ValueError(
            f"{what} file {path} is not a text CSV file ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc
    if any("\x00" in str(c) for c in table.columns):
        raise ValueError(f"{what} file {path} is not a text CSV file (binary content)")
    return table


def require_columns(table: pd.DataFrame, columns: Sequence[str], what: str, hint: str) -> None:
    """Raise ``ValueError`` naming the missing columns of ``what`` and the file to pass."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(
            f"{what} lacks columns {missing} (it has {list(table.columns)[:8]}): {hint}"
        )


def load_published(spec: TableSpec, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """Read a published table (default: the paper's, shipped with dgpbench).

    Parameters
    ----------
    spec : TableSpec
    path : path-like, optional
        A CSV with the columns ``spec.keys`` and ``spec.value`` (e.g. a made-up table).

    Returns
    -------
    pandas.DataFrame
        The key columns and ``paper`` (float).

    Raises
    ------
    ValueError
        On a missing column, a value that is not a number, or a cell that appears twice;
        the message names the file.
    """
    if path is None:
        name = f"dgpbench/resources/paper_{spec.name}.csv"
        source = resources.files("dgpbench.resources").joinpath(f"paper_{spec.name}.csv")
        with source.open("r", encoding="utf-8") as handle:
            table = pd.read_csv(handle, dtype=str)
    else:
        name = str(path)
        table = read_csv_file(path, "published table", dtype=str)
    missing = [c for c in (*spec.keys, spec.value) if c not in table.columns]
    if missing:
        raise ValueError(f"published table {name} lacks columns {missing}")
    table = table[[*spec.keys, spec.value]].copy()
    for col in (*spec.int_keys, spec.value):
        values = pd.to_numeric(table[col], errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna())[0])
            raise ValueError(
                f"published table {name}: column {col} needs a number, got "
                f"{table[col].iloc[row]!r} (row {row + 2})"
            )
        if col in spec.int_keys:
            if (values != values.round()).any():
                raise ValueError(f"published table {name}: column {col} holds a non-integer")
            values = values.astype("int64")
        table[col] = values
    duplicated = table.duplicated(list(spec.keys))
    if duplicated.any():
        cell = tuple(table.loc[duplicated, list(spec.keys)].iloc[0])
        raise ValueError(f"published table {name}: cell {cell} appears twice")
    return table.rename(columns={spec.value: "paper"}).reset_index(drop=True)


def compare(spec: TableSpec, published: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """Published and reproduced cells side by side; only cells present in both.

    Parameters
    ----------
    spec : TableSpec
    published : pandas.DataFrame
        Output of :func:`load_published`.
    ours : pandas.DataFrame
        The run's cells: the key columns, ``ours`` and optionally ``spec.ours_columns``.

    Returns
    -------
    pandas.DataFrame
        Keys, ``paper, ours, diff`` (ours - paper), ``within`` (bool), the extra columns;
        in the published table's row order.
    """
    keys = list(spec.keys)
    missing = [c for c in (*keys, "ours") if c not in ours.columns]
    if missing:
        raise ValueError(f"reproduced cells lack columns {missing}")
    if ours.duplicated(keys).any():
        raise ValueError(
            f"reproduced cells repeat a cell {tuple(ours[ours.duplicated(keys)].iloc[0][keys])}"
        )
    extra = [c for c in spec.ours_columns if c in ours.columns]
    right = ours[[*keys, "ours", *extra]].copy()
    for col in spec.int_keys:
        right[col] = right[col].astype("int64")
    joined = published.merge(right, on=keys, how="inner", validate="one_to_one")
    joined["diff"] = joined["ours"] - joined["paper"]
    joined["within"] = spec.within(joined).astype(bool) if len(joined) else pd.Series(dtype=bool)
    return joined[[*keys, "paper", "ours", "diff", "within", *extra]].reset_index(drop=True)


def summarize(spec: TableSpec, comparison: pd.DataFrame) -> pd.DataFrame:
    """Per group of ``spec.group``: cells compared, share within tolerance, mean differences.

    Returns
    -------
    pandas.DataFrame
        ``*group, n_cells, share_within, mean_diff, mean_abs_diff`` and the shares of
        ``spec.extra``; one row more, with ``all`` in the group columns, for the whole table.
    """
    group = list(spec.group)
    rows = []
    parts = list(comparison.groupby(group, sort=False)) if len(comparison) else []
    whole = ((("all",) * len(group)), comparison)
    for key, cells in [*parts, whole] if len(parts) != 1 else parts:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(group, key, strict=True))
        row.update(
            n_cells=len(cells),
            share_within=float(cells["within"].mean()) if len(cells) else np.nan,
            mean_diff=float(cells["diff"].mean()) if len(cells) else np.nan,
            mean_abs_diff=float(cells["diff"].abs().mean()) if len(cells) else np.nan,
        )
        if spec.extra is not None:
            row.update(spec.extra(cells))
        rows.append(row)
    columns = [*group, "n_cells", "share_within", "mean_diff", "mean_abs_diff"]
    return pd.DataFrame(rows, columns=list(dict.fromkeys([*columns, *(rows[0] if rows else [])])))


def _pct(value: object) -> str:
    return "" if pd.isna(value) else f"{100 * float(value):.0f}%"


def _num(value: object) -> str:
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return "-" if np.isnan(value) else f"{value:.4g}"
    return str(value)


def markdown(spec: TableSpec, comparison: pd.DataFrame, summary: pd.DataFrame, source: str) -> str:
    """The comparison as Markdown: caption (with the tolerance), shares, cells."""
    head = (
        f"Published {spec.title} ({source}) vs this run. diff = ours - paper. A cell agrees "
        f"when {spec.tolerance}. Cells this run did not compute are left out, never filled."
    )
    if comparison.empty:
        return (
            f"### Published vs reproduced: {spec.title}\n\n{head}\n\n"
            "No published cell was computed by this run.\n"
        )
    shares = summary.set_index(list(spec.group))
    shares = shares.apply(
        lambda col: col.map(_pct) if str(col.name).startswith("share") else col.map(_num)
    )
    cells = comparison.set_index(list(spec.keys)).apply(lambda col: col.map(_num))
    return (
        to_markdown(shares, f"Published vs reproduced: {spec.title} (agreement)")
        + f"\n{head}\n\n"
        + to_markdown(cells, f"Published vs reproduced: {spec.title} (cells)")
    )


def write_comparison(
    spec: TableSpec,
    ours: pd.DataFrame,
    out_dir: str | os.PathLike,
    *,
    published_path: str | os.PathLike | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, list[Path]]:
    """Compare and write ``comparison_<name>{.csv,.md,_summary.csv}`` into ``out_dir``.

    Parameters
    ----------
    spec : TableSpec
    ours : pandas.DataFrame
        The run's cells (see :func:`compare`).
    out_dir : path-like
    published_path : path-like, optional
        A published table other than the paper's.

    Returns
    -------
    comparison, summary : pandas.DataFrame
    paths : list of pathlib.Path
    """
    published = load_published(spec, published_path)
    source = "the paper" if published_path is None else str(published_path)
    comparison = compare(spec, published, ours)
    summary = summarize(spec, comparison)
    stem = Path(out_dir) / f"comparison_{spec.name}"
    paths = [
        stem.with_name(stem.name + ".csv"),
        stem.with_name(stem.name + "_summary.csv"),
        stem.with_name(stem.name + ".md"),
    ]
    write_csv(paths[0], comparison, float_format="%.6g")
    write_csv(paths[1], summary, float_format="%.6g")
    write_text(paths[2], markdown(spec, comparison, summary, source))
    return comparison, summary, paths


def sign_agrees(cells: pd.DataFrame, decimals: int = 3) -> dict[str, float]:
    """Share of cells where paper and run agree in sign (rounded, so a tie is 0)."""
    if cells.empty:
        return {"share_sign_agrees": np.nan}
    same = np.sign(cells["paper"].round(decimals)) == np.sign(cells["ours"].round(decimals))
    return {"share_sign_agrees": float(same.mean())}


def best_agrees(
    cells: pd.DataFrame, by: Sequence[str], among: str = "method", decimals: int = 2
) -> dict[str, float]:
    """Share of ``by`` groups (with two or more entries) whose best ``among`` agrees: the
    sets attaining the group's maximum (rounded to ``decimals``) share a member.
    """
    agree = []
    for _, g in cells.groupby(list(by), sort=False):
        if len(g) < 2:
            continue
        paper, ours = g["paper"].round(decimals), g["ours"].round(decimals)
        agree.append(
            bool(set(g.loc[paper == paper.max(), among]) & set(g.loc[ours == ours.max(), among]))
        )
    return {"n_groups": len(agree), "share_best_agrees": float(np.mean(agree)) if agree else np.nan}


def share_paper_in_ci(cells: pd.DataFrame) -> dict[str, float]:
    """Share of cells whose published value lies in the run's 95% interval (``ci_low``,
    ``ci_high``; cells without one left out, NaN where none has one).
    """
    if cells.empty or "ci_low" not in cells or cells["ci_low"].isna().all():
        return {"share_paper_in_ci": np.nan}
    cells = cells.dropna(subset=["ci_low", "ci_high"])
    return {
        "share_paper_in_ci": float(cells["paper"].between(cells["ci_low"], cells["ci_high"]).mean())
    }
