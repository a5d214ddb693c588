"""Start-up of one ``dgpbench score --detector`` call against ``python -c "import torch"``.

Scoring a batch with a saved detector must not pay for the workflow's
modules (pandas, scipy.ndimage, numba kernels a softmax detector never runs). The baseline
is the interpreter importing torch, which every call needs anyway; both are timed in the
same run, interleaved, best of several rounds, so that both see the same load. A softmax +
KS detector of a small MLP (a factory written here) scores one batch of 50 images.
Target: at most 1.5x.

Two reference rows in the same run show where the time goes: ``import torch, scipy.stats``
(the KS test's p-values are scipy's ``ks_2samp``: the floor of any KS scoring) and
``import torch, sklearn.base`` (every transformer and detector subclasses scikit-learn's
``BaseEstimator``, whose import also pulls in scipy.stats, scipy.sparse.linalg and pandas).
A softmax + KS detector file is scored without scikit-learn (:mod:`dgpbench.saved.scoring`), so
the call costs about what the first reference row costs (docs/your-own-model.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_helpers import REPO, RESULTS

TARGET = 1.5
ROUNDS = 5

FACTORY = """
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
    ).eval()
"""


def _best(commands: dict[str, list[str]], env: dict[str, str], cwd: Path) -> dict[str, float]:
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(ROUNDS):
        for name, cmd in commands.items():
            start = time.perf_counter()
            subprocess.run(cmd, env=env, cwd=cwd, check=name != "score", capture_output=True)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def test_score_detector_start_up_vs_import_torch(tmp_path: Path) -> None:
    (tmp_path / "startup_net.py").write_text(FACTORY)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "clean.npz", x=rng.uniform(size=(100, 1, 8, 8)).astype(np.float32))
    np.savez(tmp_path / "batch.npz", x=rng.uniform(size=(50, 1, 8, 8)).astype(np.float32))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]),
        "OMP_NUM_THREADS": "1",
    }
    dgpbench = [sys.executable, "-m", "dgpbench"]
    fit = [*dgpbench, "fit", "--model", "startup_net:mlp", "--clean", "clean.npz"]
    subprocess.run([*fit, "--method", "softmax", "--out", "det.npz"], env=env, cwd=tmp_path,
                   check=True, capture_output=True)  # fmt: skip
    score = [*dgpbench, "score", "--detector", "det.npz", "--model", "startup_net:mlp",
             "--batch", "batch.npz", "--threads", "1"]  # fmt: skip
    assert subprocess.run(score, env=env, cwd=tmp_path).returncode in (0, 1)
    python = [sys.executable, "-c"]
    commands = {
        "score": score,
        "torch": [*python, "import torch"],
        "torch + scipy.stats": [*python, "import torch, scipy.stats"],
        "torch + sklearn.base": [*python, "import torch, sklearn.base"],
    }
    best = _best(commands, env, tmp_path)
    ratio = best["score"] / best["torch"]
    refs = ", ".join(
        f"import {name} {best[name]:.2f} s ({best[name] / best['torch']:.2f}x)"
        for name in ("torch + scipy.stats", "torch + sklearn.base")
    )
    line = (
        f"score --detector (softmax, 50 images): {best['score']:.2f} s, python -c 'import "
        f"torch' {best['torch']:.2f} s, ratio {ratio:.2f}x (target <= {TARGET:g}x); {refs}"
    )
    print("\n" + line)
    RESULTS.append({"line": line})
    assert ratio <= TARGET, line
