"""``dgpbench monitor``: JSON lines, exit 1 at the first alarm, 0 at the end, 2 on bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dgpbench.cli.main import main
from dgpbench.online import OnlineCVMDetector, OnlineMMDDetector
from dgpbench.saved import FittedDetector, save_detector


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitor")
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(200, 2))
    det = OnlineMMDDetector(ert=1e6, window_size=5, n_bootstraps=2000, random_state=0).fit(ref)
    save_detector(root / "mmd.npz", FittedDetector(None, det, {}))
    cvm = OnlineCVMDetector(ert=1e6, window_size=5, n_bootstraps=2000, random_state=0).fit(ref)
    save_detector(root / "cvm.npz", FittedDetector(None, cvm, {}))
    np.savez(root / "clean1.npz", x=rng.normal(size=(12, 2)))
    np.savez(root / "clean2.npz", x=rng.normal(size=(8, 2)))
    np.savez(root / "shifted.npz", x=rng.normal(loc=6.0, size=(30, 2)))
    np.savez(root / "wide.npz", x=rng.normal(size=(5, 3)))
    return root


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["mmd.npz", "cvm.npz"])
def test_end_of_stream_without_alarm_exits_0_with_an_end_line(files, capsys, name):
    status = main(["monitor", "--detector", str(files / name), str(files / "clean1.npz"),
                   str(files / "clean2.npz"), "--every", "4"])  # fmt: skip
    lines = _lines(capsys.readouterr().out)
    assert status == 0
    assert [r["event"] for r in lines] == ["progress"] * 5 + ["end"]
    assert [r["data"]["time"] for r in lines] == [4, 8, 12, 16, 20, 20]
    assert lines[0]["data"]["distance"] is None  # the window is not yet full at t = 4
    assert lines[-1]["schema"] == "dgpbench-monitor/1" and lines[-1]["meta"]["online"] is True
    assert lines[2]["file"].endswith("clean1.npz") and lines[2]["index"] == 11


@pytest.mark.parametrize("name", ["mmd.npz", "cvm.npz"])
def test_the_first_alarm_prints_its_line_and_exits_1(files, capsys, name):
    status = main(["monitor", "--detector", str(files / name), str(files / "clean1.npz"),
                   str(files / "shifted.npz")])  # fmt: skip
    lines = _lines(capsys.readouterr().out)
    assert status == 1
    assert len(lines) == 1 and lines[0]["event"] == "alarm" and lines[0]["shift"] is True
    assert lines[0]["file"].endswith("shifted.npz")
    assert lines[0]["data"]["distance"] > lines[0]["data"]["threshold"]


def test_a_stream_fed_in_pieces_with_state_gives_the_uninterrupted_decisions(files, capsys,
                                                                              tmp_path):  # fmt: skip
    det = str(files / "mmd.npz")
    state = str(tmp_path / "state.npz")
    main(["monitor", "--detector", det, str(files / "clean1.npz"), str(files / "shifted.npz")])
    whole = _lines(capsys.readouterr().out)
    assert main(["monitor", "--detector", det, "--state", state, str(files / "clean1.npz")]) == 0
    first = _lines(capsys.readouterr().out)
    assert first[-1]["data"]["time"] == 12
    status = main(["monitor", "--detector", det, "--state", state, str(files / "shifted.npz")])
    resumed = _lines(capsys.readouterr().out)
    assert status == 1
    assert resumed[0]["data"] == whole[0]["data"]


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda f: [str(f / "mmd.npz"), str(f / "missing.npz")], "no such file"),
        (lambda f: [str(f / "mmd.npz"), str(f / "wide.npz")], "3 features"),
        (lambda f: [str(f / "clean1.npz"), str(f / "clean2.npz")], "detector file"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_no_state(files, capsys, tmp_path,
                                                             make_args, message):  # fmt: skip
    det, *stream = make_args(files)
    state = tmp_path / "state.npz"
    status = main(["monitor", "--detector", det, "--state", str(state), *stream])
    err = capsys.readouterr().err
    assert status == 2 and message in err and not state.exists()


def test_a_batch_detector_is_refused(files, capsys, tmp_path):
    from dgpbench.detectors import KSShiftDetector

    ks = KSShiftDetector().fit(np.random.default_rng(1).normal(size=(20, 2)))
    save_detector(tmp_path / "ks.npz", FittedDetector(None, ks, {}))
    status = main(["monitor", "--detector", str(tmp_path / "ks.npz"), str(files / "clean1.npz")])
    assert status == 2 and "not an online one" in capsys.readouterr().err


FACTORY = """
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)
    ).eval()
"""


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    import sys

    folder = tmp_path_factory.mktemp("onlinecli")
    (folder / "onlinecli_net.py").write_text(FACTORY)
    rng = np.random.default_rng(0)
    np.savez(folder / "clean.npz", x=rng.uniform(size=(120, 1, 8, 8)).astype(np.float32))
    np.savez(folder / "stream.npz", x=rng.uniform(size=(20, 1, 8, 8)).astype(np.float32))
    dark = rng.uniform(size=(40, 1, 8, 8)) * 0.2
    np.savez(folder / "dark.npz", x=dark.astype(np.float32))
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


@pytest.mark.parametrize("test", ["mmd_online", "cvm_online"])
def test_fit_saves_an_online_detector_that_monitor_runs_on_images(images, capsys, test):
    out = images / f"{test}.npz"
    fit = ["fit", "--model", "onlinecli_net:mlp", "--clean", str(images / "clean.npz"),
           "--method", "bbsds", "--test", test, "--ert", "1e6", "--window", "5",
           "--bootstraps", "500", "--out", str(out)]  # fmt: skip
    assert main(fit) == 0
    run = ["monitor", "--detector", str(out), "--model", "onlinecli_net:mlp"]
    assert main([*run, str(images / "stream.npz")]) == 0
    assert main([*run, str(images / "stream.npz"), str(images / "dark.npz")]) == 1
    lines = _lines(capsys.readouterr().out)
    assert lines[-1]["event"] == "alarm" and lines[-1]["file"].endswith("dark.npz")
    assert lines[-1]["meta"]["ert"] == 1e6 and lines[-1]["meta"]["window_size"] == 5


def test_score_refuses_an_online_detector_and_fit_refuses_unused_options(images, capsys):
    out = images / "mmd_online_score.npz"
    fit = [
        "fit",
        "--model",
        "onlinecli_net:mlp",
        "--clean",
        str(images / "clean.npz"),
        "--method",
        "bbsds",
        "--test",
        "mmd_online",
        "--window",
        "5",
        "--out",
        str(out),
    ]
    assert main([*fit, "--bootstraps", "200"]) == 0
    status = main(["score", "--detector", str(out), "--model", "onlinecli_net:mlp",
                   "--batch", str(images / "stream.npz")])  # fmt: skip
    assert status == 2 and "dgpbench monitor" in capsys.readouterr().err
    assert main([*fit, "--alpha", "0.01"]) == 2
    assert "--alpha is for" in capsys.readouterr().err
    assert main([*fit[:-6], "--ert", "100", "--out", str(out)]) == 2  # --ert with the ks test
    assert "--ert is for" in capsys.readouterr().err
    assert main([*fit, "--calibration", "reference"]) == 2  # cvm_online only
    assert "--calibration is for" in capsys.readouterr().err


def test_fit_passes_the_calibration_to_the_cvm_detector(images):
    from dgpbench.saved import load_detector

    out = images / "cvm_reference.npz"
    fit = ["fit", "--model", "onlinecli_net:mlp", "--clean", str(images / "clean.npz"),
           "--method", "bbsds", "--test", "cvm_online", "--window", "5", "--bootstraps", "200",
           "--calibration", "reference", "--out", str(out)]  # fmt: skip
    assert main(fit) == 0
    det = load_detector(out, model="onlinecli_net:mlp").detector
    assert det.calibration == "reference" and len(det.X_ref_) == 120 - 9
