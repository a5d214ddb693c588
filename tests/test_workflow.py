"""The Snakemake workflow end to end: config validation, determinism, resuming after kill -9.

Every run here uses a tiny configuration (one small digits model, two methods, two
corruptions at one intensity, 20 draws) in its own working directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from _workflow import REPO, SNAKEFILE, tiny_config, venv_env

from dgpbench.cli import main
from dgpbench.io import atomic_path, save_npz


def _command(workdir: Path, *args: str) -> list[str]:
    """``dgpbench run`` (snakemake, recovering from a killed run's stale lock)."""
    return [
        sys.executable, "-m", "dgpbench", "run", "--snakefile", str(SNAKEFILE),
        "--directory", str(workdir), "--cores", "2", "--profile",
        str(REPO / "workflow" / "profiles" / "local"), *args,
    ]  # fmt: skip


def run_workflow(workdir: Path, config: dict, *args: str, timeout: float = 300):
    """Write ``config.yaml`` into ``workdir`` and run the workflow there."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        _command(workdir, *args), cwd=workdir, env=venv_env(), capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _tables(workdir: Path) -> dict[str, bytes]:
    files = sorted((workdir / "results" / "tables").iterdir())
    assert files, "no tables written"
    return {f.name: f.read_bytes() for f in files}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metods": ["dgp"]}, "metods"),
        ({"methods": ["dgp", "persistence"]}, "persistence"),
        ({"datasets": ["imagenet"]}, "imagenet"),
        ({"protocol": {"draws": "many"}}, "many"),
        ({"models": {"hidden": [16], "layers": [2], "seeds": [0], "depth": 3}}, "depth"),
    ],
)
def test_invalid_config_stops_before_any_job(tmp_path, change, message):
    proc = run_workflow(tmp_path, tiny_config(**change), "-n")
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_command_line_selection_without_editing_files(tmp_path):
    proc = run_workflow(
        tmp_path, tiny_config(), "-n", "--config", "methods=[tu]", "corruptions=[UN]"
    )
    assert proc.returncode == 0, proc.stderr
    assert "detect/digits/h16-l2-s0/tu.csv" in proc.stdout
    assert "softmax" not in proc.stdout and "images/digits/GN.npz" not in proc.stdout


@pytest.mark.slow
def test_kill_9_mid_features_then_rerun_gives_identical_tables(tmp_path):
    config = tiny_config()
    first = run_workflow(tmp_path / "a", config)
    assert first.returncode == 0, first.stderr[-3000:]
    tables = _tables(tmp_path / "a")
    assert {"table1_shift_detection.md", "table_appendix_calibration.csv"} <= set(tables)

    # Second run: kill -9 the whole process group as soon as a features job is running.
    workdir = tmp_path / "b"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        _command(workdir), cwd=workdir, env=venv_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    logs = workdir / "results" / "logs" / "features"
    deadline = time.monotonic() + 240
    while not (logs.exists() and any(logs.rglob("*.log"))):
        assert proc.poll() is None, "the run ended before any features job started"
        assert time.monotonic() < deadline, "no features job started in time"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (workdir / "results" / "tables").exists()

    resumed = run_workflow(workdir, config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _tables(workdir) == tables


def test_failed_step_leaves_no_output(tmp_path, capsys):
    out = tmp_path / "clean.npz"
    code = main(["images", "--dataset", "imagenet", "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dgpbench images: error:") and "imagenet" in err and "\n" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_truncated_input_is_a_clear_error(tmp_path, capsys):
    good = tmp_path / "feats.npz"
    save_npz(good, clean=np.zeros((5, 2)))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(good.read_bytes()[:40])
    code = main(["detect", "--features", str(bad), "--ns", "2", "--deltas", "0.5",
                 "--out", str(tmp_path / "rec.csv")])  # fmt: skip
    assert code == 2
    assert "bad.npz" in capsys.readouterr().err
    assert not (tmp_path / "rec.csv").exists()


def test_atomic_path_keeps_old_file_and_leaves_no_temp_on_error(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_gzipped_csv_is_byte_identical_on_rewrite(tmp_path):
    import pandas as pd

    from dgpbench.io import write_csv

    frame = pd.DataFrame({"a": [1, 2], "b": [0.5, 0.25]})
    write_csv(tmp_path / "x.csv.gz", frame)
    first = (tmp_path / "x.csv.gz").read_bytes()
    time.sleep(1.1)  # gzip headers carry a timestamp unless it is pinned
    write_csv(tmp_path / "x.csv.gz", frame)
    assert (tmp_path / "x.csv.gz").read_bytes() == first
    assert pd.read_csv(tmp_path / "x.csv.gz").equals(frame)
