"""Atomic writers: outputs get the permissions the umask asks for, not a temp file's 0600."""

from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pytest
import torch

from dgpbench.io import atomic_path, save_figure, save_npz, write_csv, write_text
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.checkpoints import save_checkpoint


@pytest.fixture
def umask():
    """Set the process umask for one test, then restore it."""
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


def _write_everything(folder):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    write_text(folder / "a.md", "text")
    save_npz(folder / "b.npz", x=np.zeros(3))
    write_csv(folder / "c.csv", pd.DataFrame({"x": [1]}))
    write_csv(folder / "d.csv.gz", pd.DataFrame({"x": [1]}))
    fig = plt.figure()
    save_figure(fig, folder / "e")
    plt.close(fig)
    arch = ArchConfig(2, 2, 1, 2)
    save_checkpoint(folder / "f.pt", arch.build(torch.Generator().manual_seed(0)), {"arch": arch})
    return sorted(p for p in folder.iterdir())


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_outputs_respect_the_umask(tmp_path, umask, mask):
    umask(mask)
    files = _write_everything(tmp_path)
    assert [p.name for p in files] == [
        "a.md",
        "b.npz",
        "c.csv",
        "d.csv.gz",
        "e.pdf",
        "e.png",
        "f.pt",
    ]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path.name


def test_atomic_path_replaces_with_umask_mode(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "out.txt"
    with atomic_path(target) as tmp:
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o644
        tmp.write_text("new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o644
