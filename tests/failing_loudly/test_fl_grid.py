"""The Failing-loudly grid's draws and decisions (dgpbench.failing_loudly.grid, dgpbench.failing_loudly.toolbox)."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench import KSShiftDetector
from dgpbench.failing_loudly.grid import (
    RunPools,
    effective_ns,
    grid_indices,
    method_records,
    parse_method,
    run_cell,
    run_split,
)
from dgpbench.failing_loudly.toolbox import ks_batch, make_detector


def _idx(**kw):
    args = dict(n_ref_pool=300, n_test_pool=200, n=20, ref_size=50, seed=1, shift="ko_shift",
                fraction=0.5, n_draws=8) | kw  # fmt: skip
    return grid_indices(**args)


def test_draws_are_distinct_rows_and_depend_only_on_their_key():
    a = _idx()
    for rows, pool in ((a.test, 200), (a.reference, 300)):
        assert all(len(set(r)) == len(r) for r in rows) and rows.max() < pool
    assert np.array_equal(_idx(n_draws=12).test[:8], a.test)  # extending keeps draws
    assert not np.array_equal(_idx(shift="small_gn_shift").test, a.test)  # own stream
    assert not np.array_equal(_idx(fraction=0.1).test, a.test)
    assert not np.array_equal(_idx(seed=2).reference, a.reference)
    assert not np.array_equal(_idx(run=1).test, a.test)  # each run its own stream
    assert len(set(a.random_state)) == 8


def test_effective_ns_caps_and_never_repeats_a_cell():
    assert effective_ns([10, 10000], 9020, 12000, cap=9000) == [(10, 10), (10000, 9000)]
    assert effective_ns([10, 50, 100], 40, 12000) == [(10, 10), (50, 40)]


def test_ks_cell_is_calibrated_under_the_null_and_powerful_under_shift():
    rng = np.random.default_rng(1)
    f_ref, f_test = rng.normal(size=(2000, 3)), rng.normal(size=(2000, 3))
    method = parse_method("x+ks")
    idx = grid_indices(2000, 2000, 50, 50, seed=0, shift="none", fraction=0.0, n_draws=400)
    rejected, _ = run_cell(f_ref, f_test, method, idx, n_ref=50, params={"alpha": 0.05})
    # Bonferroni is conservative: at most alpha, up to binomial noise (400 draws)
    assert rejected.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    idx = grid_indices(2000, 2000, 50, 50, seed=0, shift="small_gn_shift", fraction=1.0,
                       n_draws=100)  # fmt: skip
    rejected, _ = run_cell(f_ref, f_test + 1.0, method, idx, n_ref=50, params={"alpha": 0.05})
    assert rejected.mean() > 0.95


def test_records_cover_every_cell_with_paired_draws():
    rng = np.random.default_rng(2)
    f_ref = rng.normal(size=(300, 2))
    clean = rng.normal(size=(250, 2))
    pools = {("none", 0.0): clean, ("ko_shift", 1.0): clean[:120] + 2.0}
    rec = method_records([RunPools(f_ref, pools)], parse_method("a+ks"), ns=[10, 100, 1000],
                         n_draws=5, seed=0, params={"alpha": 0.05},
                         top_n={"ko_shift": 90})  # fmt: skip
    cells = rec.groupby(["shift", "n"])["n_eff"].first().to_dict()
    assert cells == {("none", 10): 10, ("none", 100): 100, ("none", 1000): 250,
                     ("ko_shift", 10): 10, ("ko_shift", 100): 90}  # fmt: skip
    assert rec.loc[rec["shift"] == "ko_shift", "rejected"].all()
    # KS is invariant under a monotone map of the features: a second representation that is
    # one gives the same decisions and p-values draw by draw only if the draws are paired
    pools3 = {key: np.exp(f) for key, f in pools.items()}
    other = method_records(
        [RunPools(np.exp(f_ref), pools3)],
        parse_method("b+ks"),
        ns=[10, 100, 1000],
        n_draws=5,
        seed=0,
        params={"alpha": 0.05},
        top_n={"ko_shift": 90},
    )
    assert np.array_equal(other["p_value"], rec["p_value"])
    shuffled = method_records(
        [RunPools(np.exp(f_ref), pools3)],
        parse_method("b+ks"),
        ns=[10, 100, 1000],
        n_draws=5,
        seed=1,
        params={"alpha": 0.05},
        top_n={"ko_shift": 90},
    )
    assert not np.array_equal(shuffled["p_value"], rec["p_value"])


@pytest.mark.parametrize("spec", ["pca", "pca+t", "+ks", "x+classif"])
def test_bad_method_names_are_errors(spec):
    with pytest.raises(ValueError, match="representation"):
        parse_method(spec)


def test_method_dimensions():
    assert parse_method("dgp+mmd").dimension == "multivariate"
    assert parse_method("classif").name == "classif"
    assert parse_method("bbsdh+chi2").dimension == "univariate"


def test_mmd_cell_through_the_toolbox():
    rng = np.random.default_rng(3)
    f_ref, f_test = rng.normal(size=(500, 5)), rng.normal(0.8, 1, size=(500, 5))
    idx = grid_indices(500, 500, 50, 100, seed=0, shift="none", fraction=0.0, n_draws=5)
    rejected, p = run_cell(f_ref, f_test, parse_method("x+mmd"), idx, n_ref=100,
                           params={"alpha": 0.05, "n_permutations": 100})  # fmt: skip
    assert rejected.all() and (p >= 1 / 101).all()


def test_chi2_cell_through_the_toolbox():
    rng = np.random.default_rng(4)
    f_ref = rng.integers(0, 10, size=(2000, 1))
    f_test = np.where(rng.random((2000, 1)) < 0.5, 0, rng.integers(0, 10, size=(2000, 1)))
    idx = grid_indices(2000, 2000, 500, 500, seed=0, shift="none", fraction=0.0, n_draws=5)
    rejected, _ = run_cell(f_ref, f_test, parse_method("bbsdh+chi2"), idx, n_ref=500,
                           params={"alpha": 0.05})  # fmt: skip
    assert rejected.all()


def test_unknown_tests_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown test 'wilcoxon'"):
        make_detector("wilcoxon")


@pytest.mark.parametrize("correction", ["bonferroni", "fdr", None])
def test_batched_ks_decides_like_the_detector(correction):
    rng = np.random.default_rng(5)
    ref, test = rng.normal(size=(8, 40, 6)), rng.normal(0.25, 1, size=(8, 40, 6))
    rejected, p_value = ks_batch(ref, test, alpha=0.05, correction=correction)
    results = [
        KSShiftDetector(alpha=0.05, correction=correction).fit(ref[i]).test(test[i])
        for i in range(8)
    ]
    assert rejected.tolist() == [r.is_drift for r in results] and 0 < rejected.sum() < 8
    assert p_value.tolist() == [r.min_p_val_adjusted for r in results]


@pytest.mark.parametrize(("n", "d"), [(20, 3), (200, 5), (1000, 2)])
def test_batched_ks_p_values_equal_scipy_with_ties(n, d):
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(n)
    ref = np.round(rng.normal(size=(3, n, d)), 1)  # ties within and across samples
    test = np.round(rng.normal(0.2, 1, size=(3, n, d)), 1)
    _, p_value = ks_batch(ref, test, alpha=0.05, correction=None)
    expected = [ks_2samp(ref[i], test[i], axis=0).pvalue.min() for i in range(3)]
    assert np.array_equal(p_value, np.asarray(expected))


# -- independent runs --------------------------------------------------------------------------
def test_runs_split_the_unseen_set_afresh_and_disjointly():
    splits = [run_split(1000, 400, 500, seed=3, run=r) for r in range(3)]
    for ref, test in splits:
        assert len(set(ref)) == 400 and len(set(test)) == 500 and not set(ref) & set(test)
    assert not np.array_equal(splits[0][1], splits[1][1])  # fresh pools per run
    assert np.array_equal(run_split(1000, 400, 500, seed=3, run=2)[1], splits[2][1])
    with pytest.raises(ValueError, match="do not fit"):
        run_split(100, 60, 50, seed=0, run=0)


def test_a_cell_at_the_pool_size_has_one_draw_per_run_not_copies():
    # At n = pool size every draw takes every row: 30 draws of one run are one draw
    # repeated. Today's grid counted them as 30 independent draws; now a run gives one draw
    # there and the independent units are the runs, each with its own pools.
    rng = np.random.default_rng(7)
    runs = [RunPools(rng.normal(size=(60, 2)), {("none", 0.0): rng.normal(size=(60, 2))})
            for _ in range(4)]  # fmt: skip
    rec = method_records(runs, parse_method("a+ks"), ns=[10, 60], n_draws=30, seed=0,
                         params={"alpha": 0.05})  # fmt: skip
    full = rec[rec["n_eff"] == 60]
    assert len(full) == 4 and sorted(full["run"]) == [0, 1, 2, 3]
    assert full["p_value"].nunique() == 4  # four independent pools, four statistics
    small = rec[rec["n_eff"] == 10]
    assert len(small) == 4 * 30 and small.groupby("run").size().eq(30).all()


def test_draws_stay_paired_across_methods_within_a_run_and_differ_between_runs():
    rng = np.random.default_rng(8)
    base = [(rng.normal(size=(200, 3)), rng.normal(size=(200, 3))) for _ in range(2)]
    runs = [RunPools(r, {("none", 0.0): t}) for r, t in base]
    runs_exp = [RunPools(np.exp(r), {("none", 0.0): np.exp(t)}) for r, t in base]
    kw = {"ns": [20], "n_draws": 5, "seed": 1, "params": {"alpha": 0.05}}
    a = method_records(runs, parse_method("a+ks"), **kw)
    b = method_records(runs_exp, parse_method("b+ks"), **kw)
    assert np.array_equal(a["p_value"], b["p_value"])  # KS is invariant: paired draws
    assert not np.array_equal(a[a["run"] == 0]["p_value"], a[a["run"] == 1]["p_value"])
