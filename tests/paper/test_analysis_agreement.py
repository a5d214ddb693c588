"""The R² comparison's agreement criterion: beside the 2-point tolerance,
the published value inside our bootstrap interval, and a sign test over a column's cells
(12 of 12 on one side is flagged, not averaged away)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom, norm

from dgpbench.cli.main import main
from dgpbench.paper.comparisons.r2 import sign_test

# Appendix G.1, MNIST relu (hidden layers x width: R² x 100) and our 12 cells at lr 3e-3
PAPER = {(1, 50): 97.87, (1, 100): 96.95, (1, 250): 98.93, (1, 650): 98.82,
         (2, 50): 98.24, (2, 100): 98.91, (2, 250): 99.48, (2, 650): 99.58,
         (3, 50): 98.94, (3, 100): 99.09, (3, 250): 99.69, (3, 650): 99.36}  # fmt: skip
OURS_3E3 = [91.49, 94.43, 98.33, 97.48, 97.91, 96.81, 94.12, 96.03, 98.12, 97.81, 94.81, 95.28]


def test_twelve_of_twelve_below_is_flagged():
    out = sign_test(np.array(OURS_3E3) - np.array(list(PAPER.values())))
    assert (out["n_below"], out["n_above"]) == (12, 0)
    assert out["sign_test_p"] == pytest.approx(2 * 0.5**12)  # exact two-sided
    assert out["one_sided"] == 1.0


@pytest.mark.parametrize(
    ("diff", "p"),
    [
        ([1.0, -1.0], 1.0),
        ([-0.5] * 5, 2 * 0.5**5),  # 5 cells can never reach p < 0.05
        ([-1.0] * 10 + [2.0] * 2, 2 * (1 + 12 + 66) / 4096),
        ([-1.0, 0.0, np.nan, 1e-9], 1.0),  # a tie and a NaN are left out
    ],
)
def test_sign_test_oracles(diff, p):
    out = sign_test(diff)
    assert out["sign_test_p"] == pytest.approx(p)
    assert out["one_sided"] == float(p < 0.05)


def test_sign_test_without_cells_is_nan():
    out = sign_test([])
    assert np.isnan(out["sign_test_p"]) and np.isnan(out["one_sided"])
    assert (out["n_below"], out["n_above"]) == (0, 0)


def _flag_rate(n: int, q: float) -> float:
    """Exact share of flagged columns of ``n`` cells, each below the paper with probability
    ``q`` (the flag depends only on how many lie below)."""
    flags = [sign_test([-1.0] * k + [1.0] * (n - k))["one_sided"] for k in range(n + 1)]
    return float(np.dot(binom.pmf(np.arange(n + 1), n, q), flags))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8, 12, 20, 30])
def test_sign_test_is_calibrated_under_the_null(n):
    """Cells above or below the paper at random: flagged at most 5% of the time (exactly
    computed), never with 5 cells or fewer."""
    rate = _flag_rate(n, 0.5)
    assert rate <= 0.05
    if n <= 5:
        assert rate == 0.0


def test_sign_test_has_power_against_a_shift():
    """Cells one noise standard deviation below the paper (each below with probability
    Phi(1) = 0.84): a 12-cell column is flagged more often than not; 20 cells almost always."""
    q = norm.cdf(1.0)
    assert _flag_rate(12, q) > 0.6
    assert _flag_rate(20, q) > 0.9


def test_compare_paper_r2_reports_the_sign_test(tmp_path):
    fits = tmp_path / "r2.csv"
    keys = list(PAPER)
    pd.DataFrame(
        {
            "dataset": "mnist",
            "activation": "relu",
            "n_layers": [k + 1 for k, _ in keys],
            "hidden": [h for _, h in keys],
            "n": 20,
            "r2_pct": OURS_3E3,
        }
    ).to_csv(fits, index=False)
    out = tmp_path / "out"
    assert main(["compare-paper", "r2", "--input", str(fits), "--out-dir", str(out)]) == 0
    summary = pd.read_csv(out / "comparison_r2_summary.csv")
    row = summary.iloc[-1]
    assert (row["n_below"], row["n_above"]) == (12, 0)
    assert row["sign_test_p"] == pytest.approx(2 * 0.5**12, rel=1e-5)
    assert row["one_sided"] == 1.0
    md = (out / "comparison_r2.md").read_text()
    assert "sign test" in md and "one_sided" in md
