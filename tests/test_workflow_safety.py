"""The workflow with hostile or inconsistent configurations: nothing runs that the config
smuggles in, paths arrive intact, and a bad combination of keys stops the run before any job.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _workflow import SNAKEFILE, tiny_config, venv_env

MNIST = Path("/work/shared/data/MNIST")


def snakemake(workdir: Path, config: dict, *args: str, timeout: float = 300):
    """Write ``config.yaml`` into ``workdir`` and run plain Snakemake there."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--cores", "1", *args],
        cwd=workdir, env=venv_env(), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def shell_commands(output: str) -> list[list[str]]:
    """The shell commands a ``snakemake -n -p`` run prints, split as the shell would."""
    return [
        shlex.split(line.removeprefix("Shell command: "))
        for line in output.splitlines()
        if line.startswith("Shell command: ")
    ]


def test_data_root_is_quoted_and_arrives_intact(tmp_path):
    # A real job: the data root has a space and a command substitution in its name, and
    # holds MNIST. Unquoted, the shell runs `touch pwned` and splits the path in two.
    if not MNIST.is_dir():
        pytest.skip("needs the shared MNIST files")
    workdir = tmp_path / "work"
    root = tmp_path / "data root $(touch pwned)"
    root.mkdir()
    (root / "MNIST").symlink_to(MNIST)
    config = tiny_config(
        datasets=["mnist"], data_root=str(root), images={"n_refs": 10, "n_test": 10, "seed": 1}
    )
    proc = snakemake(workdir, config, "results/images/mnist/clean.npz")
    log = workdir / "results" / "logs" / "images" / "mnist.log"
    assert proc.returncode == 0, proc.stderr[-2000:] + (log.read_text() if log.exists() else "")
    assert (workdir / "results" / "images" / "mnist" / "clean.npz").is_file()
    assert not list(tmp_path.rglob("pwned"))


def test_every_config_string_reaches_the_shell_as_one_word(tmp_path):
    hostile = "a'b $(touch pwned) `touch pwned`; touch pwned"
    config = tiny_config(data_root=f"/x y/{hostile}")
    config["analysis"]["size"]["distributions"] = ["uniform", hostile]
    config["analysis"]["early_stopping"]["heatmap"] = {"dataset": [f"npz:/d/{hostile}.npz"]}
    targets = [
        "results/images/digits/clean.npz",
        "results/analysis/size/grid.csv",
        "results/analysis/early_stopping/grid.csv.gz",
    ]
    proc = snakemake(tmp_path, config, "-n", "-p", *targets)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = {
        cmd[1] if cmd[1] != "analysis" else cmd[2]: cmd for cmd in shell_commands(proc.stdout)
    }
    images = commands["images"]
    assert images[images.index("--data-root") + 1] == f"/x y/{hostile}"
    size = commands["size"]
    assert size[size.index("--distributions") + 1 : size.index("--sizes")] == ["uniform", hostile]
    es = commands["early-stopping"]
    assert es[es.index("--heatmap-where") + 1] == f"dataset=npz:/d/{hostile}.npz"
    assert not list(tmp_path.rglob("pwned"))
