"""The constant-hazard thresholds: a fraction fpr of the surviving streams stops at each step."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.online.thresholds import hazard_thresholds, per_feature_rate


def test_each_step_stops_the_fraction_fpr_of_the_surviving_streams():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(20000, 1))
    stats = base + 0.5 * rng.normal(size=(20000, 6))  # correlated over steps, as windows are
    fpr = 0.05
    thr = hazard_thresholds(stats, fpr)
    alive = np.ones(len(stats), dtype=bool)
    for t in range(stats.shape[1]):
        stop = alive & (stats[:, t] > thr[t])
        assert stop.sum() / alive.sum() == pytest.approx(fpr, abs=0.005)
        alive &= ~stop


def test_survivors_are_selected_so_later_thresholds_are_lower_for_correlated_steps():
    rng = np.random.default_rng(1)
    stats = np.repeat(rng.normal(size=(5000, 1)), 3, axis=1) + 0.1 * rng.normal(size=(5000, 3))
    thr = hazard_thresholds(stats, 0.1)
    assert thr[1] < thr[0] and thr[2] < thr[1]


def test_too_few_streams_is_an_error_that_says_what_to_raise():
    with pytest.raises(ValueError, match="n_bootstraps"):
        hazard_thresholds(np.arange(6.0).reshape(3, 2) * [1, -1], 0.9)


@pytest.mark.parametrize("bad", [np.zeros(3), np.full((3, 2), np.nan)])
def test_bad_statistics_are_refused(bad):
    with pytest.raises(ValueError, match="finite array"):
        hazard_thresholds(bad, 0.1)


@pytest.mark.parametrize("fpr", [0.0, 1.0, -0.1])
def test_a_rate_outside_the_unit_interval_is_refused(fpr):
    with pytest.raises(ValueError, match="fpr"):
        hazard_thresholds(np.zeros((4, 2)), fpr)


def test_per_feature_rate_combines_to_the_detector_rate_over_independent_features():
    beta = per_feature_rate(0.01, 7)
    assert 1 - (1 - beta) ** 7 == pytest.approx(0.01, rel=1e-12)
    assert per_feature_rate(0.01, 1) == pytest.approx(0.01, rel=1e-12)
