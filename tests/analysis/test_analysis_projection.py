"""The analysis grid's projection from measured jobs (benchmarks/analysis_grid_projection.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from _workflow import REPO, load_script


@pytest.fixture(scope="module")
def proj():
    return load_script("benchmarks/analysis_grid_projection.py")


def _write_jobs(root: Path, proj, rate, groups, seeds=20, epochs=40):
    """Benchmark files of jobs that took exactly what ``rate`` says."""
    for group in groups:
        match = re.fullmatch(r"relu-l(\d+)-h(\d+)", group)
        layers, hidden = (1, 0) if match is None else tuple(map(int, match.groups()))
        weights = proj.n_weights(layers, hidden)
        seconds = proj.job_seconds(rate, seeds, epochs, 55000, weights, layers)
        path = root / "mnist" / f"{group}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"s\th:m:s\tcpu_time\n{seconds:.3f}\t0:00:00\t{1.9 * seconds:.3f}\n")


GROUPS = ["relu-l2-h50", "relu-l3-h100", "relu-l4-h250", "relu-l2-h650", "linear"]


def test_n_weights_counts_the_linear_maps(proj):
    assert proj.n_weights(1, 0) == 7840
    assert proj.n_weights(2, 50) == 784 * 50 + 50 * 10
    assert proj.n_weights(4, 650) == 784 * 650 + 2 * 650 * 650 + 6500


def test_fit_recovers_the_rate_of_exact_jobs(proj, tmp_path):
    rate = (4.0e-7, 3.0e-5, 2.0e-7)
    _write_jobs(tmp_path, proj, rate, GROUPS)
    jobs = proj.read_jobs([tmp_path])
    assert sorted(jobs["group"]) == sorted(GROUPS)
    np.testing.assert_allclose(proj.fit_rate(jobs, 20, 40), rate, rtol=1e-4)
    np.testing.assert_allclose(proj.fit_rate(jobs, 20, 40, relative=False), rate, rtol=1e-4)


def test_fit_refuses_jobs_of_one_depth(proj, tmp_path):
    _write_jobs(tmp_path, proj, (4.0e-7, 3.0e-5, 2.0e-7), ["relu-l2-h50", "relu-l2-h100"])
    with pytest.raises(ValueError, match="two depths"):
        proj.fit_rate(proj.read_jobs([tmp_path]), 20, 40)


def test_paused_time_is_taken_off_and_unknown_pauses_are_refused(proj, tmp_path):
    _write_jobs(tmp_path, proj, (4.0e-7, 3.0e-5, 2.0e-7), GROUPS)
    plain = proj.read_jobs([tmp_path]).set_index("group")["seconds"]
    paused = proj.read_jobs([tmp_path], {"mnist/relu-l2-h50": 100.0}).set_index("group")
    assert paused.loc["relu-l2-h50", "seconds"] == pytest.approx(plain["relu-l2-h50"] - 100)
    with pytest.raises(ValueError, match="paused jobs"):
        proj.read_jobs([tmp_path], {"mnist/relu-l9-h9": 1.0})
    with pytest.raises(ValueError, match="no analysis_train benchmark"):
        proj.read_jobs([tmp_path / "empty"])


def test_makespan_bounds(proj):
    rng = np.random.default_rng(0)
    durations = rng.uniform(1, 100, size=40)
    assert proj.makespan(durations, 1) == pytest.approx(durations.sum())
    for slots in (2, 5, 32, 100):
        span = proj.makespan(durations, slots)
        assert span >= max(durations.max(), durations.sum() / slots) - 1e-9
        # the longest-first greedy schedule is within 4/3 of the optimum
        assert span <= 4 / 3 * max(durations.max(), durations.sum() / slots) + 1e-9


def test_paper_grid_has_the_workflows_training_jobs(proj):
    analysis = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["analysis"]
    jobs = proj.grid_jobs(analysis)
    # 3 data sets x (1 linear + 2 activations x 3 depths x 4 widths) + 2 x 3 regulariser jobs
    assert len(jobs) == 3 * (1 + 2 * 3 * 4) + 2 * 3
    out = proj.project(analysis, (4.0e-7, 3.0e-5, 2.0e-7), 40, 64)
    assert out["jobs"] == len(jobs)
    assert out["longest"] <= out["cluster"] <= out["total"]
    emnist = [j for j in jobs if j[0] == "emnist" and j[1:3] == (4, 650)]
    assert emnist, "EMNIST's widest architecture is in the grid"
