"""dgpbench: deep graph persistence and its baselines for covariate-shift detection.

Public API: the feature transformers :class:`DGPFeatures`, :class:`TUFeatures`,
:class:`MAGDiffFeatures`, :class:`SoftmaxFeatures`, "Failing loudly"'s representations
(:class:`NoRedFeatures`, :class:`PCAFeatures`, :class:`SRPFeatures`, :class:`UAEFeatures`,
:class:`TAEFeatures`, :class:`BBSDhFeatures`) and :class:`DGPApproxFeatures`; the detectors
:class:`KSShiftDetector`, :class:`MMDShiftDetector`, :class:`ChiSquareShiftDetector`,
:class:`ClassifierShiftDetector` and :func:`make_detector`.
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
    "DGPFeatures": "dgpbench.features.dgp",
    "TUFeatures": "dgpbench.features.tu",
    "MAGDiffFeatures": "dgpbench.features.magdiff",
    "SoftmaxFeatures": "dgpbench.features.softmax",
    "KSShiftDetector": "dgpbench.detectors.ks",
    "MMDShiftDetector": "dgpbench.detectors",
    "ChiSquareShiftDetector": "dgpbench.detectors",
    "ClassifierShiftDetector": "dgpbench.detectors",
    "make_detector": "dgpbench.detectors",
    "NoRedFeatures": "dgpbench.features.reductions",
    "PCAFeatures": "dgpbench.features.reductions",
    "SRPFeatures": "dgpbench.features.reductions",
    "UAEFeatures": "dgpbench.features.autoencoders",
    "TAEFeatures": "dgpbench.features.autoencoders",
    "BBSDhFeatures": "dgpbench.features.bbsd",
    "DGPApproxFeatures": "dgpbench.features.dgp_approx",
}

__all__ = [
    "BBSDhFeatures",
    "ChiSquareShiftDetector",
    "ClassifierShiftDetector",
    "DGPApproxFeatures",
    "DGPFeatures",
    "KSShiftDetector",
    "MAGDiffFeatures",
    "MMDShiftDetector",
    "NoRedFeatures",
    "PCAFeatures",
    "SRPFeatures",
    "SoftmaxFeatures",
    "TAEFeatures",
    "TUFeatures",
    "UAEFeatures",
    "__version__",
    "make_detector",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dgpbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
