"""The two-sample tests by the names the command line and the workflow use."""

from __future__ import annotations

from typing import Any

from dgpbench._lazy import LazyRegistry

__all__ = ["DETECTORS", "make_detector"]

#: Test name -> detector class: ``ks`` (per feature + correction), ``mmd`` (kernel,
#: permutations), ``chi2`` (hard labels), ``classif`` (domain classifier), ``cvm``
#: (Cramér-von Mises), ``ad`` (Anderson-Darling), ``energy`` (energy distance,
#: permutations), ``fisher`` (Fisher's exact test of binary features), ``lsdd``
#: (least-squares density difference), ``mmdagg`` (aggregated kernels), ``mmd_deep``
#: (learned deep kernel). Each module is imported when its test is first looked up.
DETECTORS: LazyRegistry = LazyRegistry(
    {
        "ks": "dgpbench.detectors.ks:KSShiftDetector",
        "mmd": "dgpbench.detectors.mmd:MMDShiftDetector",
        "chi2": "dgpbench.detectors.chi2:ChiSquareShiftDetector",
        "classif": "dgpbench.detectors.classifier:ClassifierShiftDetector",
        "cvm": "dgpbench.detectors.cvm:CvMShiftDetector",
        "ad": "dgpbench.detectors.anderson:ADShiftDetector",
        "energy": "dgpbench.detectors.energy:EnergyShiftDetector",
        "fisher": "dgpbench.detectors.fisher:FisherShiftDetector",
        "lsdd": "dgpbench.detectors.lsdd:LSDDShiftDetector",
        "mmdagg": "dgpbench.detectors.mmdagg:MMDAggShiftDetector",
        "mmd_deep": "dgpbench.detectors.mmd_deep:DeepKernelMMDShiftDetector",
    }
)


def make_detector(name: str, **params: Any) -> Any:
    """Build the detector of a named test.

    Parameters
    ----------
    name : {"ks", "mmd", "chi2", "classif", "cvm", "ad", "energy", "fisher", "lsdd", "mmdagg", "mmd_deep"}
        The test.
    **params
        Constructor parameters of that detector (``alpha``, ``n_permutations``, ...).

    Returns
    -------
    detector
        An unfitted detector.

    Raises
    ------
    ValueError
        If ``name`` is not a known test (the message lists the valid names).

    Examples
    --------
    >>> make_detector("mmd", n_permutations=99)
    MMDShiftDetector(n_permutations=99)
    """
    if name not in DETECTORS:
        raise ValueError(f"unknown test {name!r}; choose from {', '.join(DETECTORS)}")
    return DETECTORS[name](**params)
