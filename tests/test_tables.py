"""Markdown (DataFrame.to_markdown) and LaTeX (Styler.to_latex) rendering of wide tables."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dgpbench.tables import tex_escape, to_latex, to_markdown


def _styler_cell(text: str) -> str:
    """pandas' own LaTeX escaping of one cell: the oracle for ``tex_escape``."""
    frame = pd.DataFrame([[text]], index=["r"], columns=["c"])
    lines = frame.style.format(escape="latex").to_latex().splitlines()
    (row,) = [line for line in lines if line.startswith("r & ")]
    return row.removeprefix("r & ").removesuffix(" \\\\")


def test_tex_escape_of_backslash_tilde_and_caret():
    assert tex_escape("a\\b ~x^2") == r"a\textbackslash b \textasciitilde x\textasciicircum 2"
    assert tex_escape("5% of $x_1$ & #{y}") == r"5\% of \$x\_1\$ \& \#\{y\}"
    # A space after a command word is kept as \space (the command would swallow it).
    assert tex_escape("~ a") == r"\textasciitilde \space a"


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("ab \\~^&%$#_{}")), max_size=12))
def test_tex_escape_matches_pandas_escaping(text):
    assert tex_escape(text) == _styler_cell(text)


def _wide() -> pd.DataFrame:
    columns = pd.MultiIndex.from_tuples([("GN", "10"), ("GN", "20"), ("P_D", "10%")])
    index = pd.MultiIndex.from_tuples([(10, "a_b"), (20, "c~d")], names=["n", "Me&thod"])
    return pd.DataFrame([["**75.0**", "50.0*", "007"], ["1.0", "", "2"]], index, columns)


def test_markdown_keeps_cells_as_written_and_joins_column_levels():
    text = to_markdown(_wide(), "Title")
    lines = text.splitlines()
    assert lines[:2] == ["### Title", ""]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert rows[0] == ["n", "Me&thod", "GN / 10", "GN / 20", "P_D / 10%"]
    assert set(rows[1][:2]) <= {":" + "-" * k for k in range(1, 20)}  # left-aligned labels
    assert all(c.endswith(":") and not c.startswith(":") for c in rows[1][2:])  # right
    assert rows[2] == ["10", "a_b", "**75.0**", "50.0*", "007"]  # no number parsing
    assert rows[3] == ["20", "c~d", "1.0", "", "2"]


def test_latex_escapes_headers_and_labels_keeps_cells():
    text = to_latex(_wide(), "Caption", "tab:x")
    assert r"\begin{tabular}{llrrr}" in text and r"\toprule" in text and r"\bottomrule" in text
    assert r"\multicolumn{2}{c}{GN}" in text and r"P\_D" in text and r"10\%" in text
    assert r"n & Me\&thod" in text
    assert r"10 & a\_b & **75.0** & 50.0* & 007 \\" in text  # cells are the caller's LaTeX
    assert r"20 & c\textasciitilde d & 1.0 &  & 2 \\" in text
    assert r"\caption{Caption}" in text and r"\label{tab:x}" in text


def test_latex_row_label_renders_labels_raw():
    text = to_latex(_wide(), "C", "tab:y", row_label=lambda v: rf"$\Delta_{{{v}}}$")
    assert r"$\Delta_{10}$ & $\Delta_{a_b}$" in text
