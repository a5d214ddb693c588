"""The percentile bootstrap over independent units of a pooled ratio."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.resampling import N_BOOTSTRAP, unit_bootstrap_interval


def test_one_unit_has_no_bootstrap_interval():
    low, high = unit_bootstrap_interval([3.0], [10.0], 0.95, np.random.default_rng(0))
    assert np.isnan(low) and np.isnan(high)


def test_identical_units_give_a_point_and_spread_units_a_wide_interval():
    rng = np.random.default_rng(0)
    assert unit_bootstrap_interval([5, 5, 5], [10, 10, 10], 0.95, rng) == (0.5, 0.5)
    low, high = unit_bootstrap_interval([10, 0, 10, 0], [10] * 4, 0.95, rng)
    assert low <= 0.25 and high >= 0.75  # resamples of four all-or-nothing units


def test_interval_is_the_percentiles_of_the_resampled_pooled_ratio():
    sums, counts = np.array([1.0, 4.0, 9.0]), np.array([2.0, 5.0, 10.0])
    low, high = unit_bootstrap_interval(sums, counts, 0.9, np.random.default_rng(7))
    w = np.random.default_rng(7).multinomial(3, np.full(3, 1 / 3), size=N_BOOTSTRAP)
    expected = np.quantile((w @ sums) / (w @ counts), [0.05, 0.95])
    assert (low, high) == pytest.approx(tuple(expected))


@pytest.mark.parametrize(
    ("sums", "counts", "confidence", "message"),
    [([1, 2], [3], 0.95, "differ in length"), ([1, 2], [3, 0], 0.95, "positive count"),
     ([1, 2], [3, 4], 1.0, "confidence")],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_problem(sums, counts, confidence, message):
    with pytest.raises(ValueError, match=message):
        unit_bootstrap_interval(sums, counts, confidence, np.random.default_rng(0))
