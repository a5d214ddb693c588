"""The SLURM profile (workflow/profiles/slurm) on a real SLURM cluster.

Needs a running cluster: `bash scripts/slurm.sh start` (as root) brings up a one-node cluster
on this machine. Without one the test is skipped, with the reason, unless
``DGPBENCH_REQUIRE_SLURM=1`` is set (CI sets it after starting the cluster), in which case a
missing cluster is a failure.

The test runs a small real target of the workflow (tiny config) through the profile and
checks, from SLURM's side, that every rule ran as its own SLURM job with the resources its
rule asks for (the profile's defaults where the rule sets none).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from _workflow import SNAKEFILE, tiny_config, venv_env

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "workflow" / "profiles" / "slurm"
# Node states in which the cluster accepts and runs jobs.
READY_STATES = {"idle", "mixed", "allocated", "completing"}
# A normal run takes ~30 s (two jobs, each seen done at the plugin's second status check);
# the timeout only turns a hang (e.g. a job that can never be scheduled) into a failure.
SNAKEMAKE_TIMEOUT_S = 120.0


def _cluster_problem() -> str | None:
    """Why the SLURM cluster cannot run jobs, or None if it can."""
    if shutil.which("sinfo") is None:
        return "sinfo is not on PATH: no SLURM here (start one: sudo bash scripts/slurm.sh start)"
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return "sinfo timed out: slurmctld does not answer"
    states = set(proc.stdout.split())
    if proc.returncode != 0 or not states & READY_STATES:
        return (
            f"SLURM cluster is not up (sinfo exit {proc.returncode}, node states "
            f"{sorted(states) or 'none'}, {proc.stderr.strip()!r}); "
            "start it with: bash scripts/slurm.sh start"
        )
    return None


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    """Skip (or fail, if DGPBENCH_REQUIRE_SLURM=1) unless a SLURM cluster takes jobs."""
    problem = _cluster_problem()
    if problem is None:
        return
    if os.environ.get("DGPBENCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"DGPBENCH_REQUIRE_SLURM=1 but {problem}")
    pytest.skip(problem)


def run_snakemake_slurm(
    snakefile: Path,
    workdir: Path,
    targets: Sequence[str] = (),
    extra_args: Sequence[str] = (),
    timeout: float = SNAKEMAKE_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run Snakemake through the repository's SLURM profile and return the finished process.

    Parameters
    ----------
    snakefile : Path
        The Snakefile to run.
    workdir : Path
        Working directory of the run (``--directory``); relative paths resolve against it.
    targets : sequence of str
        Target rules or files; empty for the Snakefile's first rule.
    extra_args : sequence of str
        More command-line options, placed after the profile so that they override it.
    timeout : float
        Seconds before the run is interrupted (SIGINT, which makes Snakemake cancel its
        SLURM jobs) and the test fails.

    Returns
    -------
    subprocess.CompletedProcess
        With ``stdout`` holding Snakemake's combined stdout and stderr.
    """
    # Targets go first: options such as --default-resources take several values and would
    # swallow targets that followed them.
    cmd = [
        sys.executable, "-m", "snakemake", *targets,
        "--profile", str(PROFILE),
        "--snakefile", str(snakefile),
        "--directory", str(workdir),
        *extra_args,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        env=venv_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        queue = subprocess.run(["squeue", "-a"], capture_output=True, text=True).stdout
        pytest.fail(
            f"snakemake did not finish within {timeout:.0f} s\nsqueue:\n{queue}\n"
            f"output:\n{out[-4000:]}"
        )
    return subprocess.CompletedProcess(cmd, proc.returncode, out, None)


def _scontrol_job(jobid: str) -> dict[str, str]:
    """Fields of ``scontrol -o show job JOBID`` (known to slurmctld for MinJobAge s after the end)."""
    proc = subprocess.run(
        ["scontrol", "-o", "show", "job", jobid], capture_output=True, text=True, timeout=20
    )
    assert proc.returncode == 0, f"slurmctld does not know job {jobid}: {proc.stderr.strip()}"
    return dict(re.findall(r"(?:^|\s)([^\s=]+)=(\S*)", proc.stdout))


def _slurm_minutes(limit: str) -> int:
    """Minutes in a SLURM time limit such as ``02:00:00`` or ``1-00:00:00``."""
    days, _, clock = limit.rpartition("-")
    hours, minutes, seconds = (int(x) for x in clock.split(":"))
    return (int(days or 0) * 24 + hours) * 60 + minutes + (seconds > 0)


def _rule_block(rule: str) -> str:
    """The text of ``rule <rule>:`` in workflow/rules/*.smk (up to the next rule)."""
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        found = re.search(rf"^rule {rule}:\n(.*?)(?=^\S|\Z)", path.read_text(), re.M | re.S)
        if found:
            return found.group(1)
    raise AssertionError(f"no rule {rule} in workflow/rules")


def _expected_resources(rule: str) -> dict[str, int]:
    """A rule's resources as SLURM gets them: the rule's own ``resources:`` over the
    profile's default-resources, and its ``threads:`` as the CPUs per task."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    resources = dict(profile["default-resources"])
    block = _rule_block(rule)
    resources.update(
        {k: int(v) for k, v in re.findall(r"^\s+(mem_mb|runtime)=(\d+),", block, re.M)}
    )
    threads = re.search(r"^\s+threads: (\d+)$", block, re.M)
    resources["cpus_per_task"] = int(threads.group(1)) if threads else 1
    return resources


def test_the_profile_does_not_repeat_the_rules_resources():
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert not {"set-resources", "set-threads"} & set(profile)
    assert _expected_resources("train") == {"mem_mb": 4000, "runtime": 240, "cpus_per_task": 2}
    assert _expected_resources("images")["cpus_per_task"] == 1


def test_the_snakefile_states_the_snakemake_floor_of_the_install():
    pyproject = (REPO / "pyproject.toml").read_text()
    floor = re.search(r'"snakemake>=([0-9.]+)', pyproject).group(1)
    stated = re.search(r'^min_version\("([0-9.]+)"\)$', SNAKEFILE.read_text(), re.M).group(1)
    assert stated.removesuffix(".0") == floor.removesuffix(".0")


# A real target of the workflow: one model (rule train, which trains every seed of h16-l2;
# 2 CPUs: the rule's threads) and one corrupted image set (rules images and corrupt, default
# resources).
TARGETS = ("results/models/digits/h16-l2-s0/model.pt", "results/images/digits/GN.npz")
RULE_LOGS = {
    "train": "results/logs/train/digits/h16-l2.log",  # one job per architecture
    "images": "results/logs/images/digits.log",
    "corrupt": "results/logs/corrupt/digits/GN.log",
}


@pytest.mark.slurm
@pytest.mark.slow
def test_workflow_target_runs_as_slurm_jobs_with_profile_resources(slurm_cluster, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(tiny_config()))

    proc = run_snakemake_slurm(SNAKEFILE, workdir, targets=TARGETS)
    assert proc.returncode == 0, f"snakemake failed:\n{proc.stdout[-4000:]}"
    for target in TARGETS:
        assert (workdir / target).stat().st_size > 0

    jobids = {}
    for rule, log in RULE_LOGS.items():
        # The step itself ran inside a SLURM job (dgpbench logs SLURM_JOB_ID) ...
        found = re.search(r"running in SLURM job (\d+)", (workdir / log).read_text())
        assert found, f"rule {rule} did not run in a SLURM job: {log}"
        jobid = found.group(1)
        # ... that Snakemake submitted for this rule ...
        assert re.search(rf"submitted with SLURM jobid {jobid}\b.*rule_{rule}/", proc.stdout)
        # ... and slurmctld ran, in this directory, with the profile's resources.
        info = _scontrol_job(jobid)
        assert info["JobState"] == "COMPLETED", info
        assert info["Comment"].startswith(f"rule_{rule}"), info
        assert Path(info["WorkDir"]) == workdir
        expected = _expected_resources(rule)
        assert int(info["NumCPUs"]) == expected["cpus_per_task"], info
        assert info["MinMemoryNode"] == f"{expected['mem_mb']}M", info
        assert _slurm_minutes(info["TimeLimit"]) == expected["runtime"], info
        jobids[rule] = int(jobid)
    # One job per rule; corrupt depends on images, so it was submitted later.
    assert len(set(jobids.values())) == 3
    assert jobids["corrupt"] > jobids["images"]
