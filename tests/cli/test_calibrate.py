"""`dgpbench calibrate`: the measured false alarms recorded in the detector file, printed by
`score` in every record; overlap, exit statuses, an untouched file on any error, warnings.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from dgpbench.cli.main import main
from dgpbench.saved import load_detector

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "saved"

FACTORY = """
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)
    ).eval()
"""
MODEL = "calibnet:mlp"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("calibrate")
    (folder / "calibnet.py").write_text(FACTORY)
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(460, 1, 8, 8)).astype(np.float32)
    np.savez(folder / "clean.npz", x=images[:60])  # the detector's reference
    np.savez(folder / "fresh.npz", x=images[60:])  # 400 images never used in fitting
    np.savez(folder / "mixed.npz", x=images[:260])  # the reference and 200 fresh ones
    np.savez(folder / "dark.npz", x=images[60:100] * 0.4)
    sys.path.insert(0, str(folder))
    fit = ["fit", "--model", MODEL, "--clean", str(folder / "clean.npz"), "--method",
           "softmax", "--out", str(folder / "det.npz")]  # fmt: skip
    assert main(fit) == 0
    yield folder
    sys.path.remove(str(folder))


@pytest.fixture()
def det(work, tmp_path) -> Path:
    path = tmp_path / "det.npz"
    shutil.copy(work / "det.npz", path)
    return path


def _calibrate(det: Path, clean: Path, *args: str) -> list[str]:
    return ["calibrate", "--detector", str(det), "--model", MODEL, "--clean", str(clean),
            "--batch-size", "20", *args]  # fmt: skip


def test_a_calibrated_ks_detector_has_an_interval_containing_alpha(work, det, capsys) -> None:
    assert main(_calibrate(det, work / "fresh.npz", "--json")) == 0
    out, err = capsys.readouterr()
    block = json.loads(out)
    assert err == "" and block == load_detector(det, model=MODEL).calibration
    assert block["n_batches"] == 20 and block["batch_size"] == 20 and block["n_overlap"] == 0
    assert block["interval"][0] <= block["alpha"] == 0.05 <= block["interval"][1]
    assert block["clean"] == str(work / "fresh.npz") and len(block["clean_sha256"]) == 64
    # score: the block in every record, error records included; exit status as before
    np.savez(det.parent / "nan.npz", x=np.full((20, 1, 8, 8), np.nan, np.float32))
    batches = [str(work / "fresh.npz"), str(work / "dark.npz")]
    score = ["score", "--detector", str(det), "--model", MODEL, "--json", "--batch"]
    assert main([*score, *batches]) == 1
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["shift"] for r in records] == [False, True]
    assert all(r["calibration"] == block for r in records)
    assert main([*score, batches[0], str(det.parent / "nan.npz")]) == 2
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "error" in records[1] and all(r["calibration"] == block for r in records)
    # the text report says it once
    assert main([*score[:-2], "--batch", batches[0]]) == 0
    assert capsys.readouterr().out.startswith("measured false alarms: ")


def test_an_uncalibrated_file_scores_with_calibration_null(capsys) -> None:
    code = main(["score", "--detector", str(FIXTURES / "noredu_ks.npz"), "--batch",
                 str(FIXTURES / "batch.npz"), "--json"])  # fmt: skip
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code in (0, 1) and record["calibration"] is None and code == int(record["shift"])


def test_reference_images_in_the_clean_file_are_dropped_or_refused(work, det, capsys) -> None:
    assert main(_calibrate(det, work / "mixed.npz", "--json")) == 0
    block = json.loads(capsys.readouterr().out)
    assert block["n_overlap"] == 60 and block["n_clean"] == 260 and block["n_batches"] == 10
    before = det.read_bytes()
    assert main(_calibrate(det, work / "mixed.npz", "--overlap", "refuse", "--seed", "1")) == 2
    err = capsys.readouterr().err
    assert "60 of the 260 clean samples are in the detector's reference" in err
    assert det.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-batches", "5"], "--n-batches must be at least 10"),
        (["--n-batches", "21"], "20 disjoint batches of 20, fewer than the 21 needed"),
        (["--batch-size", "1"], "--batch-size must be at least 2 for the ks test"),
        (["--batch-size", "41"], "9 disjoint batches of 41, fewer than the 10 needed"),
        (["--clean", "absent.npz"], "--clean: no such file"),
        (["--clean", "notimages.npz"], "notimages.npz"),
        (["--detector", "notimages.npz"], "not a dgpbench detector file"),
    ],
)
def test_bad_input_exits_2_and_leaves_the_file(work, det, tmp_path, args, message, capsys):
    np.savez(tmp_path / "notimages.npz", y=np.arange(3))
    before = det.read_bytes()
    argv = _calibrate(det, work / "fresh.npz")
    for option, value in zip(args[::2], args[1::2], strict=True):
        if value.endswith(".npz"):
            value = str(tmp_path / value)
        if option in argv:
            argv[argv.index(option) + 1] = value
        else:
            argv += [option, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and det.read_bytes() == before


def test_a_failed_write_leaves_the_detector_byte_identical(work, det, monkeypatch, capsys):
    before = det.read_bytes()

    def broken(file, *args, **kwargs):
        file.write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken)
    assert main(_calibrate(det, work / "fresh.npz")) == 2
    assert "No space left" in capsys.readouterr().err
    assert det.read_bytes() == before and sorted(p.name for p in det.parent.iterdir()) == [
        "det.npz"
    ]


def test_out_writes_a_calibrated_copy(work, det, tmp_path, capsys) -> None:
    before = det.read_bytes()
    out = tmp_path / "calibrated.npz"
    assert main(_calibrate(det, work / "fresh.npz", "--out", str(out))) == 0
    assert "recorded in" in capsys.readouterr().out and det.read_bytes() == before
    assert load_detector(out, model=MODEL).calibration["n_batches"] == 20
    assert load_detector(det, model=MODEL).calibration is None


def test_a_reference_too_small_for_alpha_is_a_warning_of_score(work, tmp_path, capsys):
    small = tmp_path / "small.npz"
    np.savez(tmp_path / "five.npz", x=np.load(work / "clean.npz")["x"][:5])
    fit = ["fit", "--model", MODEL, "--clean", str(tmp_path / "five.npz"), "--method",
           "softmax", "--out", str(small)]  # fmt: skip
    assert main(fit) == 0
    np.savez(tmp_path / "b.npz", x=np.load(work / "dark.npz")["x"][:5])
    score = ["score", "--detector", str(small), "--model", MODEL, "--json", "--batch"]
    assert main([*score, str(tmp_path / "b.npz"), str(tmp_path / "b.npz")]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "it can never flag a shift" in err
    # calibrate records it, and score says it (once) from the record too
    assert main(_calibrate(small, work / "fresh.npz", "--batch-size", "5")) == 0
    assert "it can never flag a shift" in capsys.readouterr().err
    assert main([*score, str(tmp_path / "b.npz")]) == 0
    assert capsys.readouterr().err.count("warning:") == 1


def test_a_blind_domain_classifier_is_a_warning_of_score(work, tmp_path, capsys) -> None:
    from dgpbench.detectors import ClassifierShiftDetector
    from dgpbench.features.reductions import ImageFeatures
    from dgpbench.saved import FittedDetector, save_detector

    x = np.load(work / "fresh.npz")["x"]
    feats = ImageFeatures().fit(x[:40])
    # a learning rate of 1e-9: the network stays as initialised, at chance on anything
    blind = ClassifierShiftDetector(learning_rate=1e-9, epochs=1, random_state=0)
    path = tmp_path / "blind.npz"
    save_detector(path, FittedDetector(feats, blind.fit(feats.transform(x[:40])), {}))
    np.savez(tmp_path / "b.npz", x=x[40:80])
    code = main(["score", "--detector", str(path), "--batch", str(tmp_path / "b.npz"), "--json"])
    err = capsys.readouterr().err
    assert code == 0 and err.count("warning:") == 1
    assert "at chance on its own held-out references" in err
