"""`dgpbench detect --test` and `dgpbench tests-power` by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgpbench.cli.main import main
from dgpbench.io import save_npz


def _features(path):
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(200, 3))
    save_npz(path, clean=clean, GN_6=clean + 2.0)


def test_detect_with_another_test_tags_its_records_and_feeds_the_power_table(tmp_path):
    _features(tmp_path / "f.npz")
    common = ["detect", "--features", str(tmp_path / "f.npz"), "--ns", "10", "30",
              "--deltas", "1.0", "--draws", "10", "--tag", "dataset=toy",
              "--tag", "model=h16-l2-s0", "--tag", "method=dgp"]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "ks.csv")]) == 0
    assert main([*common, "--test", "cvm", "--out", str(tmp_path / "cvm.csv")]) == 0
    ks, cvm = pd.read_csv(tmp_path / "ks.csv"), pd.read_csv(tmp_path / "cvm.csv")
    assert "test" not in ks and set(cvm["test"]) == {"cvm"}
    assert len(ks) == len(cvm) and cvm.loc[cvm["delta"] > 0, "rejected"].all()
    out = tmp_path / "tables"
    assert main(["tests-power", "--records", str(tmp_path / "ks.csv"), str(tmp_path / "cvm.csv"),
                 "--out-dir", str(out)]) == 0  # fmt: skip
    table = pd.read_csv(out / "table_tests_power.csv")
    assert set(table["Test"]) == {"KS", "CvM"}
    assert set(table["Batch"]) == {"n = 10", "n = 30", "clean (level)"}


def test_an_unknown_test_is_exit_2_and_writes_nothing(tmp_path, capsys):
    _features(tmp_path / "f.npz")
    out = tmp_path / "rec.csv"
    code = main(["detect", "--features", str(tmp_path / "f.npz"), "--ns", "10", "--deltas",
                 "0.5", "--test", "ttest", "--out", str(out)])  # fmt: skip
    assert code == 2 and not out.exists()
    assert "unknown test 'ttest'" in capsys.readouterr().err
