"""Checkpoint files: identical bytes for identical runs; a full disk is one line naming the file."""

from __future__ import annotations

import errno

import pytest
import torch

import dgpbench.models.checkpoints
from dgpbench.cli.main import main
from dgpbench.data.datasets import load_dataset
from dgpbench.models.architectures import ArchConfig, build_mlp
from dgpbench.models.checkpoints import load_checkpoint, save_checkpoint
from dgpbench.models.stacked import train_mlp_seeds
from dgpbench.models.train import TrainConfig, train_mlp

_TINY = ["--dataset", "digits", "--hidden", "4", "--layers", "2", "--epochs", "1",
         "--batch-size", "128", "--threads", "1"]  # fmt: skip


def test_the_same_configuration_gives_byte_identical_checkpoints(tmp_path):
    x, y = load_dataset("digits", split="train")
    arch, config = ArchConfig(64, 4, 2, 10), TrainConfig(epochs=1, batch_size=128, threads=1)
    a = train_mlp(x, y, arch, config, tmp_path / "a", progress=False)
    b = train_mlp(x, y, arch, config, tmp_path / "b", progress=False)
    assert a.read_bytes() == b.read_bytes()
    c = train_mlp_seeds(x, y, arch, config, [0], [tmp_path / "c"])
    d = train_mlp_seeds(x, y, arch, config, [0], [tmp_path / "d"])
    assert c[0].read_bytes() == d[0].read_bytes()
    _, meta = load_checkpoint(a)
    assert "seconds" not in meta["metrics"] and "val_acc" in meta["metrics"]


def test_the_train_command_writes_identical_model_files(tmp_path):
    for run in ("a", "b"):
        assert main(["train", *_TINY, "--seeds", "0", "--out-dir", str(tmp_path / run)]) == 0
    assert (tmp_path / "a/h4-l2-s0/model.pt").read_bytes() == (
        tmp_path / "b/h4-l2-s0/model.pt"
    ).read_bytes()


class _FullDisk:
    """A file whose writes fail like a full disk (ENOSPC, no file name)."""

    def __init__(self, *args, **kwargs):
        pass

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_full_disk_is_one_oserror_naming_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(dgpbench.models.checkpoints, "open", _FullDisk, raising=False)
    net = build_mlp(4, 3, 2, 2, generator=torch.Generator().manual_seed(0))
    target = tmp_path / "epoch_01.00.pt"
    with pytest.raises(OSError) as exc:
        save_checkpoint(target, net, {"arch": ArchConfig(4, 3, 2, 2)})
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []  # no temporary file left


def test_a_full_disk_during_training_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dgpbench.models.checkpoints, "open", _FullDisk, raising=False)
    assert main(["train", *_TINY, "--seed", "0", "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert "epoch_01.00.pt" in err and ".tmp" not in err


def test_a_file_size_limit_hit_by_the_checkpoint_is_one_line(tmp_path):
    # A real write failure inside torch's own path: the process may write files of 16 KB at
    # most (split.npz is 15 KB, the checkpoint of a 64-unit MLP 20 KB). Before, torch's zip
    # writer failed with two RuntimeError tracebacks.
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))\n"
        "from dgpbench.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = [*_TINY, "--seed", "0", "--out-dir", str(tmp_path)]
    args[args.index("--hidden") + 1] = "64"
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        # -B: the limit would truncate any .pyc the child wrote
        [sys.executable, "-B", "-c", code, "train", *args],
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(repo),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "PATH": "/usr/bin:/bin",
        },
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "File too large" in lines[0] and "epoch_01.00.pt" in lines[0]
    assert not (tmp_path / "model.pt").exists()
