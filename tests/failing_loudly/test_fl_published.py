"""Rabanser et al.'s Table 1(a) against the run, and their Tables 1(b), 2(a), 2(b) for every
row of ours, on made-up records with known rates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dgpbench.cli.main import main
from dgpbench.failing_loudly.breakdowns import (
    best_rows,
    fraction_table,
    intensity_table,
    shift_table,
)
from dgpbench.failing_loudly.published import (
    SPEC,
    reproduced,
    se_published,
    write_fl_table1a_comparison,
)
from dgpbench.failing_loudly.reporting import pooled_accuracy_table
from dgpbench.paper.comparisons.core import load_published
from dgpbench.paper.comparisons.r2 import sign_test

# (method, kind) -> detection rate on every shifted cell; the calibration cells reject 1 in 10
RATES = {
    ("noredu+ks", "none"): 0.5,
    ("uae+mmd", "none"): 0.3,
    ("bbsds+ks", "cnn"): 0.8,
    ("bbsds+ks", "mlp"): 0.2,
    ("bbsdh+chi2", "cnn"): 0.4,
    ("classif", "none"): 0.6,
    ("dgp+ks", "cnn"): 0.9,
}
SHIFTS = {"small_gn_shift": 0.0, "adversarial_shift": 0.2, "large_gn_shift": 0.4}  # added rate
DRAWS = 10


def _records(datasets=("mnist", "cifar10"), runs=5, protocol="rabanser") -> pd.DataFrame:
    rows = []
    for dataset in datasets:
        for (method, kind), rate in RATES.items():
            test = method.rpartition("+")[2] if "+" in method else "classif"
            for shift, add in {"none": None, **SHIFTS}.items():
                for fraction in (0.0,) if shift == "none" else (0.1, 1.0):
                    k = 1 if add is None else round(min(1.0, rate + add) * DRAWS)
                    for run in range(runs):
                        for n in (10, 100):
                            rows += [{
                                "dataset": dataset, "model": "none" if kind == "none"
                                else f"{kind}-h16-l2-s0", "kind": kind, "method": method,
                                "test": test,
                                "dimension": "multivariate" if test == "mmd" else "univariate",
                                "protocol": protocol, "shift": shift, "fraction": fraction,
                                "n": n, "run": run, "draw": d, "rejected": d < k,
                            } for d in range(DRAWS)]  # fmt: skip
    return pd.DataFrame(rows)


def _rate(rate: float) -> float:
    """A method's pooled accuracy over the shifts of :data:`SHIFTS` (equal draws per shift)."""
    return float(np.mean([round(min(1.0, rate + a) * DRAWS) / DRAWS for a in SHIFTS.values()]))


def test_the_shipped_table_is_rabanser_et_als_table_1a():
    table = load_published(SPEC).set_index(["test", "reduction", "n"])["paper"]
    assert len(table) == 8 * 8 + 6 * 7  # MMD stops at n = 1000
    assert table["univariate", "BBSDs", 100] == 47 and table["univariate", "BBSDs", 1000] == 70
    assert table["univariate", "BBSDh_chi2", 100] == 22
    assert table["multivariate", "UAE", 1000] == 61
    assert ("multivariate", "NoRed", 10000) not in table.index


def test_a_published_cells_error_is_binomial_over_its_300_tests():
    assert se_published([50.0])[0] == pytest.approx(100 * np.sqrt(0.25 / 300))
    assert se_published([47.0])[0] == pytest.approx(100 * np.sqrt(0.47 * 0.53 / 300))
    assert se_published([0.0])[0] > 0  # no cell claims no error


def test_our_cells_pool_the_data_sets_and_compare_the_cnn_family():
    ours = reproduced(_records()).set_index(["test", "reduction", "n"])
    bbsds = ours.loc[("univariate", "BBSDs", 100)]
    assert bbsds["row"] == "bbsds+ks [cnn]" and bbsds["units"] == 10  # 2 data sets x 5 runs
    assert bbsds["ours"] == pytest.approx(100 * _rate(0.8))
    assert ours.loc[("univariate", "BBSDh_chi2", 10), "ours"] == pytest.approx(100 * _rate(0.4))
    assert ours.loc[("univariate", "Classif_binomial", 10), "ours"] == pytest.approx(
        100 * _rate(0.6)
    )
    assert ours.loc[("multivariate", "UAE", 10), "ours"] == pytest.approx(100 * _rate(0.3))
    assert "DGP" not in set(ours.index.get_level_values("reduction"))  # no published row
    cells = pooled_accuracy_table(_records()).set_index(["row", "n"])
    assert bbsds["ci_low"] == pytest.approx(100 * cells.loc[("bbsds+ks [cnn]", 100), "ci_low"])


def _made_up_published(tmp_path, ours):
    """A published table: one cell equal to ours, one 30 points above it, one far below, and
    one cell the run did not compute."""
    rows = [
        ("univariate", "BBSDs", 100, ours[("univariate", "BBSDs", 100)]),
        ("univariate", "NoRed", 100, ours[("univariate", "NoRed", 100)] + 30),
        ("multivariate", "UAE", 10, ours[("multivariate", "UAE", 10)] - 40),
        ("univariate", "NoRed", 10000, 70.0),
    ]
    path = tmp_path / "published.csv"
    pd.DataFrame(rows, columns=["test", "reduction", "n", "accuracy_pct"]).to_csv(path, index=False)
    return path


def test_the_comparison_writes_cells_agreement_and_sign_test(tmp_path):
    rec = _records()
    ours = reproduced(rec).set_index(["test", "reduction", "n"])["ours"]
    path = _made_up_published(tmp_path, ours)
    comparison, summary, paths = write_fl_table1a_comparison(rec, tmp_path, published_path=path)
    assert [p.name for p in paths] == [
        "comparison_fl_table1a.csv", "comparison_fl_table1a_summary.csv",
        "comparison_fl_table1a.md",
    ]  # fmt: skip
    assert len(comparison) == 3  # the cell the run did not compute is left out, never filled
    cells = comparison.set_index(["test", "reduction", "n"])
    assert cells.loc[("univariate", "BBSDs", 100), "within"]
    assert cells.loc[("univariate", "NoRed", 100), "diff"] == pytest.approx(-30)
    assert not cells["within"].iloc[1:].any()
    # the tolerance: 1.96 sqrt(se_paper^2 + se_ours^2)
    tol = 1.96 * np.sqrt(se_published(cells["paper"]) ** 2 + cells["se_ours"] ** 2)
    assert (cells["within"] == (cells["diff"].abs() <= tol)).all()
    whole = summary[summary["n"].astype(str) == "all"].iloc[0]
    assert whole["n_cells"] == 3 and whole["n_within"] == 1
    assert whole["mean_diff"] == pytest.approx(cells["diff"].mean())
    assert whole["sign_test_p"] == pytest.approx(sign_test(cells["diff"])["sign_test_p"])
    assert set(summary["n"].astype(str)) == {"10", "100", "all"}  # per column and overall
    text = paths[2].read_text()
    assert "pooled over CIFAR-10 + MNIST" in text and "POOL DIFFERS" not in text
    assert "units" in text and "runs, not draws" in text


def test_a_run_pooling_other_data_sets_says_so_in_the_table(tmp_path):
    rec = _records(datasets=("mnist", "fashion-mnist"), runs=2)
    comparison, _, paths = write_fl_table1a_comparison(rec, tmp_path)
    assert len(comparison) == 10  # 4 univariate rows and UAE + MMD, at n = 10 and 100
    assert "THE POOL DIFFERS" in paths[2].read_text()
    assert comparison["pool"].str.contains("theirs: MNIST \\+ CIFAR-10").all()


def test_a_row_run_on_one_data_set_of_a_grid_in_parts_names_its_own_pool(tmp_path):
    # a grid reported in parts: CIFAR-10's part has not run UAE + MMD yet
    rec = _records()
    rec = rec[~((rec["dataset"] == "cifar10") & (rec["method"] == "uae+mmd"))]
    comparison, _, paths = write_fl_table1a_comparison(rec, tmp_path)
    pools = comparison.set_index("row")["pool"]
    assert set(pools["uae+mmd"]) == {"MNIST (theirs: MNIST + CIFAR-10)"}
    assert set(pools.drop("uae+mmd")) == {"CIFAR-10 + MNIST"}
    assert "THE POOL DIFFERS between rows" in paths[2].read_text()


def test_tables_2a_and_2b_group_by_their_intensity_and_fraction():
    rec = _records(runs=2)
    levels = intensity_table(rec).set_index(["intensity", "row", "n"])
    rate = {s: round(min(1.0, 0.5 + a) * DRAWS) / DRAWS for s, a in SHIFTS.items()}
    assert levels.loc[("small", "noredu+ks", 10), "rate"] == pytest.approx(rate["small_gn_shift"])
    assert levels.loc[("medium", "noredu+ks", 10), "rate"] == pytest.approx(
        rate["adversarial_shift"]
    )
    assert list(dict.fromkeys(levels.index.get_level_values("intensity"))) == [
        "small", "medium", "large"
    ]  # fmt: skip
    assert levels.loc[("small", "noredu+ks", 10), "units"] == 4  # 2 data sets x 2 runs
    fractions = fraction_table(rec).set_index(["fraction", "row", "n"])
    assert set(fractions.index.get_level_values("fraction")) == {0.1, 1.0}
    assert fractions.loc[(0.1, "noredu+ks", 10), "rate"] == pytest.approx(_rate(0.5))
    with pytest.raises(ValueError, match="Table 2"):
        intensity_table(rec[rec["shift"] == "none"])


def test_table_1b_has_every_row_and_names_the_best_of_each_dimension():
    cells = shift_table(_records(runs=2))
    assert set(cells["row"]) == {
        "noredu+ks", "uae+mmd", "bbsds+ks [cnn]", "bbsds+ks [mlp]", "bbsdh+chi2 [cnn]",
        "classif", "dgp+ks [cnn]",
    }  # fmt: skip
    assert "none" not in set(cells["shift"])
    assert best_rows(cells) == {"univariate": "dgp+ks [cnn]", "multivariate": "uae+mmd"}


def test_fl_report_writes_the_comparison_and_the_pooled_tables(tmp_path):
    rec = _records(runs=2)
    rec = rec[rec["method"].isin(["noredu+ks", "uae+mmd", "bbsds+ks"])]  # both dimensions
    rec.to_csv(tmp_path / "records.csv", index=False)
    out = tmp_path / "tables"
    assert main(["fl-report", str(tmp_path / "records.csv"), "--out-dir", str(out)]) == 0
    for name in ("table1b_pooled", "table2a_intensity", "table2b_fraction"):
        text = (out / f"fl_{name}.md").read_text()
        assert text.count("###") == 2  # one table per test dimension
        assert (out / f"fl_{name}.csv").stat().st_size > 0
    levels = (out / "fl_table2a_intensity.md").read_text()
    assert levels.index("| small") < levels.index("| medium") < levels.index("| large")
    assert (out / "comparison_fl_table1a.md").read_text().startswith("###")
    assert (out / "comparison_fl_table1a_summary.csv").stat().st_size > 0
    assert (out / "fl_table1a_accuracy.md").stat().st_size > 0


@pytest.mark.parametrize("protocol", ["rabanser", "dgpbench"])
def test_a_small_pool_is_carried_to_the_larger_n_under_their_protocol_only(protocol):
    rec = _records(runs=2, protocol=protocol)
    small = (rec["shift"] == "large_gn_shift") & (rec["n"] == 100)  # its pool stops at n = 10
    cells = shift_table(rec[~small])
    carried = cells[(cells["shift"] == "large_gn_shift") & (cells["n"] == 100)]
    assert carried.empty == (protocol == "dgpbench")
    ours = reproduced(rec[~small]).set_index(["test", "reduction", "n"])
    whole = reproduced(rec).set_index(["test", "reduction", "n"])
    same = (
        ours.loc[("univariate", "NoRed", 100), "ours"]
        == whole.loc[("univariate", "NoRed", 100), "ours"]
    )
    assert same == (protocol == "rabanser")  # n = 10's result stands in for n = 100's


def test_the_committed_mnist_cifar10_cells_give_the_documented_comparison(tmp_path):
    """docs/failing-loudly.md reports run 4 against their Table 1(a) from the cells committed
    under docs/data: the comparison recomputed from them must say what the docs say."""
    from pathlib import Path

    from dgpbench.cli.failing_loudly import _read_inputs

    root = Path(__file__).resolve().parents[2] / "docs" / "data" / "fl_cells_mnist_cifar10"
    parts = sorted(str(p) for p in root.glob("*.csv.gz"))
    assert len(parts) == 3  # MNIST, then CIFAR-10 in two parts
    records, from_cells = _read_inputs(parts)
    assert from_cells and len(records) == 358_440
    assert records.groupby("dataset")["run"].nunique().to_dict() == {"cifar10": 5, "mnist": 5}
    comparison, summary, _ = write_fl_table1a_comparison(records, tmp_path)
    assert set(comparison["pool"]) == {"CIFAR-10 + MNIST"}  # their pool, every row
    overall = summary.set_index("n").loc["all"]
    assert (overall["n_cells"], overall["n_within"]) == (81, 65)
    assert (overall["n_below"], overall["n_above"]) == (52, 27)
    assert round(overall["mean_diff"], 1) == -2.0
    # its KS rows rerun with SciPy 1.2's p-values (scripts/fl_ks_scipy12.py), committed beside
    ks12 = _read_inputs(
        [str(root.parent / "fl_cells_ks_scipy12" / "mnist_cifar10_ks_rows.csv.gz")]
    )[0]
    key = ["dataset", "method", "kind"]
    rerun = set(map(tuple, ks12[key].drop_duplicates().to_numpy()))
    assert {m for _, m, _ in rerun} == {
        f"{r}+ks" for r in ("noredu", "pca", "srp", "uae", "tae", "bbsds")
    }
    kept = records[~pd.MultiIndex.from_frame(records[key]).isin(list(rerun))]
    _, summary, _ = write_fl_table1a_comparison(pd.concat([kept, ks12]), tmp_path / "ks12")
    overall = summary.set_index("n").loc["all"]
    assert (overall["n_cells"], overall["n_within"]) == (81, 71)
    assert round(overall["mean_diff"], 1) == -1.4
