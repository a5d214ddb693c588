"""Lazy re-exports for package ``__init__`` modules (PEP 562), and registries whose entries
are imported on first use.

A package's public names are imported on first use, so ``import dgpbench.cli`` or the
command's ``--help`` does not pay for torch or scikit-learn, and a package's ``__init__``
adds no import edge that could close a circle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` resolving ``name -> module``."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__


class LazyRegistry(MutableMapping[str, Any]):
    """A name -> object registry whose objects are imported on first use.

    Each entry is given as ``"package.module:attribute"``; iterating over the names (``in``,
    ``list(registry)``, a config check listing the valid names) imports nothing, so the
    workflow's parse and a command's start do not load every registered module (SciPy,
    scikit-learn, torch). An entry set with ``registry[name] = obj`` is kept as given.

    Parameters
    ----------
    targets : dict of str to str
        Name -> ``"module:attribute"``, in the order the registry lists them.
    """

    def __init__(self, targets: dict[str, str]) -> None:
        self._targets: dict[str, str | None] = dict(targets)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            module, _, attribute = self._targets[name].partition(":")  # KeyError if unknown
            self._loaded[name] = getattr(import_module(module), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._targets[name] = None
        self._loaded[name] = value

    def __delitem__(self, name: str) -> None:
        del self._targets[name]
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:  # Mapping's default would import the entry
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self._targets)})"
