"""``dgpbench run``: Snakemake with recovery from a killed run.

A run killed with SIGKILL (or a power loss) leaves Snakemake's directory lock behind, and the
next ``snakemake`` refuses to start until someone runs ``--unlock`` by hand. ``dgpbench run``
holds an OS file lock (``flock``) on ``.snakemake/dgpbench-run.lock`` for as long as it runs;
the kernel releases that lock when the process dies, however it dies, so two ``dgpbench run``
never share a directory. A Snakemake lock can still be live without a ``dgpbench run``: a
plain ``snakemake`` in the same folder, or the Snakemake (and its jobs) that outlive a killed
``dgpbench run``. Snakemake's lock files hold no process ids, so liveness is read from the
processes themselves: the lock is removed (``snakemake --unlock``) only when no other
process works in the directory (its current directory is the working directory or below it;
shells waiting there are ignored). Otherwise the run stops and names those processes.
Outputs of jobs that were killed are then redone by ``--rerun-incomplete`` (set in the
profiles), and every step writes atomically, so the resumed run ends as an uninterrupted one.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import subprocess
import sys
from pathlib import Path

from dgpbench.commands import SUBCOMMANDS, CommandError

log = logging.getLogger(__name__)


def _directory(snakemake_args: list[str]) -> Path:
    """The working directory Snakemake will use (``--directory``/``-d``, else the current)."""
    for i, arg in enumerate(snakemake_args):
        if arg in ("--directory", "-d") and i + 1 < len(snakemake_args):
            return Path(snakemake_args[i + 1])
        if arg.startswith("--directory="):
            return Path(arg.split("=", 1)[1])
    return Path.cwd()


# Interactive shells (and the shells that wrap Snakemake's jobs, whose commands are their
# children) sitting in the directory do not hold the lock.
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "fish", "ksh", "tcsh", "csh", "tmux", "screen"})


def lock_holders(workdir: str | os.PathLike[str]) -> list[str]:
    """Processes that work in ``workdir``: ``"PID (command line)"`` for each.

    A process counts when its current directory is ``workdir`` or inside it (Snakemake and
    its jobs run there). This process, its ancestors and shells are left out; processes whose
    details cannot be read (another user's) are skipped.
    """
    import psutil

    root = Path(workdir).resolve()
    me = psutil.Process()
    skip = {me.pid, *(p.pid for p in me.parents())}
    holders = []
    for proc in psutil.process_iter(["pid", "name", "cwd", "cmdline"]):
        info = proc.info
        if info["pid"] in skip or not info["cwd"] or info["name"] in _SHELLS:
            continue
        cwd = Path(info["cwd"])
        if cwd == root or root in cwd.parents:
            command = " ".join(info["cmdline"] or [info["name"] or "?"])
            holders.append(f"{info['pid']} ({command[:120]})")
    return holders


def _check_config_overrides(snakemake_args: list[str]) -> None:
    """Refuse ``--config a.b=1``: Snakemake sets only top-level keys there (and answers a
    dotted key with a traceback)."""
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
    dgpbench.commands.CommandError
        If another ``dgpbench run`` is active in the same working directory, or Snakemake's
        lock there is held by live processes.
    """
    _check_config_overrides(snakemake_args)
    workdir = _directory(snakemake_args)
    lock_path = workdir / ".snakemake" / "dgpbench-run.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    snakemake = [sys.executable, "-m", "snakemake"]
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(f"another `dgpbench run` is active in {workdir}") from None
        locks = workdir / ".snakemake" / "locks"
        if locks.is_dir() and any(locks.iterdir()):
            holders = lock_holders(workdir)
            if holders:
                raise CommandError(
                    f"Snakemake's lock in {workdir} is live: processes still work there "
                    f"({'; '.join(holders[:5])}). Wait for them or stop them; if they do not "
                    "belong to a run, remove the lock with `snakemake --unlock`"
                )
            log.warning("removing the Snakemake lock left by an interrupted run in %s", workdir)
            unlock = [a for a in snakemake_args if a not in ("-n", "--dry-run")]
            subprocess.run([*snakemake, *unlock, "--unlock"], check=True, stdout=subprocess.DEVNULL)
        return subprocess.run([*snakemake, *snakemake_args]).returncode


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("snakemake_args", nargs="*", help="arguments for snakemake, e.g. --cores 2")


def _run(args: argparse.Namespace) -> int:
    return run_snakemake([a for a in args.snakemake_args if a != "--"])


SUBCOMMANDS["run"] = (
    "Run the workflow (snakemake ARGS...), recovering from a killed run's stale lock.",
    _run_args,
    _run,
)
