"""The Python code blocks of the README and the docs run as written, in one namespace.

The README first, then the pages of the documentation site in the order of mkdocs.yml's nav
(a page continues the quick start's session). The site's home repeats the README's quick
start: the two must be the same code, which runs once.
"""

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from _workflow import REPO

from dgpbench.features.registry import make_features


def blocks_of(path: Path) -> list[str]:
    """Every fenced ```python block of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


def _nav_files(nav) -> list[str]:
    """The Markdown files of a mkdocs nav, in order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return [f for item in nav for f in _nav_files(item)]


def doc_pages() -> list[Path]:
    """The documentation site's pages in nav order (mkdocs.yml)."""
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    return [REPO / "docs" / name for name in _nav_files(nav)]


# Pages whose blocks another test runs as written, shell commands and Python interleaved:
# page -> that test (the python blocks alone would miss the files the commands write).
OWN_RUNNER = {"your-own-model.md": "tests/cli/test_own_model_cli.py"}


def code_sources() -> list[tuple[Path, list[str]]]:
    """(file, its python blocks) in execution order; the site's home (the README's quick
    start again) and the pages of :data:`OWN_RUNNER` are left out."""
    return [(REPO / "README.md", blocks_of(REPO / "README.md"))] + [
        (page, blocks_of(page))
        for page in doc_pages()
        if page.name != "index.md" and page.name not in OWN_RUNNER
    ]


def test_pages_with_their_own_runner_are_run_there():
    for page, runner in OWN_RUNNER.items():
        assert (REPO / "docs" / page).is_file(), page
        assert page in (REPO / runner).read_text(), f"{runner} does not run docs/{page}"


def python_blocks() -> list[str]:
    """Every python block of the README and the docs, in execution order."""
    return [block for _, blocks in code_sources() for block in blocks]


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
        for path, blocks in code_sources():
            for block in blocks:
                stdout = io.StringIO()
                with contextlib.redirect_stdout(stdout):
                    exec(compile(block, str(path.relative_to(REPO)), "exec"), namespace)
                outputs.append(stdout.getvalue())
    return {"namespace": namespace, "outputs": outputs, "dir": workdir}


def test_site_home_repeats_the_readme_quick_start():
    assert blocks_of(REPO / "docs" / "index.md") == blocks_of(REPO / "README.md")


def test_every_docs_page_is_in_the_nav():
    pages = {p.name for p in doc_pages()}
    assert all(p.is_file() for p in doc_pages())
    assert {p.name for p in (REPO / "docs").glob("*.md")} <= pages


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
