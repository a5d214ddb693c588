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


# The same for the multivariate batch tests (MMD: at least 2 rows; classifier: at least 4).
_BATCH_LEVEL_TEST: dict[str, str] = {
    "check_methods_sample_order_invariance": (
        "predict returns one bool per batch, not one value per row, so there is no per-row "
        "output to permute"
    ),
    "check_methods_subset_invariance": (
        "predict is evaluated on single-row batches, which a two-sample test refuses (it "
        "needs several samples); a batch decision is not a union of per-row decisions"
    ),
}


# A transformer over a trained MLP accepts exactly the model's input size; it raises a
# ValueError naming both sizes otherwise (tested in tests/features/test_features.py). The conformance
# test uses a 3-input model, so every check that draws X with another number of features
# fails on that error before reaching what it checks.
_FIXED_INPUT_SIZE = "the check draws X with {} features; a transformer over a trained MLP accepts only the model's input size (3 in the conformance test) and raises ValueError naming both sizes"
_MODEL_TRANSFORMER: dict[str, str] = {
    "check_dtype_object": _FIXED_INPUT_SIZE.format(10),
    "check_estimators_dtypes": _FIXED_INPUT_SIZE.format(5),
    "check_estimators_fit_returns_self": _FIXED_INPUT_SIZE.format(2),
    "check_estimators_overwrite_params": _FIXED_INPUT_SIZE.format(2),
    "check_fit2d_1feature": _FIXED_INPUT_SIZE.format(1)
    + ", so the error names the model's input size, not 'n_features = 1'",
    "check_fit2d_1sample": _FIXED_INPUT_SIZE.format(10)
    + ", so the size error comes before any one-sample message",
    "check_fit_check_is_fitted": _FIXED_INPUT_SIZE.format(2),
    "check_fit_idempotent": _FIXED_INPUT_SIZE.format(2),
    "check_n_features_in": _FIXED_INPUT_SIZE.format(2),
    "check_n_features_in_after_fitting": _FIXED_INPUT_SIZE.format(4)
    + " (and it expects the mismatch message of scikit-learn's own validation)",
    "check_positive_only_tag_during_fit": _FIXED_INPUT_SIZE.format(4),
    "check_readonly_memmap_input": _FIXED_INPUT_SIZE.format(2),
}


def _registry() -> dict[type, dict[str, str]]:
    # Imported here, not at module level, so this module never creates import cycles and the
    # modules of other estimators are loaded only when the registry is consulted.
    from dgpbench.detectors import (
        ClassifierShiftDetector,
        DeepKernelMMDShiftDetector,
        LSDDShiftDetector,
        MMDAggShiftDetector,
        MMDShiftDetector,
    )
    from dgpbench.detectors.energy import EnergyShiftDetector
    from dgpbench.detectors.ks import KSShiftDetector
    from dgpbench.detectors.per_feature import PerFeatureShiftDetector
    from dgpbench.features.network import NetworkFeatures

    return {
        KSShiftDetector: dict(_BATCH_LEVEL_DETECTOR),
        MMDShiftDetector: dict(_BATCH_LEVEL_TEST),
        EnergyShiftDetector: dict(_BATCH_LEVEL_TEST),
        PerFeatureShiftDetector: dict(_BATCH_LEVEL_DETECTOR),
        ClassifierShiftDetector: dict(_BATCH_LEVEL_TEST),
        LSDDShiftDetector: dict(_BATCH_LEVEL_TEST),
        MMDAggShiftDetector: dict(_BATCH_LEVEL_TEST),
        DeepKernelMMDShiftDetector: dict(_BATCH_LEVEL_TEST),
        NetworkFeatures: dict(_MODEL_TRANSFORMER),
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
    >>> from dgpbench.detectors.ks import KSShiftDetector
    >>> sorted(expected_failed_checks(KSShiftDetector()))
    ['check_methods_sample_order_invariance', 'check_methods_subset_invariance']
    """
    registry = _registry()
    for cls in type(estimator).__mro__:
        if cls in registry:
            return dict(registry[cls])
    return {}
