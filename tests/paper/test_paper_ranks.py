"""The DGP paper's Table 1 methods ranked with Friedman's and Nemenyi's tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dgpbench.paper.reporting import main_table, table1_ranks


def _records(ratios: dict[str, list[float]], datasets=("mnist",), draws=10) -> pd.DataFrame:
    rows = []
    blocks = [(c, n) for c in ("GB", "GN") for n in (10, 100)]
    for dataset in datasets:
        for method, values in ratios.items():
            for (corruption, n), value in zip(blocks, values, strict=True):
                for draw in range(draws):
                    rows.append({"dataset": dataset, "hidden": 100, "layers": 2, "seed": 0,
                                 "method": method, "corruption": corruption, "intensity": 1,
                                 "n": n, "delta": 0.5, "draw": draw, "kind": "mlp",
                                 "rejected": draw < round(value * draws)})  # fmt: skip
    return pd.DataFrame(rows)


def test_table1_ranks_match_a_hand_computed_friedman_statistic(tmp_path):
    # per block ranks (dgp, tu, softmax): (1,2,3), (1,3,2), (1,2,3), (2,1,3) -> R = (5, 8, 11)
    rec = _records({"dgp": [0.9, 0.8, 0.7, 0.5], "tu": [0.5, 0.2, 0.4, 0.6],
                    "softmax": [0.1, 0.3, 0.2, 0.1]})  # fmt: skip
    table = table1_ranks(rec, tmp_path, methods=("softmax", "tu", "dgp")).set_index("method")
    b, k, r = 4, 3, np.array([5.0, 8.0, 11.0])
    hand = 12 / (b * k * (k + 1)) * (r**2).sum() - 3 * b * (k + 1)
    assert table["friedman_chi2"].iloc[0] == pytest.approx(hand) == pytest.approx(4.5)
    assert table["mean_rank"].to_dict() == pytest.approx({"dgp": 1.25, "tu": 2.0, "softmax": 2.75})
    for suffix in (".csv", ".md", ".tex", ".html"):
        assert (tmp_path / f"table1_ranks{suffix}").stat().st_size > 0


def test_main_table_writes_ranks_pooled_over_data_sets_or_says_why_not(tmp_path):
    rec = _records({"dgp": [0.9, 0.8, 0.7, 0.5], "tu": [0.5, 0.2, 0.4, 0.6],
                    "softmax": [0.1, 0.3, 0.2, 0.1], "magdiff": [0.3, 0.3, 0.3, 0.3]},
                   datasets=("mnist", "fashion-mnist"))  # fmt: skip
    main_table(rec, tmp_path)
    ranks = pd.read_csv(tmp_path / "table1_ranks.csv")
    assert set(ranks["scope"]) == {"mnist", "fashion-mnist", "pooled"}
    assert ranks.loc[ranks["scope"] == "pooled", "blocks"].iloc[0] == 8
    main_table(rec[rec["method"].isin(["dgp", "tu"])], tmp_path / "two")
    assert "Fewer than 3 methods" in (tmp_path / "two" / "table1_ranks.md").read_text()
