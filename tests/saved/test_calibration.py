"""Measured false alarms: the batches, rate, interval and uniformity test against scipy, the
overlap with the reference, the warnings of a useless reference, and the calibration block
in the detector file (checked on load, written atomically, absent from older files).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, ks_2samp, kstest
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression

from dgpbench.detectors import ClassifierShiftDetector, KSShiftDetector, MMDShiftDetector
from dgpbench.saved import FittedDetector, load_detector, load_scorer, save_detector
from dgpbench.saved.calibration import (
    CALIBRATION,
    MIN_BATCHES,
    calibrate,
    check_calibration,
    reference_warnings,
    write_calibration,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "saved"


@pytest.fixture(scope="module")
def sample() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"ref": rng.normal(size=(200, 1)), "clean": rng.normal(size=(2000, 1))}


@pytest.fixture(scope="module")
def ks_fitted(sample) -> FittedDetector:
    return FittedDetector(None, KSShiftDetector(alpha=0.05, correction=None).fit(sample["ref"]))


@pytest.fixture(scope="module")
def block(ks_fitted, sample) -> dict:
    return calibrate(ks_fitted, sample["clean"], 20, seed=3)


def test_batches_rate_interval_and_uniformity_are_scipys(block, sample) -> None:
    # the documented draw: a permutation of the kept rows by default_rng(seed), cut in order
    rows = np.random.default_rng(3).permutation(2000).reshape(100, 20)
    p = [ks_2samp(sample["ref"][:, 0], sample["clean"][r, 0]).pvalue for r in rows]
    assert block["p_values"] == pytest.approx(p, rel=1e-12, abs=0)
    shifts = [q < 0.05 for q in p]
    assert block["shifts"] == shifts and block["alarms"] == sum(shifts)
    assert block["n_batches"] == 100 and block["batch_size"] == 20 and block["n_overlap"] == 0
    assert block["rate"] == sum(shifts) / 100
    ci = binomtest(sum(shifts), 100, 0.05).proportion_ci(0.95, method="exact")
    assert block["interval"] == pytest.approx([ci.low, ci.high], rel=1e-12)
    assert block["uniformity"]["p_value"] == pytest.approx(kstest(p, "uniform").pvalue)
    low = kstest(p, "uniform", alternative="greater")
    assert block["validity"]["statistic"] == pytest.approx(low.statistic)
    assert block["schema"] == CALIBRATION and block["warnings"] == []


def test_a_ks_detector_on_clean_data_has_an_interval_containing_alpha(block) -> None:
    low, high = block["interval"]
    assert low <= 0.05 <= high
    assert block["validity"]["p_value"] > 0.01  # no excess of small p-values


def test_the_batches_are_disjoint_and_seeded(ks_fitted, sample) -> None:
    a = calibrate(ks_fitted, sample["clean"], 50, seed=1)
    b = calibrate(ks_fitted, sample["clean"], 50, seed=1)
    c = calibrate(ks_fitted, sample["clean"], 50, seed=2)
    assert a["p_values"] == b["p_values"] != c["p_values"]
    assert a["n_batches"] == 40  # every row once: 2000 / 50
    assert calibrate(ks_fitted, sample["clean"], 50, n_batches=12)["n_batches"] == 12
    tiny = calibrate(ks_fitted, sample["clean"][:20], 2)  # the smallest batches
    assert tiny["n_batches"] == 10 and len(tiny["p_values"]) == 10


def test_reference_rows_in_the_clean_sample_are_dropped_or_refused(ks_fitted, sample) -> None:
    ref = sample["ref"]
    # the reference itself, and its rows as a float32 forward pass might give them
    clean = np.concatenate([ref[:50], ref[50:80] * (1 + 1e-7), sample["clean"][:400]])
    out = calibrate(ks_fitted, clean, 20)
    assert out["n_overlap"] == 80 and out["n_batches"] == 20 and out["n_clean"] == 480
    with pytest.raises(ValueError, match="80 of the 480 clean samples are in the detector"):
        calibrate(ks_fitted, clean, 20, overlap="refuse")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 201}, r"9 disjoint batches of 201, fewer than the 10 needed"),
        ({"batch_size": 20, "n_batches": 101}, "fewer than the 101 needed"),
        ({"batch_size": 20, "n_batches": MIN_BATCHES - 1}, "n_batches must be at least 10"),
        ({"batch_size": 1}, "batch_size must be at least 2"),
        ({"batch_size": 20, "overlap": "keep"}, "overlap must be one of drop, refuse"),
        ({"batch_size": 20, "seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_bad_arguments_are_refused_by_name(ks_fitted, sample, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        calibrate(ks_fitted, sample["clean"], **kwargs)


# -- a reference too small for alpha -------------------------------------------------------
def test_a_ks_reference_too_small_for_bonferroni_is_named_and_never_flags() -> None:
    rng = np.random.default_rng(1)
    det = KSShiftDetector(alpha=0.05).fit(rng.normal(size=(5, 10)))
    fitted = FittedDetector(None, det)
    # the smallest exact p-value at n = m = 5 is 2 / C(10, 5) = 0.0079 > 0.05 / 10
    (warning,) = reference_warnings(fitted, 5)
    assert f"{2 / math.comb(10, 5):.3g}" in warning and "0.005" in warning
    assert "can never flag a shift" in warning
    assert not det.test(rng.normal(loc=100.0, size=(5, 10))).is_drift  # it cannot
    assert reference_warnings(fitted, 20) == []  # larger batches can
    assert reference_warnings(FittedDetector(None, det.set_params(correction="fdr")), 5) == []


def test_mmd_permutations_too_few_for_alpha_are_named() -> None:
    rng = np.random.default_rng(2)
    det = MMDShiftDetector(alpha=0.05, n_permutations=10, random_state=0).fit(
        rng.normal(size=(30, 3))
    )
    (warning,) = reference_warnings(FittedDetector(None, det), 30)
    assert "0.0909" in warning  # 1 / (B + 1)
    det.set_params(n_permutations=1000)
    assert reference_warnings(FittedDetector(None, det), 30) == []
    # tiny samples: every split is enumerated, 2 / C(6, 3) = 0.1
    small = MMDShiftDetector(alpha=0.05).fit(rng.normal(size=(3, 2)))
    (warning,) = reference_warnings(FittedDetector(None, small), 3)
    assert "is 0.1," in warning


def test_a_classifier_reference_too_small_for_alpha_is_named() -> None:
    det = ClassifierShiftDetector(alpha=0.05).fit(np.random.default_rng(3).normal(size=(8, 2)))
    (warning,) = reference_warnings(FittedDetector(None, det), 4)
    assert "0.0625" in warning  # four held-out predictions, all right: 1 / 2**4
    assert reference_warnings(FittedDetector(None, det), 8) == []  # 1 / 2**8


def test_a_domain_classifier_at_chance_on_its_references_is_named() -> None:
    rng = np.random.default_rng(4)
    ref, clean = rng.normal(size=(100, 8)), rng.normal(size=(400, 8))
    blind = ClassifierShiftDetector(classifier=DummyClassifier(), random_state=0).fit(ref)
    out = calibrate(FittedDetector(None, blind), clean, 40)
    assert any("at chance on its own held-out references" in w for w in out["warnings"])
    seeing = ClassifierShiftDetector(classifier=LogisticRegression(), random_state=0).fit(ref)
    assert calibrate(FittedDetector(None, seeing), clean, 40)["warnings"] == []


def test_a_rate_above_alpha_is_named() -> None:
    rng = np.random.default_rng(5)
    det = KSShiftDetector(alpha=0.05, correction=None).fit(rng.normal(size=(200, 1)))
    out = calibrate(FittedDetector(None, det), rng.normal(loc=0.5, size=(400, 1)), 20)
    assert out["interval"][0] > 0.05
    assert any("is above alpha 0.05" in w for w in out["warnings"])


# -- the block in the file --------------------------------------------------------------
@pytest.fixture()
def saved(tmp_path: Path, ks_fitted) -> Path:
    path = tmp_path / "det.npz"
    save_detector(path, ks_fitted)
    return path


def test_a_recorded_block_loads_back_and_survives_a_save(saved, block, tmp_path) -> None:
    arrays_before = dict(np.load(saved))
    written = write_calibration(saved, block)
    assert written == {**block, "detector_sha256": written["detector_sha256"]}
    for loader in (load_detector, load_scorer):
        assert loader(saved).calibration == written
    with np.load(saved) as store:  # the arrays unchanged
        for key in arrays_before:
            if key != "__meta__":
                np.testing.assert_array_equal(store[key], arrays_before[key])
    again = tmp_path / "again.npz"
    save_detector(again, load_detector(saved))
    assert load_detector(again).calibration == written
    other = calibrate(load_detector(saved), np.random.default_rng(9).normal(size=(300, 1)), 30)
    copied = write_calibration(saved, other, out=tmp_path / "copy.npz")  # a copy; the file kept
    assert load_detector(tmp_path / "copy.npz").calibration == copied
    assert copied["detector_sha256"] == written["detector_sha256"]  # the same detector
    assert load_detector(saved).calibration == written


def test_files_without_a_block_load_as_uncalibrated(tmp_path) -> None:
    path = tmp_path / "noredu_ks.npz"
    shutil.copy(FIXTURES / "noredu_ks.npz", path)
    fitted = load_detector(path)
    assert fitted.calibration is None
    with np.load(FIXTURES / "batch.npz") as store:
        x = np.concatenate([store["x"]] * 10)  # 400 images: repeats are allowed, refs dropped
    out = calibrate(fitted, x, 20)
    written = write_calibration(path, out)
    assert load_detector(path).calibration == written


def _edit(path: Path, edit) -> None:
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    edit(meta["calibration"])
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b.update(rate=0.02), "calibration rate 0.02 is not what its p-values"),
        (lambda b: b.update(alarms=b["alarms"] + 1), "calibration alarms"),
        (lambda b: b["p_values"].__setitem__(0, 0.5), "calibration uniformity"),
        (lambda b: b["shifts"].__setitem__(0, not b["shifts"][0]), "calibration alarms"),
        (lambda b: b.update(interval=[0.0, 1.0]), "calibration interval"),
        (lambda b: b.update(alpha=0.1), "calibration alpha 0.1 is not the detector's 0.05"),
        (lambda b: b.update(extra=1), "calibration has keys"),
        (lambda b: b.update(schema="dgpbench-calibration/9"), "calibration must be an object"),
        (
            lambda b: b.update(n_batches=3),
            "calibration n_batches must be an integer of at least 10",
        ),
        (
            lambda b: b["p_values"].__setitem__(0, float("nan")),
            "calibration holds a value that is not a finite",
        ),
        (
            lambda b: b["p_values"].__setitem__(0, 1.5),
            "calibration p_values must be 100 numbers in",
        ),
        (lambda b: b.update(clean_sha256="xyz"), "calibration clean_sha256 must be 64 hex"),
        (lambda b: b.update(warnings=[1]), "calibration warnings must be a list of printable"),
        (lambda b: b.update(warnings=["\x1b[2J"]), "calibration warnings must be a list of"),
        (lambda b: b.update(detector_sha256="0" * 64), "calibration was measured on another"),
        (lambda b: b.update(detector_sha256=None), "calibration was measured on another"),
    ],
)
def test_an_edited_block_is_refused_on_load(saved, block, edit, message) -> None:
    write_calibration(saved, block)
    _edit(saved, edit)
    with pytest.raises(ValueError, match=rf"{saved}: invalid detector file: {message}"):
        load_detector(saved)


def test_a_failed_write_leaves_the_old_file_as_it_was(saved, block, monkeypatch) -> None:
    before = saved.read_bytes()

    def broken(file, *args, **kwargs):
        file.write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(OSError, match="No space left"):
        write_calibration(saved, block)
    assert saved.read_bytes() == before
    assert sorted(p.name for p in saved.parent.iterdir()) == ["det.npz"]


def test_a_block_that_breaks_the_rules_is_never_written(saved, block) -> None:
    before = saved.read_bytes()
    with pytest.raises(ValueError, match="calibration rate"):
        write_calibration(saved, {**block, "rate": 0.5})
    with pytest.raises(ValueError, match="cannot save the detector: calibration alpha"):
        save_detector(saved, FittedDetector(None, load_detector(saved).detector,
                                            calibration={**block, "alpha": 0.1}))  # fmt: skip
    assert saved.read_bytes() == before
    assert check_calibration(block, 0.05) is block


def test_every_test_calibrates_and_its_block_checks() -> None:
    from dgpbench.detectors import ChiSquareShiftDetector

    rng = np.random.default_rng(6)
    labels = ChiSquareShiftDetector().fit(rng.integers(0, 3, size=100))
    out = calibrate(FittedDetector(None, labels), rng.integers(0, 3, size=200), 20)
    assert out["n_overlap"] is None and out["n_batches"] == 10  # labels: no overlap to see
    assert check_calibration(out, 0.05) is out
    mmd = MMDShiftDetector(n_permutations=50, random_state=0).fit(rng.normal(size=(40, 2)))
    out = calibrate(FittedDetector(None, mmd), rng.normal(size=(200, 2)), 20)
    assert out["n_overlap"] == 0 and check_calibration(out, 0.05) is out
    assert all(p >= 1 / 51 for p in out["p_values"])  # the permutation p-value's floor


def test_a_block_moved_to_another_detector_is_refused(saved, block, tmp_path) -> None:
    write_calibration(saved, block)
    other = tmp_path / "other.npz"
    det = KSShiftDetector(alpha=0.05, correction=None).fit(np.arange(10.0).reshape(-1, 1))
    save_detector(other, FittedDetector(None, det))
    with np.load(saved) as store:
        moved = json.loads(str(store["__meta__"]))["calibration"]
    _edit_meta(other, lambda meta: meta.update(calibration=moved))
    with pytest.raises(ValueError, match="calibration was measured on another detector"):
        load_detector(other)
    with pytest.raises(ValueError, match="cannot save the detector: calibration was measured"):
        save_detector(other, FittedDetector(None, det, calibration=moved))


def _edit_meta(path: Path, edit) -> None:
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    edit(meta)
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)
