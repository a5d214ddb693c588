"""The grid's steps read the files the steps before them wrote, whatever their size: the input
limit of ``dgpbench.npz`` is raised to what those files declare (the end-to-end check on a
CIFAR-shaped grid: tests/workflow/test_resnet_workflow.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.failing_loudly.files import declared_bytes, input_limit_env
from dgpbench.npz import MAX_INPUT_BYTES_ENV, open_npz


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
