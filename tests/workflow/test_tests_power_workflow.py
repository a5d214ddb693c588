"""protocol.tests: the paper's protocol with other two-sample tests and table_tests_power."""

from __future__ import annotations

import pandas as pd
import pytest
from _workflow import CORES, config_problem, copy_tiny_grid, snakemake, tiny_config


def _config(**protocol):
    config = tiny_config(methods=["dgp"])
    config["protocol"] = {**config["protocol"], **protocol}
    return config


def test_an_unknown_or_label_test_is_refused_naming_the_key(tmp_path):
    for bad in (["ks", "ttest"], ["chi2"]):
        problem = config_problem(tmp_path, _config(tests=bad), "tests_power")
        assert problem is not None and "protocol.tests" in problem


def test_the_default_runs_no_test_but_ks(tmp_path, default_dry_run):
    assert config_problem(tmp_path, tiny_config()) is None
    # config.yaml, like tiny_config, leaves protocol.tests to the schema's default
    assert "detect_test" not in default_dry_run and "tests_power" not in default_dry_run


@pytest.mark.slow
def test_tests_power_table_ranks_the_tests_on_the_same_draws(tmp_path, tiny_grid):
    copy_tiny_grid(tiny_grid, tmp_path)  # its model, images and DGP features
    config = _config(tests=["ks", "cvm", "energy"], test_methods=["dgp"], n_permutations=49)
    proc = snakemake(tmp_path, config, "tests_power", cores=CORES, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the grid's KS detections are reused: the other tests' keys are not theirs to rerun on
    assert "rule detect:" not in proc.stderr + proc.stdout
    table = pd.read_csv(tmp_path / "results" / "tables" / "table_tests_power.csv")
    assert set(table["Test"]) == {"KS", "CvM", "Energy"}
    assert set(table["Batch"]) == {"n = 10", "n = 50", "clean (level)"}
    assert table["ratio_pct"].between(0, 100).all()
    md = (tmp_path / "results" / "tables" / "table_tests_power.md").read_text()
    assert "CvM" in md and "clean (level)" in md
