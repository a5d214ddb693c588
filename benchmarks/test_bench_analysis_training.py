"""Speed of an analysis training job: 20 seeds stacked against 20 `analysis train` runs.

Both sides train 784-650-650-10 on MNIST images with the analysis settings (lr 3e-4,
batch 32) and record the curves (NP, variance, DGP, validation and test accuracy) at every
evaluation, exactly as the workflow's jobs do: ``train_analysis_seeds`` (one stacked model,
one kernel call per evaluation for all seeds' NP and DGP) against ``train_mlp`` with a
``CurveRecorder`` once per seed (what ``dgpbench analysis train --curves`` runs). A fixed
``STEPS`` Adam steps with ``EVALUATIONS`` evaluations keep it short; a real run has one
evaluation per ~430 steps, this one per ~50, so the evaluations weigh more here than there.
One torch/numba thread on both sides: the ratio is one of CPU time. Printed, not asserted
(other jobs may share the cores); one round per side, back to back.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from bench_helpers import RESULTS, mnist_test_images

from dgpbench.analysis.curves import CurveRecorder
from dgpbench.analysis.stacked import train_analysis_seeds
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.train import analysis_config, train_mlp
from dgpbench.threads import numba_threads

SEEDS = list(range(20))
STEPS = 100
EVALUATIONS = 2
N_TEST = 2000
ARCH = ArchConfig(784, 650, 3, 10)
CONFIG = analysis_config(
    "mnist",
    epochs=1,
    val_fraction=0.1,
    checkpoints_per_epoch=EVALUATIONS,
    keep="last",
    threads=1,
)


def test_analysis_job_stacked_vs_one_at_a_time(benchmark, tmp_path):
    n_train = round(32 * STEPS / (1 - CONFIG.val_fraction))
    images = mnist_test_images(n_train + N_TEST)
    x, xt = images[:n_train], images[n_train:]
    labels = np.arange(len(images)) % 10  # the cost does not depend on the labels
    y, yt = labels[:n_train], labels[n_train:]
    # Warm up outside the timing (numba compilation, torch's fused optimiser).
    with numba_threads(1):
        train_analysis_seeds(
            x[:400], y[:400], ARCH, CONFIG, [0, 1], [tmp_path / "w0", tmp_path / "w1"],
            dataset="mnist", x_test=xt[:50], y_test=yt[:50],
        )  # fmt: skip

    times: dict[str, float] = {}

    def one_at_a_time() -> None:
        start = time.perf_counter()
        for s in SEEDS:
            cfg = dataclasses.replace(CONFIG, seed=s)
            rec = CurveRecorder(xt, yt, info={"run": f"s{s}"})
            train_mlp(x, y, ARCH, cfg, tmp_path / "single" / f"s{s}", progress=False, callback=rec)
        times["single"] = time.perf_counter() - start

    def stacked() -> None:
        dirs = [tmp_path / "stacked" / f"s{s}" for s in SEEDS]
        with numba_threads(1):
            train_analysis_seeds(x, y, ARCH, CONFIG, SEEDS, dirs, dataset="mnist",
                                 x_test=xt, y_test=yt)  # fmt: skip

    benchmark.pedantic(stacked, setup=one_at_a_time, rounds=1, iterations=1)
    ours = benchmark.stats.stats.min
    ratio = times["single"] / ours
    line = (
        f"analysis job, {len(SEEDS)} seeds of 784-650-650-10, {STEPS} steps and "
        f"{EVALUATIONS} curve evaluations each, 1 thread: stacked {ours:.1f} s, one at a time "
        f"{times['single']:.1f} s, ratio {ratio:.1f}x"
    )
    print("\n" + line)
    benchmark.extra_info.update(stacked_s=ours, one_at_a_time_s=times["single"], ratio=ratio)
    RESULTS.append({"line": line})
