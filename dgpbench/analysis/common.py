"""What the analyses share: reading earlier tables, writing tables, the figure canvas.

Each analysis module holds its computation and its figure (its ``dgpbench analysis`` target
lives in :mod:`dgpbench.cli`); this module holds the pieces they have in common (no analysis
of its own).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dgpbench.io import write_csv, write_text
from dgpbench.labels import dataset_label
from dgpbench.tables import column_tuples, tex_escape, to_latex, to_markdown

# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------


def read_table(path: str, what: str, needed: Sequence[str] = ()) -> pd.DataFrame:
    """Read a CSV written by an earlier target, with a one-line error if it is unusable."""
    from dgpbench.analysis.weights import tidy_run_columns

    if not Path(path).is_file():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{what} file {path} is empty") from exc
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} file {path} lacks columns {missing}")
    if frame.empty:
        raise ValueError(f"{what} file {path} has no rows")
    if "dataset" in frame:
        frame["dataset"] = frame["dataset"].astype(str)
    return tidy_run_columns(frame)


def split_models(models: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(linear classifiers, DNNs) rows of a frame with ``n_layers``."""
    return models[models["n_layers"] == 1], models[models["n_layers"] > 1]


def dataset_labels(values: Sequence[str]) -> list[str]:
    """The display names of data sets (``fashion-mnist`` -> ``Fashion-MNIST``)."""
    return [dataset_label(v) for v in values]


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------


def write_table(
    wide: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    title: str,
    digits: int = 2,
    caption: str | None = None,
    label: str | None = None,
    row_label: Callable[[object], str] = tex_escape,
) -> list[Path]:
    r"""Write a table as ``<stem>.csv``, ``<stem>.md`` and, with ``label``, ``<stem>.tex``.

    Parameters
    ----------
    wide : pandas.DataFrame
        The table in its display layout: named row index (one or more levels), columns
        (one or more levels).
    stem : path-like
        Output path without suffix.
    title : str
        Markdown heading (and LaTeX caption unless ``caption`` is given).
    digits : int, default=2
        Decimals of float cells in Markdown and LaTeX (the CSV keeps 6 significant digits).
    caption, label : str, optional
        LaTeX caption and ``\label``; no ``.tex`` file without a label.
    row_label : callable, default=escape
        Renders row labels in LaTeX (e.g. math for ``Δ_epoch(NP, val)``).

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If ``wide`` is empty.
    """
    if wide.empty:
        raise ValueError(f"table {title!r} is empty")
    stem = Path(stem)

    def fmt(value: Any) -> str:
        if isinstance(value, bool | np.bool_):
            return str(bool(value))
        if isinstance(value, int | np.integer):
            return str(int(value))
        if isinstance(value, float | np.floating):
            return "-" if np.isnan(value) else f"{value:.{digits}f}"
        return "-" if pd.isna(value) else str(value)

    flat = wide.copy()
    flat.columns = ["/".join(str(x) for x in c) for c in column_tuples(wide)]
    paths = [stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".md")]
    write_csv(paths[0], flat.reset_index(), float_format="%.6g")
    write_text(paths[1], to_markdown(wide, title, fmt))
    if label:
        paths.append(stem.with_name(stem.name + ".tex"))
        write_text(paths[2], to_latex(wide, caption or tex_escape(title), label, fmt, row_label))
    return paths


# --------------------------------------------------------------------------------------------
# figures: each ``plot_x(table, stem, **options) -> list[Path]`` writes ``<stem>.png`` and
# ``<stem>.pdf`` atomically (dgpbench.io.save_figure), on a matplotlib Figure with the Agg
# canvas (no pyplot state, no backend switch) and seaborn's axes-level functions; every axis
# is labelled and every hue has a legend.
# --------------------------------------------------------------------------------------------

FAMILY_LABELS = {
    "beta": "Beta",
    "exponential": "Trunc. exponential",
    "normal": "Trunc. normal",
    "pareto": "Trunc. Pareto",
}
NP_LABEL = "neural persistence (normalised)"
LOGVAR_LABEL = "log-variance of normalised weights"


def quiet_seaborn(plot: Callable) -> Callable:
    """Silence seaborn 0.13's deprecation chatter under matplotlib >= 3.11 (not ours to fix)."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
            warnings.filterwarnings("ignore", message="vert: bool was deprecated")
            return plot(*args, **kwargs)

    return wrapper


def short_number(value: object) -> str:
    """Integral floats without the ".0" (hidden sizes, burn-ins)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def new_figure(n_rows: int, n_cols: int, *, width: float = 3.2, height: float = 2.7, **kw):
    """A constrained-layout figure on the Agg canvas (no pyplot state) and its axes grid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_cols, height * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False, **kw)
    return fig, axes


def require_columns(table: pd.DataFrame, columns: Sequence[str], name: str = "table") -> None:
    """Refuse a table without ``columns`` or without rows, naming it."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name} lacks columns {missing}")
    if table.empty:
        raise ValueError(f"{name} is empty")


def ordered_values(values: pd.Series, preferred: Sequence[str] = ()) -> list:
    """The distinct values: ``preferred`` ones first (in that order), then the rest sorted."""
    present = list(dict.fromkeys(values.dropna().tolist()))
    first = [v for v in preferred if v in present]
    return first + sorted(v for v in present if v not in first)
