"""`dgpbench train` / `train-cnn`: one seeded folder per seed, the device honoured or refused,
and no old model left beside a new run's files."""

from __future__ import annotations

import pytest
import torch

from dgpbench.cli.main import main
from dgpbench.models.checkpoints import load_checkpoint
from dgpbench.models.stacked import train_mlp_seeds

_TINY = ["--dataset", "digits", "--hidden", "4", "--layers", "2", "--epochs", "1",
         "--batch-size", "128", "--threads", "1"]  # fmt: skip


def _weights(path):
    model, meta = load_checkpoint(path)
    return {k: v.clone() for k, v in model.state_dict().items()}, meta


def test_train_cnn_seeds_trains_one_seeded_folder_per_seed(tmp_path):
    for run in ("a", "b"):
        assert (
            main(["train-cnn", *_TINY, "--seeds", "0", "1", "--out-dir", str(tmp_path / run)]) == 0
        )
    for seed in (0, 1):
        name = f"cnn-h4-l2-s{seed}"
        first, meta = _weights(tmp_path / "a" / name / "model.pt")
        second, _ = _weights(tmp_path / "b" / name / "model.pt")
        assert meta["train_config"]["seed"] == seed and meta["kind"] == "cnn"
        assert all(torch.equal(first[k], second[k]) for k in first)  # seeded: identical runs
    s0, _ = _weights(tmp_path / "a" / "cnn-h4-l2-s0" / "model.pt")
    s1, _ = _weights(tmp_path / "a" / "cnn-h4-l2-s1" / "model.pt")
    assert not all(torch.equal(s0[k], s1[k]) for k in s0)  # two seeds, two models


def test_train_cnn_single_seed_is_recorded(tmp_path):
    assert main(["train-cnn", *_TINY, "--seed", "3", "--out-dir", str(tmp_path)]) == 0
    assert _weights(tmp_path / "model.pt")[1]["train_config"]["seed"] == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
@pytest.mark.parametrize("command", ["train", "train-cnn"])
def test_a_cuda_request_without_a_gpu_is_refused(tmp_path, capsys, command):
    code = main([command, *_TINY, "--seed", "0", "--device", "cuda", "--out-dir", str(tmp_path)])
    assert code == 2
    assert "cuda" in capsys.readouterr().err.lower()
    assert not (tmp_path / "model.pt").exists()


def test_the_cnn_rule_passes_the_training_device():
    from pathlib import Path

    rule = (Path(__file__).resolve().parents[2] / "workflow" / "rules" / "cnn.smk").read_text()
    assert "--device {params.train[device]}" in rule


@pytest.mark.parametrize("command", ["train", "train-cnn"])
def test_a_killed_rerun_leaves_no_old_model_beside_new_files(tmp_path, monkeypatch, command):
    import dgpbench.models.checkpoints

    assert main([command, *_TINY, "--seed", "0", "--out-dir", str(tmp_path)]) == 0
    old_metrics = (tmp_path / "metrics.csv").read_bytes()

    def killed(*args, **kwargs):  # the process dies where the final checkpoint is written
        raise KeyboardInterrupt

    monkeypatch.setattr(dgpbench.models.checkpoints.torch, "save", killed)
    assert main([command, *_TINY, "--seed", "1", "--out-dir", str(tmp_path)]) == 130
    assert not (tmp_path / "model.pt").exists()  # never the old seed's model with new files
    assert (tmp_path / "metrics.csv").read_bytes() != old_metrics


@pytest.mark.parametrize("out_dirs", ["md", b"md", None])
def test_train_mlp_seeds_refuses_a_single_path_as_out_dirs(tmp_path, out_dirs):
    from pathlib import Path

    from dgpbench.data.datasets import load_dataset
    from dgpbench.models.architectures import ArchConfig
    from dgpbench.models.train import TrainConfig

    x, y = load_dataset("digits", split="train")
    dirs = tmp_path / "md" if out_dirs is None else out_dirs
    with pytest.raises(TypeError, match="out_dirs must be a sequence"):
        train_mlp_seeds(x, y, ArchConfig(64, 4, 2, 10), TrainConfig(epochs=1), [0, 1], dirs)
    assert not Path("m").exists() and not Path("d").exists()
