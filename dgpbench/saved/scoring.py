"""Score batches with a saved softmax + KS detector without importing scikit-learn.

``dgpbench score --detector`` pays the start-up of every module it imports, and importing
any part of scikit-learn also imports pandas, scipy.sparse.linalg and its own modules: a
third of a call's time beyond ``import torch`` (docs/your-own-model.md). For the detector
most monitoring uses, the softmax (BBSDs) representation tested with per-feature KS,
:func:`load_scorer` restores the file into two light objects that run the estimators' own
code without scikit-learn:

* :class:`RestoredSoftmax` is :class:`dgpbench.features.network.SoftmaxOutput`, the code
  :class:`~dgpbench.SoftmaxFeatures` runs on a batch (image layout, body/head split, forward
  pass, softmax, class-mean distances);
* :class:`RestoredKS` calls :func:`dgpbench.detectors.ks_test.ks_test`, the whole test of
  :class:`~dgpbench.KSShiftDetector` once its inputs are checked.

They are loaded by :mod:`dgpbench.saved.files`' own loader (the same format checks, the
estimators' own ``set_state``, network fingerprint and refit of the reference sample). Their
parameter checks are built from the rules that the estimators' scikit-learn constraints are
built from (:mod:`dgpbench.parameters`); the input checks that scikit-learn does for the
estimators are done here, with the same outcome. ``tests/saved/test_scoring.py`` holds them to
scikit-learn's ``_parameter_constraints`` value by value, to the estimators' results batch
by batch, and to :func:`load_detector`'s refusals file by file. Every other detector loads
as :func:`dgpbench.saved.files.load_detector` loads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from dgpbench.detectors.base import ReferenceState
from dgpbench.detectors.ks_test import ks_test
from dgpbench.features.network import SoftmaxOutput, as_real_array
from dgpbench.parameters import KS_RULES, SOFTMAX_RULES, light_checks
from dgpbench.saved.files import FittedDetector, _load, detector_classes, load_detector

__all__ = ["RestoredKS", "RestoredSoftmax", "load_scorer"]


class _Restored:
    """The part of scikit-learn's estimator protocol that :mod:`dgpbench.saved` uses:
    ``get_params``, ``set_params`` and ``_validate_params`` over ``_defaults``, with the
    checks built from the estimator's own parameter rules (:mod:`dgpbench.parameters`).
    """

    _name: ClassVar[str]  # the registry name (and the estimator's class name)
    _defaults: ClassVar[dict[str, Any]]
    _checks: ClassVar[dict[str, tuple[Callable[[Any], bool], str]]]

    def __init__(self) -> None:
        for key, value in self._defaults.items():
            setattr(self, key, value)

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The parameters, as scikit-learn's ``get_params``.

        Parameters
        ----------
        deep : bool, default=False
            Ignored: a restored estimator holds no sub-estimator.

        Returns
        -------
        dict
            Parameter name -> value.
        """
        return {key: getattr(self, key) for key in self._defaults}

    def set_params(self, **params: Any) -> _Restored:
        """Set parameters, as scikit-learn's ``set_params`` (checked by ``_validate_params``).

        Parameters
        ----------
        **params : dict
            Parameter name -> value; each name must be one of the estimator's.

        Returns
        -------
        self : object

        Raises
        ------
        ValueError
            On a name the estimator does not take.
        """
        for key, value in params.items():
            if key not in self._defaults:
                raise ValueError(f"invalid parameter {key!r} for {self._name}")
            setattr(self, key, value)
        return self

    def _validate_params(self) -> None:
        for key, (check, allowed) in self._checks.items():
            value = getattr(self, key)
            if not check(value):
                raise ValueError(
                    f"The {key!r} parameter of {self._name} must be {allowed}. Got {value!r} "
                    "instead."
                )


def _checked_sample(
    X: Any, name: str, *, minimum: int, n_features: int | None = None
) -> np.ndarray:
    """A sample as ``validate_data(dtype=[float64, float32], ensure_min_samples=minimum)``
    accepts it: real numbers, 2-D, ``minimum`` rows, a column, finite (float32 kept).
    """
    array = np.asarray(X)
    if array.dtype not in (np.float64, np.float32):
        array = as_real_array(array, np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (samples x features), got shape {array.shape}")
    if array.shape[0] < minimum or array.shape[1] < 1:
        raise ValueError(
            f"{name} of shape {array.shape} needs at least {minimum} samples and 1 feature"
        )
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    if n_features is not None and array.shape[1] != n_features:
        raise ValueError(
            f"X has {array.shape[1]} features, but KSShiftDetector is expecting {n_features} "
            "features as input"
        )
    return array


class RestoredKS(_Restored, ReferenceState):
    """A saved :class:`~dgpbench.KSShiftDetector`, refitted on its reference sample; ``test``
    gives the estimator's :class:`~dgpbench.detectors.KSTestResult`.
    """

    _name = "KSShiftDetector"
    #: The test's name in the registry (``fit --test``), as ``KSShiftDetector``'s.
    test_name = "ks"
    _defaults: ClassVar[dict[str, Any]] = {"alpha": 0.05, "correction": "bonferroni"}
    _checks: ClassVar[dict] = light_checks(KS_RULES)

    def fit(self, X_ref: Any) -> RestoredKS:
        """Keep a checked copy of the reference features (``KSShiftDetector.fit``).

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            Reference features; at least 2 samples, finite.

        Returns
        -------
        self : RestoredKS
        """
        self.X_ref_ = np.array(_checked_sample(X_ref, "X_ref", minimum=2))
        self.n_features_in_ = int(self.X_ref_.shape[1])
        return self

    def test(self, X: Any) -> Any:
        """The per-feature KS tests of a batch (``KSShiftDetector.test``).

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 2 samples, finite, as many features as the reference.

        Returns
        -------
        KSTestResult
            Statistics, p-values, corrected p-values, the threshold used and the decision.
        """
        X = _checked_sample(X, "X", minimum=2, n_features=self.n_features_in_)
        return ks_test(self.X_ref_, X, self.alpha, self.correction, name=self._name)


class RestoredSoftmax(_Restored, SoftmaxOutput):
    """A saved :class:`~dgpbench.SoftmaxFeatures`: its network, split and class means;
    ``transform`` and ``get_feature_names_out`` run the estimator's code.
    """

    _name = "SoftmaxFeatures"
    _defaults: ClassVar[dict[str, Any]] = {
        "model": None,
        "representation": "softmax",
        "batch_size": 256,
        "device": "cpu",
    }
    _checks: ClassVar[dict] = light_checks(SOFTMAX_RULES)


_RESTORED: dict[str, type] = {"SoftmaxFeatures": RestoredSoftmax, "KSShiftDetector": RestoredKS}


def load_scorer(path: str | os.PathLike[str], *, model: Any = None) -> FittedDetector:
    """Load a detector file to score batches: :func:`dgpbench.saved.files.load_detector`'s result,
    with a softmax + KS detector restored without scikit-learn.

    Parameters
    ----------
    path : path-like
        The detector file (``dgpbench fit``).
    model : torch.nn.Module, path-like or str, optional
        As for :func:`~dgpbench.saved.files.load_detector`.

    Returns
    -------
    FittedDetector
        Its ``features.transform`` and ``detector.test`` give what the estimators give;
        for a softmax + KS file they are :class:`RestoredSoftmax` and :class:`RestoredKS`,
        which cannot be refitted.

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`~dgpbench.saved.files.load_detector` raises them.
    """
    if detector_classes(path) != ("SoftmaxFeatures", "KSShiftDetector"):
        return load_detector(path, model=model)
    return _load(path, model, _RESTORED.__getitem__)
