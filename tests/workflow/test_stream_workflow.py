"""The `stream` target: off the default run, refused when it names what the grid lacks, and a
tiny digits version (ERT 20, a few streams) end to end."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from _workflow import CORES, REPO, config_problem, copy_tiny_grid, snakemake, tiny_config

from dgpbench.cli.main import main

TINY_STREAM = {
    "methods": ["softmax", "dgp"],
    "detectors": ["cvm_online"],
    "erts": [20],
    "n_ref": 150,
    "window_size": 5,
    "n_streams": 5,
    "n_shift_streams": 3,
    "reference_splits": 2,
    "bootstraps_per_ert": 25,
    "fl_shifts": ["large_gn_shift"],
}


def _snakemake(workdir: Path, config: dict, *args: str, timeout: float = 300):
    return snakemake(workdir, config, *args, cores=CORES, profile="local", timeout=timeout)


def test_default_run_has_no_stream_job(default_dry_run):
    assert "stream_run" not in default_dry_run and "stream-report" not in default_dry_run


def test_stream_target_dry_runs_with_its_options(tmp_path):
    proc = _snakemake(tmp_path, tiny_config(stream=TINY_STREAM), "stream", "-n", "-p")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert (
        "--shifts GN_6 PD_6 FLGN_3" in out
        and "--erts 20" in out
        and "--bootstraps-per-ert 25" in out
    )
    assert "--cvm-calibration reference" in out and "stream-shifts" in out
    assert "--reference-splits 2" in out
    assert "stream/features/digits/h16-l2-s0/dgp.npz" in out
    assert "stream/digits/h16-l2-s0/dgp.csv" in out and "stream_summary.md" in out
    report = next(line for line in out.splitlines() if "dgpbench stream-report" in line)
    for method in ("softmax", "dgp"):  # one report of every method's streams
        assert f"results/stream/digits/h16-l2-s0/{method}.csv" in report


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"corruptions": ["GB"]}, "stream.corruptions"),
        ({"intensity": 3}, "stream.intensity"),
        ({"n_bootstraps": 500, "bootstraps_per_ert": 25}, "set one of the two"),
    ],
)
def test_stream_target_refuses_what_the_grid_lacks(tmp_path, change, message):
    problem = config_problem(tmp_path, tiny_config(stream={**TINY_STREAM, **change}), "stream")
    assert problem is not None and message in problem


def test_a_stream_config_problem_stops_snakemake_before_any_job(tmp_path):
    config = tiny_config(stream={**TINY_STREAM, "intensity": 3})
    proc = _snakemake(tmp_path, config, "stream", "-n")
    assert proc.returncode != 0 and "stream.intensity" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_stream_target_end_to_end_on_tiny_digits(tmp_path, tiny_grid):
    copy_tiny_grid(tiny_grid, tmp_path)  # its model, images and DGP features
    # One method runs (the dry run above plans the report of two; it is read back below)
    config = tiny_config(stream={**TINY_STREAM, "methods": ["dgp"]})
    proc = _snakemake(tmp_path, config, "stream", timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    out = tmp_path / "results" / "stream"
    summary = pd.read_csv(out / "stream_summary.csv")
    assert set(summary["method"]) == {"dgp"}
    assert set(summary["shift"]) == {"none", "GN_6", "PD_6", "FLGN_3"}
    clean = summary[summary["shift"] == "none"]
    assert (clean["n_streams"] == 10).all() and (clean["quantity"] == "run_time").all()
    assert (summary["n_references"] == 2).all()  # two reference splits, 5 + 5 streams
    assert (summary.loc[summary["shift"] != "none", "n_streams"] == 6).all()
    assert "| digits" in (out / "stream_summary.md").read_text()
    assert (out / "stream_delays.png").stat().st_size > 0
    # The report keeps the methods apart: the DGP records again, as a second method's.
    dgp = out / "digits" / "h16-l2-s0" / "dgp.csv"
    other = tmp_path / "softmax.csv"
    pd.read_csv(dgp).assign(method="softmax").to_csv(other, index=False)
    assert main(["stream-report", str(dgp), str(other), "--out-dir", str(tmp_path / "two")]) == 0
    two = pd.read_csv(tmp_path / "two" / "stream_summary.csv")
    assert set(two["method"]) == {"softmax", "dgp"} and len(two) == 2 * len(summary)


def test_shipped_stream_config_is_valid_over_the_paper_grid():
    from dgpbench.cli.config import schema_error

    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    config.update(yaml.safe_load((REPO / "config" / "stream.yaml").read_text()))
    assert schema_error(config, REPO / "workflow" / "schemas" / "config.schema.yaml") is None
