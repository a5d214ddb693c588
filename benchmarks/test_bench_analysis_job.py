"""Speed of one stacked analysis job against the code before its speed-up, same run.

Runs ``benchmarks/analysis_job_profile.py`` on 784-650-650-650-10 x 20 seeds (real MNIST
images, real evaluation sizes) twice per round in fresh processes, alternating: the job as
it runs now (retained heap; evaluations in forward passes of 256 images, in place) and
with ``--today`` (the code before the speed-up: freed gradients returned to the system,
evaluations in passes of 4,096 / 1,024 images). Compares the projected 40-epoch job in CPU
time (so other jobs on a shared machine count little) and its training step against the
goal, 2x: not met so far (1.36x at 1 thread, 27 Nov 2026; see
docs/analysis-scale.md, "Speed of one stacked job"), hence ``xfail``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench_helpers import RESULTS

SCRIPT = Path(__file__).with_name("analysis_job_profile.py")
THREADS = 2  # as the workflow runs a job (AN_TRAIN_THREADS); the docs' table is at 1
ARGS = ["--steps", "40", "--evaluations", "1", "--threads", str(THREADS)]
ROUNDS = 2
TARGET = 2.0  # the whole job at least 2x faster than today's code


def _run(today: bool) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *ARGS, *(["--today"] if today else [])],
        capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    step = float(re.search(r"([\d.]+) CPU ms per step", out).group(1))
    job = float(re.search(r"projected job \(40 epochs\): ([\d.]+) CPU h", out).group(1))
    return step, job


@pytest.mark.xfail(
    reason="goal not met: the training steps (about 80% of the job) are matrix products and "
    "Adam near their floor; 1.36x measured at 1 thread",
    strict=False,
)
def test_analysis_job_against_today(benchmark):
    times: dict[str, list[tuple[float, float]]] = {"today": [], "now": []}

    def both() -> None:
        times["today"].append(_run(today=True))
        times["now"].append(_run(today=False))

    benchmark.pedantic(both, rounds=ROUNDS, iterations=1)
    best = {k: (min(s for s, _ in v), min(j for _, j in v)) for k, v in times.items()}
    step_ratio = best["today"][0] / best["now"][0]
    job_ratio = best["today"][1] / best["now"][1]
    line = (
        f"analysis job 784-650-650-650-10 x 20 seeds, {THREADS} threads: step {best['now'][0]:.0f} vs "
        f"today {best['today'][0]:.0f} CPU ms ({step_ratio:.2f}x); projected 40-epoch job "
        f"{best['now'][1]:.2f} vs {best['today'][1]:.2f} CPU h ({job_ratio:.2f}x)"
    )
    print("\n" + line)
    benchmark.extra_info.update(step_ratio=step_ratio, job_ratio=job_ratio)
    RESULTS.append({"line": line})
    assert job_ratio >= TARGET, line
