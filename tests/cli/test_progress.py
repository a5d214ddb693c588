"""Long subcommands are not silent: a tqdm bar on a terminal, one log line per epoch (loss,
accuracy, seconds) or per image set otherwise (a workflow job's log file)."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import numpy as np
import pytest

from dgpbench.cli.main import main


@pytest.fixture
def info_logs(caplog):
    caplog.set_level(logging.INFO)
    return caplog


def _lines(caplog, prefix: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(prefix)]


def test_train_logs_one_line_per_epoch_without_a_terminal(tmp_path, info_logs):
    common = ["train", "--dataset", "digits", "--hidden", "8", "--layers", "2", "--epochs", "3",
              "--threads", "1"]  # fmt: skip
    assert main([*common, "--seed", "0", "--out-dir", str(tmp_path / "one")]) == 0
    lines = _lines(info_logs, "train digits: epoch")
    assert [line.split(":")[1].strip().split()[1] for line in lines] == ["1/3", "2/3", "3/3"]
    pattern = r"epoch \d/3: loss \d+\.\d{4}, accuracy [01]\.\d{4}, validation accuracy [01]\.\d{4}, \d+\.\d s"
    assert all(re.search(pattern, line) for line in lines), lines
    info_logs.clear()
    assert main([*common, "--seeds", "0", "1", "--out-dir", str(tmp_path / "two")]) == 0
    lines = _lines(info_logs, "train digits x2: seed")
    assert len(lines) == 6 and sum("seed 1, epoch 3/3" in line for line in lines) == 1


def test_features_and_detect_log_each_image_set(tmp_path, info_logs):
    model = tmp_path / "model"
    assert main(["train", "--dataset", "digits", "--hidden", "8", "--layers", "2", "--epochs",
                 "1", "--seed", "0", "--out-dir", str(model)]) == 0  # fmt: skip
    images, corrupted = tmp_path / "clean.npz", tmp_path / "GN.npz"
    assert main(["images", "--dataset", "digits", "--n-refs", "100", "--n-test", "100",
                 "--out", str(images)]) == 0  # fmt: skip
    assert main(["corrupt", "--dataset", "digits", "--images", str(images), "--corruption", "GN",
                 "--intensities", "2", "5", "--out", str(corrupted)]) == 0  # fmt: skip
    feats = tmp_path / "softmax.npz"
    assert main(["features", "--method", "softmax", "--model", str(model / "model.pt"),
                 "--clean", str(images), "--corrupted", str(corrupted), "--out", str(feats)]) == 0  # fmt: skip
    lines = _lines(info_logs, "features softmax:")
    assert [line.split()[2] for line in lines] == ["clean", "GN_2", "GN_5"]
    assert all(re.search(r"\(\d/3\): 100 images, \d+\.\d s$", line) for line in lines), lines
    assert main(["detect", "--features", str(feats), "--ns", "10", "--deltas", "0.5",
                 "--draws", "5", "--out", str(tmp_path / "rec.csv")]) == 0  # fmt: skip
    lines = _lines(info_logs, "detect:")
    assert len(lines) == 3 and lines[0].startswith("detect: calibration")


def test_a_terminal_gets_a_bar_and_no_lines():
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from dgpbench.progress import Progress\n"
        "with Progress(3, 'work') as bar:\n"
        "    for _ in range(3):\n"
        "        bar.update(); bar.log('step done')\n"
    )
    primary, secondary = pty.openpty()
    # a terminal 80 columns wide (a new pty has 0: tqdm would draw an empty bar)
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.run(
        [sys.executable, "-c", code], stderr=secondary, stdout=subprocess.DEVNULL, timeout=60
    )
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(primary)
    assert proc.returncode == 0
    text = out.decode(errors="replace")
    assert "work:" in text and "/3 [" in text  # the bar
    assert "step done" not in text


def test_tae_training_logs_one_line_per_epoch_in_fl_features(info_logs):
    from dgpbench.cli.failing_loudly import _make_rep
    from dgpbench.cli.main import build_parser

    args = build_parser().parse_args(
        ["fl-features", "--representation", "tae", "--images", "p.npz", "--out", "f.npz"]
    )
    tae = _make_rep("tae", None, args).set_params(epochs=3)
    assert tae.progress  # what fl-features builds reports its training
    x = np.random.default_rng(0).random((16, 1, 8, 8), dtype=np.float32)
    tae.fit(x)
    lines = _lines(info_logs, "train tae: epoch")
    assert [line.split()[3] for line in lines] == ["1", "2", "3"], lines
    assert all(re.search(r"epoch \d of 3, loss \d+\.\d{5}$", line) for line in lines), lines
