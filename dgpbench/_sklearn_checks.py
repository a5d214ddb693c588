"""The single registry of scikit-learn estimator checks that dgpbench estimators fail on purpose.

``tests/test_sklearn_checks.py`` passes :func:`expected_failed_checks` to
``sklearn.utils.estimator_checks.parametrize_with_checks(..., xfail_strict=True)``: every entry
must fail (a check that starts passing is reported), and every failure needs an entry here with
a reason. To register a new estimator, add one ``cls: {check_name: reason}`` item to
:func:`_registry`; subclasses inherit their parent's entries.
"""

from __future__ import annotations

from typing import Any

__all__ = ["expected_failed_checks"]

# A batch-level detector answers one question per batch ("is this batch shifted?"), so the
# checks that assume one prediction per row cannot hold. Shared by any future batch detector.
_BATCH_LEVEL_DETECTOR: dict[str, str] = {
    "check_methods_sample_order_invariance": (
        "predict returns one bool per batch, not one value per row, so there is no per-row "
        "output to permute (the decision itself is order invariant: KS uses sorted values)"
    ),
    "check_methods_subset_invariance": (
        "predict is evaluated on single-row batches, which a two-sample KS test rejects "
        "(at least 2 samples required); a batch decision is not a union of per-row decisions"
    ),
}


def _registry() -> dict[type, dict[str, str]]:
    # Imported here, not at module level, so this module never creates import cycles and the
    # modules of other estimators are loaded only when the registry is consulted.
    from dgpbench.detection import KSShiftDetector

    return {
        KSShiftDetector: dict(_BATCH_LEVEL_DETECTOR),
    }


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """Return ``{check_name: reason}`` for the checks ``estimator`` is expected to fail.

    Parameters
    ----------
    estimator : estimator instance
        The estimator under test; looked up by its class, then its base classes.

    Returns
    -------
    dict of str to str
        A fresh dict (empty if the class has no expected failures).

    Examples
    --------
    >>> from dgpbench.detection import KSShiftDetector
    >>> sorted(expected_failed_checks(KSShiftDetector()))
    ['check_methods_sample_order_invariance', 'check_methods_subset_invariance']
    """
    registry = _registry()
    for cls in type(estimator).__mro__:
        if cls in registry:
            return dict(registry[cls])
    return {}
