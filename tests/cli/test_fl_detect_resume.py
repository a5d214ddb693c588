"""`dgpbench fl-detect` resumes at its last finished unit: the records of an interrupted and
resumed job are byte for byte those of an uninterrupted one."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dgpbench.failing_loudly.grid as grid
from dgpbench.cli.main import main
from dgpbench.failing_loudly.checkpoint import checkpoint_path
from dgpbench.io import load_npz, save_npz

REPO = Path(__file__).resolve().parents[2]
UNITS = 8  # 2 runs x (calibration + ko_shift at 3 fractions)
NS = {"noredu+ks": ("10", "20"), "classif": ("10",)}  # one run_cell call per size and unit
SIZES = 2  # of noredu+ks


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    """Digits-sized pools, ko_shift, and the NoRed and domain-classifier features."""
    from dgpbench.failing_loudly.grid import run_split

    folder = tmp_path_factory.mktemp("fl")
    rng = np.random.default_rng(0)
    x = rng.random((120, 1, 8, 8), dtype=np.float32)
    y = np.arange(120) % 10
    splits = [run_split(80, 40, 40, seed=0, run=r) for r in range(2)]
    save_npz(folder / "pools.npz", x_fit=x[:40], y_fit=y[:40], x_unseen=x[40:],
             y_unseen=y[40:], run_ref=np.stack([s[0] for s in splits]),
             run_test=np.stack([s[1] for s in splits]), n_classes=np.array(10),
             dataset=np.array("toy"), pools_id=np.array("toy-0-2"))  # fmt: skip
    assert main(["fl-shift", "--images", str(folder / "pools.npz"), "--shift",
                 "ko_shift", "--out", str(folder / "ko.npz")]) == 0  # fmt: skip
    for rep in ("noredu", "classif"):
        assert main(["fl-features", "--representation", rep, "--images",
                     str(folder / "pools.npz"), "--shifts", str(folder / "ko.npz"),
                     "--out", str(folder / f"{rep}.npz")]) == 0  # fmt: skip
    return folder


def _argv(features: Path, method: str, out: Path, *extra: str) -> list[str]:
    rep = "classif" if method == "classif" else method.partition("+")[0]
    return ["fl-detect", "--features", str(features / f"{rep}.npz"), "--method", method,
            "--ns", *NS[method], "--draws", "2", "--tag", "dataset=toy", "--tag", "model=none",
            "--tag", "kind=none", *extra, "--out", str(out)]  # fmt: skip


class _Cells:
    """Counts run_cell calls; raises at call ``fail_at`` (one call per sample size)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls, self.fail_at, self._run_cell = 0, fail_at, grid.run_cell

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("interrupted")
        return self._run_cell(*args, **kwargs)


def _run(monkeypatch, argv: list[str], fail_at: int | None = None) -> tuple[int, _Cells]:
    cells = _Cells(fail_at)
    monkeypatch.setattr(grid, "run_cell", cells)
    code = main(argv)
    monkeypatch.setattr(grid, "run_cell", cells._run_cell)
    return code, cells


@pytest.mark.parametrize("method", ["noredu+ks", "classif"])
def test_an_interrupted_job_resumes_to_the_uninterrupted_records(
    features, tmp_path, monkeypatch, caplog, method
):
    whole, part = tmp_path / "whole.csv", tmp_path / "part.csv"
    sizes = len(NS[method])
    assert main(_argv(features, method, whole)) == 0
    # fails in the 4th unit: 3 finished
    code, _ = _run(monkeypatch, _argv(features, method, part), fail_at=3 * sizes + 1)
    assert code == 2 and not part.exists() and checkpoint_path(part).exists()
    with caplog.at_level(logging.INFO):
        code, cells = _run(monkeypatch, _argv(features, method, part))
    assert code == 0 and cells.calls == (UNITS - 3) * sizes  # the 3 units are not rerun
    assert f"resuming: 3 of {UNITS} units from {checkpoint_path(part)}" in caplog.text
    assert part.read_bytes() == whole.read_bytes()
    assert not checkpoint_path(part).exists() and not checkpoint_path(whole).exists()


def test_a_job_killed_outright_resumes_to_the_uninterrupted_records(features, tmp_path, caplog):
    whole, part = tmp_path / "whole.csv", tmp_path / "part.csv"
    assert main(_argv(features, "noredu+ks", whole)) == 0
    # a SIGKILL in the 6th unit, with a write after every unit: nothing runs on exit
    script = (
        "import os, signal, sys\n"
        "import dgpbench.failing_loudly.checkpoint as ckpt, dgpbench.failing_loudly.grid as g\n"
        "from dgpbench.cli.main import main\n"
        "ckpt.SAVE_INTERVAL_S, calls, run_cell = 0.0, [], g.run_cell\n"
        "def cell(*a, **k):\n"
        "    calls.append(1)\n"
        f"    if len(calls) == {5 * SIZES + 1}: os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return run_cell(*a, **k)\n"
        "g.run_cell = cell\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run([sys.executable, "-c", script, *_argv(features, "noredu+ks", part)],
                          env=env, capture_output=True, timeout=120)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert not part.exists() and checkpoint_path(part).exists()
    with caplog.at_level(logging.INFO):
        assert main(_argv(features, "noredu+ks", part)) == 0
    assert f"resuming: 5 of {UNITS} units" in caplog.text
    assert part.read_bytes() == whole.read_bytes() and not checkpoint_path(part).exists()


@pytest.mark.parametrize("change", ["options", "features"])
def test_a_checkpoint_of_other_settings_or_features_is_ignored(
    features, tmp_path, monkeypatch, caplog, change
):
    feats = tmp_path / "feats"
    feats.mkdir()
    (feats / "noredu.npz").write_bytes((features / "noredu.npz").read_bytes())
    part = tmp_path / "part.csv"
    code, _ = _run(monkeypatch, _argv(feats, "noredu+ks", part), fail_at=3 * SIZES + 1)
    assert code == 2 and checkpoint_path(part).exists()
    extra: tuple[str, ...] = ()
    if change == "options":
        extra = ("--alpha", "0.01")
    else:  # the same path, other contents
        arrays = load_npz(feats / "noredu.npz")
        arrays["unseen"] = arrays["unseen"] + 1.0
        save_npz(feats / "noredu.npz", **arrays)
    whole = tmp_path / "whole.csv"
    assert main(_argv(feats, "noredu+ks", whole, *extra)) == 0
    with caplog.at_level(logging.INFO):
        code, cells = _run(monkeypatch, _argv(feats, "noredu+ks", part, *extra))
    assert code == 0 and cells.calls == UNITS * SIZES
    assert "made from other inputs or settings: starting over" in caplog.text
    assert part.read_bytes() == whole.read_bytes() and not checkpoint_path(part).exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "inconsistent"])
def test_a_damaged_checkpoint_is_ignored_with_a_warning(
    features, tmp_path, monkeypatch, caplog, damage
):
    whole, part = tmp_path / "whole.csv", tmp_path / "part.csv"
    assert main(_argv(features, "noredu+ks", whole)) == 0
    code, _ = _run(monkeypatch, _argv(features, "noredu+ks", part), fail_at=3 * SIZES + 1)
    ckpt = checkpoint_path(part)
    assert code == 2 and ckpt.exists()
    if damage == "garbage":
        ckpt.write_bytes(b"PK\x03\x04 not a checkpoint")
    elif damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    else:  # its own fingerprint, but rows that do not add up
        arrays = load_npz(ckpt)
        arrays["unit_rows"] = arrays["unit_rows"] + 1
        save_npz(ckpt, **arrays)
    with caplog.at_level(logging.INFO):
        code, cells = _run(monkeypatch, _argv(features, "noredu+ks", part))
    assert code == 0 and cells.calls == UNITS * SIZES
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(ckpt) in r.getMessage() and "starting over" in r.getMessage()
               for r in warnings)  # fmt: skip
    assert part.read_bytes() == whole.read_bytes() and not ckpt.exists()


def test_unit_records_round_trip_through_the_checkpoint_with_their_dtypes(tmp_path):
    import pandas as pd

    from dgpbench.failing_loudly.checkpoint import UnitCheckpoint

    frame = pd.DataFrame({"shift": "ko_shift", "fraction": 0.1, "n": 10, "run": 1,
                          "draw": np.arange(3), "rejected": [True, False, True],
                          "p_value": [1e-300, 0.1 + 0.2, 1.0], "fallback": False})  # fmt: skip
    ckpt = UnitCheckpoint(tmp_path / "c.npz", "fp", interval_s=0)
    ckpt.add(("ko_shift", 0.1, 1), frame)
    ckpt.add(("none", 0.0, 1), pd.DataFrame())  # a unit no sample size fits
    back = UnitCheckpoint(tmp_path / "c.npz", "fp").load()
    assert list(back) == [("ko_shift", 0.1, 1), ("none", 0.0, 1)]
    pd.testing.assert_frame_equal(back[("ko_shift", 0.1, 1)], frame)
    assert back[("none", 0.0, 1)].empty
    with np.load(tmp_path / "c.npz", allow_pickle=False) as f:  # plain arrays, no pickles
        assert all(f[k].dtype != object for k in f.files)
