"""The grid's steps read the files the steps before them wrote, whatever their size: the input
limit of ``dgpbench.npz`` is raised to what those files declare (CIFAR-shaped images)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from _workflow import snakemake, tiny_config

from dgpbench.failing_loudly.files import declared_bytes, input_limit_env
from dgpbench.npz import MAX_INPUT_BYTES_ENV, open_npz


def _write_tiny_cifar(root, n_per_batch=20, seed=0):
    """A python-batch CIFAR-10 root (3x32x32 images) with ``n_per_batch`` images per batch."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]:
        entry = {
            "data": rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8),
            "labels": np.tile(np.arange(10), n_per_batch // 10).tolist(),
        }
        with (folder / name).open("wb") as fh:
            pickle.dump(entry, fh)


def test_the_limit_is_raised_to_what_the_files_declare_and_no_further(tmp_path, monkeypatch):
    big, small = tmp_path / "big.npz", tmp_path / "small.npz"
    np.savez(big, x=np.zeros((40, 3072)))  # float64 pixels, as NoRed's features
    np.savez(small, x=np.zeros(10))
    need = declared_bytes(big)
    assert need >= 40 * 3072 * 8
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(need // 2))
    prefix = input_limit_env([small, big, tmp_path / "model.pt"])
    assert prefix == f"{MAX_INPUT_BYTES_ENV}={need} "
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, prefix.strip().partition("=")[2])
    with open_npz(big) as f:  # the raised limit admits the file
        assert f["x"].shape == (40, 3072)
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(need))
    assert input_limit_env([small, big]) == ""  # never lowered, never raised without need
    with pytest.raises(FileNotFoundError):  # Snakemake waits for a file not yet written
        input_limit_env([tmp_path / "later.npz"])


@pytest.mark.slow
def test_a_cifar_shaped_grid_reads_its_own_pools_and_features_past_the_limit(tmp_path, monkeypatch):
    # The 1 GiB default scaled down to the tiny grid: its pools (40 images of 3,072 float32
    # values) and NoRed's features (float64) pass 200 kB as the full grid's pass 1 GiB.
    _write_tiny_cifar(tmp_path / "data")
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "200000")
    config = tiny_config(datasets=["cifar10"], data_root=str(tmp_path / "data"))
    config["failing_loudly"] = {
        "shifts": ["large_gn_shift"],
        "fractions": [1.0],
        "methods": ["noredu+ks"],
        "images": {"n_fit": 20, "n_ref_pool": 15, "n_test_pool": 20, "seed": 1},
        "ns_univariate": [10],
        "runs": 2,
        "draws": 1,
    }
    target = "results/fl/records/cifar10/none/noredu+ks.csv"
    proc = snakemake(tmp_path / "run", config, target, cores=1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    features = tmp_path / "run/results/fl/features/cifar10/none/noredu.npz"
    assert declared_bytes(features) > 200000  # the limit was in force, and raised
    records = pd.read_csv(tmp_path / "run" / target)
    assert set(records["shift"]) == {"none", "large_gn_shift"} and set(records["run"]) == {0, 1}
