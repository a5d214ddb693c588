"""The subcommand registry: step modules register their ``dgpbench`` subcommands here.

This module imports nothing of the package, so a step module registers without importing
the CLI, and the imports run one way: :mod:`dgpbench.cli.main` -> step modules
(:mod:`dgpbench.cli.paper`, :mod:`dgpbench.cli.run`, :mod:`dgpbench.cli.analysis`) -> library.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["SUBCOMMANDS", "CommandError", "Subcommand"]

# name -> (help, add-arguments function, run function)
Subcommand = tuple[
    str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int | None]
]
SUBCOMMANDS: dict[str, Subcommand] = {}


class CommandError(Exception):
    """A user-facing failure of a subcommand: printed as one line, exit status 2."""
