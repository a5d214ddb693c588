"""Parameter rules as plain data: scikit-learn's constraints and the light checks agree, and
every estimator's constraints are built from its rule set."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints

import dgpbench.parameters as parameters
from dgpbench import (
    BBSDhFeatures,
    ChiSquareShiftDetector,
    ClassifierShiftDetector,
    DGPApproxFeatures,
    DGPFeatures,
    KSShiftDetector,
    MAGDiffFeatures,
    MMDShiftDetector,
    NoRedFeatures,
    PCAFeatures,
    SoftmaxFeatures,
    SRPFeatures,
    TAEFeatures,
    TUFeatures,
    UAEFeatures,
)
from dgpbench.detectors import (
    ADShiftDetector,
    CvMShiftDetector,
    DeepKernelMMDShiftDetector,
    EnergyShiftDetector,
    FisherShiftDetector,
    LSDDShiftDetector,
    MMDAggShiftDetector,
)
from dgpbench.features.autoencoders import ARCHITECTURES
from dgpbench.parameters import (
    KS_RULES,
    MMD_RULES,
    Choices,
    Methods,
    Range,
    light_checks,
    sklearn_constraints,
)

PACKAGE = Path(parameters.__file__).resolve().parent


class _FitOnly:
    def fit(self) -> None: ...


VALUES = [None, True, False, 0, 1, -1, 2, 256, -3, 0.0, 0.05, 0.5, 1.0, 1.5, -0.5, 1e-300,
          float("nan"), float("inf"), -float("inf"), "0.05", "", "x", "softmax", "distances",
          "raw", "bonferroni", "fdr", "median", "cpu", "cuda", "auto", "CPU", "mnist", "greater",
          "two-sided", [1], ("fc1", "fc2"), {"a": 1}, Path("m.pt"), LogisticRegression(),
          _FitOnly(), np.bool_(True), np.int64(3), np.int64(-2), np.float64(0.1),
          np.float32(0.5)]  # fmt: skip

#: Every rule set, by name.
RULE_SETS = {
    name: getattr(parameters, name) for name in parameters.__all__ if name.endswith("_RULES")
}

#: Every estimator of the public API and its rule set.
ESTIMATORS = [
    (KSShiftDetector, "KS_RULES"), (ChiSquareShiftDetector, "CHI2_RULES"),
    (MMDShiftDetector, "MMD_RULES"), (ClassifierShiftDetector, "CLASSIFIER_RULES"),
    (LSDDShiftDetector, "LSDD_RULES"), (MMDAggShiftDetector, "MMDAGG_RULES"),
    (DeepKernelMMDShiftDetector, "MMD_DEEP_RULES"),
    (SoftmaxFeatures, "SOFTMAX_RULES"), (BBSDhFeatures, "BBSDH_RULES"),
    (MAGDiffFeatures, "MAGDIFF_RULES"), (TUFeatures, "TU_RULES"), (DGPFeatures, "DGP_RULES"),
    (DGPApproxFeatures, "DGP_APPROX_RULES"), (PCAFeatures, "PCA_RULES"), (SRPFeatures, "SRP_RULES"),
    (UAEFeatures, "UAE_RULES"), (TAEFeatures, "TAE_RULES"), (NoRedFeatures, None),
    (CvMShiftDetector, "CVM_RULES"), (ADShiftDetector, "AD_RULES"),
    (EnergyShiftDetector, "ENERGY_RULES"), (FisherShiftDetector, "FISHER_RULES"),
]  # fmt: skip


def _sklearn_accepts(constraint, value) -> bool:
    try:
        validate_parameter_constraints({"p": constraint}, {"p": value}, "x")
    except InvalidParameterError:
        return False
    return True


def _checkable(options) -> bool:
    """Whether the light checks know every rule of a parameter."""
    try:
        light_checks({"p": options})
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(RULE_SETS))
def test_light_checks_give_scikit_learns_verdicts(name) -> None:
    rules = RULE_SETS[name]
    constraints = sklearn_constraints(rules)
    assert constraints.keys() == rules.keys()
    for param, options in rules.items():
        if not _checkable(options):  # random_state, array-like: scikit-learn's own checks
            continue
        check = light_checks({param: options})[param][0]
        for value in VALUES:
            assert check(value) == _sklearn_accepts(constraints[param], value), (param, value)


def _same(a, b) -> bool:
    """Whether two constraints are the same: equal values, or objects of one type and state."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if type(a) is not type(b):
        return False
    return vars(a) == vars(b) if hasattr(a, "__dict__") and not isinstance(a, type) else a == b


@pytest.mark.parametrize(
    ("estimator", "rules"), ESTIMATORS, ids=[e.__name__ for e, _ in ESTIMATORS]
)
def test_estimators_take_their_constraints_from_their_rules(estimator, rules) -> None:
    built = sklearn_constraints(RULE_SETS[rules] if rules else {})
    constraints = estimator._parameter_constraints
    assert constraints.keys() == built.keys() == estimator().get_params().keys()
    for name, constraint in constraints.items():
        assert _same(constraint, built[name]), name


def test_every_estimator_of_the_package_has_its_rule_set() -> None:
    import dgpbench
    import dgpbench.detectors

    public = {
        name
        for package in (dgpbench, dgpbench.detectors)
        for name in package.__all__
        if name.endswith(("Features", "Detector")) and isinstance(getattr(package, name), type)
    }
    assert public == {estimator.__name__ for estimator, _ in ESTIMATORS}


def test_constraints_are_written_only_as_rules() -> None:
    """scikit-learn's constraint objects are built in one place, from the rule data."""
    written = re.compile(r"\b(Interval|StrOptions|HasMethods|Options)\(")
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name not in ("parameters.py", "_compat.py") and written.search(path.read_text())
    ]
    assert offenders == []


def test_autoencoder_architectures_are_the_rules_choices() -> None:
    (choices,) = parameters.UAE_RULES["architecture"]
    assert set(choices.values) == {"auto", *ARCHITECTURES}


def test_rules_are_plain_data() -> None:
    assert str(Range("int", 1, None, "left")) == "an int in the range [1, inf)"
    assert str(Range("float", 0, 1, "neither")) == "a float in the range (0, 1)"
    assert str(Choices(("a", "b"))) == "'a' or 'b'"
    assert str(Methods(("fit", "predict"))) == "an object implementing 'fit' and 'predict'"
    assert light_checks(KS_RULES)["correction"][1] == "'bonferroni' or 'fdr' or None"
    assert light_checks(parameters.HEAD_RULES)["head"][1] == (
        "an instance of 'list', an instance of 'tuple' or None"
    )
    model = light_checks(parameters.NETWORK_RULES)["model"]
    assert model[0](object()) and model[1] == "anything"  # checked when the model loads
    assert sklearn_constraints(parameters.NETWORK_RULES)["model"] == "no_validation"
    with pytest.raises(ValueError, match="without scikit-learn"):
        light_checks(MMD_RULES)  # random_state needs scikit-learn's check


def test_every_forward_pass_parameter_of_earlier_files_has_a_rule() -> None:
    """Files of earlier versions record these for every representation; loading checks them."""
    assert set(parameters.WORKFLOW_RULES) == {"batch_size", "n_jobs", "progress", "device"}


def test_cost_caps_are_enforced_and_match_the_workflow_schema() -> None:
    import jsonschema
    import yaml

    from dgpbench.detectors import make_detector
    from dgpbench.parameters import MAX_EPOCHS, MAX_LEARNING_RATE, MAX_PERMUTATIONS

    x = np.random.default_rng(0).normal(size=(10, 2))
    for test, params in (
        ("mmd", {"n_permutations": MAX_PERMUTATIONS + 1}),
        ("classif", {"epochs": MAX_EPOCHS + 1}),
        ("classif", {"learning_rate": MAX_LEARNING_RATE * 2}),
    ):
        with pytest.raises(InvalidParameterError):
            make_detector(test, **params).fit(x)
    schema = yaml.safe_load(
        (Path(__file__).parents[1] / "workflow/schemas/failing_loudly.schema.yaml").read_text()
    )
    rule = schema["properties"]["mmd"]["properties"]["n_permutations"]
    assert rule["maximum"] == MAX_PERMUTATIONS
    jsonschema.validate(MAX_PERMUTATIONS, rule)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(10**12, rule)
