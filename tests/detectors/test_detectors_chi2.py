"""ChiSquareShiftDetector: scipy's contingency test on hard labels, calibration, knock-out power."""

import numpy as np
import pytest
from scipy.stats import chi2_contingency
from sklearn.base import clone

from dgpbench.detectors import ChiSquareShiftDetector


def test_equals_scipy_on_the_contingency_table():
    rng = np.random.default_rng(0)
    ref, new = rng.integers(0, 4, size=(120, 1)), rng.integers(0, 4, size=(90, 1))
    res = ChiSquareShiftDetector().fit(ref).test(new)
    table = [np.bincount(ref[:, 0], minlength=4), np.bincount(new[:, 0], minlength=4)]
    expected = chi2_contingency(table)
    assert res.statistic == pytest.approx(expected.statistic)
    assert res.p_val == pytest.approx(expected.pvalue) and res.p_value == res.p_val
    assert (
        res.details["dof"] == 3 and res.threshold == 0.05 and res.name == "ChiSquareShiftDetector"
    )


def test_classes_absent_from_both_samples_are_dropped():
    ref = np.array([0, 5, 9, 5, 0, 9, 9])[:, None]
    new = np.array([5, 5, 0, 9, 0])[:, None]
    res = ChiSquareShiftDetector().fit(ref).test(new)
    assert res.details["classes"] == [0, 5, 9] and res.details["dof"] == 2
    # a class seen in one sample only stays in the table (its expected counts are positive)
    res = ChiSquareShiftDetector().fit(ref).test(np.array([5, 5, 7, 7, 7])[:, None])
    assert res.details["classes"] == [0, 5, 7, 9] and np.isfinite(res.p_val)


def test_one_shared_class_is_no_evidence():
    res = ChiSquareShiftDetector().fit(np.full((5, 1), 3)).test(np.full((4, 1), 3))
    assert (res.statistic, res.p_val, res.is_drift) == (0.0, 1.0, False)


def test_calibrated_under_the_null():
    """Labels of one distribution, n = m = 200, 1000 repetitions: rate in [0.03, 0.07]."""
    rng = np.random.default_rng(1)
    probs = np.array([0.3, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05])
    rejected = 0
    for _ in range(1000):
        ref = rng.choice(7, size=(200, 1), p=probs)
        rejected += ChiSquareShiftDetector().fit(ref).predict(rng.choice(7, size=(200, 1), p=probs))
    assert 0.03 <= rejected / 1000 <= 0.07


def test_detects_a_knock_out_of_one_class_at_n_1000():
    """Class 0 removed from the test labels ("Failing loudly"'s large knock-out)."""
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(50):
        ref = rng.integers(0, 10, size=(1000, 1))
        new = rng.integers(1, 10, size=(1000, 1))
        hits += ChiSquareShiftDetector().fit(ref).predict(new)
    assert hits == 50


def test_takes_a_1d_label_vector_too():
    a = ChiSquareShiftDetector().fit(np.array([0, 1, 1, 2])).test(np.array([1, 2, 2, 0]))
    b = (
        ChiSquareShiftDetector()
        .fit(np.array([[0], [1], [1], [2]]))
        .test(np.array([[1], [2], [2], [0]]))
    )
    assert a.p_val == b.p_val


@pytest.mark.parametrize(
    ("X_ref", "X", "match"),
    [
        (np.array([[0.5], [1.0], [2.0]]), np.array([[0], [1]]), "non-integer"),
        (np.zeros((5, 3)), np.zeros((5, 3)), "one column"),
        (np.array([[1]]), np.array([[0], [1]]), "at least 2"),
        (np.array([[0], [1]]), np.zeros((5, 2)), "features"),
    ],
)
def test_bad_input(X_ref, X, match):
    with pytest.raises(ValueError, match=match):
        ChiSquareShiftDetector().fit(X_ref).test(X)


def test_scikit_learn_conventions():
    det = ChiSquareShiftDetector(alpha=0.01)
    assert clone(det).get_params() == {"alpha": 0.01}
    with pytest.raises(ValueError):
        ChiSquareShiftDetector(alpha=0).fit(np.array([[0], [1]]))


def test_zero_count_rule_uniform_draws_the_p_value_only_where_a_count_is_zero():
    from dgpbench.detectors.chi2 import chi2_homogeneity, class_counts

    classes, table = class_counts(np.array([0, 1, 1]), np.array([1, 0]), n_classes=3)
    assert classes.tolist() == [0, 1, 2] and table.tolist() == [[1, 2, 0], [1, 1, 0]]
    stat, p, dof = chi2_homogeneity(table, zero_counts="uniform", rng=np.random.default_rng(0))
    assert np.isnan(stat) and p == np.random.default_rng(0).uniform(0.0, 1.0) and dof == 0
    full = table[:, :2]
    assert chi2_homogeneity(full, zero_counts="uniform", rng=None) == chi2_homogeneity(full)
    with pytest.raises(ValueError, match="needs rng"):
        chi2_homogeneity(table, zero_counts="uniform")
    with pytest.raises(ValueError, match="zero_counts"):
        chi2_homogeneity(full, zero_counts="drop")
