"""A user's own models (config models.user: a .pt2 file, a factory) beside the trained grid."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import torch
from _workflow import CORES, snakemake, tiny_config
from torch import nn

from dgpbench.cli.main import main

FACTORY = """\
import torch
from torch import nn


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
"""


def _snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    return snakemake(
        workdir, config, *args, cores=CORES, profile="local", importable=True, timeout=600
    )


def _setup(tmp_path: Path) -> dict:
    torch.manual_seed(1)
    net = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10),
    ).eval()  # fmt: skip
    torch.export.save(torch.export.export(net, (torch.zeros(2, 1, 8, 8),)), tmp_path / "my cnn.pt2")
    (tmp_path / "user_factory_20a.py").write_text(FACTORY)
    user = {
        "cnn": {"dataset": "digits", "model": str(tmp_path / "my cnn.pt2")},
        "mlp": {"dataset": "digits", "model": "user_factory_20a:net"},
    }
    return tiny_config(models={**tiny_config()["models"], "user": user})


def test_user_models_join_the_grid(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    dry = _snakemake(tmp_path, config, "-n", "-p")
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-3000:]
    for model in ("user-cnn", "user-mlp", "h16-l2-s0"):
        for method in ("softmax", "dgp"):
            assert f"results/detect/digits/{model}/{method}.csv" in out
    # the file name with a space reaches the shell quoted; the factory as given
    assert f"--model '{tmp_path / 'my cnn.pt2'}'" in out
    assert "--model user_factory_20a:net" in out


def test_user_model_features_detect_and_aggregate(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    target = "results/detect/digits/user-cnn/softmax.csv"
    run = _snakemake(tmp_path, config, target, "results/detect/digits/user-mlp/softmax.csv")
    assert run.returncode == 0, run.stderr[-3000:]
    assert not (tmp_path / "results" / "models").exists()  # nothing trained for them
    out = tmp_path / "records.csv"
    mlp = tmp_path / "results/detect/digits/user-mlp/softmax.csv"
    assert main(["aggregate", str(tmp_path / target), str(mlp), "--out", str(out)]) == 0
    records = pd.read_csv(out)
    assert set(records["model"]) == {"user-cnn", "user-mlp"}
    assert set(records["kind"]) == {"user"} and records["hidden"].isna().all()
    assert records["rejected"].notna().all() and len(records) > 0
