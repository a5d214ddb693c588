"""What every two-sample shift test shares: the result record and the input checks.

Each detector (:mod:`~dgpbench.detectors.ks`, :mod:`~dgpbench.detectors.mmd`,
:mod:`~dgpbench.detectors.chi2`, :mod:`~dgpbench.detectors.classifier`) supplies only its
statistic and p-value; the record layout follows alibi-detect's ``concept_drift_dict``
(``data`` + ``meta``), so a table cell can be rebuilt from ``to_dict()`` alone.

This module sits on the ground floor: it imports nothing of dgpbench but the version and
:mod:`dgpbench.state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "BatchDecisionMixin",
    "ShiftTestResult",
    "check_min_samples",
    "drift_meta",
    "package_version",
]


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


class ReferenceState:
    """The saved state of a detector: its reference sample, refitted on when restored.

    :mod:`dgpbench.saved` stores a detector as ``get_state()`` gives it; ``set_state``
    refits the detector on the sample, so its own ``fit`` checks it (finite, shape, sample
    count) exactly as for fresh data and rebuilds the identical state.
    """

    #: The fitted attribute holding the reference sample (``y_ref_`` for hard labels).
    _reference_attribute: str = "X_ref_"

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state: no JSON values, one array (the reference sample).

        Returns
        -------
        state : dict
            Empty.
        arrays : dict of str to ndarray
            ``{"X_ref_": ...}`` (``y_ref_`` for the chi-squared test).

        Raises
        ------
        TypeError
            If the detector holds other fitted state, or a classifier object (which cannot
            be stored without pickle).
        """
        from dgpbench.state import check_attributes

        key = self._reference_attribute
        check_attributes(self, {key, "n_features_in_"})
        if getattr(self, "classifier", None) is not None:
            raise TypeError(
                "cannot save a ClassifierShiftDetector with a scikit-learn classifier (it cannot "
                "be stored without pickle): use classifier=None, the default network"
            )
        return {}, {key: np.asarray(getattr(self, key))}

    def set_state(self, state: dict[str, Any], arrays: Any) -> ReferenceState:
        """Refit on the reference sample :meth:`get_state` gave.

        Parameters
        ----------
        state : dict
            The JSON state: empty.
        arrays : mapping of str to ndarray
            The reference sample under its attribute's name.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If the state is not empty, or the sample is not numbers or fails ``fit``.
        """
        from dgpbench.state import StateError, check_keys

        check_keys(state, ())
        key = self._reference_attribute
        ref = arrays[key]
        if ref.dtype.kind not in "biuf":
            raise StateError(f"{key} has dtype {ref.dtype}, not numbers")
        try:
            self.fit(ref.reshape(-1, 1) if key == "y_ref_" else ref)
        except (ValueError, TypeError) as exc:
            raise StateError(f"its reference sample {key} is invalid: {exc}") from exc
        return self


class BatchDecisionMixin:
    """``predict`` and ``p_value`` of a batch detector, both read off its ``test(X)``."""

    def predict(self, X: Any) -> bool:
        """Return ``True`` if the batch ``X`` is flagged as shifted.

        Parameters
        ----------
        X : array-like
            Test batch, as :meth:`test` takes it.

        Returns
        -------
        bool
            One decision for the whole batch (not one per sample).
        """
        return self.test(X).is_drift  # type: ignore[attr-defined]

    def p_value(self, X: Any) -> float:
        """Return the batch-level p-value of ``X`` against the reference.

        For the per-feature tests it is the smallest corrected p-value; with Bonferroni or no
        correction, ``predict(X)`` equals ``p_value(X) < alpha`` up to rounding at the boundary
        (``predict`` compares the raw p-values with ``alpha / d``, as the paper does).

        Parameters
        ----------
        X : array-like
            Test batch, as :meth:`test` takes it.

        Returns
        -------
        float
            In [0, 1].
        """
        return self.test(X).p_value  # type: ignore[attr-defined]
