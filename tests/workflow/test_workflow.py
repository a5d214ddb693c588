"""The Snakemake workflow end to end: config validation, determinism, resuming after kill -9.

Every run here uses a tiny configuration (one small digits model, two methods, two
corruptions at one intensity, 20 draws); the runs that only read outputs share one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from _workflow import (
    CORES,
    REPO,
    SNAKEFILE,
    TINY_GRID_TARGETS,
    config_problem,
    copy_tiny_grid,
    snakemake,
    tiny_config,
    venv_env,
)

from dgpbench.cli.main import main
from dgpbench.io import atomic_path, save_npz


def _command(workdir: Path, *args: str) -> list[str]:
    """``dgpbench run`` (snakemake, recovering from a killed run's stale lock)."""
    return [
        sys.executable, "-m", "dgpbench", "run", "--snakefile", str(SNAKEFILE),
        "--directory", str(workdir), "--cores", str(CORES), "--profile",
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
        ({"report": {"pool_deltas": [0.25, 0.5]}}, "report.pool_deltas"),
        ({"report": {"comparison_delta_sets": {"a b": [0.5]}}}, "a b"),
    ],
)
def test_invalid_config_is_refused_naming_the_key(tmp_path, change, message):
    problem = config_problem(tmp_path, tiny_config(**change))
    assert problem is not None and message in problem


def test_invalid_config_stops_snakemake_before_any_job(tmp_path):
    proc = snakemake(tmp_path, tiny_config(metods=["dgp"]), "-n")
    assert proc.returncode != 0
    assert "metods" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_command_line_selection_without_editing_files(tmp_path):
    proc = run_workflow(
        tmp_path, tiny_config(), "-n", "--config", "methods=[tu]", "corruptions=[UN]"
    )
    assert proc.returncode == 0, proc.stderr
    assert "detect/digits/h16-l2-s0/tu.csv" in proc.stdout
    assert "softmax" not in proc.stdout and "images/digits/GN.npz" not in proc.stdout


@pytest.mark.slow
def test_kill_9_mid_features_then_rerun_gives_identical_tables(tmp_path, tiny_grid):
    config = tiny_config()
    tables = _tables(tiny_grid)  # the same configuration, run uninterrupted
    assert {"table1_shift_detection.md", "table_appendix_calibration.csv"} <= set(tables)

    # Second run, from the grid's model, images and softmax results: kill -9 the whole process
    # group as soon as the DGP features job is running.
    workdir = copy_tiny_grid(tiny_grid, tmp_path / "b")
    results = workdir / "results"
    for path in ("features/digits/h16-l2-s0/dgp.npz", "detect/digits/h16-l2-s0/dgp.csv"):
        (results / path).unlink()
    for step in ("aggregate", "tables", "logs/features"):
        shutil.rmtree(results / step)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        _command(workdir), cwd=workdir, env=venv_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    logs = workdir / "results" / "logs" / "features"
    owner = workdir / ".snakemake" / "dgpbench-run.owner.json"

    def running() -> bool:  # a features job started, and `dgpbench run` recorded its lock
        if not (logs.exists() and any(logs.rglob("*.log")) and owner.exists()):
            return False
        with contextlib.suppress(ValueError):
            return bool(json.loads(owner.read_text())["locks"])
        return False  # the record caught mid-write

    deadline = time.monotonic() + 240
    while not running():
        assert proc.poll() is None, "the run ended before any features job started"
        assert time.monotonic() < deadline, "no features job started in time"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (workdir / "results" / "tables").exists()

    resumed = run_workflow(workdir, config, *TINY_GRID_TARGETS)  # what the grid ran
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _tables(workdir) == tables


@pytest.mark.slow
def test_comparison_on_a_tiny_grid_with_a_made_up_published_table(tmp_path, tiny_grid):
    """The compare rule on a real run: the made-up table is this run's Table 1 plus offsets
    chosen here, with cells the run did not compute (n = 200, MAGDiff, MNIST)."""
    copy_tiny_grid(tiny_grid, tmp_path)
    config = tiny_config(
        report={
            "pool_deltas": [0.5],
            "published_table1": "published.csv",
            "comparison_delta_sets": {"half": [0.5], "uncomputed": [0.25, 0.5]},
        }
    )
    # Table 1 is the grid's: the report section changes no input of the tables rule.
    ours = pd.read_csv(tmp_path / "results" / "tables" / "table1_shift_detection.csv")
    assert len(ours) == 8  # digits x {GN, PD} x n {10, 50} x {Softmax, DGP}
    # |offset| <= 5 for 5 of 8 cells; the sign keeps every published value in [0, 100]
    size = np.array([1.0, 7.0, 3.0, 5.0, 5.5, 0.0, 12.0, 2.0])
    offsets = np.where(ours["ratio_pct"] > 50, -size, size)
    published = pd.DataFrame(
        {
            "dataset": "Digits",
            "corruption": ours["Corruption"],
            "n": ours["n"],
            "method": ours["Method"],
            "detection_ratio_pct": ours["ratio_pct"] + offsets,
        }
    )
    extra = pd.DataFrame(
        {
            "dataset": ["Digits", "Digits", "MNIST"],
            "corruption": ["GN", "GN", "GN"],
            "n": [200, 10, 10],
            "method": ["DGP", "MAGDiff", "DGP"],
            "detection_ratio_pct": [50.0, 50.0, 50.0],
        }
    )
    pd.concat([published, extra]).to_csv(tmp_path / "published.csv", index=False)

    second = run_workflow(tmp_path, config, "compare")
    assert "localrule tables:" not in second.stdout + second.stderr
    assert second.returncode == 0, second.stderr[-3000:]
    tables = tmp_path / "results" / "tables"
    assert (tables / "comparison_table1_half.md").exists()
    assert not list(tables.glob("comparison_table1_uncomputed*"))
    cells = pd.read_csv(tables / "comparison_table1.csv")
    assert len(cells) == 8
    assert set(cells["method"]) == {"Softmax", "DGP"} and set(cells["n"]) == {10, 50}
    merged = cells.merge(
        ours.rename(columns={"Corruption": "corruption", "Method": "method"}),
        on=["corruption", "n", "method"],
    )
    assert np.allclose(merged["ours_pct"], merged["ratio_pct"], atol=1e-4)
    summary = pd.read_csv(tables / "comparison_table1_summary.csv")
    assert summary["delta_set"].tolist() == ["pool", "half"]
    assert summary.loc[0, "share_within_5"] == pytest.approx(5 / 8)
    assert np.allclose(cells["diff_pct"].abs().sort_values(), np.sort(size), atol=1e-3)
    assert summary.loc[0, "n_groups"] == 4 and summary.loc[0, "n_dgp_tu_groups"] == 0


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
