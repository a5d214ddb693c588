"""Markdown and LaTeX (booktabs) rendering of wide tables, shared by every table writer.

A *wide* table is a DataFrame in display layout: a named row index (one or more levels) and
columns (one or more levels; repeated upper levels become merged headers). Markdown is
rendered by :meth:`pandas.DataFrame.to_markdown` (tabulate), LaTeX by
:meth:`pandas.io.formats.style.Styler.to_latex` with its LaTeX escaping of the headers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd

__all__ = ["cell_text", "column_tuples", "tex_escape", "to_html", "to_latex", "to_markdown"]

_TEX_WORDS = {"\\": r"\textbackslash ", "~": r"\textasciitilde ", "^": r"\textasciicircum "}
_TEX_SPECIAL = re.compile(r"([\\~^])( ?)|([&%$#_{}])")


def tex_escape(text: object) -> str:
    r"""Escape LaTeX's special characters in ``text``, as pandas' ``escape="latex"`` does.

    ``& % $ # _ { }`` get a backslash; ``\``, ``~`` and ``^`` become ``\textbackslash``,
    ``\textasciitilde`` and ``\textasciicircum`` (followed by ``\space`` where a space
    follows, which the command would swallow).

    Examples
    --------
    >>> tex_escape("a\\b ~x^2 & 5%")
    'a\\textbackslash b \\textasciitilde x\\textasciicircum 2 \\& 5\\%'
    """

    def replace(match: re.Match) -> str:
        if match[3]:
            return "\\" + match[3]
        return _TEX_WORDS[match[1]] + (r"\space " if match[2] else "")

    return _TEX_SPECIAL.sub(replace, str(text))


def cell_text(value: Any) -> str:
    """Default cell renderer: empty for missing values, ``str`` otherwise."""
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def column_tuples(wide: pd.DataFrame) -> list[tuple]:
    """The columns of ``wide`` as tuples (one element per column level)."""
    return [c if isinstance(c, tuple) else (c,) for c in wide.columns]


def _cells(wide: pd.DataFrame, fmt: Callable[[Any], str]) -> pd.DataFrame:
    """``wide`` with every cell rendered by ``fmt`` (integer columns stay integers)."""
    return wide.astype(object).apply(lambda col: col.map(fmt))


def to_markdown(wide: pd.DataFrame, title: str, fmt: Callable[[Any], str] = cell_text) -> str:
    r"""A Markdown table under a ``###`` heading; column levels are joined with `` / ``.

    Row labels are left-aligned, cells right-aligned; cell text is kept as ``fmt`` wrote it,
    with ``|`` escaped as ``\|`` so that no label splits its cell.
    """
    body = _cells(wide, fmt)
    names = [str(n) for n in wide.index.names]
    body.columns = [" / ".join(str(x) for x in c) for c in column_tuples(wide)]
    body.index = body.index.set_names(names)
    body = body.reset_index()
    body[names] = body[names].astype(str)
    # a "|" in a label (a tag, a data set's name) would end its cell: escape it as GFM does
    body = body.map(lambda v: v.replace("|", r"\|") if isinstance(v, str) else v)
    body.columns = [str(c).replace("|", r"\|") for c in body.columns]
    align = ("left",) * len(names) + ("right",) * (body.shape[1] - len(names))
    table = body.to_markdown(index=False, colalign=align, disable_numparse=True)
    return f"### {title}\n\n{table}\n"


def to_latex(
    wide: pd.DataFrame,
    caption: str,
    label: str,
    fmt: Callable[[Any], str] = cell_text,
    row_label: Callable[[object], str] = tex_escape,
) -> str:
    r"""A booktabs table; repeated upper column levels are merged with \multicolumn.

    Cells are LaTeX as ``fmt`` writes them (e.g. ``\textbf{75.0}``); column headers and
    index names are escaped, row labels rendered by ``row_label`` (default: escaped).
    ``caption`` is inserted as given (escape it with :func:`tex_escape` if it is plain text).
    """
    body = _cells(wide, fmt)
    body.index = _relabel(body.index, row_label)
    body.index = body.index.set_names(
        [tex_escape(n) if n is not None else "" for n in wide.index.names]
    )
    styler = body.style.format_index(escape="latex", axis=1)
    latex = styler.to_latex(
        column_format="l" * wide.index.nlevels + "r" * wide.shape[1],
        position_float="centering",
        hrules=True,
        label=label,
        caption=caption,
        multicol_align="c",
        sparse_index=False,
        environment="table",
    )
    return latex


def _relabel(index: pd.Index, row_label: Callable[[object], str]) -> pd.Index:
    """``index`` with every label (of every level) rendered by ``row_label``."""
    if isinstance(index, pd.MultiIndex):
        tuples = [tuple(row_label(v) for v in key) for key in index]
        return pd.MultiIndex.from_tuples(tuples, names=index.names)
    return pd.Index([row_label(v) for v in index], name=index.name)


def to_html(wide: pd.DataFrame, title: str, fmt: Callable[[Any], str] = cell_text) -> str:
    """An HTML table (pandas' Styler) under an ``<h3>`` title, for the workflow's report.

    Cells are HTML as ``fmt`` writes them (e.g. ``<b>75.0</b>*``); headers, row labels and
    the title are escaped.
    """
    import html

    body = _cells(wide, fmt)
    body.index = body.index.set_names([html.escape(str(n)) for n in wide.index.names])
    styler = (
        body.style.set_uuid("dgpbench")  # fixed ids: reruns give identical files
        .format_index(escape="html", axis=0)
        .format_index(escape="html", axis=1)
        .set_table_styles(
            [
                {"selector": "", "props": "border-collapse: collapse; font-size: 0.9em;"},
                {"selector": "th, td", "props": "padding: 2px 8px; border-bottom: 1px solid #ddd;"},
                {"selector": "td", "props": "text-align: right;"},
            ]
        )
    )
    table = styler.to_html(sparse_index=False, exclude_styles=False)
    return f"<h3>{html.escape(title)}</h3>\n{table}"
