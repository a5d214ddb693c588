"""Published vs reproduced for the five tables beyond Table 1, on hand-built inputs and
made-up published tables (through ``dgpbench compare-paper``).

Worked by hand (each published table also holds cells the run did not compute, which must
not appear):

* ablation (10 draws per cell, delta 0.5): ours GN/10 TU 20, TU+ 40, DGP- 30, DGP 60;
  GN/20 TU 50, TU+ 70, DGP- 60, DGP 90; paper GN/10 22, 47, 30, 55; GN/20 50, 80, 60, 75
  -> within 5 points: 3 + 2 = 5 of 8 (DGP at GN/10 exactly 5); best agrees: GN/10 DGP/DGP
  yes, GN/20 TU+/DGP no -> 1 of 2;
* calibration (clean draws): ours Digits n10 TU 0, DGP 10; n20 TU 0, DGP 30; paper 1, 1,
  2.5, 4 -> within 2 points: 1 of 4; both <= 5% or both above: 2 of 4;
* bounds (study of 2 matrices): ours lower 0.05, 0.1, 10, 20; upper 0.3, 0.5, 35, 50;
  paper lower 0.05, 0.5, 29, 70; upper 0.3, 0.1, 35, 160 -> within a factor 3: 2 + 2 of 8;
* R²: ours MNIST relu 2 and 3 linear maps (hidden 50) 97, 90; Fashion-MNIST tanh 4 maps
  (650) 99; paper (hidden layers 1, 2, 3) 98.5, 95, 99.5 -> within 2 points: 2 of 3;
* early stopping: ours MNIST Δ_epoch(NP, val) 1.0, Δ_accuracy(NP, val) -0.05,
  Δ_epoch(DGP, val) 1.0; paper 1.5, 0.03, -0.49 -> within: 2 of 3; same sign: 1 of 3.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dgpbench.cli.main import main
from dgpbench.paper.comparisons import ablation, bounds, calibration, early_stopping, r2
from dgpbench.paper.comparisons.core import load_published

DRAWS = 10
ABLATION_OURS = {
    10: {"tu": 20, "tu_norm": 40, "dgp_nonorm": 30, "dgp": 60},
    20: {"tu": 50, "tu_norm": 70, "dgp_nonorm": 60, "dgp": 90},
}
ABLATION_PAPER = {
    10: {"TU": 22, "TU (+ norm)": 47, "DGP (- norm)": 30, "DGP": 55},
    20: {"TU": 50, "TU (+ norm)": 80, "DGP (- norm)": 60, "DGP": 75},
}
CALIBRATION_OURS = {(10, "tu"): 0, (10, "dgp"): 10, (20, "tu"): 0, (20, "dgp"): 30}


def _records() -> pd.DataFrame:
    rows = []
    for n, methods in ABLATION_OURS.items():
        for method, pct in methods.items():
            for draw in range(DRAWS):
                rows.append(dict(dataset="mnist", method=method, corruption="GN", intensity=6,
                                 n=n, delta=0.5, draw=draw, rejected=draw < pct * DRAWS // 100))  # fmt: skip
    for (n, method), pct in CALIBRATION_OURS.items():
        for draw in range(DRAWS):
            rows.append(dict(dataset="digits", method=method, corruption="none", intensity=0,
                             n=n, delta=0.0, draw=draw, rejected=draw < pct * DRAWS // 100))  # fmt: skip
    return pd.DataFrame(rows)


def _compare(tmp_path, table, inputs, published: pd.DataFrame, *extra):
    pub = tmp_path / f"published_{table}.csv"
    published.to_csv(pub, index=False)
    out = tmp_path / "out"
    argv = ["compare-paper", table, "--input", *map(str, inputs), "--published", str(pub)]
    assert main([*argv, *extra, "--out-dir", str(out)]) == 0
    cells = pd.read_csv(out / f"comparison_{table}.csv")
    summary = pd.read_csv(out / f"comparison_{table}_summary.csv")
    md = (out / f"comparison_{table}.md").read_text()
    assert "Cells this run did not compute are left out" in md
    return cells, summary, md


def _whole(summary: pd.DataFrame, column: str = "share_within") -> float:
    return float(summary.iloc[-1][column])


def test_ablation(tmp_path):
    records = tmp_path / "records.csv"
    _records().to_csv(records, index=False)
    published = [
        dict(dataset="MNIST", corruption="GN", n=n, method=m, detection_ratio_pct=v)
        for n, methods in ABLATION_PAPER.items()
        for m, v in methods.items()
    ]
    published += [  # not computed: left out
        dict(dataset="MNIST", corruption="GN", n=200, method="DGP", detection_ratio_pct=99.0),
        dict(dataset="MNIST", corruption="PD", n=10, method="TU", detection_ratio_pct=9.0),
    ]
    cells, summary, md = _compare(
        tmp_path, "table2_ablation", [records], pd.DataFrame(published), "--pool-deltas", "0.5"
    )
    assert len(cells) == 8 and set(cells["n"]) == {10, 20}
    row = cells[(cells["n"] == 10) & (cells["method"] == "DGP")].iloc[0]
    assert (row["paper"], row["ours"], row["diff"], row["within"]) == (55, 60, 5, True)
    assert cells["ci_low"].le(cells["ours"]).all() and cells["n_draws"].eq(DRAWS).all()
    (mnist,) = summary.itertuples()  # one data set: no separate "all" row
    assert mnist.n_cells == 8 and mnist.share_within == pytest.approx(5 / 8)
    assert mnist.n_groups == 2 and mnist.share_best_agrees == pytest.approx(0.5)
    inside = cells["paper"].between(cells["ci_low"], cells["ci_high"]).mean()
    assert mnist.share_paper_in_ci == pytest.approx(inside)
    assert "5 percentage points" in md


def test_ablation_refuses_an_uncomputed_pooled_delta(tmp_path, capsys):
    records = tmp_path / "records.csv"
    _records().to_csv(records, index=False)
    argv = ["compare-paper", "table2_ablation", "--input", str(records), "--pool-deltas", "0.25"]
    assert main([*argv, "--out-dir", str(tmp_path / "o")]) == 2
    assert "0.25" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_calibration(tmp_path):
    records = tmp_path / "records.csv"
    _records().to_csv(records, index=False)
    published = pd.DataFrame(
        [
            dict(dataset="Digits", n=10, method="TU", false_detection_rate_pct=1.0),
            dict(dataset="Digits", n=10, method="DGP", false_detection_rate_pct=1.0),
            dict(dataset="Digits", n=20, method="TU", false_detection_rate_pct=2.5),
            dict(dataset="Digits", n=20, method="DGP", false_detection_rate_pct=4.0),
            dict(dataset="CIFAR-10", n=10, method="TU", false_detection_rate_pct=1.0),
        ]
    )
    cells, summary, md = _compare(tmp_path, "calibration", [records], published)
    assert len(cells) == 4 and set(cells["dataset"]) == {"Digits"}
    assert cells.set_index(["n", "method"]).loc[(20, "DGP"), "ours"] == pytest.approx(30)
    assert _whole(summary) == pytest.approx(1 / 4)
    assert _whole(summary, "share_calibrated_agrees") == pytest.approx(2 / 4)
    inside = cells["paper"].between(cells["ci_low"], cells["ci_high"]).mean()
    assert _whole(summary, "share_paper_in_ci") == pytest.approx(inside)
    assert "2 percentage points" in md
    # one interval, in percent, per cell (not the fraction beside it under the same name)
    assert cells.columns.is_unique and (cells["ci_high"] >= cells["ours"]).all()
    header = next(line for line in md.splitlines() if "ci_low" in line)
    assert header.count("ci_low") == 1 and header.count("ci_high") == 1


def test_bounds(tmp_path):
    study = tmp_path / "study.csv"
    pd.DataFrame({"np": [0.5, 1.0], "lower": [0.4, 1.0], "upper": [0.6, 1.5]}).to_csv(
        study, index=False
    )
    values = {
        "Lower bound": [0.05, 0.5, 29, 70],
        "Upper bound": [0.3, 0.1, 35, 160],
    }
    stats = ["abs_mean", "abs_max", "rel_mean_pct", "rel_max_pct"]
    published = pd.DataFrame(
        [
            dict(bound=b, statistic=s, value=v)
            for b, vs in values.items()
            for s, v in zip(stats, vs, strict=True)
        ]
    )
    cells, summary, md = _compare(tmp_path, "bounds", [study], published)
    ours = cells.set_index(["bound", "statistic"])["ours"]
    assert ours[("Lower bound", "rel_max_pct")] == pytest.approx(20)
    assert ours[("Upper bound", "rel_mean_pct")] == pytest.approx(35)
    assert cells["within"].tolist() == [True, False, True, False, True, False, True, False]
    assert summary["share_within"].tolist() == [0.5, 0.5, 0.5]  # lower, upper, all
    assert "factor of 3" in md


def test_r2_maps_hidden_layers_to_linear_maps(tmp_path):
    fits = tmp_path / "r2.csv"
    pd.DataFrame(
        {
            "dataset": ["mnist", "mnist", "fashion-mnist", "mnist"],
            "activation": ["relu", "relu", "tanh", "relu"],
            "n_layers": [2, 3, 4, 1],
            "hidden": [50, 50, 650, None],
            "n": [20, 20, 20, 20],
            "r2_pct": [97.0, 90.0, 99.0, 99.9],
        }
    ).to_csv(fits, index=False)
    rows = [
        ("MNIST", "relu", 1, 50, 98.5),
        ("MNIST", "relu", 2, 50, 95.0),
        ("Fashion-MNIST", "tanh", 3, 650, 99.5),
        ("MNIST", "relu", 3, 50, 80.0),  # not computed
        ("EMNIST", "relu", 1, 50, 98.0),  # not computed
    ]
    published = pd.DataFrame(
        [
            dict(table="r2_np_logvar", dataset=d, activation=a, layers=k, hidden=h, r2_pct=v)
            for d, a, k, h, v in rows
        ]
    )
    cells, summary, md = _compare(tmp_path, "r2", [fits], published)
    assert cells[["dataset", "layers", "ours"]].values.tolist() == [
        ["MNIST", 1, 97.0],
        ["MNIST", 2, 90.0],
        ["Fashion-MNIST", 3, 99.0],
    ]
    assert cells["within"].tolist() == [True, False, True]
    assert _whole(summary) == pytest.approx(2 / 3)
    assert "2 points" in md


def test_r2_counts_published_values_inside_the_runs_interval(tmp_path):
    fits = tmp_path / "r2.csv"
    pd.DataFrame(
        {
            "dataset": ["mnist", "mnist", "mnist"],
            "activation": ["relu"] * 3,
            "n_layers": [2, 3, 4],
            "hidden": [50, 50, 50],
            "n": [20, 20, 20],
            "r2_pct": [91.0, 97.0, 95.0],
            "r2_ci_low_pct": [82.0, 95.0, np.nan],
            "r2_ci_high_pct": [96.0, 98.5, np.nan],
        }
    ).to_csv(fits, index=False)
    published = pd.DataFrame(
        [
            dict(
                table="r2_np_logvar",
                dataset="MNIST",
                activation="relu",
                layers=k,
                hidden=50,
                r2_pct=v,
            )
            for k, v in ((1, 97.9), (2, 98.2), (3, 96.0))
        ]
    )
    cells, summary, md = _compare(tmp_path, "r2", [fits], published)
    assert cells[["ci_low", "ci_high"]].iloc[0].tolist() == [82.0, 96.0]
    # 97.9 lies above [82, 96], 98.2 inside [95, 98.5]; the third cell has no interval
    assert _whole(summary, "share_paper_in_ci") == pytest.approx(1 / 2)
    assert cells["within"].tolist() == [False, True, True]
    assert "bootstrap interval" in md


def test_early_stopping(tmp_path):
    np_table, dgp_table = tmp_path / "table_np.csv", tmp_path / "table_dgp.csv"
    pd.DataFrame(
        {"difference": ["Δ_epoch(NP, val)", "Δ_accuracy(NP, val)"], "MNIST": [1.0, -0.05]}
    ).to_csv(np_table, index=False)
    pd.DataFrame({"difference": ["Δ_epoch(DGP, val)"], "MNIST": [1.0]}).to_csv(
        dgp_table, index=False
    )
    rows = [
        ("early_stopping_np", "epochs", "NP", "val", "MNIST", 1.5),
        ("early_stopping_np", "accuracy_pct", "NP", "val", "MNIST", 0.03),
        ("early_stopping_dgp", "epochs", "DGP", "val", "MNIST", -0.49),
        ("early_stopping_dgp", "epochs", "DGP", "val", "EMNIST", -1.9),  # not computed
    ]
    published = pd.DataFrame(
        rows, columns=["table", "quantity", "first", "second", "dataset", "difference"]
    )
    cells, summary, md = _compare(tmp_path, "early_stopping", [np_table, dgp_table], published)
    assert cells["within"].tolist() == [True, True, False]
    assert _whole(summary) == pytest.approx(2 / 3)
    assert _whole(summary, "share_sign_agrees") == pytest.approx(1 / 3)
    assert "1 epoch" in md and "0.1 percentage points" in md


def test_nothing_computed_is_said_not_filled(tmp_path):
    fits = tmp_path / "r2.csv"
    pd.DataFrame(
        {
            "dataset": ["digits"],
            "activation": ["relu"],
            "n_layers": [2],
            "hidden": [16],
            "n": [5],
            "r2_pct": [90.0],
        }
    ).to_csv(fits, index=False)
    assert main(["compare-paper", "r2", "--input", str(fits), "--out-dir", str(tmp_path)]) == 0
    assert pd.read_csv(tmp_path / "comparison_r2.csv").empty
    assert "No published cell was computed" in (tmp_path / "comparison_r2.md").read_text()


@pytest.mark.parametrize(
    ("module", "rows"),
    [(ablation, 80), (calibration, 30), (bounds, 8), (r2, 72), (early_stopping, 36)],
)
def test_the_shipped_tables_load(module, rows):
    table = load_published(module.SPEC)
    assert len(table) == rows and table["paper"].notna().all()


def test_a_bad_published_table_is_a_one_line_error(tmp_path, capsys):
    study = tmp_path / "study.csv"
    pd.DataFrame({"np": [0.5], "lower": [0.4], "upper": [0.6]}).to_csv(study, index=False)
    bad = tmp_path / "bad.csv"
    bad.write_text("bound,statistic,value\nLower bound,abs_mean,0.1\nLower bound,abs_mean,0.2\n")
    argv = ["compare-paper", "bounds", "--input", str(study), "--published", str(bad)]
    assert main([*argv, "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "appears twice" in err and str(bad) in err
    assert not (tmp_path / "o").exists()


def test_calibration_and_ablation_intervals_count_the_models():
    rows = [
        dict(dataset="mnist", model=f"h8-l2-s{s}", kind="mlp", method="dgp", corruption=c,
             intensity=i, n=10, delta=d, draw=draw, rejected=(s == 0) and draw < 8)
        for s in range(4)
        for c, i, d in (("none", 0, 0.0), ("GN", 6, 0.5))
        for draw in range(20)
    ]  # fmt: skip
    rec = pd.DataFrame(rows)
    for cells in (calibration.reproduced(rec), ablation.reproduced(rec, [0.5])):
        (cell,) = cells.itertuples()
        assert (cell.n_models, cell.n_draws, cell.ours) == (4, 80, pytest.approx(10))
        assert cell.ci_high >= 30  # Wilson's over 80 draws: 18.5 (one model of four says 40%)
