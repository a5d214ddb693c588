"""Config-time errors of the workflow name the config key, in one line, before any job."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from _workflow import REPO, SNAKEFILE, tiny_config, venv_env


def _dry_run(workdir, config, extra_path):
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    env = venv_env()
    env["PYTHONPATH"] = os.pathsep.join([str(extra_path), str(REPO), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "dgpbench", "run", "--snakefile", str(SNAKEFILE),
           "--directory", str(workdir), "--cores", "1", "-n"]  # fmt: skip
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


def test_a_custom_module_failing_at_import_names_the_config_key(tmp_path):
    # one snakemake dry run (slow); the other import-time failures are tested in-process in
    # test_exit_status.py, through the same load_method_class
    (tmp_path / "dgpb_cfg_broken.py").write_text("class M(:\n")
    work = tmp_path / "work"
    work.mkdir()
    proc = _dry_run(work, tiny_config(methods=["dgp", "dgpb_cfg_broken:M"]), tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    line = next(x for x in out.splitlines() if "config key methods" in x)
    assert "dgpb_cfg_broken:M" in line and "SyntaxError" in line
    assert not (work / "results").exists()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_output_folder_names_the_output(tmp_path, capsys):
    import numpy as np

    from dgpbench.cli.main import main
    from dgpbench.io import save_npz

    feats = tmp_path / "feats.npz"
    save_npz(feats, clean=np.random.default_rng(0).normal(size=(40, 2)))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code = main(["detect", "--features", str(feats), "--ns", "5", "--deltas", "0.5",
                     "--draws", "2", "--out", str(locked / "rec.csv")])  # fmt: skip
    finally:
        locked.chmod(0o755)
    err = capsys.readouterr().err
    assert code == 2 and "Permission denied" in err
    assert f"{locked / 'rec.csv'}'" in err and ".tmp" not in err


def test_atomic_path_names_the_output_when_no_temporary_file_can_be_made(tmp_path, monkeypatch):
    import errno
    import tempfile

    from dgpbench.io import atomic_path

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".out.csv.x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(PermissionError) as exc, atomic_path(tmp_path / "out.csv"):
        pass
    assert exc.value.filename == str(tmp_path / "out.csv")


def test_a_run_directory_without_config_yaml_takes_the_clones_defaults(tmp_path):
    # `--directory DIR --snakefile CLONE/Snakefile` with only an overlay --configfile, as
    # the docs' commands run: the base is the clone's config.yaml, in the check and the run
    from dgpbench.cli.config import workflow_config_error

    work = tmp_path / "run"
    work.mkdir()
    overlay = str(REPO / "config" / "failing_loudly.yaml")
    argv = ["--snakefile", str(SNAKEFILE), "--directory", str(work), "--configfile", overlay]
    assert workflow_config_error(argv, work) is None
    cmd = [sys.executable, "-m", "dgpbench", "run", *argv, "--cores", "1", "-n",
           "--config", "datasets=[mnist]"]  # fmt: skip
    env = {**venv_env(), "SLURM_CONF": os.devnull}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rule fl_detect" in proc.stdout
    assert not (work / "results").exists()
