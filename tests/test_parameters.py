"""Parameter rules as plain data: scikit-learn's constraints and the light checks agree."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints

from dgpbench import KSShiftDetector, MMDShiftDetector, SoftmaxFeatures
from dgpbench.detectors import ChiSquareShiftDetector
from dgpbench.features.base import WORKFLOW_CONSTRAINTS
from dgpbench.parameters import (
    CHI2_RULES,
    KS_RULES,
    MMD_RULES,
    SOFTMAX_RULES,
    WORKFLOW_RULES,
    Choices,
    Range,
    light_checks,
    sklearn_constraints,
)

VALUES = [None, True, False, 0, 1, -1, 2, 256, -3, 0.0, 0.05, 0.5, 1.0, 1.5, -0.5, 1e-300,
          float("nan"), float("inf"), -float("inf"), "0.05", "", "x", "softmax", "distances",
          "bonferroni", "fdr", "median", "cpu", "cuda", "auto", "CPU", [1], {"a": 1},
          np.bool_(True), np.int64(3), np.int64(-2), np.float64(0.1), np.float32(0.5)]  # fmt: skip


def _sklearn_accepts(constraint: list, value) -> bool:
    try:
        validate_parameter_constraints({"p": constraint}, {"p": value}, "x")
    except InvalidParameterError:
        return False
    return True


@pytest.mark.parametrize(
    "rules",
    [KS_RULES, CHI2_RULES, WORKFLOW_RULES, SOFTMAX_RULES],
    ids=["ks", "chi2", "workflow", "softmax"],
)
def test_light_checks_give_scikit_learns_verdicts(rules) -> None:
    constraints = sklearn_constraints(rules)
    checks = light_checks(rules)
    assert checks.keys() == constraints.keys() == rules.keys()
    for name in rules:
        for value in VALUES:
            assert checks[name][0](value) == _sklearn_accepts(constraints[name], value), (
                name,
                value,
            )


@pytest.mark.parametrize(
    ("estimator", "rules"),
    [(KSShiftDetector, KS_RULES), (ChiSquareShiftDetector, CHI2_RULES), (MMDShiftDetector, MMD_RULES),
     (SoftmaxFeatures, {**WORKFLOW_RULES, **SOFTMAX_RULES})],
)  # fmt: skip
def test_estimators_take_their_constraints_from_the_rules(estimator, rules) -> None:
    constraints = {k: v for k, v in estimator._parameter_constraints.items() if k != "model"}
    assert constraints.keys() == rules.keys()
    built = sklearn_constraints(rules)
    for name, constraint in constraints.items():
        for value in VALUES:
            assert _sklearn_accepts(constraint, value) == _sklearn_accepts(built[name], value)
    assert WORKFLOW_CONSTRAINTS["model"] == "no_validation"


def test_rules_are_plain_data() -> None:
    assert str(Range("int", 1, None, "left")) == "an int in the range [1, inf)"
    assert str(Range("float", 0, 1, "neither")) == "a float in the range (0, 1)"
    assert str(Choices(("a", "b"))) == "'a' or 'b'"
    assert light_checks(KS_RULES)["correction"][1] == "'bonferroni' or 'fdr' or None"
    with pytest.raises(ValueError, match="without scikit-learn"):
        light_checks(MMD_RULES)  # random_state needs scikit-learn's check
