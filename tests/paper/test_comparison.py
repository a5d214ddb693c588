"""Published vs reproduced Table 1 on hand-built records and a made-up published table.

Records: data set digits (label "Digits"), methods softmax/tu/dgp, corruptions GN/PD,
n in {10, 50}, deltas 0.5 and 1.0 with the same detection ratio, delta 0.75 never
detecting, 10 draws each, plus calibration rows. Pooling {0.5, 1.0} gives these ratios (%):

    group    Softmax  TU   DGP   | published: Softmax  TU  DGP
    GN, 10     20     40    60   |              22     50   58
    GN, 50     80     70    50   |              70     75   60
    PD, 10     10     30    30   |              10     35   25
    PD, 50    100     90   100   |              99     99   98

Worked by hand:
* within 5 points (|ours - paper| <= 5): GN10 S, DGP; GN50 TU (exactly 5); PD10 all three;
  PD50 S, DGP -> 8 of 12 cells;
* best method: GN10 DGP/DGP agree; GN50 paper TU, ours Softmax disagree; PD10 paper TU,
  ours TU = DGP (tie) agree; PD50 paper Softmax = TU, ours Softmax = DGP agree -> 3 of 4;
* sign(DGP - TU): GN10 +/+ agree; GN50 -/- agree; PD10 -/0 disagree; PD50 -/+ disagree
  -> 2 of 4.
The published table also holds cells the run did not compute (MAGDiff; n = 200; MNIST):
they must not appear.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dgpbench.cli.main import main
from dgpbench.paper.comparisons.table1 import (
    compare_table1,
    load_published_table,
    reproduced_cells,
    summarize_comparison,
    write_comparisons,
)
from dgpbench.paper.protocol import wilson_interval

OURS = {  # (corruption, n) -> {method: pooled ratio in %}
    ("GN", 10): {"softmax": 20, "tu": 40, "dgp": 60},
    ("GN", 50): {"softmax": 80, "tu": 70, "dgp": 50},
    ("PD", 10): {"softmax": 10, "tu": 30, "dgp": 30},
    ("PD", 50): {"softmax": 100, "tu": 90, "dgp": 100},
}
PAPER = {
    ("GN", 10): {"Softmax": 22, "TU": 50, "DGP": 58},
    ("GN", 50): {"Softmax": 70, "TU": 75, "DGP": 60},
    ("PD", 10): {"Softmax": 10, "TU": 35, "DGP": 25},
    ("PD", 50): {"Softmax": 99, "TU": 99, "DGP": 98},
}
DRAWS = 10


def _records() -> pd.DataFrame:
    rows = []
    for (corruption, n), methods in OURS.items():
        for method, pct in methods.items():
            for delta in (0.5, 0.75, 1.0):
                k = 0 if delta == 0.75 else pct * DRAWS // 100
                for draw in range(DRAWS):
                    rows.append(
                        dict(dataset="digits", method=method, corruption=corruption,
                             intensity=6, n=n, delta=delta, draw=draw, rejected=draw < k)
                    )  # fmt: skip
            for draw in range(DRAWS):  # calibration: never counted
                rows.append(
                    dict(dataset="digits", method=method, corruption="none", intensity=0,
                         n=n, delta=0.0, draw=draw, rejected=True)
                )  # fmt: skip
    return pd.DataFrame(rows)


def _published() -> pd.DataFrame:
    rows = [
        dict(dataset="Digits", corruption=c, n=n, method=m, detection_ratio_pct=v)
        for (c, n), methods in PAPER.items()
        for m, v in methods.items()
    ]
    rows += [  # not computed by the run: left out
        dict(dataset="Digits", corruption="GN", n=10, method="MAGDiff", detection_ratio_pct=50.0),
        dict(dataset="Digits", corruption="GN", n=200, method="DGP", detection_ratio_pct=90.0),
        dict(dataset="MNIST", corruption="GN", n=10, method="DGP", detection_ratio_pct=5.0),
    ]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def comparison() -> pd.DataFrame:
    cells = reproduced_cells(_records(), deltas=[0.5, 1.0])
    return compare_table1(_published(), cells)


def test_only_computed_cells_with_paper_labels(comparison):
    assert len(comparison) == 12
    assert set(comparison["dataset"]) == {"Digits"}
    assert set(comparison["method"]) == {"Softmax", "TU", "DGP"}
    assert set(comparison["n"]) == {10, 50}
    assert not comparison.isna().any().any()


def test_cell_values_diff_and_interval(comparison):
    cell = comparison.set_index(["corruption", "n", "method"]).loc[("GN", 10, "DGP")]
    assert cell["paper_pct"] == 58
    assert cell["ours_pct"] == pytest.approx(60)
    assert cell["diff_pct"] == pytest.approx(2)
    assert cell["n_draws"] == 2 * DRAWS  # deltas 0.5 and 1.0, not 0.75 nor calibration
    low, high = wilson_interval(12, 20)
    assert cell["ci_low_pct"] == pytest.approx(100 * low)
    assert cell["ci_high_pct"] == pytest.approx(100 * high)
    assert cell["paper_in_ci"]
    # rows: corruption order, then n, then the published table's method order
    first = comparison[["corruption", "n", "method"]].head(3).to_numpy().tolist()
    assert first == [["GN", 10, "Softmax"], ["GN", 10, "TU"], ["GN", 10, "DGP"]]


def test_shares_match_the_hand_count(comparison):
    summary = summarize_comparison(comparison).set_index("dataset").loc["Digits"]
    assert summary["n_cells"] == 12
    assert summary["share_within_5"] == pytest.approx(8 / 12)
    assert summary["n_groups"] == 4
    assert summary["share_best_agrees"] == pytest.approx(3 / 4)
    assert summary["n_dgp_tu_groups"] == 4
    assert summary["share_dgp_vs_tu_agrees"] == pytest.approx(2 / 4)
    diffs = [-2, -10, 2, 10, -5, -10, 0, -5, 5, 1, -9, 2]
    assert summary["mean_diff_pct"] == pytest.approx(np.mean(diffs))
    assert summary["mean_abs_diff_pct"] == pytest.approx(np.mean(np.abs(diffs)))


def test_delta_pool_changes_the_cells():
    # delta 0.75 never detects: pooling {0.5, 0.75} halves every ratio
    cells = reproduced_cells(_records(), deltas=[0.5, 0.75]).set_index(
        ["corruption", "n", "method"]
    )
    assert cells.loc[("GN", 10, "DGP"), "ratio_pct"] == pytest.approx(30)
    with pytest.raises(ValueError, match=r"\[0\.25\] have no records"):
        reproduced_cells(_records(), deltas=[0.25, 0.5])


def test_write_comparisons_files_and_summary(tmp_path):
    path = tmp_path / "published.csv"
    _published().to_csv(path, index=False)
    summary = write_comparisons(
        _records(),
        tmp_path / "out",
        pool_deltas=[0.5, 1.0],
        delta_sets={"low": [0.5, 0.75], "uncomputed": [0.25, 0.5]},
        published_path=path,
    )
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {
        "comparison_table1.csv",
        "comparison_table1.md",
        "comparison_table1_low.csv",
        "comparison_table1_low.md",
        "comparison_table1_summary.csv",
    }
    assert summary["delta_set"].tolist() == ["pool", "low"]
    assert summary["deltas"].tolist() == ["{0.5, 1}", "{0.5, 0.75}"]
    pool = summary.iloc[0]
    assert pool["share_within_5"] == pytest.approx(8 / 12)
    assert pool["share_best_agrees"] == pytest.approx(3 / 4)
    cells = pd.read_csv(tmp_path / "out" / "comparison_table1.csv")
    assert len(cells) == 12 and "MAGDiff" not in set(cells["method"])
    md = (tmp_path / "out" / "comparison_table1.md").read_text()
    assert "67%" in md and "75% of 4" in md and "50% of 4" in md
    assert "60.0 (" in md  # ours with its interval


def test_no_published_cell_computed(tmp_path):
    records = _records().assign(dataset="npz:/x/other.npz")
    summary = write_comparisons(records, tmp_path, pool_deltas=[0.5])
    assert summary.empty or summary["n_cells"].sum() == 0
    assert "No published cell" in (tmp_path / "comparison_table1.md").read_text()
    assert len(pd.read_csv(tmp_path / "comparison_table1.csv")) == 0


def test_shipped_paper_table():
    table = load_published_table()
    assert len(table) == 240
    assert set(table["dataset"]) == {"CIFAR-10", "Fashion-MNIST", "MNIST"}
    assert set(table["n"]) == {10, 20, 50, 100, 200}
    assert table["detection_ratio_pct"].between(0, 100).all()
    # one spot check against the paper: MNIST, GN, n = 10, Softmax
    row = table[(table.dataset == "MNIST") & (table.corruption == "GN") & (table.n == 10)]
    assert row.set_index("method").at["Softmax", "detection_ratio_pct"] == 15.3


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.drop(columns="method"), r"lacks columns \['method'\]"),
        (lambda t: t.assign(n="ten"), "column n needs an integer, got 'ten'"),
        (lambda t: t.assign(detection_ratio_pct=130.0), r"must lie in \[0, 100\]"),
        (lambda t: pd.concat([t, t.head(1)]), "appears twice"),
    ],
)
def test_bad_published_table_is_a_clear_error(tmp_path, edit, message):
    path = tmp_path / "bad.csv"
    edit(_published()).to_csv(path, index=False)
    with pytest.raises(ValueError, match=message) as err:
        load_published_table(path)
    assert "bad.csv" in str(err.value)


def test_cli_compare(tmp_path, capsys):
    records = tmp_path / "records.csv"
    _records().to_csv(records, index=False)
    published = tmp_path / "published.csv"
    _published().to_csv(published, index=False)
    out = tmp_path / "tables"
    code = main(
        ["compare", "--records", str(records), "--pool-deltas", "0.5", "1.0",
         "--delta-set", "low=0.5,0.75", "--published", str(published), "--out-dir", str(out)]
    )  # fmt: skip
    assert code == 0
    summary = pd.read_csv(out / "comparison_table1_summary.csv")
    assert summary["delta_set"].tolist() == ["pool", "low"]
    assert summary.loc[0, "share_dgp_vs_tu_agrees"] == pytest.approx(0.5)
    # an uncomputed pooled delta is a clear error and writes nothing
    bad = tmp_path / "bad"
    code = main(
        ["compare", "--records", str(records), "--pool-deltas", "0.25",
         "--out-dir", str(bad)]
    )  # fmt: skip
    assert code == 2
    assert "0.25" in capsys.readouterr().err
    assert not bad.exists() or not any(bad.iterdir())


# --- the interval counts the models ---------------------------------------------------------
def _model_records(model_rates, draws=40, dataset="digits") -> pd.DataFrame:
    """One DGP cell (GN, n = 10) whose models each detect in ``rate`` of their draws."""
    rows = [
        dict(dataset=dataset, model=f"h8-l2-s{i}", kind="mlp", method="dgp", corruption="GN",
             intensity=6, n=10, delta=1.0, draw=draw, rejected=draw < round(rate * draws))
        for i, rate in enumerate(model_rates)
        for draw in range(draws)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_the_interval_counts_the_models_not_the_draws():
    # 4 models detect in every draw, 1 in none: 160 of 200 draws, but 5 independent units
    cell = reproduced_cells(_model_records([1, 1, 1, 1, 0])).iloc[0]
    low, high = wilson_interval(160, 200)
    assert (cell["n_models"], cell["n_draws"]) == (5, 200)
    assert cell["ratio_pct"] == pytest.approx(80)
    assert cell["ci_low_pct"] <= 40 and cell["ci_high_pct"] == pytest.approx(100)
    assert cell["ci_high_pct"] - cell["ci_low_pct"] > 3 * 100 * (high - low)
    published = pd.DataFrame(
        [dict(dataset="Digits", corruption="GN", n=10, method="DGP", detection_ratio_pct=55)]
    )
    comparison = compare_table1(published, reproduced_cells(_model_records([1, 1, 1, 1, 0])))
    assert bool(comparison["paper_in_ci"].iloc[0])  # outside Wilson's [74, 85], inside ours
    summary = summarize_comparison(comparison).iloc[0]
    assert summary["share_paper_in_ci"] == 1.0 and summary["n_models"] == 5
    # models alike (independent draws): never narrower than the draws' interval
    flat = reproduced_cells(_model_records([0.8] * 5)).iloc[0]
    assert flat["ci_low_pct"] <= 100 * low + 1e-9 and flat["ci_high_pct"] >= 100 * high - 1e-9


def test_one_model_gives_the_draws_interval_and_says_so():
    cell = reproduced_cells(_model_records([0.5])).iloc[0]
    low, high = wilson_interval(20, 40)
    assert cell["n_models"] == 1
    assert (cell["ci_low_pct"], cell["ci_high_pct"]) == pytest.approx((100 * low, 100 * high))


def test_a_model_id_in_two_data_sets_is_two_models():
    rec = pd.concat([_model_records([1, 0]), _model_records([1, 0], dataset="mnist")])
    cells = reproduced_cells(rec)
    assert cells["n_models"].tolist() == [2, 2]
