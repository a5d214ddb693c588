"""The exit-status contract: 1 means "the test rejected" and nothing else.

Every failure, whatever raised it (a crafted file, a broken custom method, a closed or broken
standard output, an unexpected exception), exits 2 with one line on stderr naming the file
or method; Ctrl-C exits 130.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from dgpbench.cli.main import main
from dgpbench.cli.registry import SUBCOMMANDS
from dgpbench.data.datasets import load_dataset
from dgpbench.models.architectures import build_mlp
from dgpbench.models.checkpoints import save_checkpoint

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An untrained digits MLP (exit statuses need no trained model) and the three batches."""
    out = tmp_path_factory.mktemp("exit")
    net = build_mlp(64, 16, 2, 10, generator=torch.Generator().manual_seed(0))
    model = save_checkpoint(
        out / "model.pt",
        net,
        {"arch": {"n_inputs": 64, "hidden": 16, "n_layers": 2, "n_classes": 10}},
    )
    x, y = load_dataset("digits", split="test")
    paths = {"model": model}
    for name, content in {
        "refs": {"x": x[:200], "y": y[:200]},
        "clean": {"x": x[200:300]},
        "batch": {"x": x[300:350]},
    }.items():
        paths[name] = out / f"{name}.npz"
        np.savez(paths[name], **content)
    return paths


def _args(files, *extra, batch=None, method="tu"):
    return ["score", "--model", str(files["model"]), "--refs", str(files["refs"]),
            "--clean", str(files["clean"]), "--batch", str(batch or files["batch"]),
            "--method", method, *extra]  # fmt: skip


def _one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_a_clean_batch_exits_0(files, capsys):
    assert main(_args(files)) == 0
    assert capsys.readouterr().out.startswith("no shift")


# ---------------------------------------------------------------------------------------------
# crafted files
# ---------------------------------------------------------------------------------------------
def _npy_header(shape, dtype="<f4") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _huge_header(path):
    # 4 KB that declare a (60000, 3, 4096, 4096) float32 array: 11 TiB
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", _npy_header((60000, 3, 4096, 4096)) + b"\0" * 4000)


def _flagged(path, *, flag_bits=0, compress_type=zipfile.ZIP_STORED):
    np.savez(path, x=np.zeros((4, 8, 8), np.float32))
    data = bytearray(path.read_bytes())
    # patch the local header and the central directory entry of the one member
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    struct.pack_into("<HH", data, local + 6, flag_bits, compress_type)
    struct.pack_into("<HH", data, central + 8, flag_bits, compress_type)
    path.write_bytes(bytes(data))


def _encrypted(path):
    _flagged(path, flag_bits=0x1)


def _unknown_compression(path):
    _flagged(path, compress_type=99)


def _bzip2(path):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as z:
        with z.open("x.npy", "w") as fh:
            np.lib.format.write_array(fh, np.zeros((4, 8, 8), np.float32))


def _object_array(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", _npy_header((4,), "|O") + b"\0" * 64)


def _text_file(path):
    path.write_text("x,y\n1,2\n")


def _npy_file(path):
    with open(path, "wb") as fh:
        np.save(fh, np.zeros((4, 8, 8), np.float32))


@pytest.mark.parametrize(
    ("craft", "message"),
    [
        (_huge_header, "declares shape (60000, 3, 4096, 4096)"),
        (_encrypted, "encrypted"),
        (_unknown_compression, "compression method 99"),
        (_bzip2, "compression method 12"),
        (_object_array, "Python objects"),
        (_text_file, "not an .npz file"),
        (_npy_file, "a single .npy array"),
    ],
)
def test_a_crafted_batch_exits_2_naming_the_file(files, capsys, tmp_path, craft, message):
    bad = tmp_path / "crafted.npz"
    craft(bad)
    assert main(_args(files, batch=bad)) == 2
    err = _one_line(capsys.readouterr().err)
    assert "crafted.npz" in err and message in err
    assert "allow_pickle" not in err  # numpy's advice must never reach a user


def test_a_directory_as_batch_is_named_as_such(files, capsys, tmp_path):
    assert main(_args(files, batch=tmp_path)) == 2
    err = _one_line(capsys.readouterr().err)
    assert "is a directory" in err and "does not exist" not in err


def test_a_deflate_bomb_is_refused_before_inflating(files, capsys, tmp_path, monkeypatch):
    # 4 MiB of zeros deflate to ~4 kB; with the limit at 1 MiB the file is refused from
    # its declared sizes alone (the default limit, 1 GiB, works the same way at scale)
    bomb = tmp_path / "bomb.npz"
    np.savez_compressed(bomb, x=np.zeros((16384, 1, 8, 8), np.float32))
    assert bomb.stat().st_size < 100_000
    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", str(2**20))
    assert main(_args(files, batch=bomb)) == 2
    err = _one_line(capsys.readouterr().err)
    assert "bomb.npz" in err and "4.0 MiB" in err and "DGPBENCH_MAX_INPUT_BYTES" in err
    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", str(2**25))  # raised: the file is read
    assert main(_args(files, batch=bomb)) in (0, 1)
    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", "lots")
    assert main(_args(files)) == 2
    assert "DGPBENCH_MAX_INPUT_BYTES must be a positive number" in capsys.readouterr().err


def test_the_limit_is_checked_on_every_reader(tmp_path, monkeypatch):
    from dgpbench.data.datasets import load_dataset as load
    from dgpbench.io import load_npz

    path = tmp_path / "big.npz"
    np.savez_compressed(path, x_train=np.zeros((512, 1, 32, 32), np.float32),
                        y_train=np.zeros(512, np.int64), x_test=np.zeros((2, 1, 32, 32)),
                        y_test=np.zeros(2, np.int64))  # fmt: skip
    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", str(2**20))
    with pytest.raises(ValueError, match=r"big\.npz.*2\.0 MiB.*DGPBENCH_MAX_INPUT_BYTES"):
        load_npz(path)
    with pytest.raises(ValueError, match=r"big\.npz.*DGPBENCH_MAX_INPUT_BYTES"):
        load(f"npz:{path}", split="train")


# ---------------------------------------------------------------------------------------------
# broken custom methods
# ---------------------------------------------------------------------------------------------
_METHODS = {
    "syntax": "class Bad(:\n",
    "raises_on_import": "raise RuntimeError('boom at import')\n",
    "exits_on_import": "import sys\nsys.exit(1)\n",
    "init_raises": (
        "class M:\n"
        "    def __init__(self, model=None): raise ZeroDivisionError('boom in init')\n"
        "    def fit(self, X, y=None): return self\n"
        "    def transform(self, X): return X\n"
    ),
    "transform_raises": (
        "class M:\n"
        "    def __init__(self, model=None): pass\n"
        "    def fit(self, X, y=None): return self\n"
        "    def transform(self, X): raise IndexError('boom in transform')\n"
    ),
    "fit_raises_memory": (
        "class M:\n"
        "    def __init__(self, model=None): pass\n"
        "    def fit(self, X, y=None): raise MemoryError()\n"
        "    def transform(self, X): return X.reshape(len(X), -1)\n"
    ),
}


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("syntax", "SyntaxError"),
        ("raises_on_import", "RuntimeError: boom at import"),
        ("exits_on_import", "SystemExit"),
        ("init_raises", "ZeroDivisionError: boom in init"),
        ("transform_raises", "IndexError: boom in transform"),
        ("fit_raises_memory", "MemoryError"),
    ],
)
def test_a_broken_custom_method_exits_2_naming_it(
    files, capsys, tmp_path, monkeypatch, module, message
):
    name = f"dgpb_broken_{module}"
    (tmp_path / f"{name}.py").write_text(_METHODS[module])
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(_args(files, method=f"{name}:M")) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"{name}:M" in err and message in err


def test_ctrl_c_exits_130_and_a_crash_exits_2(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    def crashes(args):
        raise RecursionError("maximum recursion depth exceeded")

    def exits(args):
        sys.exit(1)

    for name, run in (("fake-int", interrupted), ("fake-crash", crashes), ("fake-exit", exits)):
        monkeypatch.setitem(SUBCOMMANDS, name, ("test", lambda p: None, run))
    assert main(["fake-int"]) == 130
    assert "interrupted" in _one_line(capsys.readouterr().err)
    assert main(["fake-crash"]) == 2
    assert "RecursionError: maximum recursion depth" in _one_line(capsys.readouterr().err)
    assert main(["fake-exit"]) == 2
    assert "exited early" in _one_line(capsys.readouterr().err)


# ---------------------------------------------------------------------------------------------
# closed and broken standard streams (a real process)
# ---------------------------------------------------------------------------------------------
def _env():
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


def test_closed_stdout_exits_2_with_a_message(files):
    # `dgpbench score --json ... >&-`: Python starts with sys.stdout = None and print()
    # would drop the results silently
    cmd = [sys.executable, "-m", "dgpbench", *_args(files, "--json")]
    proc = subprocess.run(
        ["bash", "-c", '"$@" >&-', "_", *cmd], capture_output=True, text=True, env=_env()
    )
    assert proc.returncode == 2, proc.stderr
    assert "standard output is closed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_stdout_and_stderr_into_a_closed_pipe_exit_2(files):
    # `dgpbench score ... 2>&1 | true`: the reader is gone before the results are written
    read, write = os.pipe()
    os.close(read)
    cmd = [sys.executable, "-m", "dgpbench", *_args(files, "--json")]
    proc = subprocess.run(cmd, stdout=write, stderr=write, env=_env())
    os.close(write)
    assert proc.returncode == 2


def test_a_checkpoint_declaring_too_much_is_refused_before_torch_reads_it(
    files, tmp_path, monkeypatch, capsys
):
    from dgpbench.models.checkpoints import load_checkpoint

    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", "1000")
    with pytest.raises(ValueError, match=r"checkpoint .*model\.pt.*DGPBENCH_MAX_INPUT_BYTES"):
        load_checkpoint(files["model"])
    encrypted = tmp_path / "model.pt"
    encrypted.write_bytes(files["model"].read_bytes())
    data = bytearray(encrypted.read_bytes())
    central = data.find(b"PK\x01\x02")
    data[central + 8] |= 0x1
    encrypted.write_bytes(bytes(data))
    monkeypatch.delenv("DGPBENCH_MAX_INPUT_BYTES")
    assert main(_args({**files, "model": encrypted})) == 2
    assert "is encrypted" in _one_line(capsys.readouterr().err)


def test_a_bare_key_error_is_described_not_just_quoted(monkeypatch, capsys):
    def missing(args):
        raise KeyError("y_test")

    monkeypatch.setitem(SUBCOMMANDS, "fake-key", ("test", lambda p: None, missing))
    assert main(["fake-key"]) == 2
    assert _one_line(capsys.readouterr().err) == "dgpbench fake-key: error: KeyError: 'y_test'\n"


@pytest.mark.parametrize(
    ("config", "key"),
    [("protocol:\n  draws: x\n", "protocol.draws"),
     ("failing_loudly:\n  mmd:\n    n_permutations: 1000000000000\n", "n_permutations")],
)  # fmt: skip
def test_run_with_a_bad_config_exits_2_with_the_schemas_message_alone(
    tmp_path, monkeypatch, capsys, config, key
):
    pytest.importorskip("snakemake")
    (tmp_path / "bad.yaml").write_text(config)
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--snakefile", str(REPO / "Snakefile"), "--cores", "1", "-n",
                 "--configfile", str(REPO / "config.yaml"), "bad.yaml"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and key in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / ".snakemake").exists()  # refused before Snakemake ran
