"""The imports run one way: cli -> step modules -> library; the registry imports nothing;
no module of the package reaches itself through its imports (no import cycle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dgpbench"
CLI = {"dgpbench.cli", "dgpbench.__main__"}
REGISTRY = "dgpbench.commands"
STEPS = {
    "dgpbench.steps",
    "dgpbench.runner",
    "dgpbench.analysis.steps",
    "dgpbench.comparisons.steps",
    "dgpbench.fl_steps",
}


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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (or a module importing itself),
    each as one cycle through it (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph[node]:
                    groups.append(sorted(group))
    return groups


def test_the_cycle_finder_finds_cycles():
    # the oracle: hand-made graphs with known cycles
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    found = _cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}})
    assert sorted(found) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_cycle_in_the_package():
    # Imports inside functions count too: a deferred import hides a circle, it does not
    # remove it (the two modules still cannot be understood or tested one without the other).
    graph = {name: _imports(name) - {name} for name in MODULES}
    assert _cycles(graph) == [], "modules that import each other (directly or via others)"


def test_architectures_and_checkpoints_sit_below_training_and_the_split():
    assert not _imports("dgpbench.architectures") & {
        "dgpbench.models",
        "dgpbench.cnn",
        "dgpbench.checkpoints",
    }
    assert not _imports("dgpbench.checkpoints") & {"dgpbench.models", "dgpbench.cnn"}


def test_the_old_import_paths_still_work():
    from dgpbench import architectures, checkpoints, cnn, models

    assert models.build_mlp is architectures.build_mlp
    assert models.ArchConfig is architectures.ArchConfig
    assert models.ACTIVATIONS is architectures.ACTIVATIONS
    assert models.load_checkpoint is checkpoints.load_checkpoint
    assert models.save_checkpoint is checkpoints.save_checkpoint
    assert cnn.CNNConfig is architectures.CNNConfig
    assert cnn.build_cnn is architectures.build_cnn


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
