"""The energy-distance test: the statistic against SciPy (one dimension) and dcor (several),
random and tied data, exact permutation p-values against scipy.stats.permutation_test on
tiny samples, bad input, level, power and the saved round trip."""

import json
import runpy
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom, permutation_test
from scipy.stats import energy_distance as scipy_energy

from dgpbench.detectors import EnergyShiftDetector
from dgpbench.detectors.energy import _permutation_energy, energy_distance
from dgpbench.saved import FittedDetector, load_detector, save_detector

LOW, HIGH = binom.ppf(0.0005, 400, 0.05), binom.isf(0.0005, 400, 0.05)


def _draw(rng, kind, n, m, d):
    if kind == "integers":
        return rng.integers(0, 3, (n, d)).astype(float), rng.integers(0, 3, (m, d)).astype(float)
    return rng.normal(size=(n, d)), rng.normal(0.5, size=(m, d))


def _observed(ref, test):
    """The detector's statistic of the observed split (the vectorised formula)."""
    pooled = np.concatenate([ref, test])
    return _permutation_energy(pooled, len(ref), [np.arange(len(ref))[None]])[0][0]


@pytest.mark.parametrize("kind", ["normal", "integers"])
def test_statistic_is_the_square_of_scipys_in_one_dimension(kind):
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (1, 4), (3, 2), (5, 5), (40, 17)]:
        ref, test = _draw(rng, kind, n, m, 1)
        expected = scipy_energy(ref[:, 0], test[:, 0]) ** 2
        assert _observed(ref, test) == pytest.approx(expected, rel=1e-10, abs=1e-12)
        assert energy_distance(ref, test) == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_statistic_is_dcors_in_several_dimensions():
    """dcor.energy_distance of seeded normal and tied samples, d = 1..32, kept in a fixture
    with the script that computed it (importing dcor takes ~20 s)."""
    folder = Path(__file__).parents[1] / "fixtures" / "twosample"
    cases = runpy.run_path(str(folder / "make_energy_dcor.py"))["cases"]()
    expected = json.loads((folder / "energy_dcor.json").read_text())["energy_distance"]
    assert len(cases) == len(expected) == 12
    for (ref, test), value in zip(cases, expected, strict=True):
        assert _observed(ref, test) == pytest.approx(value, rel=1e-10, abs=1e-12)
        assert energy_distance(ref, test) == pytest.approx(value, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize(("n", "m"), [(1, 1), (1, 3), (2, 2), (3, 4), (5, 5)])
def test_exact_p_value_is_the_share_of_all_splits(n, m):
    """Tiny samples: every split enumerated; the share of splits at least as extreme, as
    scipy.stats.permutation_test computes it exactly (it needs 2 per sample) and as a
    direct enumeration gives it."""
    rng = np.random.default_rng(2)
    for kind in ("normal", "integers"):
        ref, test = _draw(rng, kind, n, m, 2)
        res = EnergyShiftDetector(n_permutations=1000).fit(ref).test(test)
        pooled = np.concatenate([ref, test])
        splits = [
            energy_distance(pooled[list(s)], np.delete(pooled, list(s), axis=0))
            for s in combinations(range(n + m), n)
        ]
        observed = energy_distance(ref, test)
        direct = np.mean(np.asarray(splits) >= observed - 1e-12)
        assert res.details["exact"] and res.p_val == pytest.approx(direct, rel=1e-12)
        if n >= 2 and m >= 2:
            expected = permutation_test(  # permuting row indices: the rows are points
                (np.arange(n), np.arange(n, n + m)),
                lambda i, j, z=pooled: energy_distance(z[i], z[j]),
                permutation_type="independent",
                alternative="greater",
                n_resamples=np.inf,
            ).pvalue
            assert res.p_val == pytest.approx(expected, rel=1e-12)


def test_equal_splits_tie_with_the_observed_one_far_from_the_origin():
    """Splits with the same E (n = m = 1: the swap) are summed in other orders; with
    features near 1e6 the rounding scales with the distances, and the ties still count."""
    det = EnergyShiftDetector().fit(np.array([[1e6 + 0.1, 3e6]]))
    assert det.test(np.array([[1e6 + 0.7, 3e6 + 0.2]])).p_val == 1.0
    rng = np.random.default_rng(8)
    ref = 1e6 + rng.normal(size=(3, 2))
    res = EnergyShiftDetector().fit(ref).test(1e6 + rng.normal(size=(3, 2)))
    assert res.details["exact"] and res.p_val >= 2 / 20  # the observed split and its swap


def test_random_permutations_count_the_observed_split():
    rng = np.random.default_rng(3)
    det = EnergyShiftDetector(n_permutations=49, random_state=0).fit(rng.normal(size=(30, 2)))
    res = det.test(rng.normal(3.0, size=(30, 2)))
    assert res.p_val == 1 / 50 and res.details == {**res.details, "exact": False}
    assert det.test(det.X_ref_ * 1.0).p_val == det.test(det.X_ref_ * 1.0).p_val  # seeded


def test_bad_input_is_refused():
    det = EnergyShiftDetector().fit(np.arange(10.0).reshape(5, 2))
    with pytest.raises(ValueError, match="NaN"):
        det.test(np.full((5, 2), np.nan))
    with pytest.raises(ValueError, match="2 features"):
        det.test(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="not finite"):
        EnergyShiftDetector().fit(np.full((3, 2), 1e308)).test(np.full((3, 2), -1e308))
    with pytest.raises(ValueError, match="n_permutations"):
        EnergyShiftDetector(n_permutations=0).fit(np.zeros((5, 2)))


@pytest.mark.parametrize("n", [4, 50])
def test_level_under_the_null(n):
    """400 exchangeable draws (d = 3): rejections at 0.05 within the binomial bounds
    (n = 4: all 70 splits enumerated; n = 50: 199 random ones)."""
    rng = np.random.default_rng(4)
    det = EnergyShiftDetector(n_permutations=199, random_state=0)
    rejected = sum(
        det.fit(rng.normal(size=(n, 3))).predict(rng.normal(size=(n, 3))) for _ in range(400)
    )
    assert rejected <= HIGH and (n == 4 or rejected >= LOW), rejected


def test_power_against_a_location_and_a_scale_shift():
    rng = np.random.default_rng(5)
    det = EnergyShiftDetector(n_permutations=199, random_state=0).fit(rng.normal(size=(60, 3)))
    assert det.predict(rng.normal(0.6, size=(60, 3)))
    assert det.predict(rng.normal(scale=2.0, size=(60, 3)))


def test_saved_detector_gives_the_same_p_values(tmp_path):
    rng = np.random.default_rng(6)
    det = EnergyShiftDetector(n_permutations=99, random_state=3).fit(rng.normal(size=(20, 3)))
    save_detector(tmp_path / "det.npz", FittedDetector(None, det, {}))
    loaded = load_detector(tmp_path / "det.npz")
    batch = rng.normal(0.3, size=(15, 3))
    assert loaded.info["test"] == "energy" and loaded.detector.random_state == 3
    assert loaded.test(batch).p_val == det.test(batch).p_val
