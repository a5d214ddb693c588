"""The tiny grid that several end-to-end tests build on, run once per test session."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest
from _workflow import CORES, snakemake, tiny_config


@pytest.fixture(scope="session")
def tiny_grid(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder of :func:`tiny_config`'s default target, run once (``dgpbench run``).

    The pytest-xdist workers share it: the first to ask runs it under a file lock, the others
    wait for it. Read it, or copy it (``_workflow.copy_tiny_grid``) to run more targets: never run
    Snakemake in it.
    """
    base = tmp_path_factory.getbasetemp()
    root = base if worker_id == "master" else base.parent
    workdir, done = root / "tiny-grid", root / "tiny-grid.done"
    with open(root / "tiny-grid.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)
            run = snakemake(workdir, tiny_config(), cores=CORES, profile="local", via_dgpbench=True)
            assert run.returncode == 0, run.stderr[-3000:]
            done.touch()
    return workdir
