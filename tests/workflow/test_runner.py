"""``dgpbench run``: a Snakemake lock is removed only when provably stale.

Provably stale: taken by a recorded ``dgpbench run`` on this host whose processes (itself,
its Snakemake, its jobs) are all gone. A live run, a plain ``snakemake``'s lock and a lock
taken on another host are never removed; the message says how to unlock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _workflow import venv_env

from dgpbench.cli.main import main
from dgpbench.cli.run import OWNER_FILE

SNAKEFILE = """
rule done:
    output: "done.txt"
    shell: "sleep {config[wait]}; touch {output}"
"""


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text(SNAKEFILE)
    return work


def _args(workdir: Path, wait: int) -> list[str]:
    return ["--directory", str(workdir), "--snakefile", str(workdir / "Snakefile"),
            "--cores", "1", "--config", f"wait={wait}"]  # fmt: skip


def _locks(workdir: Path) -> list[Path]:
    locks = workdir / ".snakemake" / "locks"
    return sorted(locks.iterdir()) if locks.is_dir() else []


def _wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert proc.poll() is None, f"ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within a minute"
        time.sleep(0.1)


def _start(cmd: list[str], workdir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, cwd=workdir, env=venv_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def _start_dgpbench_run(workdir: Path) -> tuple[subprocess.Popen, dict]:
    """A `dgpbench run` whose job sleeps a minute, once it has recorded Snakemake's lock."""
    proc = _start([sys.executable, "-m", "dgpbench", "run", *_args(workdir, 60)], workdir)
    owner = workdir / ".snakemake" / OWNER_FILE
    _wait_for(lambda: owner.is_file() and json.loads(owner.read_text())["locks"], proc, "record")
    return proc, json.loads(owner.read_text())


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_killed_run_is_recovered_and_a_live_one_never(workdir, capsys):
    run, record = _start_dgpbench_run(workdir)
    bystander = _start(["sleep", "60"], workdir)  # an editor or kernel sitting in the folder
    try:
        # Killing `dgpbench run` and Snakemake leaves the lock and the job (sleep 60).
        _kill(record["pid"])
        _kill(record["snakemake_pid"])
        run.wait()
        assert main(["run", *_args(workdir, 0)]) == 2
        err = capsys.readouterr().err
        assert "live" in err and "--unlock" in err and "sleep 60" in err
        assert _locks(workdir) and not (workdir / "done.txt").exists()
        os.killpg(run.pid, signal.SIGKILL)  # now nothing of that run is left: stale
        time.sleep(0.2)
        assert main(["run", *_args(workdir, 0)]) == 0
        assert (workdir / "done.txt").is_file()
        assert not _locks(workdir) and not (workdir / ".snakemake" / OWNER_FILE).exists()
    finally:
        for proc in (run, bystander):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_lock_taken_on_another_host_is_kept(workdir, capsys):
    run, record = _start_dgpbench_run(workdir)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    owner = workdir / ".snakemake" / OWNER_FILE
    owner.write_text(json.dumps({**record, "host": "login-node-2"}))
    assert main(["run", *_args(workdir, 0)]) == 2
    err = capsys.readouterr().err
    assert "login-node-2" in err and f"PID {record['pid']}" in err and "--unlock" in err
    assert _locks(workdir)
    # The message's own command unlocks; then the run goes through.
    assert main(["run", *_args(workdir, 0), "--unlock"]) == 0
    assert not _locks(workdir)
    assert main(["run", *_args(workdir, 0)]) == 0
    assert (workdir / "done.txt").is_file()


def test_a_plain_snakemake_lock_is_never_removed(workdir, capsys):
    plain = _start([sys.executable, "-m", "snakemake", *_args(workdir, 60)], workdir)
    try:
        _wait_for(lambda: bool(_locks(workdir)), plain, "lock")
        assert main(["run", *_args(workdir, 0)]) == 2
        assert "plain `snakemake`" in capsys.readouterr().err
        assert plain.poll() is None, "the running snakemake was disturbed"
    finally:
        os.killpg(plain.pid, signal.SIGKILL)
        plain.wait()
    # Killed, its lock is stale, but nothing proves it: still kept.
    assert main(["run", *_args(workdir, 0)]) == 2
    assert "--unlock" in capsys.readouterr().err and _locks(workdir)


def test_a_double_dash_ends_the_config_list_before_the_targets(workdir):
    assert main(["run", *_args(workdir, 0), "--", "done.txt"]) == 0
    assert (workdir / "done.txt").is_file()


def test_run_outside_a_clone_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--cores", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "clone" in err and "Snakefile" in err
