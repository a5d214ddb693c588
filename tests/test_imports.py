"""The imports run one way: cli -> step modules -> library; the registry imports nothing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dgpbench"
CLI = {"dgpbench.cli", "dgpbench.__main__"}
REGISTRY = "dgpbench.commands"
STEPS = {"dgpbench.steps", "dgpbench.runner", "dgpbench.analysis.steps", "dgpbench.fl_steps"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """Package modules that ``name`` imports anywhere (module level or inside functions)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            # `from dgpbench.analysis import plots` imports the submodule `plots`
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES)
    return {m for m in found if m == "dgpbench" or m.startswith("dgpbench.")}


def test_the_layers_are_known_modules():
    assert CLI | STEPS | {REGISTRY} <= set(MODULES)


def test_registry_imports_nothing_of_the_package():
    assert _imports(REGISTRY) == set()


@pytest.mark.parametrize("name", sorted(set(MODULES) - CLI))
def test_only_the_entry_point_imports_the_cli(name):
    assert not _imports(name) & CLI


@pytest.mark.parametrize("name", sorted(set(MODULES) - CLI - STEPS - {REGISTRY}))
def test_library_modules_import_no_step_module(name):
    assert not _imports(name) & (STEPS | {REGISTRY})


def test_step_modules_import_the_registry_not_the_cli():
    for name in STEPS:
        imports = _imports(name)
        assert REGISTRY in imports, name
        assert not imports & CLI, name


def test_the_cli_loads_only_the_analysis_target_it_runs():
    # `dgpbench` builds every parser at start-up; a target's module (torch, numba, seaborn)
    # is imported only when that target is chosen
    code = (
        "import sys; from dgpbench.cli import build_parser; "
        "parser = build_parser(); loaded = set(sys.modules); "
        "args = parser.parse_args(['analysis', 'bounds', '--out-dir', 'x']); "
        "print(args.n_matrices, args.threads); print(' '.join(sorted(loaded))); "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "10000 None"
    at_start, after = set(out[1].split()), set(out[2].split())
    heavy = {"torch", "seaborn", "matplotlib", "numba"}
    assert not at_start & (heavy | {"dgpbench.analysis.bounds"})
    assert "dgpbench.analysis.bounds" in after
    assert not after & {"torch", "seaborn", "dgpbench.analysis.curves"}
