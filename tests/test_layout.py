"""The tests mirror the package: one folder per subpackage of dgpbench, end-to-end runs apart."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "dgpbench"
# Not a subpackage: Snakemake end to end (marked `workflow` in conftest.py).
END_TO_END = {"workflow"}


def _folders() -> set[str]:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir()}
    return {name for name in folders if not name.startswith((".", "_"))} - {"fixtures"}


def test_every_test_folder_names_a_subpackage_or_the_end_to_end_runs():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert _folders() - END_TO_END <= subpackages


def test_test_module_names_are_unique():
    # tests/ has no __init__.py: pytest imports each module by its file name alone
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
    assert not list(TESTS.rglob("__init__.py"))
