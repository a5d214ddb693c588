"""Failing loudly's tables (dgpbench.failing_loudly.reporting) on records with known rates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from dgpbench.failing_loudly.reporting import (
    accuracy_table,
    best_table,
    false_positive_table,
    pooled_accuracy_table,
    proportion_cells,
    rabanser_table1b,
    write_report,
)


def _records(rates: dict[tuple[str, str, str], float], draws: int = 40) -> pd.DataFrame:
    """Records where (method, model, shift) rejects round(rate * draws) of its draws."""
    rows = []
    for (method, model, shift), rate in rates.items():
        k = round(rate * draws)
        for n in (10, 100):
            for draw in range(draws):
                rows.append({
                    "dataset": "mnist", "model": model, "kind": "none" if model == "none"
                    else "cnn", "method": method,
                    "dimension": "multivariate" if method.endswith("+mmd") else "univariate",
                    "shift": shift, "fraction": 0.0 if shift == "none" else 0.5, "n": n,
                    "draw": draw, "rejected": draw < k,
                })  # fmt: skip
    return pd.DataFrame(rows)


RATES = {
    ("pca+ks", "none", "none"): 0.05,
    ("pca+ks", "none", "ko_shift"): 0.2,
    ("pca+ks", "none", "small_gn_shift"): 0.9,
    ("bbsds+ks", "cnn-h100-l2-s0", "none"): 0.5,  # anti-conservative on purpose
    ("bbsds+ks", "cnn-h100-l2-s0", "ko_shift"): 0.6,
    ("bbsds+ks", "cnn-h100-l2-s0", "small_gn_shift"): 0.3,
    ("dgp+mmd", "cnn-h100-l2-s0", "none"): 0.0,
    ("dgp+mmd", "cnn-h100-l2-s0", "ko_shift"): 0.1,
    ("dgp+mmd", "cnn-h100-l2-s0", "small_gn_shift"): 0.8,
}


def test_intervals_are_scipys_wilson_and_clopper_pearson():
    rec = _records(RATES)
    cells = proportion_cells(rec, ["method", "shift"])
    row = cells[(cells["method"] == "pca+ks") & (cells["shift"] == "ko_shift")].iloc[0]
    ci = binomtest(16, 80).proportion_ci(method="wilson")
    assert (row["k"], row["count"]) == (16, 80)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high))
    exact = proportion_cells(rec, ["method", "shift"], method="exact").iloc[0]
    ci = binomtest(int(exact["k"]), int(exact["count"])).proportion_ci(method="exact")
    assert (exact["ci_low"], exact["ci_high"]) == pytest.approx((ci.low, ci.high))


def test_table_1a_pools_shifts_and_leaves_out_calibration():
    acc = accuracy_table(_records(RATES))
    pca = acc[(acc["row"] == "pca+ks") & (acc["n"] == 10)].iloc[0]
    assert pca["rate"] == pytest.approx((0.2 + 0.9) / 2) and pca["count"] == 80
    assert "bbsds+ks [cnn]" in set(acc["row"])  # model-reading rows name their family


def test_table_1b_picks_the_best_per_dimension_and_ranks_dgp():
    best = best_table(_records(RATES)).set_index("shift")
    assert best.loc["ko_shift", "best_univariate"] == "bbsds+ks [cnn]"
    assert best.loc["small_gn_shift", "best_univariate"] == "pca+ks"
    assert best.loc["small_gn_shift", "best_multivariate"] == "dgp+mmd [cnn]"
    assert best.loc["small_gn_shift", "dgp+mmd [cnn]"].endswith("(#2/3)")


def test_false_positive_cells_wholly_above_alpha_are_flagged_and_listed(tmp_path):
    rec = _records(RATES)
    fp = false_positive_table(rec, alpha=0.05)
    flagged = fp[fp["above_alpha"]]
    assert set(flagged["row"]) == {"bbsds+ks [cnn]"} and len(flagged) == 2
    write_report(rec, tmp_path, alpha=0.05)
    summary = (tmp_path / "fl_summary.md").read_text()
    assert "wholly above alpha = 0.05: 2 of 6" in summary
    assert "bbsds+ks [cnn], n = 10" in summary and "pca+ks, n" not in summary
    assert "**!**" in (tmp_path / "fl_false_positives.md").read_text()
    for name in ("fl_table1a_accuracy", "fl_table1b", "fl_best_per_shift", "fl_false_positives"):
        assert (tmp_path / f"{name}.csv").is_file() and (tmp_path / f"{name}.md").is_file()


def test_no_calibration_draws_is_an_error():
    rec = _records({("pca+ks", "none", "ko_shift"): 0.5})
    with pytest.raises(ValueError, match="calibration"):
        false_positive_table(rec, alpha=0.05)
    assert np.isfinite(accuracy_table(rec)["rate"]).all()


# -- intervals that count independent runs ------------------------------------------
def _run_records(run_rates, draws=30, dataset="mnist", method="noredu+ks", shift="ko_shift"):
    """Each run rejects all or none of its draws (the draws of a run are copies)."""
    rows = []
    for run, rate in enumerate(run_rates):
        for draw in range(draws):
            rows.append({"dataset": dataset, "model": "none", "kind": "none", "method": method,
                         "dimension": "univariate", "shift": shift, "fraction": 1.0,
                         "n": 10000, "run": run, "draw": draw,
                         "rejected": draw < round(rate * draws)})  # fmt: skip
    return pd.DataFrame(rows)


def test_copies_within_a_run_do_not_narrow_the_interval():
    # 5 runs, 4 detect with all 30 draws, 1 with none: 120/150. Wilson on the 150 draws
    # (today's table) says [72.8, 85.7]; five independent units can say much less.
    rec = _run_records([1, 1, 1, 1, 0])
    cell = proportion_cells(rec, ["method"]).iloc[0]
    wilson = binomtest(120, 150).proportion_ci(method="wilson")
    assert cell["units"] == 5 and cell["rate"] == pytest.approx(0.8)
    assert cell["ci_low"] <= 0.4 and cell["ci_high"] == pytest.approx(1.0)
    assert cell["ci_high"] - cell["ci_low"] > 3 * (wilson.high - wilson.low)
    # with independent draws (every run alike) the interval is no narrower than Wilson's
    flat = proportion_cells(_run_records([0.8] * 5), ["method"]).iloc[0]
    assert flat["ci_low"] <= wilson.low + 1e-12 and flat["ci_high"] >= wilson.high - 1e-12


def test_run_bootstrap_covers_under_the_null_of_correlated_draws():
    # Runs with a random per-run rate (draws within a run correlated): the interval of
    # the pooled rate covers the true mean 0.3 in about 95% of repeats (runs = 8).
    rng = np.random.default_rng(0)
    cover = 0
    for _ in range(150):
        rates = np.clip(rng.normal(0.3, 0.2, size=8), 0, 1)
        rows = [{"dataset": "d", "run": r, "m": "x", "rejected": rng.random() < p}
                for r, p in enumerate(rates) for _ in range(20)]  # fmt: skip
        cell = proportion_cells(pd.DataFrame(rows), ["m"]).iloc[0]
        cover += cell["ci_low"] <= 0.3 <= cell["ci_high"]
    assert cover / 150 >= 0.85  # the draws' Wilson interval alone covers ~60% here


def test_rabanser_tables_pool_data_sets_and_carry_only_zero_forward():
    rec = pd.concat([
        _run_records([1, 0], dataset="mnist"),
        _run_records([0, 0], dataset="cifar10"),
        _run_records([1, 1], dataset="mnist", shift="only_zero_shift+medium_img_shift"
                     ).assign(n=1000),
    ]).assign(protocol="rabanser")  # fmt: skip
    pooled = pooled_accuracy_table(rec).set_index("n")
    # n = 10000: mnist ko (30/60), cifar10 ko (0/60) and only-zero's n = 1000 carried (60/60)
    assert pooled.loc[10000, "rate"] == pytest.approx(90 / 180)
    assert pooled.loc[10000, "units"] == 4
    t1b = rabanser_table1b(pd.concat([rec, _run_records([1, 1], method="uae+mmd")]))
    assert set(t1b["row"]) == {"uae+mmd"}  # the two methods of their Table 1b only
    with pytest.raises(ValueError, match="Table 1b"):
        rabanser_table1b(rec)


# -- ranks with significance --------------------------------------------------------
def test_rank_table_matches_a_hand_computed_friedman_statistic():
    from dgpbench.failing_loudly.ranks import friedman_ranks, rank_table
    from dgpbench.failing_loudly.reporting import with_rows

    # 3 methods x 4 blocks; accuracies chosen so the ranks per block are
    # (1, 2, 3), (1, 3, 2), (1, 2, 3), (2, 1, 3) -> rank sums R = (5, 8, 11)
    acc = {"a+ks": [0.9, 0.8, 0.7, 0.5], "b+ks": [0.5, 0.2, 0.4, 0.6], "c+ks": [0.1, 0.3, 0.2, 0.1]}
    rows = []
    for method, values in acc.items():
        for block, value in enumerate(values):
            for draw in range(10):
                rows.append({"dataset": "mnist", "model": "none", "kind": "none",
                             "method": method, "dimension": "univariate",
                             "shift": f"s{block}", "fraction": 1.0, "n": 10, "run": 0,
                             "draw": draw, "rejected": draw < round(value * 10)})  # fmt: skip
    b, k, r = 4, 3, np.array([5.0, 8.0, 11.0])
    hand = 12 / (b * k * (k + 1)) * (r**2).sum() - 3 * b * (k + 1)  # = 4.5
    table = rank_table(with_rows(pd.DataFrame(rows))).set_index("row")
    assert table["friedman_chi2"].iloc[0] == pytest.approx(hand) == pytest.approx(4.5)
    assert table["mean_rank"].to_dict() == pytest.approx({"a+ks": 1.25, "b+ks": 2.0, "c+ks": 2.75})
    assert list(table.index) == ["a+ks", "b+ks", "c+ks"] and table.loc["a+ks", "position"] == 1
    with pytest.raises(ValueError, match="3 methods"):
        friedman_ranks(pd.DataFrame({"a": [1.0, 2.0], "b": [2.0, 1.0]}))


def test_write_report_writes_the_rank_table(tmp_path):
    rec = _records(RATES)
    write_report(rec, tmp_path, alpha=0.05)
    assert (tmp_path / "fl_ranks.csv").is_file() and (tmp_path / "fl_ranks.md").is_file()


def test_formula_text_from_tags_is_inert_in_csv_and_markdown(tmp_path):
    # --tag values reach the tables as labels
    rec = _records(RATES).assign(dataset='=HYPERLINK("http://x","y")', kind="@cmd")
    write_report(rec, tmp_path, alpha=0.05)
    for name in ("fl_table1a_accuracy", "fl_best_per_shift", "fl_false_positives"):
        for suffix in (".csv", ".md"):
            text = (tmp_path / f"{name}{suffix}").read_text()
            assert suffix == ".md" or "'=HYPERLINK" in text, name
            for line in text.splitlines():
                cells = [c.strip() for c in line.replace("|", ",").split(",")]
                assert not any(c.startswith(("=", "@")) for c in cells), (name, line)


def test_a_pipe_in_a_tag_does_not_split_a_markdown_cell(tmp_path):
    import re

    rec = _records(RATES).assign(dataset="mnist|v2", kind="cnn|big")
    write_report(rec, tmp_path, alpha=0.05)
    for name in ("fl_table1a_accuracy", "fl_best_per_shift", "fl_false_positives"):
        rows = [line for line in (tmp_path / f"{name}.md").read_text().splitlines()
                if line.startswith("|")]  # fmt: skip
        widths = {len(re.split(r"(?<!\\)\|", line)) for line in rows}
        assert len(widths) == 1, (name, rows[:3])
        assert any("mnist\\|v2" in line or "cnn\\|big" in line for line in rows), name
