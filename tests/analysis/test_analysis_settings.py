"""The analysis models' settings follow the authors' analysis code.

ExplainableML/Deep-Graph-Persistence, ``src/neural-persistence-analysis``: Adam at lr 3e-4
(``mlp.py:143``), Xavier-normal weights, batch 32, 40 epochs, 55,000/5,000, an evaluation
every quarter epoch. The paper's text (lr 0.003) stays an option.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from dgpbench.analysis.stacked import train_analysis_seeds
from dgpbench.cli.analysis_curves import _optimiser_args, _train_config
from dgpbench.cli.main import main
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.train import ANALYSIS_LR, ANALYSIS_LR_TEXT, analysis_config

REPO = Path(__file__).resolve().parents[2]


def test_analysis_config_is_the_authors_code():
    cfg = analysis_config("mnist")
    assert cfg.lr == ANALYSIS_LR == 3e-4
    assert (cfg.batch_size, cfg.epochs, cfg.checkpoints_per_epoch) == (32, 40, 4)
    assert (cfg.betas, cfg.eps, cfg.weight_decay) == ((0.9, 0.999), 1e-8, 0.0)
    assert round(cfg.val_fraction * 60000) == 5000
    assert analysis_config("emnist").val_fraction == 0.1
    # the paper's text is an option
    assert analysis_config("mnist", lr=ANALYSIS_LR_TEXT).lr == 3e-3


def test_cli_lr_defaults_to_the_authors_and_takes_the_texts():
    p = argparse.ArgumentParser()
    _optimiser_args(p)
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--checkpoints-per-epoch", type=int, default=4)
    p.add_argument("--threads", type=int, default=None)
    assert _train_config(p.parse_args([])).lr == 3e-4
    assert _train_config(p.parse_args(["--lr", "3e-3"])).lr == 3e-3


@pytest.mark.parametrize("path", ["config.yaml", "config/paper.yaml"])
def test_workflow_configs_train_at_the_authors_lr(path):
    config = yaml.safe_load((REPO / path).read_text())
    assert config["analysis"]["training"]["lr"] == 3e-4
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    training = schema["properties"]["analysis"]["properties"]["training"]["properties"]
    assert training["lr"]["default"] == 3e-4


def test_weights_are_xavier_normal():
    """mlp.py re-initialises every weight with xavier_normal_ (std sqrt(2 / (fan_in +
    fan_out))); biases keep torch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    net = ArchConfig(784, 650, 3, 10).build(generator=torch.Generator().manual_seed(0))
    for layer in (m for m in net if isinstance(m, torch.nn.Linear)):
        fan_out, fan_in = layer.weight.shape
        w = layer.weight.detach().numpy().ravel()
        assert w.std() == pytest.approx(np.sqrt(2 / (fan_in + fan_out)), rel=0.05)
        assert abs(w.mean()) < 4 * w.std() / np.sqrt(w.size)
        assert layer.bias.abs().max() <= 1 / np.sqrt(fan_in)


def _digits(n=200):
    rng = np.random.default_rng(0)
    return rng.random((n, 64), dtype=np.float32), rng.integers(0, 10, n)


def test_train_seeds_refuses_duplicate_runs(tmp_path, capsys):
    """Two seeds under one run id would merge in every per-run table."""
    argv = ["analysis", "train-seeds", "--dataset", "digits", "--epochs", "1", "--layers", "2",
            "--hidden", "4", "--seeds", "0", "1", "--out-dirs", str(tmp_path / "a"),
            str(tmp_path / "b"), "--runs", "digits/x", "digits/x", "--threads", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--runs" in err and "digits/x" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()

    x, y = _digits()
    arch = ArchConfig(64, 4, 2, 10)
    outs = [tmp_path / "p" / "s", tmp_path / "q" / "s"]  # the default ids repeat too
    with pytest.raises(ValueError, match=r"run ids must be distinct.*rename a folder"):
        train_analysis_seeds(x, y, arch, analysis_config("digits", epochs=1), [0, 1], outs,
                             dataset="digits")  # fmt: skip
    with pytest.raises(ValueError, match="run ids must be distinct"):
        train_analysis_seeds(x, y, arch, analysis_config("digits", epochs=1), [0, 1],
                             [tmp_path / "c", tmp_path / "d"], dataset="digits",
                             runs=["r", "r"])  # fmt: skip
    assert not any((tmp_path / n).exists() for n in ("c", "d", "p", "q"))
