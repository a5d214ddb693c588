"""Two-sample shift tests on arrays: one module per test, one result record.

* :class:`KSShiftDetector` (``ks``): per-feature Kolmogorov-Smirnov + Bonferroni/FDR;
* :class:`MMDShiftDetector` (``mmd``): Gaussian-kernel MMD, permutation p-value;
* :class:`ChiSquareShiftDetector` (``chi2``): class frequencies of hard labels;
* :class:`ClassifierShiftDetector` (``classif``): a domain classifier's held-out accuracy.

Detectors take arrays (features, a label column, or images for the classifier test); none
loads or runs the user's model. :func:`make_detector` builds one by name.
"""

from dgpbench.detectors.base import ShiftTestResult
from dgpbench.detectors.chi2 import ChiSquareShiftDetector
from dgpbench.detectors.classifier import ClassifierShiftDetector
from dgpbench.detectors.ks import KSShiftDetector, KSTestResult
from dgpbench.detectors.mmd import MMDShiftDetector
from dgpbench.detectors.registry import DETECTORS, make_detector

__all__ = [
    "DETECTORS",
    "ChiSquareShiftDetector",
    "ClassifierShiftDetector",
    "KSShiftDetector",
    "KSTestResult",
    "MMDShiftDetector",
    "ShiftTestResult",
    "make_detector",
]
