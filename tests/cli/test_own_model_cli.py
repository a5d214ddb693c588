"""docs/your-own-model.md, run as written: a user's own CNN, fitted and scored from the shell.

Every Python and shell block of the page runs here in order, in one folder (``my_models.py``
written from the block that names it), and every command's exit status is the one its
comment promises (``# exit status N``; 0 otherwise). Both run in this process (a Python
block as ``__main__``, a shell line through ``dgpbench``'s ``main`` with its ``PYTHONPATH``
on ``sys.path``): the page's content is what is tested here, the process boundary of the
command (exit statuses, closed streams) in tests/cli/test_exit_status.py.
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "your-own-model.md"
ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(), re.S)


def _run_shell_line(line: str, cwd: Path) -> SimpleNamespace:
    code, _, comment = line.partition("#")
    words = shlex.split(code)
    paths = []
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        assert key == "PYTHONPATH", line
        paths.append(str(cwd / value))
    assert words[0] == "dgpbench", line
    sys.path[:0] = paths
    try:
        proc = _cli(cwd, *words[1:])
    finally:
        del sys.path[: len(paths)]
    expected = re.search(r"exit status (\d)", comment)
    want = int(expected[1]) if expected else 0
    assert proc.returncode == want, (
        line,
        proc.returncode,
        proc.stdout[-2000:],
        proc.stderr[-2000:],
    )
    return proc


def _run_python_block(script: Path) -> str:
    """Run ``script`` as ``__main__`` in its folder; its stdout."""
    out = io.StringIO()
    with contextlib.chdir(script.parent), contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__main__")
    return out.getvalue()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The page run as written, once: its folder and each command's or script's stdout."""
    cwd = tmp_path_factory.mktemp("own")
    outputs = []
    for i, (kind, text) in enumerate(_blocks()):
        if kind == "python":
            first = text.splitlines()[0].strip()
            if first.startswith("# ") and first.endswith(".py"):
                (cwd / first[2:]).write_text(text)  # a module the commands import
                continue
            script = cwd / f"block{i}.py"
            script.write_text(text)
            outputs.append(_run_python_block(script))
        elif kind == "bash":
            for line in text.splitlines():
                if line.strip():
                    outputs.append(_run_shell_line(line, cwd).stdout)
    sys.modules.pop("my_models", None)  # the page's module, not another folder's
    return SimpleNamespace(cwd=cwd, outputs=outputs)


@pytest.mark.slow
def test_documented_two_commands_run(page: SimpleNamespace) -> None:
    kinds = [k for k, _ in _blocks()]
    assert kinds.count("bash") >= 2 and "python" in kinds
    # The saved detector is what scored: the two-command path produced a detector file, and
    # the Python block loading it reports the shift the shell reported.
    assert (page.cwd / "cnn-dgp.npz").is_file()
    assert page.outputs[-1].split()[0] == "True"


@pytest.fixture(scope="module")
def workdir(page: SimpleNamespace) -> Path:
    """The page's folder (model, images, detectors) with a softmax detector fitted too."""
    fit = "fit --model cnn.pt2 --clean clean.npz --method softmax --out sm.npz".split()
    assert _cli(page.cwd, *fit).returncode == 0
    return page.cwd


def _cli(cwd: Path, *args: str) -> SimpleNamespace:
    """Run ``dgpbench ARGS`` in this process (no interpreter start-up) in folder ``cwd``."""
    from dgpbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_saved_detector_gives_the_one_call_result(workdir: Path) -> None:
    """score --detector and the one-call score print the same numbers (JSON)."""
    import json

    saved = _cli(workdir, "score", "--detector", "sm.npz", "--batch", "noisy.npz", "--json")
    direct = _cli(
        workdir, "score", "--model", "cnn.pt2", "--refs", "refs.npz", "--clean", "clean.npz",
        "--batch", "noisy.npz", "--method", "softmax", "--json",
    )  # fmt: skip
    assert saved.returncode == direct.returncode == 1, saved.stderr + direct.stderr
    a, b = json.loads(saved.stdout), json.loads(direct.stdout)
    assert a["features"] == b["features"]
    assert a["p_value"] == b["p_value"]


def test_softmax_needs_no_labels(workdir: Path) -> None:
    import numpy as np

    np.savez(workdir / "unlabelled.npz", x=np.load(workdir / "refs.npz")["x"])
    for refs in ([], ["--refs", "unlabelled.npz"]):
        proc = _cli(
            workdir, "fit", "--model", "cnn.pt2", "--clean", "clean.npz", *refs,
            "--method", "softmax", "--out", "sm2.npz",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    # one rule for every method, as in Python (fit(X) without y): without
    # --refs the clean images are the references, grouped by the model's predicted class
    proc = _cli(workdir, "fit", "--model", "cnn.pt2", "--clean", "clean.npz", "--out", "x.npz")
    assert proc.returncode == 0, proc.stderr
    assert (workdir / "x.npz").exists()


def test_detector_with_other_weights_is_refused(workdir: Path) -> None:
    """A model whose weights differ from the fitted one: exit 2, the checksum named."""
    import torch

    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval()
    torch.export.save(torch.export.export(net, (torch.zeros(2, 1, 8, 8),)), workdir / "other.pt2")
    proc = _cli(
        workdir, "score", "--detector", "sm.npz", "--model", "other.pt2", "--batch", "batch.npz"
    )
    assert proc.returncode == 2
    assert "do not match" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"not a zip", "not a dgpbench detector"), (None, "not a dgpbench detector")],
)
def test_bad_detector_file_exit_2(workdir: Path, content: bytes | None, message: str) -> None:
    import numpy as np

    bad = workdir / "bad.npz"
    if content is None:
        np.savez(bad, x=np.zeros(3))  # an npz, but no detector
    else:
        bad.write_bytes(content)
    proc = _cli(workdir, "score", "--detector", str(bad), "--batch", "batch.npz")
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_factory_import_error_is_clear(workdir: Path) -> None:
    proc = _cli(
        workdir, "score", "--model", "no_such_pkg_xyz.models:build", "--refs", "refs.npz",
        "--clean", "clean.npz", "--batch", "batch.npz",
    )  # fmt: skip
    assert proc.returncode == 2
    assert "cannot import module 'no_such_pkg_xyz.models'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_features_subcommand_takes_a_pt2(workdir: Path) -> None:
    """`dgpbench features --model x.pt2` gives the Python API's features of the exported net."""
    import numpy as np

    from dgpbench import SoftmaxFeatures
    from dgpbench.models.exported import load_exported

    refs = np.load(workdir / "refs.npz")
    x_test = np.load(workdir / "batch.npz")["x"]
    np.savez(workdir / "sets.npz", x_ref=refs["x"], y_ref=refs["y"], x_test=x_test)
    proc = _cli(
        workdir, "features", "--method", "softmax", "--model", "cnn.pt2", "--clean", "sets.npz",
        "--out", "feats.npz",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    module, _ = load_exported(workdir / "cnn.pt2")
    want = SoftmaxFeatures(module).fit(refs["x"], refs["y"]).transform(x_test)
    np.testing.assert_array_equal(np.load(workdir / "feats.npz")["clean"], want)
