"""The SLURM test's run: a small real target of the workflow through the SLURM profile.

The run is started in the background as soon as a test session that selects the SLURM test
begins (``tests/workflow/conftest.py``), because most of its wall time is waiting for
slurmctld (job start, the plugin's status checks, which back off by 10 s while nothing has
finished): the pytest worker that would otherwise sit idle through those waits runs other
tests meanwhile. The test then reads the finished run. Nothing is mocked: the jobs go through
the cluster of ``scripts/slurm.sh``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from _workflow import REPO, SNAKEFILE, tiny_config, venv_env

PROFILE = REPO / "workflow" / "profiles" / "slurm"
# Node states in which the cluster accepts and runs jobs.
READY_STATES = {"idle", "mixed", "allocated", "completing"}
# A real target of the workflow: one model (rule train, which trains every seed of h16-l2;
# 2 CPUs: the rule's threads) and one corrupted image set (rules images and corrupt, default
# resources).
TARGETS = ("results/models/digits/h16-l2-s0/model.pt", "results/images/digits/GN.npz")
# A normal run takes ~30 s (three jobs, each seen done at one of the plugin's status checks);
# the limit only turns a hang (e.g. a job that can never be scheduled) into a failure: the run
# is then interrupted (SIGINT, which makes Snakemake cancel its SLURM jobs).
SNAKEMAKE_TIMEOUT_S = 150


def cluster_problem() -> str | None:
    """Why the SLURM cluster cannot run jobs, or None if it can."""
    if shutil.which("sinfo") is None:
        return "sinfo is not on PATH: no SLURM here (start one: sudo bash scripts/slurm.sh start)"
    try:
        # `scontrol ping` answers at once when slurmctld is down; sinfo waits ~9 s for it.
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
        if "is UP" not in ping.stdout:
            said = (ping.stdout + ping.stderr).split("\n", 1)[0].strip()
            return f"slurmctld is not up ({said!r}); start it with: bash scripts/slurm.sh start"
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except (subprocess.TimeoutExpired, FileNotFoundError):
        return "scontrol or sinfo failed or timed out: slurmctld does not answer"
    states = set(proc.stdout.split())
    if proc.returncode != 0 or not states & READY_STATES:
        return (
            f"SLURM cluster is not up (sinfo exit {proc.returncode}, node states "
            f"{sorted(states) or 'none'}, {proc.stderr.strip()!r}); "
            "start it with: bash scripts/slurm.sh start"
        )
    return None


class SlurmRun:
    """:data:`TARGETS` of :func:`tiny_config` run through the SLURM profile in ``root/work``,
    in the background; Snakemake's combined output goes to ``root/snakemake.out``, and when it
    ends, what slurmctld then knows of every job (``scontrol -o show job``: finished jobs stay
    for MinJobAge seconds only, the test may run later) to ``root/jobs.txt`` and its exit
    status to ``root/snakemake.rc``."""

    def __init__(self, root: Path) -> None:
        self.workdir = root / "work"
        self.out = root / "snakemake.out"
        self.rc = root / "snakemake.rc"
        self.jobs = root / "jobs.txt"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Submit the run (returns at once)."""
        self.workdir.mkdir(parents=True)
        (self.workdir / "config.yaml").write_text(yaml.safe_dump(tiny_config()))
        # Targets go first: options such as --default-resources take several values and
        # would swallow targets that followed them.
        command = [
            "timeout", "-s", "INT", "-k", "30", str(SNAKEMAKE_TIMEOUT_S),
            sys.executable, "-m", "snakemake", *TARGETS,
            "--profile", str(PROFILE),
            "--snakefile", str(SNAKEFILE),
            "--directory", str(self.workdir),
        ]  # fmt: skip
        out, rc, jobs = (shlex.quote(str(path)) for path in (self.out, self.rc, self.jobs))
        # The status is written last, under another name and renamed: a reader that sees it
        # sees everything else whole.
        script = (
            f"{shlex.join(command)} > {out} 2>&1; status=$?; "
            f"scontrol -o show job > {jobs}; "
            f"echo $status > {rc}.part && mv {rc}.part {rc}"
        )
        self.process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.workdir,
            env=venv_env(slurm=True),
            stdin=subprocess.DEVNULL,
        )

    def result(self) -> tuple[int, str]:
        """Wait for the run (started by any worker of the session) and return its exit status
        (124: it hit :data:`SNAKEMAKE_TIMEOUT_S`) and output."""
        deadline = time.monotonic() + SNAKEMAKE_TIMEOUT_S + 60
        while not self.rc.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"the SLURM run never ended; its output:\n{self._tail()}")
            time.sleep(0.5)
        return int(self.rc.read_text()), self.out.read_text()

    def job(self, jobid: str) -> dict[str, str]:
        """The fields slurmctld gave for job ``jobid`` when the run ended."""
        for line in self.jobs.read_text().splitlines():
            if line.startswith(f"JobId={jobid} "):
                return dict(re.findall(r"(?:^|\s)([^\s=]+)=(\S*)", line))
        raise AssertionError(f"slurmctld did not know job {jobid} when the run ended")

    def finish(self) -> None:
        """Wait for a run this process started (so that no job outlives the session)."""
        if self.process is not None:
            self.process.wait(timeout=SNAKEMAKE_TIMEOUT_S + 60)

    def _tail(self) -> str:
        return self.out.read_text()[-4000:] if self.out.exists() else "(none)"
