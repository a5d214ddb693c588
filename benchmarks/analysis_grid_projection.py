"""Project the analysis grid's wall time from analysis jobs that really ran.

``benchmarks/analysis_job_time.py`` projects a job from one-thread timings of its parts;
this script starts from whole jobs instead: the Snakemake benchmark files of finished
``analysis_train`` jobs (``results/benchmarks/analysis/train/<dataset>/<group>.tsv``, one
stacked job of all seeds of one architecture, with the rule's 2 threads). It fits

    job seconds = seeds * epochs * training images * (a + b * million weights + c * maps)

(``maps``: the linear maps, whose per-step overhead adds up) by least squares (relative errors: small and large jobs weigh alike; ``--absolute``: seconds,
so that the long jobs which dominate the grid weigh most), then projects every
training job of a config (``analysis_train`` per data set and architecture, linear
classifiers included, and ``analysis_train_regulariser``) and schedules them:

* on this machine (2 cores): one 2-thread job after the other, the sum;
* on a SLURM allocation of ``--cores`` cores: ``cores / 2`` jobs at a time, longest first
  (the makespan of that greedy schedule, never below the longest job), assuming cores as
  fast as the measuring machine's.

Approximations, stated in the output: tanh costs what relu costs; EMNIST scales with its
training images (the evaluation images scale alike; the NP/DGP part, a few per cent, does
not depend on images); regulariser models (no curves, 30 seeds) are projected at the
curve-recording rate per seed, an upper bound for the missing curves and a lower one for
batch norm's and dropout's extra work. The tables, figures and comparisons after training
take minutes and are left out.

    python benchmarks/analysis_grid_projection.py results/benchmarks/analysis/train \\
        --config config/paper.yaml config/analysis_mnist_relu.yaml \\
        --project config/paper.yaml [--cores 64]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from dgpbench.models.architectures import ArchConfig

# training images after the validation split; input size; classes
DATA = {
    "mnist": (55000, 784, 10),
    "fashion-mnist": (55000, 784, 10),
    "emnist": (101520, 784, 47),
}
_GROUP = re.compile(r"(?:relu|tanh)-l(\d+)-h(\d+)|linear")


def n_weights(layers: int, hidden: int, n_inputs: int = 784, n_classes: int = 10) -> int:
    """Weights (biases left out) of an MLP with ``layers`` linear maps of width ``hidden``."""
    return ArchConfig(n_inputs, hidden, layers, n_classes).n_weights


def read_jobs(
    roots: Iterable[str | Path], paused: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """One row per finished ``analysis_train`` job under ``roots`` (``<dataset>/<group>.tsv``).

    ``paused`` maps ``<dataset>/<group>`` to seconds the job was stopped (SIGSTOP), taken
    off its wall time. Columns: ``dataset, group, layers, hidden, weights, seconds,
    cpu_seconds``.
    """
    paused = dict(paused or {})
    rows = []
    tsvs = [t for root in roots for t in sorted(Path(root).glob("*/*.tsv"))]
    for tsv in tsvs:
        dataset, group = tsv.parent.name, tsv.stem
        match = _GROUP.fullmatch(group)
        if match is None or dataset not in DATA:
            continue
        layers, hidden = (1, 0) if group == "linear" else tuple(map(int, match.groups()))
        bench = pd.read_csv(tsv, sep="\t")
        _, n_in, n_cls = DATA[dataset]
        rows.append(
            {
                "dataset": dataset,
                "group": group,
                "layers": layers,
                "hidden": hidden,
                "weights": n_weights(layers, hidden, n_in, n_cls),
                "seconds": float(bench["s"].iloc[0]) - paused.pop(f"{dataset}/{group}", 0.0),
                "cpu_seconds": float(bench["cpu_time"].iloc[0]),
            }
        )
    if not rows:
        raise ValueError(f"no analysis_train benchmark files (<dataset>/<group>.tsv) in {roots}")
    if paused:
        raise ValueError(f"no benchmark file for the paused jobs {sorted(paused)}")
    return pd.DataFrame(rows)


def job_seconds(
    rate: tuple[float, float, float], seeds: int, epochs: int, images: Any, weights: Any, maps: Any
) -> Any:
    """Seconds of jobs at ``rate = (a, b, c)`` (``weights`` in units, not millions)."""
    a, b, c = rate
    return seeds * epochs * images * (a + b * np.asarray(weights) / 1e6 + c * np.asarray(maps))


def fit_rate(
    jobs: pd.DataFrame, seeds: int, epochs: int, *, relative: bool = True
) -> tuple[float, float, float]:
    """``(a, b, c)`` of ``seconds = seeds * epochs * images * (a + b * Mweights + c * maps)``.

    Least squares on relative errors (each job's equation divided by its own time: small and
    large jobs weigh alike) or, with ``relative=False``, on seconds (the long jobs, which
    dominate a grid's total, weigh most); needs jobs of at least two depths and two sizes.
    """
    images = jobs["dataset"].map(lambda d: DATA[d][0]).to_numpy(float)
    unit = seeds * epochs * images
    design = np.column_stack(
        [unit, unit * jobs["weights"].to_numpy(float) / 1e6, unit * jobs["layers"].to_numpy(float)]
    )
    if np.linalg.matrix_rank(design) < 3:
        raise ValueError(
            f"{len(jobs)} jobs cannot separate the rate's three parts: give jobs of at least "
            "two depths and two widths"
        )
    seconds = jobs["seconds"].to_numpy(float)
    scale = seconds if relative else np.ones_like(seconds)
    coef, *_ = np.linalg.lstsq(design / scale[:, None], seconds / scale, rcond=None)
    return float(coef[0]), float(coef[1]), float(coef[2])


def grid_jobs(analysis: Mapping) -> list[tuple[str, int, int, int]]:
    """``(dataset, layers, hidden, seeds)`` of every training job the config plans."""
    jobs = []
    seeds = len(analysis["seeds"])
    for dataset in analysis["datasets"]:
        if 1 in analysis["layers"]:
            jobs.append((dataset, 1, 0, seeds))
        deep = [n for n in analysis["layers"] if n > 1]
        for _, layers, hidden in itertools.product(
            analysis["activations"], deep, analysis["hidden"]
        ):
            jobs.append((dataset, layers, hidden, seeds))
    reg = analysis.get("regularisers") or {}
    for dataset, _ in itertools.product(reg.get("datasets", []), reg.get("kinds", [])):
        jobs.append((dataset, reg["layers"], reg["hidden"], len(reg["seeds"])))
    return jobs


def makespan(durations: Iterable[float], slots: int) -> float:
    """Wall time of running jobs on ``slots`` parallel slots, longest job first."""
    ends = [0.0] * max(1, slots)
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(ends, ends[0] + d)
    return max(ends)


def project(
    analysis: Mapping, rate: tuple[float, float, float], epochs: int, cores: int
) -> dict[str, float]:
    """Projected seconds of the config's training jobs: ``total`` (one job at a time, the
    2-core machine), ``longest`` job and ``cluster`` (``cores / 2`` jobs at a time)."""
    durations = []
    for dataset, layers, hidden, seeds in grid_jobs(analysis):
        images, n_in, n_cls = DATA[dataset]
        w = n_weights(layers, hidden, n_in, n_cls)
        durations.append(float(job_seconds(rate, seeds, epochs, images, w, layers)))
    return {
        "jobs": float(len(durations)),
        "total": float(sum(durations)),
        "longest": float(max(durations)),
        "cluster": makespan(durations, cores // 2),
    }


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "benchmarks", nargs="+", help="results/benchmarks/analysis/train of one or more runs"
    )
    parser.add_argument("--config", nargs="+", required=True, help="the run's config files")
    parser.add_argument("--project", nargs="+", default=None, help="config to project")
    parser.add_argument("--cores", type=int, default=64, help="cores of the SLURM allocation")
    parser.add_argument("--absolute", action="store_true", help="fit seconds, not relative errors")
    parser.add_argument(
        "--paused",
        nargs="*",
        default=[],
        metavar="DATASET/GROUP=SECONDS",
        help="seconds a job was stopped, taken off its wall time",
    )
    args = parser.parse_args(argv)

    def analysis_of(paths: list[str]) -> dict:
        merged: dict = {}
        for path in paths:
            with open(path) as fh:
                merged.update((yaml.safe_load(fh) or {}).get("analysis", {}))
        return merged

    ran = analysis_of(args.config)
    target = analysis_of(args.project or args.config[:1])
    epochs = int(ran["training"]["epochs"])
    paused = {k: float(v) for k, v in (item.split("=", 1) for item in args.paused)}
    jobs = read_jobs(args.benchmarks, paused)
    rate = fit_rate(jobs, len(ran["seeds"]), epochs, relative=not args.absolute)
    a, b, c = rate
    images = jobs["dataset"].map(lambda d: DATA[d][0]).to_numpy(float)
    jobs["fitted"] = job_seconds(
        rate, len(ran["seeds"]), epochs, images, jobs["weights"], jobs["layers"]
    )
    jobs["cpu_per_wall"] = jobs["cpu_seconds"] / jobs["seconds"]
    cols = ["dataset", "group", "weights", "seconds", "fitted", "cpu_seconds", "cpu_per_wall"]
    print(jobs[cols].round(2).to_markdown(index=False))
    print(
        f"\nrate per seed, epoch and training image: {a:.3e} s + {b:.3e} s per million "
        f"weights + {c:.3e} s per linear map"
    )
    out = project(target, rate, int(target["training"]["epochs"]), args.cores)
    print(
        f"projected: {int(out['jobs'])} training jobs; one at a time (2 cores) "
        f"{_hours(out['total'])}; longest job {_hours(out['longest'])}; "
        f"{args.cores} cores ({args.cores // 2} jobs of 2 threads at a time) "
        f"{_hours(out['cluster'])}"
    )


if __name__ == "__main__":
    main()
