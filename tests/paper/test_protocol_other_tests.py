"""The paper's protocol with another two-sample test than KS on the same draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from dgpbench.detectors import make_detector
from dgpbench.paper.power_by_test import power_cells
from dgpbench.paper.protocol import bootstrap_detection, calibration, draw_indices

ALPHA = 0.05


def _features(seed=0, N=400, d=4):
    rng = np.random.default_rng(seed)
    clean = rng.normal(size=(N, d))
    return clean, clean + rng.normal(0.6, 0.5, size=(N, d))


def test_ks_is_the_default_and_unchanged():
    clean, corr = _features()
    kw = {"ns": [10, 50], "deltas": [0.0, 0.5], "n_draws": 20}
    pd.testing.assert_frame_equal(bootstrap_detection(clean, corr, **kw),
                                  bootstrap_detection(clean, corr, test="ks", **kw))  # fmt: skip


@pytest.mark.parametrize("test", ["cvm", "ad"])
@pytest.mark.parametrize("correction", ["bonferroni", "fdr"])
def test_per_feature_tests_decide_as_their_detector_on_the_protocols_draws(test, correction):
    clean, corr = _features(1)
    rec = bootstrap_detection(clean, corr, ns=[12], deltas=[0.5], n_draws=6, test=test,
                              correction=correction)  # fmt: skip
    idx = draw_indices(len(clean), 12, 0.5, n_draws=6)
    for i in range(6):
        x = clean[idx.test[i]].copy()
        x[idx.corrupted[i]] = corr[idx.test[i][idx.corrupted[i]]]
        res = make_detector(test, correction=correction).fit(clean[idx.reference[i]]).test(x)
        assert rec["rejected"][i] == res.is_drift
        assert rec["min_p"][i] == pytest.approx(res.p_val.min(), rel=1e-12)


@pytest.mark.parametrize("test", ["cvm", "ad", "energy"])
def test_other_tests_hold_the_level_and_detect_a_strong_shift(test):
    clean, _ = _features(2, N=600, d=3)
    kw = {"n_draws": 60, "test": test, "n_permutations": 99}
    cal = calibration(clean, ns=[10, 50], **kw)
    assert cal["rejected"].sum() <= binom.ppf(0.999, len(cal), ALPHA)
    strong = bootstrap_detection(clean, clean + 3.0, ns=[50], deltas=[1.0], **kw)
    assert strong["rejected"].all()


def test_energy_draws_are_paired_and_reproducible():
    clean, corr = _features(3)
    kw = {"ns": [20], "deltas": [0.5], "test": "energy", "n_permutations": 49}
    a = bootstrap_detection(clean, corr, n_draws=4, **kw)
    b = bootstrap_detection(clean, corr, n_draws=8, **kw)
    pd.testing.assert_frame_equal(a, b.iloc[:4])


def test_an_unknown_test_is_refused_by_name():
    clean, corr = _features()
    with pytest.raises(ValueError, match="unknown test 'ttest'"):
        bootstrap_detection(clean, corr, ns=[10], test="ttest")


def test_power_cells_mark_the_most_powerful_test_among_those_holding_the_level():
    rows = []
    # ks: 50% power, level 0; cvm: 90% power but a 60% level (not held); ad: 70%, level 0
    for test, power, level in (("ks", 10, 0), ("cvm", 18, 12), ("ad", 14, 0)):
        for i in range(20):
            rows.append(("dgp", test, "GN", 0.5, 10, i < power))
            rows.append(("dgp", test, "none", 0.0, 10, i < level))
    rec = pd.DataFrame(rows, columns=["method", "test", "corruption", "delta", "n", "rejected"])
    cells = power_cells(rec, [0.5], alpha=ALPHA)
    best = cells[cells["best"]]
    assert best[["test", "column"]].values.tolist() == [["ad", "n = 10"]]
    level = cells[cells["column"] == "clean (level)"].set_index("test")["ratio_pct"]
    assert level.to_dict() == {"ad": 0.0, "cvm": 60.0, "ks": 0.0}
