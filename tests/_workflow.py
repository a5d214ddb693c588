"""Helpers shared by the workflow tests (imported as a plain module from tests/)."""

from __future__ import annotations

import importlib.util
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "Snakefile"
# Cores of an end-to-end run: both, except beside another pytest-xdist worker, where two
# runs of two threads each would share the machine's two cores and slow each other down.
CORES = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2


def load_script(relative: str) -> ModuleType:
    """Import a script of the repository that is not part of the package (e.g.
    ``scripts/config_readme.py``) as a module."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_config(**overrides) -> dict:
    """The default config shrunk to a run of a few seconds per job."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.update(
        datasets=["digits"],
        methods=["softmax", "dgp"],
        ablation={"datasets": [], "methods": ["dgp"], "ns": [10]},
        models={"hidden": [16], "layers": [2], "seeds": [0], "activation": "relu"},
        training={"lr": 3e-3, "epochs": 2, "batch_size": 32, "val_fraction": 0.2},
        images={"n_refs": 300, "n_test": 300, "seed": 112},
        corruptions=["GN", "PD"],
        intensities=[6],
        protocol={
            "ns": [10, 50],
            "deltas": [0.5],
            "draws": 20,
            "seed": 112,
            "alpha": 0.05,
            "correction": "bonferroni",
        },
        report={"pool_deltas": [0.5]},
    )
    config.update(overrides)
    return config


TINY_GRID_TARGETS = ("tables", "compare", "compare_paper")
"""What the shared tiny grid runs: the default target but its figures, which none of the tests
that read the grid look at (the tests that run the default target draw their own)."""


def venv_env(slurm: bool = False) -> dict[str, str]:
    """The environment with this interpreter's bin first on PATH (jobs find `dgpbench`).

    Without ``slurm``, SLURM's client tools read an empty configuration: Snakemake loads its
    SLURM executor plugin at every start, and the plugin asks ``scontrol show config``, which
    waits ~10 s for a slurmctld that is down; with an empty configuration it answers at once.
    Local runs need no SLURM; only the SLURM tests (``slurm``) keep the real configuration.
    """
    env = os.environ.copy()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if not slurm:
        env["SLURM_CONF"] = os.devnull
    return env


def snakemake(
    workdir: Path,
    config: dict | None,
    *args: str,
    timeout: float = 300,
    cores: int | None = 1,
    profile: str | None = None,
    importable: bool = False,
    via_dgpbench: bool = False,
) -> subprocess.CompletedProcess:
    """Run the workflow in ``workdir``: plain Snakemake, or ``dgpbench run`` (``via_dgpbench``).

    ``config`` is written to ``workdir/config.yaml`` (None: leave what is there); ``cores``
    None and ``profile`` None add neither option (``profile`` names one of
    ``workflow/profiles/``); ``importable`` puts ``workdir`` on the jobs' ``PYTHONPATH``, for a
    user's module written there.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    env = venv_env()
    if importable:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(workdir), env.get("PYTHONPATH")) if p)
    command = [
        sys.executable, "-m", *(("dgpbench", "run") if via_dgpbench else ("snakemake",)),
        "--snakefile", str(SNAKEFILE), "--directory", str(workdir),
        *(("--cores", str(cores)) if cores is not None else ()),
        *(("--profile", str(REPO / "workflow" / "profiles" / profile)) if profile else ()),
        *args,
    ]  # fmt: skip
    return subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def config_problem(workdir: Path, config: dict, *args: str) -> str | None:
    """What the workflow's configuration check says of ``config`` in ``workdir`` (None: valid).

    The check `dgpbench run` makes before Snakemake starts, and the Snakefile before any job
    (the schema with its defaults, then the cross-key checks), run in this process: each
    bad-configuration case needs no Snakemake run of its own; one end-to-end case per family
    shows that the run stops.
    """
    from dgpbench.cli.config import workflow_config_error

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    argv = ["--snakefile", str(SNAKEFILE), "--directory", str(workdir), "--cores", "1", *args]
    # The check imports Snakemake here, the first time with its SLURM plugin's query
    # (``venv_env``): an empty SLURM configuration while it runs, the real one back after.
    real = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = os.devnull
    try:
        return workflow_config_error(argv, workdir)
    finally:
        if real is None:
            del os.environ["SLURM_CONF"]
        else:
            os.environ["SLURM_CONF"] = real


def write_tiny_cifar(root: Path, n_per_batch: int = 20, seed: int = 0) -> None:
    """A python-batch CIFAR-10 root (``root/cifar-10-batches-py``) of random 3x32x32 images,
    ``n_per_batch`` in each of the five training batches and the test batch."""
    import numpy as np

    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]:
        entry = {
            "data": rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8),
            "labels": np.tile(np.arange(10), n_per_batch // 10).tolist(),
        }
        with (folder / name).open("wb") as fh:
            pickle.dump(entry, fh)


def copy_tiny_grid(grid: Path, workdir: Path) -> Path:
    """Copy the shared tiny grid (fixture ``tiny_grid``) into ``workdir``, file times kept, so
    that Snakemake reruns only what a test's own configuration changes; return ``workdir``."""
    shutil.copytree(grid, workdir, dirs_exist_ok=True)
    return workdir
