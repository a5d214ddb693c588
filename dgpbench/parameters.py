"""Parameter rules as plain data: the one source of the estimators' parameter checks.

A rule set maps a parameter name to the list of what it may be (any one suffices, as in
scikit-learn's ``_parameter_constraints``): a :class:`Range` of numbers, a set of
:class:`Choices` (strings), an object with some :class:`Methods`, a type (its instances),
``None``, or one of scikit-learn's named constraints (``"boolean"``, ``"random_state"``,
...); or, instead of a list, ``"no_validation"`` (not checked: a model, checked when loaded).
Every estimator of dgpbench that takes parameters has its rule set here, named after it.
From a rule set,

* :func:`sklearn_constraints` builds an estimator's ``_parameter_constraints`` (scikit-learn
  imported only then), and
* :func:`light_checks` builds the same verdicts without scikit-learn, for the scorer that
  restores a saved detector without importing it (:mod:`dgpbench.saved.scoring`).

This module sits on the ground floor: it imports nothing of dgpbench but the device names.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from dgpbench._device import DEVICE_OPTIONS

__all__ = [
    "AD_RULES",
    "BBSDH_RULES",
    "CHI2_RULES",
    "CLASSIFIER_RULES",
    "CVM_RULES",
    "DGP_APPROX_RULES",
    "DGP_RULES",
    "ENERGY_RULES",
    "FISHER_RULES",
    "FORWARD_RULES",
    "HEAD_RULES",
    "KERNEL_RULES",
    "KS_RULES",
    "LSDD_RULES",
    "MAGDIFF_RULES",
    "MAX_EPOCHS",
    "MAX_LEARNING_RATE",
    "MAX_PERMUTATIONS",
    "MMDAGG_RULES",
    "MMD_DEEP_RULES",
    "MMD_RULES",
    "NETWORK_RULES",
    "PCA_RULES",
    "REPRESENTATION_RULES",
    "SOFTMAX_RULES",
    "SRP_RULES",
    "TAE_RULES",
    "TU_RULES",
    "UAE_RULES",
    "WORKFLOW_RULES",
    "Choices",
    "Methods",
    "Range",
    "light_checks",
    "sklearn_constraints",
]


@dataclass(frozen=True)
class Range:
    """Numbers of a kind between two bounds: scikit-learn's ``Interval``.

    Parameters
    ----------
    kind : {"int", "float"}
        ``"int"``: integers (``numbers.Integral``); ``"float"``: real numbers.
    low, high : float or None
        The bounds; None is unbounded.
    closed : {"left", "right", "both", "neither"}
        Which bounds belong to the range.
    """

    kind: str
    low: float | None
    high: float | None
    closed: str

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is in the range (scikit-learn's verdict)."""
        if not isinstance(value, Integral if self.kind == "int" else Real):
            return False
        if not isinstance(value, Integral) and math.isnan(value):
            return False
        # an unbounded side is -inf or inf, in the range if that side is closed (scikit-learn)
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        if value < low or (value == low and self.closed in ("right", "neither")):
            return False
        return not (value > high or (value == high and self.closed in ("left", "neither")))

    def __str__(self) -> str:
        left = "[" if self.closed in ("left", "both") else "("
        right = "]" if self.closed in ("right", "both") else ")"
        low = "-inf" if self.low is None else self.low
        high = "inf" if self.high is None else self.high
        return f"{'an int' if self.kind == 'int' else 'a float'} in the range {left}{low}, {high}{right}"


@dataclass(frozen=True)
class Choices:
    """One of a few strings: scikit-learn's ``StrOptions``."""

    values: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is one of the strings."""
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        return " or ".join(map(repr, self.values))


@dataclass(frozen=True)
class Methods:
    """An object with these methods: scikit-learn's ``HasMethods``."""

    names: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has every method."""
        return all(callable(getattr(value, name, None)) for name in self.names)

    def __str__(self) -> str:
        names = [repr(name) for name in self.names]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        return f"an object implementing {listed}"


#: The significance level of every test: a float in (0, 1).
_ALPHA = [Range("float", 0, 1, "neither")]
_POSITIVE_INT = [Range("int", 1, None, "left")]
_POSITIVE_FLOAT = [Range("float", 0, None, "neither")]
_BOOLEAN = ["boolean"]
#: scikit-learn's word for a parameter it does not check (in place of the list).
_UNCHECKED = "no_validation"

# -- pieces: the parameters that several estimators share ---------------------------------

#: How a network's forward pass runs: every estimator that runs a network.
FORWARD_RULES: dict[str, list] = {
    "batch_size": _POSITIVE_INT,
    "device": [Choices(DEVICE_OPTIONS)],
}

#: The compiled kernels' threads and progress bar (TU, DGP and its approximation).
KERNEL_RULES: dict[str, list] = {
    # joblib's convention: -1 = all cores, -2 = all but one; 0 is meaningless
    "n_jobs": [Range("int", 1, None, "left"), Range("int", None, -1, "right"), None],
    "progress": _BOOLEAN,
}

#: The forward-pass parameters of ``dgpbench features``, which every representation of
#: earlier versions took (used or not): how a saved file of those versions is checked.
WORKFLOW_RULES: dict[str, list] = {**FORWARD_RULES, **KERNEL_RULES}

#: The transformers built on the classifier: the network (checked when loaded) and its
#: forward pass.
NETWORK_RULES: dict[str, Any] = {"model": _UNCHECKED, **FORWARD_RULES}

#: The distances to the class means, or the raw representation (every transformer with
#: class means but Softmax, which offers its output itself instead).
REPRESENTATION_RULES: dict[str, list] = {"representation": [Choices(("distances", "raw"))]}

#: The trailing MLP's linear modules by name (TU, DGP and its approximation, MAGDiff).
HEAD_RULES: dict[str, list] = {"head": [list, tuple, None]}

# -- the feature transformers ---------------------------------------------------------------

#: :class:`~dgpbench.SoftmaxFeatures`.
SOFTMAX_RULES: dict[str, Any] = {
    **NETWORK_RULES,
    "representation": [Choices(("softmax", "distances"))],
}

#: :class:`~dgpbench.features.BBSDhFeatures`.
BBSDH_RULES: dict[str, Any] = dict(NETWORK_RULES)

#: :class:`~dgpbench.MAGDiffFeatures`.
MAGDIFF_RULES: dict[str, Any] = {
    **NETWORK_RULES,
    **REPRESENTATION_RULES,
    **HEAD_RULES,
    "signed": _BOOLEAN,
}

#: :class:`~dgpbench.TUFeatures`.
TU_RULES: dict[str, Any] = {
    **NETWORK_RULES,
    **REPRESENTATION_RULES,
    **HEAD_RULES,
    **KERNEL_RULES,
    "standardize": _BOOLEAN,
}

#: :class:`~dgpbench.features.DGPApproxFeatures`.
DGP_APPROX_RULES: dict[str, Any] = {**TU_RULES, "normalize": _BOOLEAN}

#: :class:`~dgpbench.DGPFeatures`.
DGP_RULES: dict[str, Any] = {**DGP_APPROX_RULES, "sort": _BOOLEAN}

#: :class:`~dgpbench.features.PCAFeatures`: a number of components, or the share of the
#: variance they explain.
PCA_RULES: dict[str, list] = {
    "n_components": [Range("int", 1, None, "left"), Range("float", 0, 1, "neither")],
    "random_state": ["random_state"],
}

#: :class:`~dgpbench.features.SRPFeatures`.
SRP_RULES: dict[str, list] = {
    "n_components": [Range("int", 1, None, "left"), None],
    "variance": [Range("float", 0, 1, "neither")],
    "random_state": ["random_state"],
}

#: :class:`~dgpbench.features.UAEFeatures` (the architectures are
#: :data:`dgpbench.features.autoencoders.ARCHITECTURES`, or ``"auto"``).
UAE_RULES: dict[str, list] = {
    **FORWARD_RULES,
    "architecture": [Choices(("auto", "mnist", "cifar10", "mnist_usps"))],
    "image_shape": ["array-like", None],
    "random_state": [Range("int", 0, None, "left")],
}

#: :class:`~dgpbench.features.TAEFeatures`.
TAE_RULES: dict[str, list] = {
    **UAE_RULES,
    "autoencoder": [str, os.PathLike, None],
    "epochs": _POSITIVE_INT,
    "learning_rate": _POSITIVE_FLOAT,
    "train_batch_size": _POSITIVE_INT,
    "progress": _BOOLEAN,
}

# -- the detectors ----------------------------------------------------------------------------

#: The most permutations an MMD test draws: its cost grows with them (time, and the blocks of
#: statistics), and 100000 resolves p-values far below any alpha in use.
MAX_PERMUTATIONS = 100_000
#: The most training epochs of the domain classifier's default network (it trains per batch).
MAX_EPOCHS = 1000
#: The largest learning rate of the domain classifier's network (Adam's usual are 1e-4..1e-2).
MAX_LEARNING_RATE = 10.0

#: :class:`~dgpbench.KSShiftDetector`.
KS_RULES: dict[str, list] = {"alpha": _ALPHA, "correction": [Choices(("bonferroni", "fdr")), None]}

#: :class:`~dgpbench.detectors.CvMShiftDetector`: the KS detector's parameters.
CVM_RULES: dict[str, list] = dict(KS_RULES)

#: :class:`~dgpbench.detectors.ADShiftDetector`.
AD_RULES: dict[str, list] = {**KS_RULES, "extrapolate": _BOOLEAN}

#: :class:`~dgpbench.detectors.FisherShiftDetector`.
FISHER_RULES: dict[str, list] = {
    **KS_RULES,
    "alternative": [Choices(("two-sided", "greater", "less"))],
}

#: :class:`~dgpbench.detectors.ChiSquareShiftDetector`.
CHI2_RULES: dict[str, list] = {"alpha": _ALPHA}

#: :class:`~dgpbench.MMDShiftDetector`.
MMD_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "n_permutations": [Range("int", 1, MAX_PERMUTATIONS, "both")],
    "bandwidth": [Choices(("median",)), Range("float", 0, None, "neither")],
    "random_state": ["random_state"],
    "device": [Choices(DEVICE_OPTIONS)],
}

#: :class:`~dgpbench.detectors.EnergyShiftDetector`.
ENERGY_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "n_permutations": [Range("int", 1, MAX_PERMUTATIONS, "both")],
    "random_state": ["random_state"],
}

#: :class:`~dgpbench.ClassifierShiftDetector`.
CLASSIFIER_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "classifier": [Methods(("fit", "predict")), None],
    "epochs": [Range("int", 1, MAX_EPOCHS, "both")],
    "learning_rate": [Range("float", 0, MAX_LEARNING_RATE, "right")],
    "alternative": [Choices(("greater", "two-sided"))],
    "random_state": ["random_state"],
    **FORWARD_RULES,
}

#: :class:`~dgpbench.detectors.LSDDShiftDetector`.
LSDD_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "n_permutations": [Range("int", 1, MAX_PERMUTATIONS, "both")],
    "bandwidth": [Choices(("median",)), Range("float", 0, None, "neither")],
    "n_kernel_centers": [Range("int", 1, None, "left"), None],
    "lambda_rd_max": _POSITIVE_FLOAT,
    "random_state": ["random_state"],
}

#: :class:`~dgpbench.detectors.MMDAggShiftDetector`.
MMDAGG_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "kernel": [Choices(("laplace_gaussian", "laplace", "gaussian"))],
    "number_bandwidths": [Range("int", 2, None, "left")],
    "weights_type": [Choices(("uniform", "decreasing", "increasing", "centred"))],
    "n_draws_quantile": [Range("int", 1, MAX_PERMUTATIONS, "both")],
    "n_draws_level": [Range("int", 1, MAX_PERMUTATIONS, "both")],
    "n_bisection": [Range("int", 1, 200, "both")],
    "permutations_same_sample_size": _BOOLEAN,
    "random_state": ["random_state"],
}

#: :class:`~dgpbench.detectors.DeepKernelMMDShiftDetector`.
MMD_DEEP_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "n_permutations": [Range("int", 1, MAX_PERMUTATIONS, "both")],
    "train_size": [Range("float", 0, 1, "neither")],
    "hidden": _POSITIVE_INT,
    "out_features": _POSITIVE_INT,
    "epochs": [Range("int", 1, MAX_EPOCHS, "both")],
    "batch_size": [Range("int", 2, None, "left")],
    "learning_rate": [Range("float", 0, MAX_LEARNING_RATE, "right")],
    "var_reg": [Range("float", 0, None, "left")],
    "random_state": ["random_state"],
    "device": [Choices(DEVICE_OPTIONS)],
}


def sklearn_constraints(rules: dict[str, list]) -> dict[str, list]:
    """scikit-learn's ``_parameter_constraints`` of a rule set.

    Parameters
    ----------
    rules : dict
        Parameter name -> list of :class:`Range`, :class:`Choices`, :class:`Methods`, types,
        None or named constraints of scikit-learn (passed as is); or ``"no_validation"``.

    Returns
    -------
    dict
        The same with ``Interval``, ``StrOptions`` and ``HasMethods`` objects.
    """
    from dgpbench._compat import HasMethods, Interval, StrOptions

    def convert(rule: Any) -> Any:
        if isinstance(rule, Range):
            kind = Integral if rule.kind == "int" else Real
            return Interval(kind, rule.low, rule.high, closed=rule.closed)
        if isinstance(rule, Choices):
            return StrOptions(set(rule.values))
        if isinstance(rule, Methods):
            return HasMethods(list(rule.names))
        return rule

    return {
        name: options if options == _UNCHECKED else [convert(rule) for rule in options]
        for name, options in rules.items()
    }


def _light(rule: Any) -> Callable[[Any], bool]:
    if isinstance(rule, Range | Choices | Methods):
        return rule.accepts
    if isinstance(rule, type):
        return lambda value: isinstance(value, rule)
    if rule is None:
        return lambda value: value is None
    if rule == "boolean":
        return lambda value: isinstance(value, bool | np.bool_)
    raise ValueError(f"no check without scikit-learn for the constraint {rule!r}")


def _describe(rule: Any) -> str:
    if rule is None:
        return "None"
    if rule == "boolean":
        return "an instance of 'bool'"
    if isinstance(rule, type):
        return f"an instance of {rule.__qualname__!r}"
    return str(rule)


def light_checks(rules: dict[str, list]) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """The checks of a rule set without scikit-learn: the same verdict, value by value.

    Parameters
    ----------
    rules : dict
        A rule set of :class:`Range`, :class:`Choices`, :class:`Methods`, types, None,
        ``"boolean"`` and ``"no_validation"`` (accepts anything).

    Returns
    -------
    dict
        Parameter name -> (predicate, what the parameter must be, for an error message).

    Raises
    ------
    ValueError
        If a rule needs scikit-learn to check (``"random_state"``, ``"array-like"``, ...).
    """
    checks = {}
    for name, options in rules.items():
        if options == _UNCHECKED:
            checks[name] = (lambda value: True, "anything")
            continue
        predicates = [_light(rule) for rule in options]
        allowed = [_describe(rule) for rule in options]
        text = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        checks[name] = (lambda value, ps=predicates: any(p(value) for p in ps), text)
    return checks
