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
    proportion_cells,
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
    for name in ("fl_table1a_accuracy", "fl_table1b_best", "fl_false_positives"):
        assert (tmp_path / f"{name}.csv").is_file() and (tmp_path / f"{name}.md").is_file()


def test_no_calibration_draws_is_an_error():
    rec = _records({("pca+ks", "none", "ko_shift"): 0.5})
    with pytest.raises(ValueError, match="calibration"):
        false_positive_table(rec, alpha=0.05)
    assert np.isfinite(accuracy_table(rec)["rate"]).all()
