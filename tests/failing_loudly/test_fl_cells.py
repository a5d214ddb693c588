"""The grid's results per cell (dgpbench.failing_loudly.cells): every table of
``dgpbench fl-report`` recomputed from the counts is the one computed from the draws."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from dgpbench.cli.main import main
from dgpbench.failing_loudly.cells import from_cells, to_cells

# (method, kind) -> detection rate; chi-squared draws record the fallback
RATES = {
    ("uae+mmd", "none"): 0.3,
    ("bbsds+ks", "cnn"): 0.7,
    ("bbsdh+chi2", "cnn"): 0.4,
    ("dgp+ks", "cnn"): 0.6,
}
# not in sorted order: the summary names them in the records' order
SHIFTS = ("none", "small_gn_shift", "ko_shift", "large_gn_shift")


def _records(seed=0, runs=2, draws=4) -> pd.DataFrame:
    """A tiny grid's draws as ``fl-detect`` writes them: two data sets, scattered
    rejections and p-values, a small pool that stops short of the largest n."""
    rng = np.random.default_rng(seed)
    rows = []
    for dataset in ("mnist", "cifar10"):
        for (method, kind), rate in RATES.items():
            rep, _, test = method.partition("+")
            for shift in SHIFTS:
                for fraction in (0.0,) if shift == "none" else (0.1, 1.0):
                    for n in (10, 100):
                        if shift == "ko_shift" and n == 100:
                            continue  # its pool is too small
                        for run in range(runs):
                            p = rng.uniform(size=draws) * (0.2 if shift == "none" else 1 - rate)
                            rows += [{
                                "dataset": dataset, "model": "none" if kind == "none"
                                else f"{kind}-h16-l2-s0", "kind": kind, "method": method,
                                "representation": rep, "test": test,
                                "dimension": "multivariate" if test == "mmd" else "univariate",
                                "protocol": "rabanser", "pools_id": f"{dataset}0123abcd",
                                "shift": shift, "fraction": fraction, "n": n,
                                "n_eff": min(n, 188) if shift == "ko_shift" else n,
                                "n_ref": n, "run": run, "draw": d,
                                "rejected": bool(p[d] < 0.05 + rate / 2),
                                "p_value": float(p[d]),
                                "fallback": bool(rng.uniform() < 0.3) if test == "chi2"
                                else None,
                            } for d in range(draws)]  # fmt: skip
    return pd.DataFrame(rows)


def _report(inputs, out, *extra) -> int:
    return main(["fl-report", *map(str, inputs), "--out-dir", str(out), *map(str, extra)])


def test_every_table_from_the_cells_is_the_one_from_the_draws(tmp_path):
    rec = _records()
    paths = []
    for (dataset, method), part in rec.groupby(["dataset", "method"], sort=False):
        paths.append(tmp_path / f"{dataset}-{method}.csv")
        part.to_csv(paths[-1], index=False, float_format="%.6g")
    drawn, counted = tmp_path / "drawn", tmp_path / "counted"
    assert _report(paths, drawn, "--aggregate", tmp_path / "records.csv.gz") == 0
    cells = drawn / "fl_cells.csv.gz"
    assert _report([cells], counted) == 0
    names = sorted(p.name for p in drawn.iterdir())
    assert names == sorted(p.name for p in counted.iterdir())
    assert len(names) == 21  # tables (CSV and Markdown), the summary and the cells
    for name in names:
        assert (counted / name).read_bytes() == (drawn / name).read_bytes(), name
    assert "small_gn_shift, ko_shift, large_gn_shift" in (drawn / "fl_summary.md").read_text()
    assert "fallback" in (drawn / "fl_summary.md").read_text()
    # one row per (data set, row, shift, fraction, n, run); no timestamp in the gzip header
    table = pd.read_csv(cells)
    assert (
        len(table)
        == rec.drop(columns=["draw", "rejected", "p_value", "fallback"]).drop_duplicates().shape[0]
    )
    assert table["draws"].sum() == len(rec) and table["rejected"].sum() == rec["rejected"].sum()
    assert cells.read_bytes()[4:8] == b"\0\0\0\0"
    assert gzip.decompress(cells.read_bytes()).startswith(b"dataset,model,kind,method,")


def test_cells_round_trip_and_draw_order_does_not_matter():
    rec = _records()
    cells = to_cells(rec)
    again = to_cells(from_cells(cells))
    pd.testing.assert_frame_equal(again, cells)
    # the same draws in another order within each cell count the same
    shuffled = rec.sample(frac=1.0, random_state=1).sort_values(
        ["dataset", "method"], kind="stable"
    )
    key = [c for c in cells if c not in ("rejected", "draws", "fallbacks")]
    pd.testing.assert_frame_equal(
        to_cells(shuffled).sort_values(key, ignore_index=True),
        cells.sort_values(key, ignore_index=True),
    )
    expanded = from_cells(cells)
    assert "p_value" not in expanded
    assert expanded["fallback"].isna().sum() == rec["fallback"].isna().sum()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rejected": 5}, "more rejected than draws"),
        ({"draws": 0}, "whole numbers of at least 1"),
        ({"rejected": 1.5}, "whole numbers"),
    ],
)
def test_cells_with_impossible_counts_are_refused(tmp_path, capsys, change, message):
    cells = to_cells(_records()).assign(**change)
    cells.to_csv(tmp_path / "cells.csv", index=False)
    assert _report([tmp_path / "cells.csv"], tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert message in err and "cells.csv" in err
    assert not (tmp_path / "out").exists()


def test_a_mix_of_cells_and_draws_and_aggregating_cells_are_refused(tmp_path, capsys):
    rec = _records()
    rec.to_csv(tmp_path / "draws.csv", index=False)
    to_cells(rec).to_csv(tmp_path / "cells.csv", index=False)
    out = tmp_path / "out"
    assert _report([tmp_path / "draws.csv", tmp_path / "cells.csv"], out) == 2
    assert "mix cells files" in capsys.readouterr().err
    assert _report([tmp_path / "cells.csv"], out, "--aggregate", tmp_path / "all.csv.gz") == 2
    assert "--aggregate" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "all.csv.gz").exists()


def test_a_cell_whose_draws_disagree_on_the_fallback_is_refused():
    rec = _records()
    first = rec.index[rec["test"] == "chi2"][0]
    rec.loc[first, "fallback"] = None  # a chi-squared draw without it
    with pytest.raises(ValueError, match="disagree on whether they record the fallback"):
        to_cells(rec)


def test_cells_of_separate_sittings_report_as_one_grid(tmp_path, capsys):
    # a grid run in parts (data sets, or rows of one data set, on different days): the
    # report of the parts' cells files is the report of the whole grid's
    rec = _records()
    whole = tmp_path / "whole"
    rec.to_csv(tmp_path / "draws.csv", index=False)
    assert _report([tmp_path / "draws.csv"], whole) == 0
    parts = []
    first_rows = rec["method"].isin(["uae+mmd", "bbsds+ks"])
    cifar = rec["dataset"] == "cifar10"
    for i, part in enumerate([rec[~cifar], rec[cifar & first_rows], rec[cifar & ~first_rows]]):
        out = tmp_path / f"sitting{i}"
        part.to_csv(tmp_path / f"draws{i}.csv", index=False)
        assert _report([tmp_path / f"draws{i}.csv"], out) == 0
        parts.append(out / "fl_cells.csv.gz")
    joined = tmp_path / "joined"
    assert _report(parts, joined) == 0
    for path in whole.iterdir():
        assert (joined / path.name).read_bytes() == path.read_bytes(), path.name
    # a cell counted in two sittings is refused, naming the double count
    again = tmp_path / "again.csv.gz"
    again.write_bytes(parts[0].read_bytes())
    assert _report([parts[0], parts[1], again], tmp_path / "twice") == 2
    assert "count a cell twice" in capsys.readouterr().err
    assert not (tmp_path / "twice").exists()
