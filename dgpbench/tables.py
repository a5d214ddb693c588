"""Markdown and LaTeX (booktabs) rendering of wide tables, shared by every table writer.

A *wide* table is a DataFrame in display layout: a named row index (one or more levels) and
columns (one or more levels; repeated upper levels become merged headers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd


def tex_escape(text: object) -> str:
    r"""Escape LaTeX's special characters (``\ & % $ # _ { }``) in ``text``."""
    out = str(text)
    for char in ("\\", "&", "%", "$", "#", "_", "{", "}"):
        out = out.replace(char, "\\" + char)
    return out


def cell_text(value: Any) -> str:
    """Default cell renderer: empty for missing values, ``str`` otherwise."""
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def column_tuples(wide: pd.DataFrame) -> list[tuple]:
    """The columns of ``wide`` as tuples (one element per column level)."""
    return [c if isinstance(c, tuple) else (c,) for c in wide.columns]


def _rows(wide: pd.DataFrame):
    """(index tuple, cell values) per row; unlike ``iterrows`` integer columns stay integers."""
    keys = [k if isinstance(k, tuple) else (k,) for k in wide.index]
    return zip(keys, wide.astype(object).itertuples(index=False, name=None), strict=True)


def to_markdown(wide: pd.DataFrame, title: str, fmt: Callable[[Any], str] = cell_text) -> str:
    """A Markdown table under a ``###`` heading; column levels are joined with `` / ``."""
    names = [str(n) for n in wide.index.names]
    cols = [" / ".join(str(x) for x in c) for c in column_tuples(wide)]
    lines = [f"### {title}", "", "| " + " | ".join(names + cols) + " |"]
    lines.append("|" + "---|" * len(names) + "---:|" * len(cols))
    for key, row in _rows(wide):
        lines.append("| " + " | ".join([str(k) for k in key] + [fmt(v) for v in row]) + " |")
    return "\n".join(lines) + "\n"


def to_latex(
    wide: pd.DataFrame,
    caption: str,
    label: str,
    fmt: Callable[[Any], str] = cell_text,
    row_label: Callable[[object], str] = tex_escape,
) -> str:
    """A booktabs table; repeated upper column levels are merged with \\multicolumn."""
    n_idx = wide.index.nlevels
    cols = column_tuples(wide)
    lines = [
        r"\begin{table}",
        r"\centering",
        r"\begin{tabular}{" + "l" * n_idx + "r" * len(cols) + "}",
    ]
    lines.append(r"\toprule")
    n_levels = len(cols[0])
    for level in range(n_levels):
        last = level == n_levels - 1
        head = [tex_escape(n) for n in wide.index.names] if last else [""] * n_idx
        spans: list[list] = []
        for c in cols:
            if not last and spans and spans[-1][0] == c[: level + 1]:
                spans[-1][1] += 1
            else:
                spans.append([c[: level + 1], 1])
        cells = [
            rf"\multicolumn{{{n}}}{{c}}{{{tex_escape(key[-1])}}}" if n > 1 else tex_escape(key[-1])
            for key, n in spans
        ]
        lines.append(" & ".join(head + cells) + r" \\")
    lines.append(r"\midrule")
    for key, row in _rows(wide):
        lines.append(" & ".join([row_label(k) for k in key] + [fmt(v) for v in row]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", rf"\label{{{label}}}"]
    return "\n".join([*lines, r"\end{table}"]) + "\n"
