"""Parameter rules as plain data: the one source of the estimators' parameter checks.

A rule set maps a parameter name to the list of what it may be (any one suffices, as in
scikit-learn's ``_parameter_constraints``): a :class:`Range` of numbers, a set of
:class:`Choices` (strings), ``None``, or one of scikit-learn's named constraints
(``"boolean"``, ``"random_state"``, ...). From a rule set,

* :func:`sklearn_constraints` builds an estimator's ``_parameter_constraints`` (scikit-learn
  imported only then), and
* :func:`light_checks` builds the same verdicts without scikit-learn, for the scorer that
  restores a saved detector without importing it (:mod:`dgpbench.saved.scoring`).

This module sits on the ground floor: it imports nothing of dgpbench but the device names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from dgpbench._device import DEVICE_OPTIONS

__all__ = [
    "CHI2_RULES",
    "KS_RULES",
    "MMD_RULES",
    "SOFTMAX_RULES",
    "WORKFLOW_RULES",
    "Choices",
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
        low, high, closed = self.low, self.high, self.closed
        if low is not None and (value < low or (value == low and closed in ("right", "neither"))):
            return False
        return not (
            high is not None and (value > high or (value == high and closed in ("left", "neither")))
        )

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


#: The significance level of every test: a float in (0, 1).
_ALPHA = [Range("float", 0, 1, "neither")]

#: The forward-pass parameters every representation takes (``dgpbench features``).
WORKFLOW_RULES: dict[str, list] = {
    "batch_size": [Range("int", 1, None, "left")],
    # joblib's convention: -1 = all cores, -2 = all but one; 0 is meaningless
    "n_jobs": [Range("int", 1, None, "left"), Range("int", None, -1, "right"), None],
    "progress": ["boolean"],
    "device": [Choices(DEVICE_OPTIONS)],
}

#: :class:`~dgpbench.SoftmaxFeatures`' own parameter (beyond :data:`WORKFLOW_RULES`).
SOFTMAX_RULES: dict[str, list] = {"representation": [Choices(("softmax", "distances"))]}

#: :class:`~dgpbench.KSShiftDetector`.
KS_RULES: dict[str, list] = {"alpha": _ALPHA, "correction": [Choices(("bonferroni", "fdr")), None]}

#: :class:`~dgpbench.detectors.ChiSquareShiftDetector`.
CHI2_RULES: dict[str, list] = {"alpha": _ALPHA}

#: :class:`~dgpbench.MMDShiftDetector`.
MMD_RULES: dict[str, list] = {
    "alpha": _ALPHA,
    "n_permutations": [Range("int", 1, None, "left")],
    "bandwidth": [Choices(("median",)), Range("float", 0, None, "neither")],
    "random_state": ["random_state"],
    "device": [Choices(DEVICE_OPTIONS)],
}


def sklearn_constraints(rules: dict[str, list]) -> dict[str, list]:
    """scikit-learn's ``_parameter_constraints`` of a rule set.

    Parameters
    ----------
    rules : dict
        Parameter name -> list of :class:`Range`, :class:`Choices`, None or a named
        constraint of scikit-learn (passed as is).

    Returns
    -------
    dict
        The same with ``Interval`` and ``StrOptions`` objects.
    """
    from dgpbench._compat import Interval, StrOptions

    def convert(rule: Any) -> Any:
        if isinstance(rule, Range):
            kind = Integral if rule.kind == "int" else Real
            return Interval(kind, rule.low, rule.high, closed=rule.closed)
        if isinstance(rule, Choices):
            return StrOptions(set(rule.values))
        return rule

    return {name: [convert(rule) for rule in options] for name, options in rules.items()}


def _light(rule: Any) -> Callable[[Any], bool]:
    if isinstance(rule, Range | Choices):
        return rule.accepts
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
    return str(rule)


def light_checks(rules: dict[str, list]) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """The checks of a rule set without scikit-learn: the same verdict, value by value.

    Parameters
    ----------
    rules : dict
        A rule set of :class:`Range`, :class:`Choices`, None and ``"boolean"``.

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
        predicates = [_light(rule) for rule in options]
        allowed = [_describe(rule) for rule in options]
        text = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        checks[name] = (lambda value, ps=predicates: any(p(value) for p in ps), text)
    return checks
