"""Backward-compatible home of the KS detector: it now lives in :mod:`dgpbench.detectors.ks`.

``from dgpbench.detection import KSShiftDetector`` (and the helpers :mod:`dgpbench.protocol`
and :mod:`dgpbench.label_shift` share with it) keeps working; new code imports from
:mod:`dgpbench.detectors`.
"""

from __future__ import annotations

from dgpbench.detectors.ks import (
    CORRECTIONS,
    KSShiftDetector,
    KSTestResult,
    _check_no_constant_features,
    _decide,
    _package_version,
)

__all__ = ["CORRECTIONS", "KSShiftDetector", "KSTestResult"]

# Private helpers re-exported for the modules that import them from here.
_REEXPORTED = (_check_no_constant_features, _decide, _package_version)
