"""Profile one stacked analysis job: training steps, curve evaluations and I/O.

Runs ``train_analysis_seeds`` (what ``dgpbench analysis train-seeds`` runs) on real MNIST
images for ``--steps`` Adam steps with ``--evaluations`` evaluations, each at the real job's
size (5,000 validation images, 10,000 test images, NP / variance / DGP of every seed), and
times each part by wrapping the functions that do it:

* ``validation``: the stacked forward pass over the validation images (every checkpoint,
  epoch 0 included, as in a real job);
* ``criteria``: NP, variance and DGP of all seeds (``stacked_criteria``);
* ``test``: the test accuracy of all seeds;
* ``io``: ``metrics.csv``, checkpoints, ``split.npz`` and ``curves.csv``;
* ``setup``: the validation split, the seeds' initial networks and their stack (once per
  job: counted once, not spread over the short run's steps);
* ``training``: the rest (batches, forward, backward, Adam).

and projects the whole job (``epochs x 1,719`` steps, ``epochs x 4`` evaluations, one more
validation at epoch 0, one setup) from the per-step and per-evaluation costs.
``--today`` runs today's code as it was before the retained-heap speed-up: freed gradients go back to
the system, and the evaluations take one forward pass per 4,096 validation and 1,024 test
images with out-of-place activations under ``no_grad``. Times are CPU times of
the process (``time.process_time``, all threads), so other jobs on a shared machine count
little; wall times are printed beside them.

Beside it, the FLOP floor: training ``6 x weights x images x epochs x seeds`` (forward 2,
backward 4 multiply-adds per weight and image), evaluations ``2 x weights x (5,000 + 10,000)
x seeds`` each, at the machine's sgemm rate measured here (a 2048 x 2048 float32 product,
CPU time at the same thread count): the job cannot run faster than that floor without doing
less arithmetic.

    PYTHONPATH=. python benchmarks/analysis_job_profile.py [--hidden 650 --layers 4]
        [--seeds 20] [--steps 200] [--evaluations 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import dgpbench.analysis.stacked as an_stacked
import dgpbench.models.stacked as mstacked
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.train import analysis_config
from dgpbench.threads import numba_threads

STEPS_PER_EPOCH, EVALS_PER_EPOCH, N_VAL, N_TEST = 1719, 4, 5000, 10000


def today_evaluate_stacked(model, x, y):  # as before the retained-heap speed-up
    import torch

    n = len(x)
    if n == 0:
        return [(float("nan"), float("nan"))] * model.n_models
    loss_sum = torch.zeros(model.n_models, dtype=torch.float64, device=x.device)
    correct = torch.zeros(model.n_models, dtype=torch.int64, device=x.device)
    with torch.no_grad():
        for start in range(0, n, mstacked._EVAL_CHUNK):
            logits = model(x[start : start + mstacked._EVAL_CHUNK])
            target = y[start : start + mstacked._EVAL_CHUNK].expand(model.n_models, -1)
            loss_sum += mstacked._cross_entropy(logits, target).sum(1)
            correct += (logits.argmax(-1) == target).sum(1)
    return [(s / n, c / n) for s, c in zip(loss_sum.tolist(), correct.tolist(), strict=True)]


def today_stacked_accuracy(model, x, y):  # as before the retained-heap speed-up
    import torch

    correct = torch.zeros(model.n_models, dtype=torch.int64, device=x.device)
    with torch.no_grad():
        for start in range(0, len(x), 1024):
            logits = model(x[start : start + 1024])
            correct += (logits.argmax(-1) == y[start : start + 1024]).sum(1)
    return correct.cpu().numpy() / len(x)


def todays_code() -> list[tuple[object, str, object]]:
    """The job's code before the retained-heap speed-up, as ``(module, attribute, value)`` to set: no
    retained heap, the evaluations as they were, activations out of place. The one copy:
    ``tests/analysis/test_analysis_stacked.py`` sets the same with ``monkeypatch`` (its oracle that the
    speed-ups change no number)."""
    import torch

    return [
        (mstacked, "_retained_heap", contextlib.nullcontext),
        (mstacked, "_evaluate_stacked", today_evaluate_stacked),
        (an_stacked, "_stacked_accuracy", today_stacked_accuracy),
        (mstacked, "_ACTIVATE_IN_PLACE", {torch.nn.ReLU: torch.relu, torch.nn.Tanh: torch.tanh}),
    ]


def use_todays_code() -> None:
    """Switch the job back to its code before the retained-heap speed-up (for the same-run ratio)."""
    for module, name, value in todays_code():
        setattr(module, name, value)


class Timers:
    """CPU and wall seconds per part."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    @contextlib.contextmanager
    def part(self, name: str):
        c, w = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w
            self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, module, attr: str, name: str) -> None:
        fn = getattr(module, attr)

        def wrapped(*args, **kwargs):
            with self.part(name):
                return fn(*args, **kwargs)

        setattr(module, attr, wrapped)


def _data(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from dgpbench.data.datasets import load_dataset

    root = os.environ.get("DGPBENCH_DATA_ROOT", "/work/shared/data")
    x, y = load_dataset("mnist", root, "train")
    xt, yt = load_dataset("mnist", root, "test")
    return x[:n], y[:n], xt[:N_TEST], yt[:N_TEST]


def sgemm_rate(threads: int, n: int = 2048, repeat: int = 5) -> float:
    """Float32 matrix-product rate, FLOP per CPU second (``n x n`` by ``n x n``)."""
    import torch

    from dgpbench.threads import torch_threads

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    with torch_threads(threads):
        a @ b  # warm-up
        best = math.inf
        for _ in range(repeat):
            c = time.process_time()
            a @ b
            best = min(best, time.process_time() - c)
    return 2 * n**3 / best


def flop_floor(arch: ArchConfig, seeds: int, epochs: int = 40, n_train: int = 55000) -> dict:
    """FLOPs of a whole job: training (6 per weight and image) and evaluations."""
    w = arch.n_weights
    return {
        "training": 6 * w * n_train * epochs * seeds,
        "evaluations": 2 * w * (N_VAL + N_TEST) * seeds * (epochs * EVALS_PER_EPOCH + 1),
    }


def profile(hidden: int, layers: int, seeds: int, steps: int, evaluations: int, threads: int,
            epochs: int = 40) -> dict:  # fmt: skip
    """Run the short job and return the measured parts and the projected whole job."""
    arch = ArchConfig(784, hidden, layers, 10)
    n_train = 32 * steps
    x, y, xt, yt = _data(n_train + N_VAL)
    config = analysis_config(
        "mnist",
        epochs=1,
        val_fraction=N_VAL / (n_train + N_VAL),
        checkpoints_per_epoch=evaluations,
        keep="last",
        threads=threads,
    )
    timers = Timers()
    timers.wrap(mstacked, "_evaluate_stacked", "validation")
    timers.wrap(an_stacked, "stacked_criteria", "criteria")
    timers.wrap(an_stacked, "_stacked_accuracy", "test")
    for attr in ("_write_metrics", "save_checkpoint", "_write_split"):
        timers.wrap(mstacked, attr, "io")
    timers.wrap(an_stacked, "write_csv", "io")
    for attr in ("_training_data", "_seed_model", "StackedMLP"):
        timers.wrap(mstacked, attr, "setup")
    with tempfile.TemporaryDirectory() as tmp, numba_threads(threads):
        an_stacked.train_analysis_seeds(  # warm-up: numba compilation, allocator
            x[:2000], y[:2000], arch, config, [0, 1], [Path(tmp, "w0"), Path(tmp, "w1")],
            dataset="mnist", x_test=xt[:100], y_test=yt[:100],
        )  # fmt: skip
        timers.cpu.clear(), timers.wall.clear(), timers.calls.clear()
        c, w = time.process_time(), time.perf_counter()
        an_stacked.train_analysis_seeds(
            x, y, arch, config, list(range(seeds)),
            [Path(tmp, f"s{s}") for s in range(seeds)],
            dataset="mnist", x_test=xt, y_test=yt,
        )  # fmt: skip
        total_cpu, total_wall = time.process_time() - c, time.perf_counter() - w
    parts = ("validation", "criteria", "test", "io", "setup")
    train_cpu = total_cpu - sum(timers.cpu.get(p, 0.0) for p in parts)
    train_wall = total_wall - sum(timers.wall.get(p, 0.0) for p in parts)
    n_val_calls = timers.calls["validation"]  # evaluations + the one at epoch 0
    per_eval = {
        p: timers.cpu.get(p, 0.0) / max(timers.calls.get(p, 1), 1)
        for p in ("validation", "criteria", "test")
    }
    n_evals = epochs * EVALS_PER_EPOCH
    projected = {
        "training": train_cpu / steps * epochs * STEPS_PER_EPOCH,
        "validation": per_eval["validation"] * (n_evals + 1),
        "criteria": per_eval["criteria"] * n_evals,
        "test": per_eval["test"] * n_evals,
        "io": timers.cpu.get("io", 0.0) / max(n_val_calls, 1) * (n_evals + 1),
        "setup": timers.cpu.get("setup", 0.0),  # once per job (55,000 images: a little more)
    }
    return {
        "arch": arch,
        "seeds": seeds,
        "steps": steps,
        "threads": threads,
        "total_cpu": total_cpu,
        "total_wall": total_wall,
        "training_cpu": train_cpu,
        "training_wall": train_wall,
        "step_cpu": train_cpu / steps,
        "cpu": dict(timers.cpu),
        "wall": dict(timers.wall),
        "calls": dict(timers.calls),
        "per_eval_cpu": per_eval,
        "projected_cpu": projected,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=650)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--evaluations", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--today",
        action="store_true",
        help="today's code as before the retained-heap speed-up: no retained heap (freed gradients go "
        "back to the system), evaluations in passes of 4,096 / 1,024 images, out of place",
    )
    a = p.parse_args()
    if a.today:
        use_todays_code()
    r = profile(a.hidden, a.layers, a.seeds, a.steps, a.evaluations, a.threads)
    print(("today's code: " if a.today else "") + f"{r['arch']} x {r['seeds']} seeds, {r['steps']} steps, {a.evaluations} evaluations, "
          f"{r['threads']} threads: {r['total_cpu']:.1f} CPU s ({r['total_wall']:.1f} s wall)")  # fmt: skip
    print(f"  training: {r['training_cpu']:.2f} CPU s, {1e3 * r['step_cpu']:.1f} CPU ms per step")
    for part in ("validation", "criteria", "test", "io", "setup"):
        print(f"  {part}: {r['cpu'].get(part, 0):.2f} CPU s in {r['calls'].get(part, 0)} calls")
    proj = r["projected_cpu"]
    total = sum(proj.values())
    print(f"  projected job ({40} epochs): {total / 3600:.2f} CPU h: " + ", ".join(
        f"{k} {100 * v / total:.0f}%" for k, v in proj.items()))  # fmt: skip
    rate = sgemm_rate(a.threads)
    floor = flop_floor(r["arch"], r["seeds"])
    floor_s = sum(floor.values()) / rate
    print(f"  sgemm {rate / 1e9:.1f} GFLOP per CPU s; FLOP floor: training "
          f"{floor['training']:.3g} + evaluations {floor['evaluations']:.3g} FLOP = "
          f"{floor_s / 3600:.2f} CPU h; projected job / floor {total / floor_s:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
