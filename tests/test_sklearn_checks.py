"""scikit-learn conformance of every dgpbench estimator.

To add an estimator, append an instance to ``ESTIMATORS`` and register its expected failures
(with reasons) in ``dgpbench/_sklearn_checks.py``; ``xfail_strict=True`` makes an entry that
starts passing fail the suite, so the registry cannot rot.
"""

from __future__ import annotations

import inspect

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from dgpbench._sklearn_checks import expected_failed_checks
from dgpbench.detectors import (
    ADShiftDetector,
    ClassifierShiftDetector,
    CvMShiftDetector,
    DeepKernelMMDShiftDetector,
    EnergyShiftDetector,
    LSDDShiftDetector,
    MMDAggShiftDetector,
    MMDShiftDetector,
)
from dgpbench.detectors.ks import KSShiftDetector
from dgpbench.features import (
    BBSDhFeatures,
    DGPApproxFeatures,
    NoRedFeatures,
    PCAFeatures,
    SRPFeatures,
)
from dgpbench.features.dgp import DGPFeatures
from dgpbench.features.magdiff import MAGDiffFeatures
from dgpbench.features.softmax import SoftmaxFeatures
from dgpbench.features.tu import TUFeatures


def _mlp():
    """A fixed 3-5-3 ReLU MLP (3 inputs: the size most estimator checks draw)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    first, last = torch.nn.Linear(3, 5), torch.nn.Linear(5, 3)
    with torch.no_grad():
        for layer in (first, last):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen))
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen))
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


def _logistic():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression()


ESTIMATORS = [
    KSShiftDetector(),
    KSShiftDetector(correction="fdr"),
    KSShiftDetector(alpha=0.1, correction=None),
    DGPFeatures(_mlp()),
    DGPFeatures(_mlp(), standardize=False, representation="raw"),
    DGPFeatures(_mlp(), sort=False, representation="raw"),
    TUFeatures(_mlp()),
    TUFeatures(_mlp(), standardize=True, representation="raw"),
    MAGDiffFeatures(_mlp()),
    MAGDiffFeatures(_mlp(), signed=True, representation="raw"),
    SoftmaxFeatures(_mlp()),
    SoftmaxFeatures(_mlp(), representation="distances"),
    # ChiSquareShiftDetector (one integer label column) and UAE/TAE (images) take inputs the
    # generic checks never draw; tests/detectors/test_detectors_chi2.py and test_representations.py
    # check their API instead.
    MMDShiftDetector(n_permutations=19, random_state=0),
    CvMShiftDetector(),
    ADShiftDetector(correction="fdr"),
    EnergyShiftDetector(n_permutations=19, random_state=0),
    # FisherShiftDetector takes 0/1 features only: test_detectors_fisher.py checks its API.
    ClassifierShiftDetector(classifier=_logistic(), random_state=0),
    LSDDShiftDetector(n_permutations=19, random_state=0),
    MMDAggShiftDetector(n_draws_quantile=19, n_draws_level=19, number_bandwidths=2, random_state=0),
    DeepKernelMMDShiftDetector(n_permutations=19, epochs=1, random_state=0),
    NoRedFeatures(),
    PCAFeatures(),
    SRPFeatures(),
    BBSDhFeatures(_mlp()),
    DGPApproxFeatures(_mlp()),
]


# xfail_strict (scikit-learn >= 1.7) turns an expected failure that passes into an error.
_STRICT = (
    {"xfail_strict": True}
    if "xfail_strict" in inspect.signature(parametrize_with_checks).parameters
    else {}
)


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks, **_STRICT)
def test_sklearn_api(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_every_expected_failure_has_a_reason(estimator):
    for name, reason in expected_failed_checks(estimator).items():
        assert name.startswith("check_"), name
        assert isinstance(reason, str) and len(reason) > 20, (name, reason)


def test_registry_returns_fresh_dict_and_empty_for_unknown():
    a = expected_failed_checks(KSShiftDetector())
    a.clear()
    assert expected_failed_checks(KSShiftDetector())  # mutation did not leak into the registry
    assert expected_failed_checks(object()) == {}


def test_registry_applies_to_subclasses():
    class Sub(KSShiftDetector):
        pass

    assert expected_failed_checks(Sub()) == expected_failed_checks(KSShiftDetector())


def test_docstring_examples_run():
    import doctest

    import dgpbench._sklearn_checks

    results = doctest.testmod(dgpbench._sklearn_checks)
    assert results.attempted > 0 and results.failed == 0
