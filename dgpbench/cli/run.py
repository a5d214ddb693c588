"""``dgpbench run``: Snakemake with recovery from a killed run.

A run killed with SIGKILL (or a power loss) leaves Snakemake's directory lock behind, and the
next ``snakemake`` refuses to start until someone runs ``--unlock`` by hand. ``dgpbench run``
holds an OS file lock (``flock``) on ``.snakemake/dgpbench-run.lock`` for as long as it runs,
so two ``dgpbench run`` on one machine never share a directory, and records who took
Snakemake's lock in ``.snakemake/dgpbench-run.owner.json``: host, PIDs of itself and of
Snakemake, a run id that every job inherits (``DGPBENCH_RUN_ID``), and the identity (inode,
mtime) of the lock files Snakemake wrote. Snakemake's own lock files name no process, so
the next ``dgpbench run`` removes a lock only when that record proves it stale: the same
lock files, taken on this host, and no process of that run (``dgpbench run``, Snakemake, a
job) alive. A lock taken on another host (a shared file system, e.g. two login nodes of a
cluster), by a plain ``snakemake``, or by a run that is still alive stops the run with a
message saying how to unlock (``dgpbench run ... --unlock`` once no run is active). An editor
or notebook sitting in the folder does not block recovery.
Outputs of jobs that were killed are then redone by ``--rerun-incomplete`` (set in the
profiles), and every step writes atomically, so the resumed run ends as an uninterrupted one.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dgpbench.cli.registry import SUBCOMMANDS, CommandError

log = logging.getLogger(__name__)

OWNER_FILE = "dgpbench-run.owner.json"
RUN_ID_ENV = "DGPBENCH_RUN_ID"


def _directory(snakemake_args: list[str]) -> Path:
    """The working directory Snakemake will use (``--directory``/``-d``, else the current)."""
    for i, arg in enumerate(snakemake_args):
        if arg in ("--directory", "-d") and i + 1 < len(snakemake_args):
            return Path(snakemake_args[i + 1])
        if arg.startswith("--directory="):
            return Path(arg.split("=", 1)[1])
    return Path.cwd()


def _has_snakefile(snakemake_args: list[str]) -> bool:
    """Whether Snakemake will find a Snakefile: ``--snakefile``/``-s`` given, or one of the
    places it looks in the current directory.
    """
    if any(a in ("--snakefile", "-s") or a.startswith("--snakefile=") for a in snakemake_args):
        return True
    names = ("Snakefile", "snakefile", "workflow/Snakefile", "workflow/snakefile")
    return any(Path(name).is_file() for name in names)


def _lock_files(workdir: Path) -> dict[str, list[int]]:
    """Snakemake's lock files in ``workdir``: name -> [inode, mtime in ns]."""
    locks = workdir / ".snakemake" / "locks"
    if not locks.is_dir():
        return {}
    found = {}
    for path in sorted(locks.iterdir()):
        with_stat = path.stat()
        found[path.name] = [with_stat.st_ino, with_stat.st_mtime_ns]
    return found


def _read_owner(workdir: Path) -> dict | None:
    try:
        record = json.loads((workdir / ".snakemake" / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write_owner(workdir: Path, record: dict) -> None:
    from dgpbench.io import write_text

    write_text(workdir / ".snakemake" / OWNER_FILE, json.dumps(record, indent=1))


def _run_processes(record: dict) -> list[str]:
    """Live processes of the recorded run on this host: ``"PID (command line)"`` each.

    ``dgpbench run`` and its Snakemake by PID (a PID reused by a process started later does
    not count), and every process carrying the run's id in its environment (its jobs).
    Processes of other users, whose details cannot be read, are skipped.
    """
    import psutil

    started = float(record.get("started", 0))
    pids = {int(p) for p in (record.get("pid"), record.get("snakemake_pid")) if p}
    run_id = record.get("run_id")
    alive = []
    for proc in psutil.process_iter(["pid", "name", "cmdline", "create_time", "status"]):
        info = proc.info
        if info["status"] == psutil.STATUS_ZOMBIE:  # dead, waiting for a parent to reap it
            continue
        mine = info["pid"] in pids and (info["create_time"] or 0) <= started + 5
        if not mine and run_id:
            try:
                mine = proc.environ().get(RUN_ID_ENV) == run_id
            except (psutil.Error, OSError):
                mine = False
        if mine:
            command = " ".join(info["cmdline"] or [info["name"] or "?"])
            alive.append(f"{info['pid']} ({command[:120]})")
    return alive


def _unlock_hint(snakemake_args: list[str]) -> str:
    import shlex

    return "dgpbench run " + shlex.join([*snakemake_args, "--unlock"])


def check_stale_lock(workdir: Path, snakemake_args: list[str]) -> None:
    """Decide about Snakemake's lock in ``workdir``: return when it is stale (to be removed),
    raise :class:`~dgpbench.cli.registry.CommandError` saying why and how to unlock otherwise.
    """
    record = _read_owner(workdir)
    hint = (
        f"if no run is active in {workdir} (on any machine), remove the lock with "
        f"`{_unlock_hint(snakemake_args)}`"
    )
    if record is None or record.get("locks") != _lock_files(workdir):
        raise CommandError(
            f"Snakemake's lock in {workdir} was not taken by a `dgpbench run` recorded there "
            f"(a plain `snakemake`, or a run from elsewhere): {hint}"
        )
    host, pid = record.get("host"), record.get("pid")
    if host != socket.gethostname():
        raise CommandError(
            f"Snakemake's lock in {workdir} was taken by `dgpbench run` (PID {pid}) on host "
            f"{host}, which this machine cannot check: {hint}"
        )
    alive = _run_processes(record)
    if alive:
        raise CommandError(
            f"Snakemake's lock in {workdir} is live: processes of the run that took it still "
            f"work ({'; '.join(alive[:5])}). Wait for them or stop them; {hint}"
        )


def _check_config_overrides(snakemake_args: list[str]) -> None:
    """Refuse ``--config a.b=1``: Snakemake sets only top-level keys there (and answers a
    dotted key with a traceback).
    """
    in_config = False
    for arg in snakemake_args:
        if arg in ("--config", "-C"):
            in_config = True
            continue
        if arg.startswith("--config="):
            arg, in_config = arg.removeprefix("--config="), False
        elif arg.startswith("-") or not in_config:
            in_config = False
            continue
        key = arg.partition("=")[0]
        if "." in key or "[" in key:
            raise CommandError(
                f"--config {arg}: --config sets top-level keys only and {key!r} is nested; "
                "put nested keys in a second --configfile, e.g. a YAML file with "
                "`protocol: {draws: 50}`"
            )


def run_snakemake(snakemake_args: list[str]) -> int:
    """Run Snakemake with ``snakemake_args``, first clearing a lock left by a killed run.

    Parameters
    ----------
    snakemake_args : list of str
        Arguments passed to ``snakemake`` unchanged.

    Returns
    -------
    int
        Snakemake's exit status.

    Raises
    ------
    dgpbench.cli.registry.CommandError
        If Snakemake is not installed, there is no workflow to run, the configuration is
        invalid (:func:`~dgpbench.cli.config.workflow_config_error`), another ``dgpbench run``
        is active in the same working directory, or Snakemake's lock there is not provably
        stale (see :func:`check_stale_lock`).
    """
    _check_config_overrides(snakemake_args)
    if not all(importlib.util.find_spec(m) for m in ("snakemake", "psutil")):
        raise CommandError(
            "dgpbench run needs the workflow extra: pip install 'dgpbench[workflow]'"
        )
    if not _has_snakefile(snakemake_args):
        raise CommandError(
            f"no Snakefile in {Path.cwd()}: the workflow ships with the repository, not the "
            "package; run this in a clone of dgpbench (or pass --snakefile CLONE/Snakefile)"
        )
    workdir = _directory(snakemake_args)
    if "--unlock" not in snakemake_args:
        from dgpbench.cli.config import workflow_config_error

        problem = workflow_config_error(snakemake_args, workdir)
        if problem is not None:  # the schema's message alone, before Snakemake runs
            raise CommandError(problem)
    lock_path = workdir / ".snakemake" / "dgpbench-run.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    snakemake = [sys.executable, "-m", "snakemake"]
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(f"another `dgpbench run` is active in {workdir}") from None
        if "--unlock" in snakemake_args:  # the user's explicit unlock: Snakemake's own
            (workdir / ".snakemake" / OWNER_FILE).unlink(missing_ok=True)
            return subprocess.run([*snakemake, *snakemake_args]).returncode
        if _lock_files(workdir):
            check_stale_lock(workdir, snakemake_args)
            log.warning("removing the Snakemake lock left by an interrupted run in %s", workdir)
            unlock = [a for a in snakemake_args if a not in ("-n", "--dry-run")]
            subprocess.run([*snakemake, *unlock, "--unlock"], check=True, stdout=subprocess.DEVNULL)
        return _run_recorded(snakemake, snakemake_args, workdir)


def _run_recorded(snakemake: list[str], snakemake_args: list[str], workdir: Path) -> int:
    """Run Snakemake, recording this run as the owner of the lock files it writes."""
    record = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run_id": uuid.uuid4().hex,
        "started": time.time(),
        "locks": {},
    }
    env = {**os.environ, RUN_ID_ENV: record["run_id"]}
    proc = subprocess.Popen([*snakemake, *snakemake_args], env=env)
    record["snakemake_pid"] = proc.pid
    _write_owner(workdir, record)
    try:
        while proc.poll() is None:
            locks = _lock_files(workdir)
            if locks and locks != record["locks"]:
                record["locks"] = locks
                _write_owner(workdir, record)
            time.sleep(0.2)
    except KeyboardInterrupt:  # Snakemake got the same Ctrl-C: let it finish its clean-up
        proc.wait()
        raise
    if not _lock_files(workdir):
        (workdir / ".snakemake" / OWNER_FILE).unlink(missing_ok=True)
    return proc.returncode


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "snakemake_args",
        nargs="*",
        metavar="SNAKEMAKE_ARGS",
        help="passed to snakemake unchanged, e.g. --cores 2 --configfile config/paper.yaml "
        "-n; every option of `snakemake --help` works here",
    )


def _run(args: argparse.Namespace) -> int:
    # `--` stays: it ends a --config list before the targets, as in snakemake itself.
    return run_snakemake(args.snakemake_args)


SUBCOMMANDS["run"] = (
    "Run the workflow (snakemake ARGS...), recovering from a killed run's stale lock.",
    _run_args,
    _run,
)
