"""The grid's rows with the newer registered tests: Cramér-von Mises, Anderson-Darling, energy
distance and Fisher's exact test (and any test registered later)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from dgpbench.detectors import DETECTORS, make_detector
from dgpbench.detectors.energy import EnergyShiftDetector
from dgpbench.failing_loudly.grid import (
    RunPools,
    grid_indices,
    method_records,
    parse_method,
    run_cell,
)
from dgpbench.failing_loudly.toolbox import decide, indicators, per_feature_batch

ALPHA = 0.05


@pytest.mark.parametrize(
    ("spec", "dimension"),
    [("pca+cvm", "univariate"), ("bbsds+ad", "univariate"), ("bbsdh+fisher", "univariate"),
     ("uae+energy", "multivariate"), ("dgp+mmd", "multivariate"), ("tu+ks", "univariate")],
)  # fmt: skip
def test_rows_with_registered_tests_parse_with_their_dimension(spec, dimension):
    method = parse_method(spec)
    assert method.name == spec and method.dimension == dimension


def test_an_unregistered_test_is_refused_listing_the_registered_ones():
    with pytest.raises(ValueError, match="'cvm', 'ad', 'energy', 'fisher'"):
        parse_method("pca+ttest")


def test_a_newly_registered_test_joins_the_grid_without_code(monkeypatch):
    class Twin(EnergyShiftDetector):
        pass

    monkeypatch.setitem(DETECTORS, "twin", Twin)
    method = parse_method("pca+twin")
    assert method.dimension == "multivariate"
    rng = np.random.default_rng(0)
    f_ref, f_test = rng.normal(size=(200, 3)), rng.normal(1.5, 1, size=(200, 3))
    idx = grid_indices(200, 200, 30, 30, seed=0, shift="none", fraction=0.0, n_draws=3)
    rejected, _ = run_cell(f_ref, f_test, method, idx, n_ref=30,
                           params={"alpha": ALPHA, "correction": "bonferroni",
                                   "n_permutations": 99})  # fmt: skip
    assert rejected.all()


@pytest.mark.parametrize("test", ["cvm", "ad", "ks"])
@pytest.mark.parametrize(("n", "correction"), [(8, "bonferroni"), (40, "fdr"), (25, None)])
def test_batched_per_feature_tests_decide_as_their_detector_draw_by_draw(test, n, correction):
    rng = np.random.default_rng(n)
    ref = np.round(rng.normal(size=(5, n, 4)), 1)  # ties
    x = np.round(rng.normal(0.4, 1, size=(5, n, 4)), 1)
    x[:, :, 3] = ref[:, :, 3] = 2.0  # a constant feature: p = 1
    rejected, p_value = per_feature_batch(test, ref, x, alpha=ALPHA, correction=correction)
    for i in range(5):
        with pytest.warns(UserWarning, match="constant"):
            res = make_detector(test, alpha=ALPHA, correction=correction).fit(ref[i]).test(x[i])
        assert rejected[i] == res.is_drift
        assert p_value[i] == pytest.approx(res.min_p_val_adjusted, rel=1e-12, abs=1e-15)


def test_fisher_on_hard_labels_tests_one_indicator_per_class():
    rng = np.random.default_rng(1)
    ref, x = rng.integers(0, 4, size=(3, 30, 1)), rng.integers(0, 4, size=(3, 30, 1))
    x[:, :12, 0] = 0  # more zeros
    rejected, p_value = per_feature_batch("fisher", ref, x, alpha=ALPHA, n_classes=4)
    for i in range(3):
        det = make_detector("fisher", alpha=ALPHA).fit(indicators(ref[i], 4))
        res = det.test(indicators(x[i], 4))
        assert rejected[i] == res.is_drift and p_value[i] == res.min_p_val_adjusted
    with pytest.raises(ValueError, match=r"integers in \[0, 4\)"):
        indicators(np.array([[0], [4]]), 4)


def _runs(shift: float, rng: np.random.Generator, labels: bool = False) -> list[RunPools]:
    runs = []
    for _ in range(2):
        if labels:
            ref = rng.integers(0, 5, size=(300, 1))
            test = np.where(rng.random((300, 1)) < shift, 0, rng.integers(0, 5, size=(300, 1)))
        else:
            ref, test = rng.normal(size=(300, 4)), rng.normal(size=(300, 4))
            test[150:] += shift  # half the pool shifted
        runs.append(RunPools(ref, {("none", 0.0): ref[::-1].copy(), ("ko_shift", 0.5): test}))
    return runs


@pytest.mark.parametrize("spec", ["x+cvm", "x+ad", "x+energy", "bbsdh+fisher"])
def test_tiny_grid_detects_a_strong_shift_with_every_new_row(spec):
    method = parse_method(spec)
    labels = method.test == "fisher"
    runs = _runs(0.8 if labels else 3.0, np.random.default_rng(2), labels=labels)
    params = {"alpha": ALPHA, "correction": "bonferroni", "n_permutations": 99}
    if labels:
        params["n_classes"] = 5
    rec = method_records(runs, method, ns=[100], n_draws=3, seed=0, params=params)
    shifted = rec[rec["shift"] == "ko_shift"]
    assert len(shifted) == 2 * 3 and shifted["rejected"].all()
    assert ((rec["p_value"] >= 0) & (rec["p_value"] <= 1)).all()


@pytest.mark.parametrize("test", ["cvm", "ad"])
@pytest.mark.parametrize("n", [5, 50])
def test_per_feature_rows_hold_their_level_on_clean_draws(test, n):
    rng = np.random.default_rng(10 + n)
    draws = 300
    ref, x = rng.normal(size=(draws, n, 3)), rng.normal(size=(draws, n, 3))
    rejected, _ = per_feature_batch(test, ref, x, alpha=ALPHA, correction="bonferroni")
    # Bonferroni is conservative: at most alpha, up to the binomial's 99.9% quantile.
    assert rejected.sum() <= binom.ppf(0.999, draws, ALPHA)


def test_fisher_and_energy_rows_hold_their_level_on_clean_draws():
    rng = np.random.default_rng(11)
    draws = 120
    ref, x = rng.integers(0, 3, size=(draws, 40, 1)), rng.integers(0, 3, size=(draws, 40, 1))
    rejected, _ = per_feature_batch("fisher", ref, x, alpha=ALPHA, n_classes=3)
    assert rejected.sum() <= binom.ppf(0.999, draws, ALPHA)
    energy = [
        decide("energy", rng.normal(size=(10, 2)), rng.normal(size=(10, 2)), random_state=i,
               alpha=ALPHA, n_permutations=99)[0]
        for i in range(draws)
    ]  # fmt: skip
    assert sum(energy) <= binom.ppf(0.999, draws, ALPHA)
