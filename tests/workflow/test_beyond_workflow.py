"""config/beyond.yaml: it dry-runs, the default grid stays as it was, and a tiny version of it
(digits, one MLP and one CNN, rotation and knock-out) runs end to end."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from _workflow import CORES, REPO, config_problem, copy_tiny_grid, snakemake, tiny_config

BEYOND = REPO / "config" / "beyond.yaml"


def _snakemake(workdir: Path, config: dict, *args: str, timeout: float = 300):
    return snakemake(
        workdir, config, *args, cores=CORES, profile="local", via_dgpbench=True, timeout=timeout
    )


def test_beyond_config_dry_runs(tmp_path):
    config = yaml.safe_load(BEYOND.read_text())
    # plain Snakemake: its plan is the same as `dgpbench run`'s, one interpreter start sooner
    proc = snakemake(tmp_path, config, "-n", "-p", cores=CORES, profile="local")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    for dataset in ("mnist", "fashion-mnist"):
        assert f"models/{dataset}/cnn-h100-l4-s2/model.pt" in out
        assert f"models/{dataset}/h100-l2-s0/model.pt" in out
        for code in ("RO", "ZO", "TR", "SH", "GN"):
            assert f"images/{dataset}/{code}.npz" in out
    assert "dgpbench train-cnn" in out and "--channels 8 16" in out
    assert "--knockout-intensities 1 2 3 4 5 6 --knockout-class 0" in out
    assert "table_beyond_shifts.md" in out and "table_cnn.md" in out
    assert not (tmp_path / "results").exists()


def test_default_config_has_no_cnn_and_no_new_shift(default_dry_run):
    out = default_dry_run
    assert "train-cnn" not in out and "cnn-" not in out and "--knockout" not in out
    for code in ("RO", "ZO", "TR", "SH"):
        assert f"{code}.npz" not in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": ["mlp", "vgg"]}, "vgg"),
        ({"cnn_channels": [8]}, "cnn_channels"),
    ],
)
def test_bad_model_kind_is_refused_naming_it(tmp_path, change, message):
    config = yaml.safe_load(BEYOND.read_text())
    config["models"].update(change)
    problem = config_problem(tmp_path, config)
    assert problem is not None and message in problem


def tiny_beyond_config() -> dict:
    config = yaml.safe_load(BEYOND.read_text())
    config.update(
        datasets=["digits"],
        methods=["dgp"],
        ablation={"datasets": [], "methods": ["dgp"], "ns": [10]},
        models={"kind": ["mlp", "cnn"], "hidden": [16], "layers": [2], "seeds": [0],
                "activation": "relu", "cnn_channels": [4, 8]},
        training=tiny_config()["training"],  # the shared tiny grid's MLP and images
        images=tiny_config()["images"],
        corruptions=["RO"],
        intensities=[6],
        label_shift={"intensities": [6], "knockout_class": 0},
        protocol={"ns": [10, 50], "deltas": [0.5], "draws": 10, "seed": 112, "alpha": 0.05,
                  "correction": "bonferroni"},
        report={"pool_deltas": [0.5]},
    )  # fmt: skip
    return config


@pytest.mark.slow
def test_tiny_beyond_run(tmp_path, tiny_grid):
    copy_tiny_grid(tiny_grid, tmp_path)  # its MLP and images: only the CNN trains
    proc = _snakemake(tmp_path, tiny_beyond_config())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    tables = tmp_path / "results" / "tables"
    beyond = pd.read_csv(tables / "table_beyond_shifts.csv")
    assert set(beyond["Shift"]) == {"RO", "KO"} and set(beyond["Method"]) == {"DGP"}
    assert (beyond["n_draws"] == 10).all()  # one MLP, one intensity, one delta
    cnn = pd.read_csv(tables / "table_cnn.csv")
    assert set(cnn["Shift"]) == {"RO", "KO"} and (cnn["n_draws"] == 10).all()
    # no paper corruption configured: the paper's table says so
    assert "No MLP" in (tables / "table1_shift_detection.md").read_text()
    records = pd.read_csv(tmp_path / "results" / "aggregate" / "records.csv.gz")
    assert set(records["kind"]) == {"mlp", "cnn"}
    assert (records.loc[records["model"] == "cnn-h16-l2-s0", "kind"] == "cnn").all()
    for stem in ("table_cnn_calibration.md", "table_cnn.tex"):
        assert (tables / stem).stat().st_size > 100
    assert (tmp_path / "results" / "figures" / "fig_beyond.png").stat().st_size > 1000
