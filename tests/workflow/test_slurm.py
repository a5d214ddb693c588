"""The SLURM profile (workflow/profiles/slurm) on a real SLURM cluster.

Needs a running cluster: `bash scripts/slurm.sh start` (as root) brings up a one-node cluster
on this machine. Without one the test is skipped, with the reason, unless
``DGPBENCH_REQUIRE_SLURM=1`` is set (CI sets it after starting the cluster), in which case a
missing cluster is a failure.

The test reads a small real target of the workflow (tiny config) run through the profile,
started in the background when the session begins (tests/workflow/_slurm.py), and checks,
from SLURM's side, that every rule ran as its own SLURM job with the resources its
rule asks for (the profile's defaults where the rule sets none).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from _slurm import PROFILE, TARGETS, SlurmRun, cluster_problem
from _workflow import REPO, SNAKEFILE


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    """Skip (or fail, if DGPBENCH_REQUIRE_SLURM=1) unless a SLURM cluster takes jobs."""
    problem = cluster_problem()
    if problem is None:
        return
    if os.environ.get("DGPBENCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"DGPBENCH_REQUIRE_SLURM=1 but {problem}")
    pytest.skip(problem)


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


RULE_LOGS = {
    "train": "results/logs/train/digits/h16-l2.log",  # one job per architecture
    "images": "results/logs/images/digits.log",
    "corrupt": "results/logs/corrupt/digits/GN.log",
}


@pytest.mark.slurm
@pytest.mark.slow
def test_workflow_target_runs_as_slurm_jobs_with_profile_resources(
    slurm_cluster: None, slurm_run: SlurmRun
) -> None:
    returncode, out = slurm_run.result()  # started with the session (tests/workflow/conftest.py)
    assert returncode == 0, f"snakemake failed (124: timed out):\n{out[-4000:]}"
    workdir = slurm_run.workdir
    for target in TARGETS:
        assert (workdir / target).stat().st_size > 0

    jobids = {}
    for rule, log in RULE_LOGS.items():
        # The step itself ran inside a SLURM job (dgpbench logs SLURM_JOB_ID) ...
        found = re.search(r"running in SLURM job (\d+)", (workdir / log).read_text())
        assert found, f"rule {rule} did not run in a SLURM job: {log}"
        jobid = found.group(1)
        # ... that Snakemake submitted for this rule ...
        assert re.search(rf"submitted with SLURM jobid {jobid}\b.*rule_{rule}/", out)
        # ... and slurmctld ran, in this directory, with the profile's resources.
        info = slurm_run.job(jobid)
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
