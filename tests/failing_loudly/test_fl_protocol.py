"""Rabanser et al.'s protocol (`failing_loudly.protocol: rabanser`), element by element."""

from __future__ import annotations

import numpy as np
import pytest
from _workflow import load_script
from scipy.spatial.distance import cdist
from scipy.stats import chi2_contingency

from dgpbench.detectors.mmd import MMDShiftDetector, cross_median_bandwidth, mmd2_unbiased
from dgpbench.failing_loudly.grid import RunPools, method_records, parse_method
from dgpbench.failing_loudly.toolbox import decide, rabanser_chi2
from dgpbench.shifts import apply_shift
from dgpbench.shifts.image import IMAGE_SHIFTS, random_affine


def test_kernel_is_exp_minus_d2_over_the_median_cross_distance():
    # A known pair: ref {0, 0}, test {3, 4} in 1-D: cross distances 3, 4, 3, 4 -> med 3.5;
    # k(0, 3) = exp(-9 / 3.5) in Rabanser et al.'s kernel (torch_two_sample, alphas=[1/med]).
    ref, test = np.array([[0.0], [0.0]]), np.array([[3.0], [4.0]])
    sigma = cross_median_bandwidth(ref, test)
    assert np.exp(-9.0 / (2 * sigma**2)) == pytest.approx(np.exp(-9.0 / 3.5), rel=1e-12)
    # The detector with that bandwidth computes the unbiased MMD^2 of that kernel.
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 4)), rng.normal(0.5, 1, size=(9, 4))
    med = np.median(cdist(x, y))
    z = np.concatenate([x, y])
    k = np.exp(-(cdist(z, z) ** 2) / med)
    det = MMDShiftDetector(n_permutations=9, bandwidth=cross_median_bandwidth(x, y), random_state=0)
    assert det.fit(x).test(y).statistic == pytest.approx(mmd2_unbiased(k, 12), rel=1e-9)


def test_on_pixels_their_kernel_is_nearly_diagonal_and_ours_is_not():
    # The observation: on MNIST-like pixels exp(-d^2/med) is ~0 off the diagonal.
    rng = np.random.default_rng(1)
    x = (rng.random((40, 784)) < 0.2).astype(float)
    y = (rng.random((40, 784)) < 0.2).astype(float)
    d = cdist(x, y)
    theirs = np.exp(-np.median(d**2) / np.median(d))
    ours_sigma = np.median(cdist(np.concatenate([x, y]), np.concatenate([x, y])))
    ours = np.exp(-np.median(d**2) / (2 * ours_sigma**2))
    assert theirs < 1e-3 < 0.5 < ours


def test_rabanser_mmd_compares_against_m_equal_n():
    rng = np.random.default_rng(2)
    runs = [RunPools(rng.normal(size=(300, 2)), {("none", 0.0): rng.normal(size=(300, 2))})]
    rec = method_records(runs, parse_method("x+mmd"), ns=[10, 50], n_draws=2, seed=0,
                         params={"alpha": 0.05, "n_permutations": 20, "kernel": "rabanser"},
                         multivariate_ref=None)  # fmt: skip
    assert (rec["n_ref"] == rec["n_eff"]).all()
    old = method_records(runs, parse_method("x+mmd"), ns=[10], n_draws=1, seed=0,
                         params={"alpha": 0.05, "n_permutations": 20},
                         multivariate_ref=200)  # fmt: skip
    assert (old["n_ref"] == 200).all()


def test_zero_count_chi2_is_a_uniform_p_value_and_counts_all_classes():
    rng = np.random.default_rng(3)
    ref = np.array([0, 1, 1, 2, 2, 2])
    test = np.array([0, 0, 1, 1, 2, 2])
    # every class of 3 seen in both: chi2_contingency of the full table
    table = np.array([[1, 2, 3], [2, 2, 2]])
    assert rabanser_chi2(ref, test, 3, rng) == pytest.approx(chi2_contingency(table)[1])
    # a fourth class the classifier has but neither sample predicts: their U(0, 1) p-value
    ps = np.array([rabanser_chi2(ref, test, 4, rng) for _ in range(2000)])
    assert 0.0 <= ps.min() and ps.max() <= 1.0
    assert abs(ps.mean() - 0.5) < 0.03 and abs((ps < 0.05).mean() - 0.05) < 0.02
    # seeded per draw: the same random_state gives the same p-value
    a = decide("chi2", ref, test, random_state=5, zero_counts="uniform", n_classes=4)
    assert a == decide("chi2", ref, test, random_state=5, zero_counts="uniform", n_classes=4)
    with pytest.raises(ValueError, match="outside"):
        rabanser_chi2(ref, np.array([5]), 4, rng)
    with pytest.raises(ValueError, match="empty"):
        rabanser_chi2(ref, np.array([], dtype=int), 4, rng)


def test_chi2_on_observed_classes_takes_the_labels_even_with_the_class_count():
    # n_classes turns labels into indicators for the other tests only: chi-squared on the
    # observed classes is chi2_contingency of the label counts, whether or not it is given
    ref = np.array([[0], [1], [1], [2], [2], [2]])
    test = np.array([[0], [0], [1], [1], [2], [2]])
    expected = chi2_contingency(np.array([[1, 2, 3], [2, 2, 2]]))[1]
    for n_classes in (None, 3):
        _, p = decide("chi2", ref, test, random_state=0, zero_counts="observed",
                      n_classes=n_classes)  # fmt: skip
        assert p == pytest.approx(expected)


def test_shear_in_degrees_is_theirs_and_barely_moves_an_image():
    rng = np.random.default_rng(4)
    img = rng.random((1, 1, 28, 28)).astype(np.float32)
    only_shear = IMAGE_SHIFTS["large"].__class__(0.0, 0.0, 0.0, 0.3, 0.0, False, False)
    u = np.random.default_rng(0).uniform(-1, 1, 6)[3]  # the shear draw of the first image
    deg = random_affine(img, only_shear, np.random.default_rng(0), "degrees")
    rad = random_affine(img, only_shear, np.random.default_rng(0), "radians")
    # 0.3 degrees * u shears the far rows by < 0.1 px; 0.3 radians by several pixels
    assert np.abs(deg - img).max() < 0.1 < np.abs(rad - img).max()
    assert abs(u) > 0.1  # the draw is not trivially small
    with pytest.raises(ValueError, match="shear_unit"):
        random_affine(img, only_shear, np.random.default_rng(0), "gradians")


def test_apply_shift_re_applies_per_run_and_reads_the_shear_unit():
    x = np.random.default_rng(5).random((20, 1, 8, 8), dtype=np.float32)
    y = np.arange(20) % 10
    a = apply_shift("medium_image_shift", 1.0, x, y, seed=1, run=0)
    b = apply_shift("medium_image_shift", 1.0, x, y, seed=1, run=1)
    assert not np.array_equal(a.x_new, b.x_new)  # each run its own transformations
    c = apply_shift("medium_image_shift", 1.0, x, y, seed=1, run=0, shear_unit="degrees")
    assert not np.array_equal(a.x_new, c.x_new)
    with pytest.raises(ValueError, match="run"):
        apply_shift("medium_image_shift", 1.0, x, y, run=-1)


def test_domain_classifier_is_two_sided_under_rabanser():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(6)
    ref, x = rng.normal(size=(40, 3)), rng.normal(size=(40, 3))
    _, p_two = decide("classif", ref, x, random_state=0, alternative="two-sided",
                      classifier=LogisticRegression())  # fmt: skip
    _, p_one = decide("classif", ref, x, random_state=0, classifier=LogisticRegression())
    assert p_two >= p_one


def test_records_say_which_chi2_draws_fell_back_to_a_uniform_p_value():
    rng = np.random.default_rng(7)
    ref = rng.integers(0, 10, size=(400, 1))
    runs = [RunPools(ref, {("none", 0.0): rng.integers(0, 10, size=(400, 1)),
                           ("ko_shift", 1.0): rng.integers(1, 10, size=(400, 1))})]  # fmt: skip
    params = {"alpha": 0.05, "zero_counts": "uniform", "n_classes": 10}
    rec = method_records(runs, parse_method("bbsdh+chi2"), ns=[10, 200], n_draws=20, seed=0,
                         params=params)  # fmt: skip
    share = rec.groupby(["shift", "n"])["fallback"].mean()
    assert share[("none", 10)] == 1.0 and share[("none", 200)] == 0.0  # ten classes, ten rows
    assert share[("ko_shift", 200)] == 1.0  # class 0 never in the test sample
    ko = rec[(rec["shift"] == "ko_shift") & (rec["n"] == 200)]
    assert ko["rejected"].mean() < 0.3  # theirs: a coin at alpha, not a detection


@pytest.mark.parametrize(("n", "d"), [(10, 5), (30, 8)])
def test_rabanser_mmd_holds_its_level_under_the_null_on_small_samples(n, d):
    # Their kernel is fixed by the observed split and kept for the permutations: not exactly
    # a permutation test, but on Gaussian nulls it stays at or below alpha.
    rng = np.random.default_rng(n)
    rejected = [
        decide("mmd", rng.normal(size=(n, d)), rng.normal(size=(n, d)), random_state=i,
               kernel="rabanser", n_permutations=50)[0]
        for i in range(150)
    ]  # fmt: skip
    assert np.mean(rejected) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 150)


def test_rabanser_mmd_detects_a_known_mean_shift():
    # Power, the other half of the null calibration above: N(0, I) against N(1, I) in d = 5
    # (1 sd in every coordinate), n = 30 per sample, 30 seeded draws, 50 permutations
    # (smallest p-value 1/51 < alpha). Measured (27 Nov 2026): 30 of 30 rejected; the bound,
    # 27 of 30, leaves margin. A degenerate kernel must not pass: with a bandwidth 1e6 times
    # too small the kernel matrix is the identity, every permutation gives the same MMD and
    # nothing is rejected (measured 0 of 30), so the same draws must then fail the bound.
    n, d, draws = 30, 5, 30
    rejected, degenerate = [], []
    for i in range(draws):
        rng = np.random.default_rng(1000 + i)
        ref, x = rng.normal(size=(n, d)), rng.normal(1.0, 1.0, size=(n, d))
        rejected.append(
            decide("mmd", ref, x, random_state=i, kernel="rabanser", n_permutations=50)[0]
        )
        tiny = cross_median_bandwidth(ref, x) * 1e-6
        degenerate.append(
            decide("mmd", ref, x, random_state=i, bandwidth=tiny, n_permutations=50)[0]
        )
    assert np.mean(rejected) >= 0.9
    assert np.mean(degenerate) <= 0.1


def test_rabanser_chi2_holds_its_level_under_the_null_at_every_n():
    rng = np.random.default_rng(9)
    for n in (10, 50, 500):
        rejected = [
            decide("chi2", rng.integers(0, 10, size=(n, 1)), rng.integers(0, 10, size=(n, 1)),
                   random_state=i, zero_counts="uniform", n_classes=10)[0]
            for i in range(300)
        ]  # fmt: skip
        assert np.mean(rejected) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300), n


def test_mmd_null_script_tests_the_same_exchangeable_pairs_under_both_kernels(tmp_path, capsys):
    # scripts/fl_mmd_null.py (docs/failing-loudly.md): fresh rows per draw, both kernels tested
    # on the same pairs, seeded.
    script = load_script("scripts/fl_mmd_null.py")
    rng = np.random.default_rng(0)
    features = rng.normal(size=(60, 3))
    ps = script.null_p_values(features, 10, 20, n_permutations=49, seed=1)
    assert set(ps) == {"rabanser", "median"} and all(len(p) == 20 for p in ps.values())
    assert all(((p > 0) & (p <= 1)).all() for p in ps.values())
    # the same pairs: a pair's two p-values agree in rank far beyond chance
    assert np.corrcoef(ps["rabanser"], ps["median"])[0, 1] > 0.5
    assert ps["median"].tolist() == script.null_p_values(features, 10, 20, n_permutations=49,
                                                         seed=1)["median"].tolist()  # fmt: skip
    with pytest.raises(ValueError, match="at least 122 rows"):
        script.null_p_values(features, 61, 1)
    np.savez(tmp_path / "f.npz", unseen=features)
    script.main([str(tmp_path / "f.npz"), "--n", "10", "--draws", "5", "--permutations", "19"])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "kernel=rabanser" in out[0] and "/5 rejected" in out[1]


def test_scipy12_ks_script_rejects_at_n_10_where_the_exact_test_does_not(tmp_path):
    # scripts/fl_ks_scipy12.py (docs/failing-loudly.md): SciPy 1.2's asymptotic KS p-values
    # in the grid's KS engine, for its own process only.
    from dgpbench.detectors.ks_test import ks_pvalues_at
    from dgpbench.failing_loudly.toolbox import ks_batch

    script = load_script("scripts/fl_ks_scipy12.py")
    # large samples: the asymptotic p-value is the exact one's approximation
    h = np.arange(20, 90)
    exact, old = ks_pvalues_at(2000, h), script.scipy12_pvalues_at(2000, h)
    moderate = (exact > 1e-3) & (exact < 0.5)
    assert moderate.sum() > 20 and np.all(np.abs(old[moderate] / exact[moderate] - 1) < 0.2)
    # n = 10, 32 features, one at distance 0.8: exact p = 0.0021 > 0.05 / 32, SciPy 1.2's below
    ref = np.tile(np.arange(10.0)[None, :, None], (1, 1, 32))
    test = ref.copy()
    test[0, :, 0] += 8.0
    assert not ks_batch(ref, test)[0][0]
    with script.scipy12():
        assert ks_batch(ref, test)[0][0]
    assert not ks_batch(ref, test)[0][0]  # restored
    assert script.main(["fl-features"]) == 2  # only fl-detect runs under it
