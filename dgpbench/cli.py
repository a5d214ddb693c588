"""The ``dgpbench`` command line: one subcommand per workflow step.

User mistakes (bad paths, unknown names, invalid values) end in a one-line message on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from dgpbench import __version__
from dgpbench.commands import SUBCOMMANDS, CommandError

log = logging.getLogger("dgpbench")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level argument parser with every registered subcommand."""
    import dgpbench.analysis.steps  # registers `dgpbench analysis`
    import dgpbench.fl_steps  # registers the Failing-loudly grid's `dgpbench fl-*`
    import dgpbench.runner
    import dgpbench.steps  # noqa: F401  (registers the workflow subcommands)

    parser = argparse.ArgumentParser(
        prog="dgpbench",
        description="Deep graph persistence and baselines for covariate-shift detection.",
    )
    parser.add_argument("--version", action="version", version=f"dgpbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, add_args, run) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        add_args(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dgpbench`` console script."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"] and argv[1:2] not in (["-h"], ["--help"]):
        # `dgpbench run` hands every further argument to snakemake untouched.
        args = parser.parse_args(["run"])
        args.snakemake_args = argv[1:]
    else:
        args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if os.environ.get("SLURM_JOB_ID"):
        log.info("running in SLURM job %s", os.environ["SLURM_JOB_ID"])
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except (CommandError, ValueError, TypeError, KeyError, OSError) as exc:  # user mistakes
        print(f"dgpbench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
