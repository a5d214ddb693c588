"""The documented workflow commands work with a PATH that lacks the venv.

The docs call ``.venv/bin/dgpbench run`` and ``.venv/bin/snakemake`` by path; every rule
must then call the dgpbench of that interpreter, not whatever ``dgpbench`` PATH finds (a bare
``dgpbench`` exits 127 in the job, the reason only in its log).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml
from _workflow import REPO, SNAKEFILE, tiny_config


# The shared venv is installed editable from elsewhere: keep PYTHONPATH so that the jobs
# import this checkout's package, as in every workflow test.
def _bare_env(decoy_bin: Path) -> dict[str, str]:
    """No venv on PATH; first on it a `dgpbench` that fails, so a rule calling a bare
    `dgpbench` fails whatever else is installed system-wide."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{decoy_bin}:/usr/bin:/bin"
    env["SLURM_CONF"] = os.devnull  # no SLURM in these local runs (_workflow.venv_env)
    return env


def _console_script(name: str) -> list[str]:
    """``<venv>/bin/NAME`` when installed there, else the same module by the interpreter."""
    script = Path(sys.executable).parent / name
    return [str(script)] if script.is_file() else [sys.executable, "-m", name]


def test_documented_commands_run_without_the_venv_on_path(tmp_path):
    workdir, decoy = tmp_path / "work", tmp_path / "bin"
    workdir.mkdir()
    decoy.mkdir()
    (decoy / "dgpbench").write_text("#!/bin/sh\necho 'not the venv dgpbench' >&2\nexit 99\n")
    (decoy / "dgpbench").chmod(0o755)
    (workdir / "config.yaml").write_text(yaml.safe_dump(tiny_config()))
    common = ["--snakefile", str(SNAKEFILE), "--directory", str(workdir), "--cores", "1",
              "--profile", str(REPO / "workflow" / "profiles" / "local")]  # fmt: skip

    def run(cmd):
        return subprocess.run(
            cmd, cwd=workdir, env=_bare_env(decoy), capture_output=True, text=True,
            timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    # `.venv/bin/dgpbench run ...` (the docs' "Reproducing the paper").
    images = "results/images/digits/clean.npz"
    proc = run([*_console_script("dgpbench"), "run", *common, images])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # `.venv/bin/snakemake ...` (the docs' SLURM and report commands).
    corrupt = "results/images/digits/GN.npz"
    proc = run([*_console_script("snakemake"), *common, corrupt])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with np.load(workdir / corrupt) as data:
        assert data.files
