"""``dgpbench run``: a live Snakemake lock is never removed, a stale one is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _workflow import venv_env

from dgpbench.cli import main

SNAKEFILE = """
rule done:
    output: "done.txt"
    shell: "sleep {config[wait]}; touch {output}"
"""


def _start_plain_snakemake(workdir: Path) -> subprocess.Popen:
    """A plain `snakemake` running in ``workdir`` (a job sleeping a minute), lock taken."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--config", "wait=60"],
        cwd=workdir, env=venv_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    locks = workdir / ".snakemake" / "locks"
    deadline = time.monotonic() + 60
    while not (locks.is_dir() and any(locks.iterdir())):
        assert proc.poll() is None, "snakemake ended early"
        assert time.monotonic() < deadline, "snakemake took no lock"
        time.sleep(0.1)
    return proc


def test_run_refuses_a_live_lock_and_recovers_a_stale_one(tmp_path, capsys):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "Snakefile").write_text(SNAKEFILE)
    run = ["run", "--directory", str(workdir), "--snakefile", str(workdir / "Snakefile"),
           "--cores", "1", "--config", "wait=0"]  # fmt: skip
    live = _start_plain_snakemake(workdir)
    try:
        assert main(run) == 2
        err = capsys.readouterr().err
        assert "lock" in err and "live" in err and str(live.pid) in err
        assert live.poll() is None, "the running snakemake was disturbed"
        assert any((workdir / ".snakemake" / "locks").iterdir())
        assert not (workdir / "done.txt").exists()
    finally:
        os.killpg(live.pid, signal.SIGKILL)  # leaves its lock behind: now stale
        live.wait()
    assert any((workdir / ".snakemake" / "locks").iterdir())
    assert main(run) == 0
    assert (workdir / "done.txt").is_file()
