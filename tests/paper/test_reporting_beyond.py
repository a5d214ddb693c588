"""The tables beyond the paper: new shifts and CNNs go to their own tables, and the paper's
tables are byte-identical with or without them."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from dgpbench.paper import reporting

DRAWS = 20


def _records(rates: dict[tuple[str, str, str], float], calibration_kinds=("mlp",)) -> pd.DataFrame:
    """Records whose detection ratio per (kind, method, shift) is exactly ``rate``."""
    rows = []
    for (kind, method, shift), rate in rates.items():
        prefix = "" if kind == "mlp" else f"{kind}-"
        for dataset, seed, n in itertools.product(["mnist", "digits"], [0, 1], [10, 50]):
            for draw in range(DRAWS):
                rows.append(
                    dict(dataset=dataset, model=f"{prefix}h8-l2-s{seed}", kind=kind,
                         method=method, corruption=shift, intensity=1, n=n, delta=0.5,
                         draw=draw, rejected=draw < round(rate * DRAWS), min_p=0.5)
                )  # fmt: skip
    for kind, dataset, method, n in itertools.product(
        calibration_kinds, ["mnist", "digits"], ["tu", "dgp"], [10, 50]
    ):
        prefix = "" if kind == "mlp" else f"{kind}-"
        rejected = {"mlp": 1, "cnn": 3}[kind]
        for draw in range(DRAWS):
            rows.append(
                dict(dataset=dataset, model=f"{prefix}h8-l2-s0", kind=kind, method=method,
                     corruption="none", intensity=0, n=n, delta=0.0, draw=draw,
                     rejected=draw < rejected, min_p=0.5)
            )  # fmt: skip
    return pd.DataFrame(rows)


PAPER = {("mlp", "tu", "GN"): 0.25, ("mlp", "dgp", "GN"): 0.5, ("mlp", "dgp", "PD"): 0.1}
BEYOND = {
    ("mlp", "tu", "RO"): 0.6,
    ("mlp", "dgp", "RO"): 0.3,
    ("mlp", "dgp", "KO"): 0.05,
    ("cnn", "tu", "GN"): 0.75,
    ("cnn", "dgp", "GN"): 0.9,
    ("cnn", "dgp", "RO"): 0.4,
}


def _read(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_paper_tables_and_figures_do_not_change_with_new_shifts_and_cnns(tmp_path):
    paper = _records(PAPER)
    both = _records({**PAPER, **BEYOND}, calibration_kinds=("mlp", "cnn"))
    for out, rec in (("paper", paper), ("both", both)):
        reporting.main_table(rec, tmp_path / out)
        reporting.ablation_tables(rec, tmp_path / out, ["mnist"], ns_main=[10])
        reporting.calibration_table(rec, tmp_path / out)
    assert _read(tmp_path / "paper") == _read(tmp_path / "both")
    # also without a kind column at all (records of older runs)
    reporting.main_table(paper.drop(columns="kind"), tmp_path / "nokind")
    a = (tmp_path / "nokind" / "table1_shift_detection.md").read_bytes()
    assert a == (tmp_path / "paper" / "table1_shift_detection.md").read_bytes()


def test_beyond_tables_hold_the_new_shifts_and_the_cnns(tmp_path):
    rec = _records({**PAPER, **BEYOND}, calibration_kinds=("mlp", "cnn"))
    tables = reporting.beyond_tables(rec, tmp_path, methods=["tu", "dgp"])
    beyond = tables["table_beyond_shifts"]
    got = {
        (m, s): r
        for m, s, r in zip(beyond["method"], beyond["corruption"], beyond["ratio_pct"], strict=True)
    }
    assert got == pytest.approx({("tu", "RO"): 60.0, ("dgp", "RO"): 30.0, ("dgp", "KO"): 5.0})
    cnn = tables["table_cnn"]
    got = {
        (m, s): r
        for m, s, r in zip(cnn["method"], cnn["corruption"], cnn["ratio_pct"], strict=True)
    }
    assert got == pytest.approx({("tu", "GN"): 75.0, ("dgp", "GN"): 90.0, ("dgp", "RO"): 40.0})
    assert np.allclose(tables["table_cnn_calibration"]["ratio_pct"], 15.0)
    md = (tmp_path / "table_cnn.md").read_text()
    assert "Shift" in md and "**90.0**" in md and "CNN" in md
    # shifts in the paper's order, then the new ones
    cols = (tmp_path / "table_beyond_shifts.md").read_text().splitlines()
    assert any(
        "RO" in line and "KO" in line and line.index("RO") < line.index("KO") for line in cols
    )


def test_beyond_tables_without_data_say_why(tmp_path):
    reporting.beyond_tables(_records(PAPER), tmp_path)
    for stem, word in (
        ("table_beyond_shifts", "No shift beyond the paper"),
        ("table_cnn", "No CNN models"),
        ("table_cnn_calibration", "No CNN models"),
    ):
        for ext in (".csv", ".md", ".tex"):
            assert word in (tmp_path / f"{stem}{ext}").read_text()


def test_beyond_figure(tmp_path):
    # Only the shifts beyond the paper and no clean draws: figures() draws fig_beyond (what the
    # paper's records would add is left out of it) and notes for the paper's figures.
    records = _records(BEYOND, calibration_kinds=())
    written = reporting.figures(records, tmp_path, methods=["tu", "dgp"])
    assert tmp_path / "fig_beyond.png" in written
    assert (tmp_path / "fig_beyond.pdf").stat().st_size > 1000
    # the paper's shifts on MLPs only: the figure is a note (drawn alone, as figures() does)
    none = reporting.beyond_figure(_records(PAPER), tmp_path / "none", methods=["tu", "dgp"])
    assert none == tmp_path / "none" / "fig_beyond.png" and none.stat().st_size > 500


def test_paper_table_without_paper_corruptions_is_a_note(tmp_path):
    reporting.main_table(_records({("mlp", "dgp", "RO"): 0.5}), tmp_path)
    assert "No MLP" in (tmp_path / "table1_shift_detection.md").read_text()


def test_published_comparison_uses_only_the_papers_setting():
    from dgpbench.paper.comparisons.table1 import reproduced_cells

    paper = _records(PAPER)
    both = _records({**PAPER, **BEYOND}, calibration_kinds=("mlp", "cnn"))
    pd.testing.assert_frame_equal(reproduced_cells(paper), reproduced_cells(both))


def test_published_comparison_without_the_papers_setting_is_empty(tmp_path):
    from dgpbench.paper.comparisons.table1 import write_comparisons

    summary = write_comparisons(
        _records({("mlp", "dgp", "RO"): 0.5, ("cnn", "dgp", "GN"): 0.5}),
        tmp_path,
        pool_deltas=[0.5],
    )
    assert summary.empty
    assert "No published cell" in (tmp_path / "comparison_table1.md").read_text()
