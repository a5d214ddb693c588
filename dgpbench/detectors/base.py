"""What every two-sample shift test shares: the result record and the input checks.

Each detector (:mod:`~dgpbench.detectors.ks`, :mod:`~dgpbench.detectors.mmd`,
:mod:`~dgpbench.detectors.chi2`, :mod:`~dgpbench.detectors.classifier`) supplies only its
statistic and p-value; the record layout follows alibi-detect's ``concept_drift_dict``
(``data`` + ``meta``), so a table cell can be rebuilt from ``to_dict()`` alone.

This module sits on the ground floor: it imports nothing of dgpbench but the version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ShiftTestResult", "check_min_samples", "drift_meta", "package_version"]


def package_version() -> str:
    """The installed dgpbench version (imported lazily: ``dgpbench`` may import detectors)."""
    import dgpbench

    return str(dgpbench.__version__)


def check_min_samples(n: int, minimum: int, name: str, why: str) -> None:
    """Raise ``ValueError`` naming ``name`` if it has fewer than ``minimum`` samples."""
    if n < minimum:
        raise ValueError(f"{name} has {n} samples; this test needs at least {minimum} ({why})")


def drift_meta(name: str, version: str, **settings: Any) -> dict[str, Any]:
    """alibi-detect's ``meta`` block of an offline drift detector, then the test's settings."""
    return {"name": name, "version": version, "detector_type": "drift", "online": False, **settings}


@dataclass(frozen=True, eq=False)
class ShiftTestResult:
    """Outcome of one batch test with a single batch-level statistic and p-value.

    Parameters
    ----------
    is_drift : bool
        ``True`` if the test batch is flagged as shifted (``p_val < threshold``).
    statistic : float
        The test statistic (MMD^2, chi-squared, the classifier's held-out accuracy).
    p_val : float
        The test's p-value.
    threshold : float
        The cut-off applied to ``p_val`` (the significance level ``alpha``).
    alpha : float
        Significance level.
    n_ref : int
        Number of reference samples.
    n : int
        Number of test samples.
    name : str
        The detector's class name (the test's name).
    version : str, default=""
        dgpbench version that produced the record.
    details : dict, default={}
        Test-specific settings and by-products (bandwidth, number of permutations, degrees
        of freedom, ...); they go to ``meta`` in :meth:`to_dict`.

    Examples
    --------
    >>> r = ShiftTestResult(True, 3.2, 0.01, 0.05, 0.05, 100, 80, "MMDShiftDetector")
    >>> r.p_value, r.to_dict()["data"]["is_drift"]
    (0.01, True)
    """

    is_drift: bool
    statistic: float
    p_val: float
    threshold: float
    alpha: float
    n_ref: int
    n: int
    name: str
    version: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def p_value(self) -> float:
        """The batch-level p-value (compared with ``alpha``)."""
        return float(self.p_val)

    @property
    def meta(self) -> dict[str, Any]:
        """A fresh ``meta`` dict (alibi-detect layout plus the test's settings)."""
        return {
            **drift_meta(self.name, self.version, alpha=self.alpha, n_ref=self.n_ref, n=self.n),
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.details.items()},
        }

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Return ``{"data": {...}, "meta": {...}}`` with plain Python numbers."""
        return {
            "data": {
                "is_drift": bool(self.is_drift),
                "statistic": float(self.statistic),
                "p_val": float(self.p_val),
                "threshold": float(self.threshold),
            },
            "meta": self.meta,
        }
