"""The ``dgpbench`` command line: one subcommand per workflow step.

User mistakes (bad paths, unknown names, invalid values) end in a one-line message on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from dgpbench import __version__

log = logging.getLogger("dgpbench")

# name -> (help, add-arguments function, run function); subcommand modules register here.
Subcommand = tuple[
    str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int | None]
]
SUBCOMMANDS: dict[str, Subcommand] = {}


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level argument parser with every registered subcommand."""
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
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, KeyError) as exc:
        print(f"dgpbench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
