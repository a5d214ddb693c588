"""Measure the parts of an analysis training job and project the paper's grid from them.

A job of the analysis grid is ``epochs * steps_per_epoch`` Adam steps plus
``epochs * checkpoints_per_epoch`` evaluations (validation loss/accuracy, test accuracy,
NP / variance / DGP). Running one at the paper's scale takes hours, so this script times,
on real MNIST images and one thread, for every architecture of ``config/paper.yaml``:

* one training step of the stacked model of ``S`` seeds (``train_mlp_seeds``' step: stacked
  forward, backward, fused Adam) and of one model (``train_mlp``'s step);
* one evaluation: the stacked forward pass per image (validation and test images) and one
  ``stacked_criteria`` call for all seeds, against ``S`` single forward passes and ``S``
  ``model_metrics`` calls;

and projects a job's wall time as ``steps * t_step + evaluations * t_eval`` per data set
(MNIST and Fashion-MNIST: 55,000 training, 5,000 validation and 10,000 test images, 10
classes; EMNIST balanced: 101,520 / 11,280 / 18,800, 47 classes). The regulariser models
(4 x 650, 30 seeds, no curves) are projected from the 4 x 650 step and forward pass.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/analysis_job_time.py [--quick]
        [--config config/paper.yaml config/analysis_mnist_relu.yaml]

Prints one line per architecture and the grid's totals (CPU hours on one core per job). Times
are CPU times (``time.process_time``), so other jobs on a shared machine do not count.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time

import numpy as np
import torch
import yaml
from torch.nn import functional as F

from dgpbench.analysis.stacked import stacked_criteria
from dgpbench.analysis.weights import model_metrics, torch_linear_weights
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.stacked import StackedMLP
from dgpbench.models.train import analysis_config
from dgpbench.threads import numba_threads

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = {  # train (after the validation part), validation, test images; classes
    "mnist": (55000, 5000, 10000, 10),
    "fashion-mnist": (55000, 5000, 10000, 10),
    "emnist": (101520, 11280, 18800, 47),
}


def _mnist(n: int) -> np.ndarray:
    from dgpbench.data.datasets import load_dataset

    root = os.environ.get("DGPBENCH_DATA", "/work/shared/data")
    x, _ = load_dataset("mnist", root, "train")
    return x[:n].reshape(n, -1).astype(np.float32)


def _best(fn, repeat: int) -> float:
    """Least CPU time of ``repeat`` calls (one thread: CPU time is the time on a free core;
    wall time on a shared machine would count the other jobs)."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def measure(arch: ArchConfig, n_seeds: int, x: np.ndarray, steps: int, images: int) -> dict:
    """Seconds per step and per evaluation, stacked (all seeds) and single (one seed)."""
    cfg = analysis_config("mnist")
    nets = [arch.build(generator=torch.Generator().manual_seed(s)) for s in range(n_seeds)]
    stacked = StackedMLP(nets, arch.activation)
    opt = torch.optim.Adam(stacked.parameters(), lr=cfg.lr, fused=True)
    xt = torch.from_numpy(x)
    yt = torch.arange(len(x)) % arch.n_classes
    gen = torch.Generator().manual_seed(0)

    def stacked_steps() -> None:
        for _ in range(steps):
            idx = torch.randint(len(x), (n_seeds, 32), generator=gen)
            logits = stacked(xt[idx])
            loss = F.cross_entropy(logits.flatten(0, 1), yt[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    single = nets[0]
    opt1 = torch.optim.Adam(single.parameters(), lr=cfg.lr)

    def single_steps() -> None:
        for _ in range(steps):
            idx = torch.randint(len(x), (32,), generator=gen)
            loss = F.cross_entropy(single(xt[idx]), yt[idx])
            opt1.zero_grad(set_to_none=True)
            loss.backward()
            opt1.step()

    xe = xt[:images]
    weights = [w.detach().numpy() for w in stacked.weights]

    def stacked_forward() -> None:
        with torch.no_grad():
            for start in range(0, len(xe), 1024):
                stacked(xe[start : start + 1024]).argmax(-1)

    def single_forward() -> None:
        with torch.no_grad():
            single(xe).argmax(-1)

    stacked_steps(), single_steps()  # warm up (fused Adam, numba)
    stacked_criteria(weights)
    model_metrics(torch_linear_weights(single), layers=False)
    return {
        "step_stacked": _best(stacked_steps, 2) / steps,
        "step_single": _best(single_steps, 2) / steps,
        "image_stacked": _best(stacked_forward, 2) / images,
        "image_single": _best(single_forward, 2) / images,
        "criteria_stacked": _best(lambda: stacked_criteria(weights), 2),
        "criteria_single": _best(
            lambda: model_metrics(torch_linear_weights(single), layers=False), 2
        ),
    }


def project(m: dict, dataset: str, n_seeds: int, epochs: int, cpe: int) -> tuple[float, float]:
    """(stacked job seconds, one-at-a-time seconds for the same seeds) on one data set."""
    n_train, n_val, n_test, _ = DATA[dataset]
    steps = epochs * math.ceil(n_train / 32)
    evals = epochs * cpe
    eval_images = n_val + n_test
    stacked = steps * m["step_stacked"] + evals * (
        eval_images * m["image_stacked"] + m["criteria_stacked"]
    )
    # a single run also evaluates its initialisation (epoch 0)
    single = n_seeds * (
        steps * m["step_single"]
        + (evals + 1) * (eval_images * m["image_single"] + m["criteria_single"])
    )
    return stacked, single


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config",
        nargs="+",
        default=[os.path.join(REPO, "config", "paper.yaml")],
        help="config files, later ones overriding earlier ones' analysis keys",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="only 2 x 50 and 4 x 650")
    args = parser.parse_args()
    torch.set_num_threads(1)
    an: dict = {}
    for path in args.config:
        with open(path) as fh:
            an.update(yaml.safe_load(fh).get("analysis", {}))
    n_seeds, epochs = len(an["seeds"]), an["training"]["epochs"]
    cpe = an["training"]["checkpoints_per_epoch"]
    x = _mnist(4096)
    archs = [("linear", ArchConfig(784, 1, 1, 10))] if 1 in an["layers"] else []
    deep = [n for n in an["layers"] if n > 1]
    for act, layers, hidden in itertools.product(an["activations"], deep, an["hidden"]):
        if args.quick and (layers, hidden) not in ((2, 50), (4, 650)):
            continue
        archs.append((f"{act}-l{layers}-h{hidden}", ArchConfig(784, hidden, layers, 10, act)))
    totals = {"stacked": 0.0, "single": 0.0}
    measured = {}
    print(f"{n_seeds} seeds, {epochs} epochs, {cpe} evaluations per epoch, 1 thread")
    with numba_threads(1):
        for name, arch in archs:
            m = measure(arch, n_seeds, x, args.steps, args.images)
            measured[name] = m
            jobs = [project(m, d, n_seeds, epochs, cpe) for d in an["datasets"]]
            st = sum(j[0] for j in jobs)
            si = sum(j[1] for j in jobs)
            totals["stacked"] += st
            totals["single"] += si
            print(
                f"{name:14s} step {1e3 * m['step_stacked']:7.2f} ms stacked / "
                f"{1e3 * m['step_single']:6.2f} ms single; eval/img {1e6 * m['image_stacked']:7.1f}"
                f" / {1e6 * m['image_single']:6.1f} us; criteria {m['criteria_stacked']:.3f} / "
                f"{m['criteria_single']:.3f} s; MNIST job {project(m, 'mnist', n_seeds, epochs, cpe)[0] / 3600:.2f} h "
                f"stacked vs {project(m, 'mnist', n_seeds, epochs, cpe)[1] / 3600:.2f} h one at a time",
                flush=True,
            )
    print(
        f"analysis jobs (curves): stacked {totals['stacked'] / 3600:.1f} CPU h, "
        f"one at a time {totals['single'] / 3600:.1f} CPU h"
    )
    reg = an["regularisers"]
    key = f"{reg['activation']}-l{reg['layers']}-h{reg['hidden']}"
    if key in measured:
        # no curves: steps and the validation part of each evaluation; stacked at the plain
        # model's stacked rate per seed (batch norm and dropout add a little, unmeasured)
        m = measured[key]
        scale = len(reg["seeds"]) / n_seeds
        reg_st = reg_si = 0.0
        for d in reg["datasets"]:
            steps = epochs * math.ceil(DATA[d][0] / 32)
            val = epochs * cpe * DATA[d][1]
            reg_st += (
                len(reg["kinds"]) * scale * (steps * m["step_stacked"] + val * m["image_stacked"])
            )
            reg_si += (
                len(reg["kinds"])
                * len(reg["seeds"])
                * (steps * m["step_single"] + val * m["image_single"])
            )
        n_jobs = len(reg["kinds"]) * len(reg["datasets"])
        print(
            f"regulariser models: {n_jobs} stacked jobs {reg_st / 3600:.1f} CPU h (longest "
            f"{reg_st / n_jobs / 3600:.1f} h), {n_jobs * len(reg['seeds'])} one-model jobs "
            f"{reg_si / 3600:.1f} CPU h"
        )
        totals["stacked"] += reg_st
        totals["single"] += reg_si
    print(
        f"grid (training jobs only, 1 thread each): stacked {totals['stacked'] / 3600:.1f} CPU h, "
        f"one at a time {totals['single'] / 3600:.1f} CPU h"
    )


if __name__ == "__main__":
    main()
