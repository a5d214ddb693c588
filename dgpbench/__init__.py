"""dgpbench: deep graph persistence and its baselines for covariate-shift detection.

Public API: the feature transformers :class:`DGPFeatures`, :class:`TUFeatures`,
:class:`MAGDiffFeatures`, :class:`SoftmaxFeatures` and the detector :class:`KSShiftDetector`.
They are imported lazily, so ``import dgpbench`` (and the CLI's ``--help``) stays fast.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("dgpbench")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

_LAZY = {
    "DGPFeatures": "dgpbench.features",
    "TUFeatures": "dgpbench.features",
    "MAGDiffFeatures": "dgpbench.features",
    "SoftmaxFeatures": "dgpbench.features",
    "KSShiftDetector": "dgpbench.detection",
}

__all__ = [
    "DGPFeatures",
    "KSShiftDetector",
    "MAGDiffFeatures",
    "SoftmaxFeatures",
    "TUFeatures",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dgpbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
