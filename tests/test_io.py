"""Atomic writers: outputs get the permissions the umask asks for, not a temp file's 0600, and
replace only regular files; readers open only regular files."""

from __future__ import annotations

import os
import socket
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


def _special_files(folder):
    """A fifo, a directory, a socket and (as root) a copy of /dev/null, in ``folder``."""
    os.mkfifo(folder / "fifo")
    (folder / "folder").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "socket"))
    sock.close()
    names = ["fifo", "folder", "socket"]
    if os.geteuid() == 0:
        os.mknod(folder / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        names.append("null")
    return names


def test_writers_never_replace_what_is_not_a_regular_file(tmp_path):
    names = _special_files(tmp_path)
    before = {name: os.lstat(tmp_path / name) for name in names}
    for name in names:
        (tmp_path / f"link-{name}").symlink_to(tmp_path / name)
        for path in (tmp_path / name, tmp_path / f"link-{name}"):
            for write in (lambda p: write_text(p, "x"), lambda p: save_npz(p, x=np.zeros(2))):
                with pytest.raises(ValueError, match="not a regular file") as info:
                    write(path)
                assert str(path) in str(info.value)
    for name in names:  # the same inode and type: nothing replaced
        after = os.lstat(tmp_path / name)
        assert (after.st_ino, after.st_mode) == (before[name].st_ino, before[name].st_mode)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary left


def test_a_link_to_a_regular_file_is_followed(tmp_path):
    target = tmp_path / "data" / "out.txt"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "out.txt"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_output_problem_names_the_reason_without_writing(tmp_path):
    from dgpbench.io import output_problem

    _special_files(tmp_path)
    (tmp_path / "file").write_text("x")
    assert output_problem(tmp_path / "fifo") == "it is a named pipe (fifo), not a regular file"
    assert output_problem(tmp_path / "folder") == "it is a directory, not a regular file"
    assert output_problem(tmp_path / "folder", folder=True) is None
    assert output_problem(tmp_path / "file", folder=True) == "it is a regular file, not a directory"
    assert (
        output_problem(tmp_path / "file" / "a" / "b") == f"{tmp_path / 'file'} is not a directory"
    )
    assert output_problem(tmp_path / "new" / "deeper" / "out.csv") is None
    names = {"fifo", "file", "folder", "socket"} | ({"null"} if os.geteuid() == 0 else set())
    assert {p.name for p in tmp_path.iterdir()} == names  # nothing created


def test_readers_refuse_what_is_not_a_regular_file_by_name(tmp_path):
    # a socket: open() fails on it; a fifo would block it and /dev/zero never end (the
    # command line tests those in a child process)
    from dgpbench.npz import check_zip_archive, open_npz

    _special_files(tmp_path)
    link = tmp_path / "link.npz"
    link.symlink_to(tmp_path / "socket")
    for path in (tmp_path / "socket", link):
        with pytest.raises(ValueError, match=f"{path} is a socket, not a regular file"):
            open_npz(path)
        with pytest.raises(ValueError, match=f"checkpoint {path} is a socket, not a regular"):
            check_zip_archive(path, "checkpoint")
    # a fifo named as a checkpoint: refused by what it is, not "does not exist"
    from dgpbench.models.checkpoints import load_checkpoint

    with pytest.raises(ValueError, match="is a named pipe \\(fifo\\), not a regular file"):
        load_checkpoint(tmp_path / "fifo")
