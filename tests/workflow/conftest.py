"""Runs that end-to-end tests read, made once per test session: the tiny grid, a dry run of
the default configuration, and the SLURM test's run (started when the session starts)."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from _slurm import SlurmRun, cluster_problem
from _workflow import CORES, REPO, TINY_GRID_TARGETS, snakemake, tiny_config


def _shared_root(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder that every pytest-xdist worker of this session sees."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def _once(root: Path, name: str, make: Callable[[], None]) -> None:
    """Run ``make`` once per session, whichever worker asks first (under a file lock; the
    others wait for it)."""
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f"{name}.done"
        if not done.exists():
            make()
            done.touch()


@pytest.fixture(scope="session")
def tiny_grid(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder of :func:`tiny_config`'s tables (``TINY_GRID_TARGETS``), run once
    (``dgpbench run``).

    The pytest-xdist workers share it. Read it, or copy it (``_workflow.copy_tiny_grid``) to
    run more targets: never run Snakemake in it.
    """
    workdir = _shared_root(tmp_path_factory, worker_id) / "tiny-grid"

    def make() -> None:
        shutil.rmtree(workdir, ignore_errors=True)
        run = snakemake(
            workdir, tiny_config(), *TINY_GRID_TARGETS, cores=CORES, profile="local",
            via_dgpbench=True,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]

    _once(workdir.parent, "tiny-grid", make)
    return workdir


@pytest.fixture(scope="session")
def default_dry_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> str:
    """What ``snakemake -n -p`` prints (stdout, then stderr) for the shipped ``config.yaml``,
    run once; the tests that check what the default run leaves out read it."""
    root = _shared_root(tmp_path_factory, worker_id)
    printed = root / "default-dry-run.txt"

    def make() -> None:
        config = yaml.safe_load((REPO / "config.yaml").read_text())
        proc = snakemake(root / "default-dry-run", config, "-n", "-p", cores=CORES)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        assert "Job stats:" in proc.stdout and "dgpbench detect" in proc.stdout  # a planned grid
        printed.write_text(proc.stdout + proc.stderr)

    _once(root, "default-dry-run", make)
    return printed.read_text()


@pytest.fixture(scope="session")
def slurm_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> SlurmRun:
    """The SLURM test's run, started by whichever worker began first."""
    return SlurmRun(_shared_root(tmp_path_factory, worker_id) / "slurm-run")


@pytest.fixture(scope="session", autouse=True)
def _slurm_run_started(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    worker_id: str,
    slurm_run: SlurmRun,
):
    """Start the SLURM test's run (``_slurm.SlurmRun``) when the session begins, if the session
    selected that test and a cluster is up: its jobs run while the workers run other tests.
    The worker that started it waits for it at the session's end."""
    if not any(item.get_closest_marker("slurm") for item in request.session.items):
        yield
        return

    def start() -> None:
        if cluster_problem() is None:
            slurm_run.start()

    _once(_shared_root(tmp_path_factory, worker_id), "slurm-run", start)
    yield
    slurm_run.finish()
