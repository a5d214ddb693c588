"""Mistakes that used to end in an unclear or late error now name the problem."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _workflow import snakemake, tiny_config

from dgpbench import SoftmaxFeatures
from dgpbench.cli.main import main
from dgpbench.io import atomic_path, save_npz
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.checkpoints import load_checkpoint, save_checkpoint
from dgpbench.topology.graphs import MLPGraph


def _model() -> torch.nn.Sequential:
    return ArchConfig(12, 5, 2, 3).build(torch.Generator().manual_seed(0))


# --- configuration ----------------------------------------------------------------------
def test_nested_config_value_says_how_to_override_a_nested_key(tmp_path):
    proc = snakemake(tmp_path, tiny_config(), "-n", "--config", "protocol={draws: 5}")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "protocol.draws" in out and "second --configfile" in out
    assert len(out.splitlines()) < 15


def test_dotted_config_key_is_refused_by_dgpbench_run(tmp_path, capsys):
    code = main(["run", "--directory", str(tmp_path), "-n", "--config", "protocol.draws=5"])
    assert code == 2
    err = capsys.readouterr().err
    assert "protocol.draws" in err and "--configfile" in err and "\n" not in err.strip()


def test_unknown_key_prints_the_key_not_the_schema(tmp_path):
    proc = snakemake(tmp_path, tiny_config(metods=["dgp"]), "-n")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "unknown config key metods" in out
    assert "Failed validating" not in out and len(out.splitlines()) < 15


# --- subcommands: missing arrays ------------------------------------------------------
def test_detect_names_the_missing_array(tmp_path, capsys):
    feats = tmp_path / "feats.npz"
    save_npz(feats, GN_6=np.zeros((5, 2)))
    code = main(["detect", "--features", str(feats), "--ns", "2", "--deltas", "0.5",
                 "--out", str(tmp_path / "rec.csv")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "feats.npz has no array 'clean'" in err and "dgpbench features" in err


def test_features_names_the_missing_array(tmp_path, capsys):
    rng = np.random.default_rng(0)
    clean = tmp_path / "clean.npz"
    x = rng.random((6, 1, 3, 4), dtype=np.float32)
    save_npz(clean, x_ref=x, y_ref=np.arange(6) % 3, x_test=x)
    corrupted = tmp_path / "GN.npz"
    save_npz(corrupted, intensity_6=x)  # lacks "corruption"
    model = save_checkpoint(tmp_path / "m.pt", _model(), {"arch": ArchConfig(12, 5, 2, 3)})
    code = main(["features", "--method", "softmax", "--model", str(model), "--clean",
                 str(clean), "--corrupted", str(corrupted), "--out", str(tmp_path / "f.npz")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "GN.npz has no array 'corruption'" in err and "dgpbench corrupt" in err
    assert not (tmp_path / "f.npz").exists()


# --- features: input and model ----------------------------------------------------------
def test_empty_image_batch(tmp_path):
    x = np.random.default_rng(0).random((9, 1, 3, 4), dtype=np.float32)
    est = SoftmaxFeatures(_model()).fit(x, np.arange(9) % 3)
    with pytest.raises(ValueError, match=r"empty batch \(shape \(0, 1, 3, 4\)\)"):
        est.transform(x[:0])


def test_model_on_the_meta_device():
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(12, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    with pytest.raises(ValueError, match=r"model layer 0 \(Linear\).*meta device"):
        MLPGraph.from_module(model)


def test_directory_passed_as_model(tmp_path):
    save_checkpoint(tmp_path / "model.pt", _model(), {"arch": ArchConfig(12, 5, 2, 3)})
    with pytest.raises(ValueError, match=r"is a directory \(it holds model\.pt\)"):
        load_checkpoint(tmp_path)
    x = np.zeros((3, 12), dtype=np.float32)
    with pytest.raises(ValueError, match="is a directory"):
        SoftmaxFeatures(tmp_path).fit(x, [0, 1, 2])


def test_whole_model_saved_with_torch_save(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(_model(), path)
    with pytest.raises(ValueError) as exc:
        load_checkpoint(path)
    message = str(exc.value)
    assert "torch.save(model)" in message and "Sequential" in message
    assert "Accepted:" in message and "save_checkpoint" in message
    assert "\n" not in message and "weights_only" not in message


# --- outputs ----------------------------------------------------------------------------
def test_full_disk_names_the_output(tmp_path):
    # Writing to /dev/full fails with ENOSPC and no file name, as a full disk does.
    target = tmp_path / "features.npz"
    with pytest.raises(OSError, match="No space left on device") as exc:
        with atomic_path(target) as tmp, open("/dev/full", "wb") as full:
            tmp.write_bytes(b"partial")
            full.write(b"x" * 100_000)
    assert exc.value.errno == 28 and exc.value.filename == str(target)
    assert str(target) in str(exc.value)
    assert list(tmp_path.iterdir()) == []
