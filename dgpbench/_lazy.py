"""Lazy re-exports for package ``__init__`` modules (PEP 562).

A package's public names are imported on first use, so ``import dgpbench.cli`` or the
command's ``--help`` does not pay for torch or scikit-learn, and a package's ``__init__``
adds no import edge that could close a circle.
"""

from __future__ import annotations

from collections.abc import Callable
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
