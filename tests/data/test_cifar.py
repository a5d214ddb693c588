"""Rabanser et al.'s other data set, CIFAR-10, through the fl-* steps (tiny files the
test writes in torchvision's layout; the real data set is not offline here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from test_data import write_cifar

from dgpbench.cli.main import main
from dgpbench.io import load_npz


def test_cifar10_runs_through_images_shifts_features_detect_and_report(tmp_path):
    write_cifar(tmp_path / "data", n_per_batch=60, seed=3)
    pools = tmp_path / "pools.npz"
    assert main(["fl-images", "--dataset", "cifar10", "--data-root", str(tmp_path / "data"),
                 "--n-fit", "60", "--n-ref-pool", "60", "--n-test-pool", "60", "--runs", "2",
                 "--out", str(pools)]) == 0  # fmt: skip
    arrays = load_npz(pools)
    assert arrays["x_unseen"].shape[1:] == (3, 32, 32) and arrays["run_test"].shape == (2, 60)
    shifts = []
    for shift in ("medium_image_shift", "large_gn_shift"):
        shifts.append(str(tmp_path / f"{shift}.npz"))
        assert main(["fl-shift", "--images", str(pools), "--shift", shift, "--protocol",
                     "rabanser", "--fractions", "1.0", "--out", shifts[-1]]) == 0  # fmt: skip
    records = []
    for rep, method in (("noredu", "noredu+ks"), ("pca", "pca+mmd")):
        feats = tmp_path / f"{rep}.npz"
        assert (
            main(
                [
                    "fl-features",
                    "--representation",
                    rep,
                    "--images",
                    str(pools),
                    "--shifts",
                    *shifts,
                    "--protocol",
                    "rabanser",
                    "--out",
                    str(feats),
                ]
            )
            == 0
        )
        if rep == "pca":  # Rabanser et al.'s dr_amount
            assert load_npz(feats)["unseen"].shape[1] == 32
        records.append(str(tmp_path / f"{method}.csv"))
        assert main(["fl-detect", "--features", str(feats), "--method", method, "--ns", "10",
                     "30", "--draws", "2", "--n-permutations", "20", "--protocol", "rabanser",
                     "--tag", "dataset=cifar10", "--tag", "model=none", "--tag", "kind=none",
                     "--out", records[-1]]) == 0  # fmt: skip
    rec = pd.concat([pd.read_csv(p) for p in records])
    assert set(rec["run"]) == {0, 1} and set(rec["protocol"]) == {"rabanser"}
    assert set(rec["shift"]) == {"none", "medium_image_shift", "large_gn_shift"}
    # 2 runs x 3 cells x 2 sizes x 2 draws per method; every p-value a probability
    assert rec.groupby("method").size().eq(24).all() and rec["p_value"].between(0, 1).all()
    assert main(["fl-report", *records, "--out-dir", str(tmp_path / "tables")]) == 0
    table = pd.read_csv(tmp_path / "tables" / "fl_table1a_accuracy.csv")
    assert set(table["dataset"]) == {"cifar10"} and np.isfinite(table["rate"]).all()
