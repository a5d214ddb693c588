"""No module of the package imports another subpackage's private (``_``) names.

A name that starts with ``_`` (a module such as ``topology/_kernels.py``, or a function,
class or constant) is private to the subpackage that defines it: ``dgpbench.features`` may
not import ``dgpbench.topology._kernels`` nor ``dgpbench.topology.graphs._flatten``; what
another subpackage needs is made public (or moved to where it is needed). Within one
subpackage (``dgpbench.models.stacked`` importing ``dgpbench.models.train._adam``) private
names are shared freely.

The modules directly under ``dgpbench/`` whose names start with ``_`` (``_compat``,
``_device``, ``_lazy``, ``_validation``, ...) are the package's shared internals: every
subpackage may import them, but only their public names (``from dgpbench._compat import
fit_context``, never ``from dgpbench._compat import _something``).

Imports inside functions count as well as those at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dgpbench"

# (importing module, private name) pairs fixed on another branch; the merge empties this set.
ALLOWED: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _subpackage(module: str) -> str:
    """``dgpbench.models.train`` -> ``models``; a top-level module (``dgpbench.io``,
    ``dgpbench._compat``) or the root -> ``""``."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return ""


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _imported(name: str) -> list[tuple[str, str]]:
    """``(target module, imported name or "")`` for every import of the package in ``name``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.extend((base, alias.name) for alias in node.names)
    return [(m, n) for m, n in found if m == "dgpbench" or m.startswith("dgpbench.")]


def _violations(importer: str, target: str, name: str) -> list[str]:
    """What is wrong with ``from target import name`` (``import target`` when name is "")
    written in ``importer``."""
    home = _subpackage(importer)
    parts = target.split(".")
    wrong = []
    # a private module on the way to the target, inside another subpackage
    for i in range(2, len(parts)):
        if _private(parts[i]) and _subpackage(target) != home:
            wrong.append(target)
            break
    full = f"{target}.{name}"
    if name and full in MODULES:  # `from package import module`: the module rule
        wrong += _violations(importer, full, "")
    elif name and _private(name) and (_subpackage(target) != home or target.count(".") == 1):
        wrong.append(full)
    return wrong


def test_the_rule_on_hand_made_imports():
    # the oracle: imports whose verdict is known
    assert _violations("dgpbench.features.dgp", "dgpbench.topology._kernels", "") == [
        "dgpbench.topology._kernels"
    ]
    assert _violations("dgpbench.features.dgp", "dgpbench.topology.graphs", "_flatten") == [
        "dgpbench.topology.graphs._flatten"
    ]
    assert _violations("dgpbench.features.dgp", "dgpbench.topology", "_kernels") == [
        "dgpbench.topology._kernels"
    ]
    assert _violations("dgpbench.models.stacked", "dgpbench.models.train", "_adam") == []
    assert _violations("dgpbench.topology.mst", "dgpbench.topology._kernels", "mst") == []
    assert _violations("dgpbench.features.base", "dgpbench._compat", "fit_context") == []
    assert _violations("dgpbench.features.base", "dgpbench._compat", "_fit") == [
        "dgpbench._compat._fit"
    ]
    assert _violations("dgpbench.cli.analysis", "dgpbench.analysis.common", "read_table") == []
    assert _violations("dgpbench.models.train", "dgpbench", "_device") == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_another_subpackages_private_names(name):
    wrong = {
        full
        for target, imported in _imported(name)
        for full in _violations(name, target, imported)
        if (name, full) not in ALLOWED
    }
    assert not wrong, f"{name} imports private names of another subpackage: {sorted(wrong)}"


def test_every_allowed_exception_is_still_needed():
    used = {
        (name, full)
        for name in MODULES
        for target, imported in _imported(name)
        for full in _violations(name, target, imported)
    }
    assert ALLOWED <= used, f"fixed, remove from ALLOWED: {sorted(ALLOWED - used)}"


# (module, private name in its __all__) fixed on another branch; the merge empties this set.
ALLOWED_EXPORTS: set[tuple[str, str]] = set()


def _exported(name: str) -> set[str]:
    """The names of a module's ``__all__`` list and ``_EXPORTS`` dict (literal values)."""
    names: set[str] = set()
    for node in ast.parse(MODULES[name].read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id in {"__all__", "_EXPORTS"} for t in targets):
            value = node.value
            if isinstance(value, ast.Dict):
                names.update(k.value for k in value.keys if isinstance(k, ast.Constant))
            elif isinstance(value, ast.List | ast.Tuple | ast.Set):
                names.update(e.value for e in value.elts if isinstance(e, ast.Constant))
    return names


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_is_exported(name):
    private = {n for n in _exported(name) if _private(n) and (name, n) not in ALLOWED_EXPORTS}
    assert not private, f"{name} exports private names: {sorted(private)}"


def test_the_exports_are_read():
    assert "train_mlp" in _exported("dgpbench.models")
    assert "train_mlp" in _exported("dgpbench.models.train")


def test_every_allowed_export_is_still_needed():
    used = {(name, n) for name in MODULES for n in _exported(name) if _private(n)}
    assert ALLOWED_EXPORTS <= used, f"fixed, remove: {sorted(ALLOWED_EXPORTS - used)}"
