"""Knock-out label shift: the pool against its definition, the draws' composition, decisions
against the KS detector on the same rows, pairing, and what label-blind features can detect."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dgpbench.detectors.ks import KSShiftDetector
from dgpbench.paper.label_shift import (
    KNOCKOUT_FRACTIONS,
    knockout_draw_indices,
    knockout_pool,
    label_shift_detection,
)
from dgpbench.paper.protocol import n_corrupted

LABELS = np.random.default_rng(5).integers(0, 10, size=600)


def test_fractions_hold_rabanser_small_medium_large_at_one_three_six():
    assert (KNOCKOUT_FRACTIONS[1], KNOCKOUT_FRACTIONS[3], KNOCKOUT_FRACTIONS[6]) == (0.1, 0.5, 1.0)
    values = [KNOCKOUT_FRACTIONS[i] for i in range(1, 7)]
    assert values == sorted(values) and len(set(values)) == 6


@pytest.mark.parametrize("knocked", [0, 3])
def test_pool_removes_the_fraction_of_one_class_nested_over_intensities(knocked):
    n_class = int((LABELS == knocked).sum())
    previous = np.arange(len(LABELS))
    for level in range(1, 7):
        pool = knockout_pool(LABELS, level, knocked_class=knocked, seed=1)
        removed = np.setdiff1d(np.arange(len(LABELS)), pool)
        assert len(removed) == math.ceil(KNOCKOUT_FRACTIONS[level] * n_class)
        assert (LABELS[removed] == knocked).all()
        assert set(pool) <= set(previous)  # nested
        previous = pool
    assert not (LABELS[previous] == knocked).any()  # intensity VI removes the whole class


def test_pool_is_deterministic_per_seed():
    a = knockout_pool(LABELS, 3, seed=1)
    np.testing.assert_array_equal(a, knockout_pool(LABELS, 3, seed=1))
    assert not np.array_equal(a, knockout_pool(LABELS, 3, seed=2))


@pytest.mark.parametrize(("n", "delta"), [(10, 0.25), (50, 0.5), (200, 1.0), (20, 0.0)])
def test_draws_take_round_delta_n_images_from_the_pool_all_distinct(n, delta):
    level = 4
    idx = knockout_draw_indices(LABELS, n, delta, level, n_draws=30, seed=3)
    pool = set(knockout_pool(LABELS, level, seed=3))
    k = n_corrupted(n, delta)
    for test, mask, ref in zip(idx.test, idx.corrupted, idx.reference, strict=True):
        assert len(set(test)) == n and len(set(ref)) == n
        assert mask.sum() == k and set(test[mask]) <= pool
    # draw i is the same whatever n_draws
    np.testing.assert_array_equal(
        idx.test[:5], knockout_draw_indices(LABELS, n, delta, level, n_draws=5, seed=3).test
    )


def test_the_class_share_falls_as_the_protocol_says():
    # delta = 1, intensity III: the class keeps half its images, so its share in test batches
    # is (n_k / 2) / (N - n_k / 2); references keep the clean share.
    idx = knockout_draw_indices(LABELS, 100, 1.0, 3, n_draws=400, seed=0)
    n_k = (LABELS == 0).sum()
    want = math.floor(n_k / 2) / (len(LABELS) - math.ceil(n_k / 2))
    assert (LABELS[idx.test] == 0).mean() == pytest.approx(want, abs=0.01)
    assert (LABELS[idx.reference] == 0).mean() == pytest.approx(n_k / len(LABELS), abs=0.01)


def test_decisions_equal_the_ks_detector_on_the_same_rows():
    rng = np.random.default_rng(0)
    F = (LABELS == 0)[:, None] * 0.5 + rng.normal(size=(len(LABELS), 3))
    rec = label_shift_detection(F, LABELS, intensities=[5], ns=[50], deltas=[0.75], n_draws=15)
    idx = knockout_draw_indices(LABELS, 50, 0.75, 5, n_draws=15)
    for draw, row in rec.iterrows():
        det = KSShiftDetector(alpha=0.05).fit(F[idx.reference[draw]])
        assert bool(det.predict(F[idx.test[draw]])) == bool(row["rejected"])


def test_draws_do_not_depend_on_the_features():
    rng = np.random.default_rng(1)
    a = label_shift_detection(
        rng.normal(size=(600, 2)), LABELS, intensities=[2], ns=[20], deltas=[0.5], n_draws=5
    )
    b = label_shift_detection(
        rng.normal(size=(600, 4)), LABELS, intensities=[2], ns=[20], deltas=[0.5], n_draws=5
    )
    assert a[["intensity", "n", "delta", "draw"]].equals(b[["intensity", "n", "delta", "draw"]])


def test_label_blind_features_stay_at_the_false_detection_rate_label_aware_ones_detect():
    # three classes: knocking out class 0 moves a third of the mass of a label-aware feature
    labels = np.arange(600) % 3
    rng = np.random.default_rng(2)
    blind = rng.normal(size=(600, 2))
    aware = (labels == 0)[:, None] + rng.normal(scale=0.1, size=(600, 2))
    kwargs = {"intensities": [6], "ns": [200], "deltas": [1.0], "n_draws": 100}
    assert label_shift_detection(blind, labels, **kwargs).rejected.mean() <= 0.12
    assert label_shift_detection(aware, labels, **kwargs).rejected.mean() >= 0.9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": LABELS[:-1]}, "labels has 599 entries"),
        ({"labels": LABELS.astype(float)}, "integer"),
        ({"knocked_class": 11}, "class 11 has no test image"),
        ({"intensities": [0]}, "knock-out intensity"),
        ({"intensities": [7]}, "from 1 to 6"),
        ({"intensities": [2.0]}, "integer"),
        ({"ns": [601]}, "n"),
    ],
)
def test_bad_input(kwargs, match):
    F = np.random.default_rng(0).normal(size=(600, 2))
    args = {"labels": LABELS, **kwargs}
    labels = args.pop("labels")
    with pytest.raises(ValueError, match=match):
        label_shift_detection(F, labels, **args)


def test_detect_step_adds_knockout_records(tmp_path, capsys):
    import pandas as pd

    from dgpbench.cli.main import main
    from dgpbench.io import save_npz

    rng = np.random.default_rng(4)
    F = (LABELS == 0)[:, None] + rng.normal(size=(len(LABELS), 2))
    save_npz(tmp_path / "feats.npz", clean=F, classes=np.arange(10))
    save_npz(tmp_path / "clean.npz", y_test=LABELS)
    args = ["detect", "--features", str(tmp_path / "feats.npz"), "--ns", "20", "--deltas", "0.5",
            "--draws", "7", "--out", str(tmp_path / "rec.csv")]  # fmt: skip
    assert main([*args, "--knockout-intensities", "2", "6"]) == 2
    assert "needs --labels" in capsys.readouterr().err
    assert not (tmp_path / "rec.csv").exists()
    code = main([*args, "--labels", str(tmp_path / "clean.npz"), "--knockout-intensities", "2", "6",
                 "--knockout-class", "0"])  # fmt: skip
    assert code == 0
    rec = pd.read_csv(tmp_path / "rec.csv")
    ko = rec[rec["corruption"] == "KO"].reset_index(drop=True)
    want = label_shift_detection(F, LABELS, intensities=[2, 6], ns=[20], deltas=[0.5], n_draws=7)
    assert ko["rejected"].tolist() == want["rejected"].tolist()
    assert ko["intensity"].tolist() == want["intensity"].tolist()
    assert set(rec["corruption"]) == {"none", "KO"}
