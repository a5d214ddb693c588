"""A user's own models (config models.user: a .pt2 file, a factory) beside the trained grid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch
import yaml
from _workflow import REPO, SNAKEFILE, tiny_config, venv_env
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
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    env = venv_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(workdir), env.get("PYTHONPATH")) if p)
    command = [
        sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--directory",
        str(workdir), "--cores", "2", "--profile", str(REPO / "workflow" / "profiles" / "local"),
        *args,
    ]  # fmt: skip
    return subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


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
