"""Two-sample shift tests on arrays: one module per test, one result record.

* :class:`KSShiftDetector` (``ks``): per-feature Kolmogorov-Smirnov + Bonferroni/FDR;
* :class:`MMDShiftDetector` (``mmd``): Gaussian-kernel MMD, permutation p-value;
* :class:`ChiSquareShiftDetector` (``chi2``): class frequencies of hard labels;
* :class:`ClassifierShiftDetector` (``classif``): a domain classifier's held-out accuracy;
* :class:`CvMShiftDetector` (``cvm``), :class:`ADShiftDetector` (``ad``),
  :class:`FisherShiftDetector` (``fisher``): per-feature Cramér-von Mises, Anderson-Darling
  and Fisher's exact tests with the KS corrections;
* :class:`EnergyShiftDetector` (``energy``): energy distance, permutation p-value.
* :class:`LSDDShiftDetector` (``lsdd``), :class:`MMDAggShiftDetector` (``mmdagg``) and
  :class:`DeepKernelMMDShiftDetector` (``mmd_deep``): more kernel two-sample tests.

The KS engine (:mod:`~dgpbench.detectors.ks_test`: :func:`ks_test`, the batched
:func:`ks_pvalues`, the correction :func:`apply_correction`) is what the estimator, the
DGP paper's protocol and the Failing-loudly grid all call.

Detectors take arrays (features, a label column, or images for the classifier test); none
loads or runs the user's model. :func:`make_detector` builds one by name.

The names are imported on first use (:mod:`dgpbench._lazy`): the KS test's arithmetic
(:mod:`~dgpbench.detectors.ks_test`) and the result record load without scikit-learn,
which scoring a saved softmax + KS detector never imports (:mod:`dgpbench.saved.scoring`).
"""

from dgpbench._lazy import lazy_exports

_EXPORTS = {
    "ADShiftDetector": "dgpbench.detectors.anderson",
    "CvMShiftDetector": "dgpbench.detectors.cvm",
    "EnergyShiftDetector": "dgpbench.detectors.energy",
    "FeatureTestResult": "dgpbench.detectors.per_feature",
    "FisherShiftDetector": "dgpbench.detectors.fisher",
    "DETECTORS": "dgpbench.detectors.registry",
    "ChiSquareShiftDetector": "dgpbench.detectors.chi2",
    "ClassifierShiftDetector": "dgpbench.detectors.classifier",
    "KSShiftDetector": "dgpbench.detectors.ks",
    "KSTestResult": "dgpbench.detectors.ks_test",
    "apply_correction": "dgpbench.detectors.ks_test",
    "ks_pvalues": "dgpbench.detectors.ks_test",
    "ks_test": "dgpbench.detectors.ks_test",
    "MMDShiftDetector": "dgpbench.detectors.mmd",
    "LSDDShiftDetector": "dgpbench.detectors.lsdd",
    "MMDAggShiftDetector": "dgpbench.detectors.mmdagg",
    "DeepKernelMMDShiftDetector": "dgpbench.detectors.mmd_deep",
    "ShiftTestResult": "dgpbench.detectors.base",
    "make_detector": "dgpbench.detectors.registry",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.detectors", _EXPORTS)
