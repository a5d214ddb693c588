"""Paths a user points at: an output never destroys what is there, an input is read only from
a regular file, and both are checked before any work (exit status 2, the option named)."""

from __future__ import annotations

import importlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dgpbench.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SAVED = REPO / "tests" / "fixtures" / "saved"

#: A factory that leaves a mark when called: a refusal "before the fit" leaves none.
FACTORY = """
import pathlib

import torch


def mlp():
    (pathlib.Path(__file__).parent / "called").touch()
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)
    ).eval()
"""


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A folder on ``sys.path`` with a factory module ``pathsnet`` and clean images."""
    (tmp_path / "pathsnet.py").write_text(FACTORY)
    x = np.random.default_rng(0).uniform(size=(40, 1, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "clean.npz", x=x)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("pathsnet")]:
        del sys.modules[name]


def _fit(work, out, *extra, model="pathsnet:mlp"):
    return ["fit", "--model", model, "--clean", str(work / "clean.npz"),
            "--method", "softmax", *extra, "--out", str(out)]  # fmt: skip


def _refused(err: str, option: str, path: object) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{option} {path}" in err, err


def test_fit_writes_a_detector(work, capsys):
    assert main(_fit(work, work / "det.npz")) == 0
    assert (work / "det.npz").is_file() and (work / "called").exists()


def test_out_a_fifo_is_refused_and_kept(work, capsys):
    fifo = work / "fifo"
    os.mkfifo(fifo)
    assert main(_fit(work, fifo)) == 2
    _refused(capsys.readouterr().err, "--out", fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (work / "called").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
@pytest.mark.parametrize("device", [(1, 3), (1, 7)], ids=["null", "full"])
def test_out_a_device_is_refused_and_kept(work, device, capsys):
    # a copy of /dev/null or /dev/full in the test's folder: the real ones are never at risk
    node = work / "dev"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(*device))
    link = work / "link.npz"
    link.symlink_to(node)
    for out in (node, link):
        assert main(_fit(work, out)) == 2
        err = capsys.readouterr().err
        _refused(err, "--out", out)
        assert "a character device, not a regular file" in err
    assert stat.S_ISCHR(os.lstat(node).st_mode) and os.stat(node).st_rdev == os.makedev(*device)
    assert link.is_symlink() and not (work / "called").exists()


def test_out_a_directory_or_under_a_file_fails_before_the_fit(work, capsys):
    folder = work / "folder"
    folder.mkdir()
    assert main(_fit(work, folder)) == 2
    err = capsys.readouterr().err
    _refused(err, "--out", folder)
    assert "a directory" in err
    under_a_file = work / "clean.npz" / "det.npz"
    assert main(_fit(work, under_a_file)) == 2
    err = capsys.readouterr().err
    _refused(err, "--out", under_a_file)
    assert "not a directory" in err
    assert not (work / "called").exists() and not any(folder.iterdir())


def test_out_dir_a_file_is_refused(work, capsys):
    out = work / "clean.npz"
    before = out.read_bytes()
    code = main(["fl-report", str(work / "none.csv"), "--out-dir", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    _refused(err, "--out-dir", out)
    assert "not a directory" in err and out.read_bytes() == before


def test_out_a_link_to_a_regular_file_replaces_the_file_and_keeps_the_link(work, capsys):
    target = work / "old.npz"
    target.write_bytes(b"old")
    link = work / "link.npz"
    link.symlink_to(target)
    assert main(_fit(work, link)) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes()[:2] == b"PK"  # now the detector (an .npz is a zip)


@pytest.mark.parametrize(
    ("files", "model", "method", "out"),
    [
        ({"mynets.py": FACTORY}, "mynets:mlp", [], "mynets.py"),
        ({"mypkg/__init__.py": "", "mypkg/nets.py": FACTORY}, "mypkg.nets:mlp", [],
         "mypkg/nets.py"),
        ({"mymeth.py": "raise SystemExit('imported')"}, "pathsnet:mlp",
         ["--method", "mymeth:Features"], "mymeth.py"),
    ],
    ids=["factory", "package-factory", "custom-method"],
)  # fmt: skip
def test_out_a_module_the_command_imports_is_refused(work, files, model, method, out, capsys):
    for name, text in files.items():
        (work / name).parent.mkdir(exist_ok=True)
        (work / name).write_text(text)
    importlib.invalidate_caches()
    args = _fit(work, work / out, model=model)
    if method:
        args[args.index("--method") : args.index("--method") + 2] = method
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "is also the module of the input" in err and out.split("/")[-1] in err, err
    assert all((work / name).read_text() == text for name, text in files.items())
    assert not (work / "called").exists()
    assert not {"mynets", "mypkg", "mypkg.nets", "mymeth"} & set(sys.modules)  # none imported


def test_classif_refuses_head_as_it_refuses_method(work, capsys):
    for option in (["--head", "fc2"], ["--method", "softmax"]):
        args = _fit(work, work / "det.npz", "--test", "classif")
        args.remove("--method")
        args.remove("softmax")
        assert main([*args, *option]) == 2
        assert f"{option[0]} is not used by --test classif" in capsys.readouterr().err
    assert not (work / "det.npz").exists()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``dgpbench`` in a child process: reading a fifo would block the test process."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "dgpbench", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("option", ["--detector", "--batch"])
def test_a_fifo_or_link_to_one_as_input_is_refused_without_opening_it(tmp_path, option):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.npz"
    link.symlink_to(fifo)  # a link to /dev/zero or to a fifo: followed, then refused
    files = {"--detector": str(SAVED / "pca_ks.npz"), "--batch": str(SAVED / "batch.npz")}
    files[option] = str(link)
    proc = _cli("score", "--detector", files["--detector"], "--batch", files["--batch"],
                cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert str(link) in proc.stderr and "a named pipe (fifo), not a regular file" in proc.stderr
