"""Tables and figures from synthetic bootstrap records with known detection rates."""

import itertools

import numpy as np
import pandas as pd
import pytest

from dgpbench.paper import reporting


def _records(rates: dict[tuple[str, str], float], draws: int = 40, seed: int = 0) -> pd.DataFrame:
    """Records whose detection ratio per (method, corruption) is exactly ``rate``."""
    rng = np.random.default_rng(seed)
    rows = []
    for (method, corruption), rate in rates.items():
        for dataset, model, n, delta in itertools.product(
            ["mnist", "digits"], ["h8-l2-s0", "h8-l2-s1"], [10, 20, 50], [0.25, 0.5]
        ):
            k = round(rate * draws)
            rejected = np.zeros(draws, dtype=bool)
            rejected[rng.permutation(draws)[:k]] = True
            for draw in range(draws):
                rows.append(
                    dict(
                        dataset=dataset,
                        model=model,
                        method=method,
                        corruption=corruption,
                        intensity=1,
                        n=n,
                        delta=delta,
                        draw=draw,
                        rejected=rejected[draw],
                        min_p=0.5,
                    )
                )
    for dataset, method, n in itertools.product(["mnist", "digits"], ["tu", "dgp"], [10, 20, 50]):
        for draw in range(draws):
            rows.append(
                dict(
                    dataset=dataset,
                    model="h8-l2-s0",
                    method=method,
                    corruption="none",
                    intensity=0,
                    n=n,
                    delta=0.0,
                    draw=draw,
                    rejected=draw < 2,
                    min_p=0.5,
                )
            )
    return pd.DataFrame(rows)


RATES = {
    ("softmax", "GN"): 0.5,
    ("tu", "GN"): 0.25,
    ("magdiff", "GN"): 0.75,
    ("dgp", "GN"): 0.5,
    ("softmax", "PD"): 0.1,
    ("tu", "PD"): 0.6,
    ("magdiff", "PD"): 0.2,
    ("dgp", "PD"): 0.3,
    ("tu_norm", "GN"): 0.3,
    ("dgp_nonorm", "GN"): 0.4,
    ("tu_norm", "PD"): 0.3,
    ("dgp_nonorm", "PD"): 0.2,
}


@pytest.fixture(scope="module")
def rates_figures(tmp_path_factory):
    """Every figure of :data:`RATES`' records, drawn once (the folder, the files written)."""
    folder = tmp_path_factory.mktemp("figures")
    return folder, reporting.figures(_records(RATES), folder)


def test_main_table_values_bold_and_star(tmp_path):
    cells = reporting.main_table(_records(RATES), tmp_path)
    gn = cells[(cells["corruption"] == "GN") & (cells["dataset"] == "mnist") & (cells["n"] == 10)]
    got = dict(zip(gn["method"], gn["ratio_pct"], strict=True))
    assert got == pytest.approx({"softmax": 50.0, "tu": 25.0, "magdiff": 75.0, "dgp": 50.0})
    assert set(gn.loc[gn["best"], "method"]) == {"magdiff"}
    assert set(gn.loc[gn["star"], "method"]) == {"dgp"}
    pd_ = cells[(cells["corruption"] == "PD") & (cells["n"] == 10) & (cells["dataset"] == "mnist")]
    assert set(pd_.loc[pd_["best"], "method"]) == {"tu"}
    assert set(pd_.loc[pd_["star"], "method"]) == {"tu"}
    md = (tmp_path / "table1_shift_detection.md").read_text()
    assert "**75.0**" in md and "50.0*" in md
    assert md.split("\n")[2].replace(" ", "").startswith("|n|Method|")
    tex = (tmp_path / "table1_shift_detection.tex").read_text()
    assert r"\textbf{75.0}" in tex and r"\begin{tabular}" in tex
    csv = pd.read_csv(tmp_path / "table1_shift_detection.csv")
    assert {"ratio_pct", "ci_low_pct", "ci_high_pct", "n_draws"} <= set(csv.columns)
    assert (csv["ci_low_pct"] <= csv["ratio_pct"]).all() and (
        csv["ratio_pct"] <= csv["ci_high_pct"]
    ).all()


def test_ablation_and_calibration_tables(tmp_path):
    rec = _records(RATES)
    cells = reporting.ablation_tables(rec, tmp_path, ["mnist"], ns_main=[20, 50])
    assert set(cells["dataset"]) == {"mnist"}
    assert set(cells["method"]) == {"tu", "tu_norm", "dgp_nonorm", "dgp"}
    short = (tmp_path / "table2_ablation.md").read_text()
    assert "TU (+ norm)" in short and "DGP (- norm)" in short
    assert "10 /" not in short  # n = 10 only in the full table
    cal = reporting.calibration_table(rec, tmp_path)
    assert np.allclose(cal["ratio_pct"], 5.0)  # 2 of 40 draws rejected everywhere


def test_tables_are_byte_identical_on_rerun(tmp_path, rates_figures):
    rec = _records(RATES)
    for out in ("a", "b"):
        reporting.main_table(rec, tmp_path / out)
    for name in (
        "table1_shift_detection.csv",
        "table1_shift_detection.md",
        "table1_shift_detection.tex",
    ):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    for name in ("fig_gn_by_n.png", "fig_gn_by_delta.png", "fig_overview.png", "fig_overview.pdf"):
        assert (rates_figures[0] / name).stat().st_size > 1000


def test_figures_exist_even_without_gaussian_noise(tmp_path):
    rec = _records({k: v for k, v in RATES.items() if k[1] != "GN"})
    written = reporting.figures(rec, tmp_path)
    for stem in ("fig_gn_by_n", "fig_gn_by_delta", "fig_overview"):
        for ext in (".png", ".pdf"):
            assert (tmp_path / f"{stem}{ext}").stat().st_size > 500
    assert tmp_path / "fig_gn_by_n.png" in written


def test_tables_pool_the_configured_deltas(tmp_path):
    # delta 0.25 at rate 0.5, and a delta 1.0 block that always detects: pooling {0.25, 1.0}
    # gives 75%, pooling {0.25} 50%; calibration rows (delta 0) are always kept.
    rec = _records({("dgp", "GN"): 0.5})
    rec = rec[rec["delta"] != 0.5]
    always = rec[rec["delta"] == 0.25].assign(delta=1.0, rejected=True)
    rec = pd.concat([rec, always], ignore_index=True)
    for deltas, expected in (([0.25, 1.0], 75.0), ([0.25], 50.0), (None, 75.0)):
        pooled = reporting.pooled_records(rec, deltas)
        assert (pooled["delta"] == 0).sum() == (rec["delta"] == 0).sum()
        cells = reporting.main_table(pooled, tmp_path, methods=["dgp"])
        assert cells["ratio_pct"].to_numpy() == pytest.approx(expected)
    with pytest.raises(ValueError, match=r"pooled deltas \[0\.75\] have no records"):
        reporting.pooled_records(rec, [0.25, 0.75])


def test_cli_tables_and_figures_pool_deltas(tmp_path):
    from dgpbench.cli.main import main

    rec = _records({("dgp", "GN"): 0.5, ("tu", "GN"): 0.25})
    rec.loc[rec["delta"] == 0.5, "rejected"] = True
    path = tmp_path / "records.csv"
    rec.to_csv(path, index=False)
    code = main(["tables", "--records", str(path), "--methods", "tu", "dgp",
                 "--pool-deltas", "0.25", "--out-dir", str(tmp_path / "t")])  # fmt: skip
    assert code == 0
    table = pd.read_csv(tmp_path / "t" / "table1_shift_detection.csv")
    assert set(table["ratio_pct"]) == {25.0, 50.0}
    code = main(["figures", "--records", str(path), "--methods", "tu", "dgp",
                 "--pool-deltas", "0.25", "1.0", "--out-dir", str(tmp_path / "f")])  # fmt: skip
    assert code == 2  # delta 1.0 was not run


def test_calibration_caption_states_the_configured_alpha(tmp_path):
    rec = _records(RATES)
    reporting.calibration_table(rec, tmp_path, alpha=0.01)
    for ext, caption in ((".md", "alpha = 1%"), (".tex", r"alpha = 1\%")):
        text = (tmp_path / f"table_appendix_calibration{ext}").read_text()
        assert caption in text and "alpha = 5" not in text
    reporting.calibration_table(rec, tmp_path, alpha=0.1)
    assert "alpha = 10%" in (tmp_path / "table_appendix_calibration.md").read_text()


def _auroc_by_pairs(pos: np.ndarray, neg: np.ndarray) -> float:
    """Brute-force AUROC: share of (shifted, clean) pairs ordered right, ties counting half."""
    pairs = [(p < q) + 0.5 * (p == q) for p in pos for q in neg]
    return float(np.mean(pairs))


def _p_records(seed: int = 0) -> pd.DataFrame:
    """Records with random min p-values (with ties), clean and shifted, two methods."""
    rng = np.random.default_rng(seed)
    rows = []
    for method, corruption, n in itertools.product(["tu", "dgp"], ["GN", "PD", "none"], [10, 20]):
        shifted = corruption != "none"
        for model, draw in itertools.product(["h8-l2-s0", "h8-l2-s1"], range(15)):
            p = rng.choice([0.01, 0.2, 0.5, 1.0]) if rng.random() < 0.3 else rng.random()
            rows.append(
                dict(
                    dataset="digits",
                    model=model,
                    method=method,
                    corruption=corruption,
                    intensity=int(shifted),
                    n=n,
                    delta=0.5 if shifted else 0.0,
                    draw=draw,
                    rejected=False,
                    min_p=p * (0.3 if shifted else 1.0),
                    n_features=10,
                )
            )
    return pd.DataFrame(rows)


def test_auroc_matches_pairwise_count_and_table_files(tmp_path):
    rec = _p_records()
    cells = reporting.auroc_table(rec, tmp_path, methods=["tu", "dgp"])
    assert len(cells) == 2 * 2 * 2  # method x corruption x n
    clean = rec[rec["corruption"] == "none"]
    for row in cells.itertuples():
        pos = rec[(rec["method"] == row.method) & (rec["corruption"] == row.corruption)]
        pos = pos[pos["n"] == row.n]["min_p"].to_numpy()
        neg = clean[(clean["method"] == row.method) & (clean["n"] == row.n)]["min_p"].to_numpy()
        assert row.auroc == pytest.approx(_auroc_by_pairs(pos, neg))
        assert (row.n_shifted, row.n_clean) == (30, 30)
    md = (tmp_path / "table_auroc.md").read_text()
    best = cells.loc[cells["best"]].iloc[0]
    assert f"**{best.auroc:.3f}**" in md
    assert (tmp_path / "table_auroc.tex").read_text().count(r"\textbf{") == cells["best"].sum()
    assert set(pd.read_csv(tmp_path / "table_auroc.csv")["method"]) == {"tu", "dgp"}


def test_auroc_extremes():
    rec = _p_records()
    rec.loc[rec["corruption"] != "none", "min_p"] = 1e-9  # every shifted batch below every clean
    assert np.allclose(reporting.auroc_cells(rec)["auroc"], 1.0)
    rec["min_p"] = 0.3  # all tied: chance
    assert np.allclose(reporting.auroc_cells(rec)["auroc"], 0.5)


def test_auroc_table_without_calibration_draws_says_so(tmp_path):
    rec = _p_records()
    reporting.auroc_table(rec[rec["corruption"] != "none"], tmp_path)
    assert "No calibration" in (tmp_path / "table_auroc.md").read_text()


def test_calibration_figure_and_wilson_bands(tmp_path, rates_figures):
    import matplotlib.pyplot as plt

    rec = _records(RATES)
    folder, written = rates_figures
    assert folder / "fig_calibration.png" in written
    assert (folder / "fig_calibration.pdf").stat().st_size > 1000
    # One Wilson band (a filled polygon) per method in every panel of the GN-by-n figure.
    captured = []
    original = plt.Axes.fill_between

    def spy(self, *args, **kwargs):
        captured.append((np.asarray(args[1]), np.asarray(args[2])))
        return original(self, *args, **kwargs)

    plt.Axes.fill_between = spy
    try:
        reporting.figures(rec[rec["corruption"] == "GN"], tmp_path / "again", methods=["tu"])
    finally:
        plt.Axes.fill_between = original
    cells = reporting.detection_cells(
        rec[(rec["corruption"] == "GN") & (rec["method"] == "tu")], ["dataset", "n"]
    )
    lows = sorted(np.round(np.concatenate([lo for lo, _ in captured]), 6))
    assert set(np.round(cells["ci_low_pct"], 6)) <= set(lows)
