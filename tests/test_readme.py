"""The README's Python code blocks run as written, in order, in one namespace."""

import contextlib
import io
import re

import numpy as np
import pytest
import torch
from _workflow import REPO

from dgpbench.methods import make_features


def python_blocks() -> list[str]:
    """Every fenced ```python block of README.md, in order."""
    return re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)


def custom_method_module() -> str:
    """The README's example custom method (the block that starts with ``# my_methods.py``)."""
    (block,) = [b for b in python_blocks() if b.startswith("# my_methods.py")]
    return block


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    """Run every block (the quick start trains a small model) and keep stdout and names."""
    workdir = tmp_path_factory.mktemp("readme")
    namespace: dict = {"__name__": "readme"}
    outputs = []
    with contextlib.chdir(workdir):
        for block in python_blocks():
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                exec(compile(block, "README.md", "exec"), namespace)
            outputs.append(stdout.getvalue())
    return {"namespace": namespace, "outputs": outputs, "dir": workdir}


def test_readme_has_the_quick_start_and_the_custom_method():
    blocks = python_blocks()
    assert len(blocks) >= 4
    assert "train_mlp" in blocks[0] and "KSShiftDetector" in blocks[0]
    assert "class LogitFeatures" in custom_method_module()


def test_quick_start_prints_what_its_comments_say(readme_run):
    quick, pipeline = readme_run["outputs"][:2]
    lines = quick.split()
    assert lines[:2] == ["False", "True"]  # clean batch: no shift; noisy batch: shift
    assert float(lines[2]) < 0.05
    assert pipeline.split() == ["False", "True", "(100,", "10)"]


def test_readme_writes_the_npz_it_describes(readme_run):
    saved = np.load(readme_run["dir"] / "my_batch.npz")
    assert saved["x"].dtype == np.uint8 and saved["x"].shape == (100, 8, 8)


def test_custom_method_example_is_a_working_method(readme_run, tmp_path, monkeypatch):
    (tmp_path / "my_methods.py").write_text(custom_method_module())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(readme_run["dir"])  # the quick start's checkpoint path is relative
    ns = readme_run["namespace"]
    est = make_features("my_methods:LogitFeatures", str(ns["ckpt"]), batch_size=16, n_jobs=1)
    logits = est.fit(ns["x_train"][:50], ns["y_train"][:50]).transform(ns["x_test"][:20])
    assert logits.shape == (20, 10) and logits.dtype == np.float64
    with torch.no_grad():
        expected = ns["model"](torch.from_numpy(ns["x_test"][:20].reshape(20, -1))).numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
