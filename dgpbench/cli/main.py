"""The ``dgpbench`` command line: one subcommand per workflow step.

Exit statuses: 0 success; 1 only where a command defines it (``dgpbench score``: the test
rejected, i.e. a shift); 2 every failure (a bad file, an unknown name, an invalid value, a
custom method that raises, a closed or broken standard output, even an unexpected crash),
with one line on stderr naming what failed, never a traceback (``-v`` adds it); 130 on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import sys
from collections.abc import Sequence

from dgpbench import __version__
from dgpbench.cli.registry import SUBCOMMANDS, CommandError

log = logging.getLogger("dgpbench")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless there is none to show (``None``,
    ``False``, an empty list, a required option) or the help names it already.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        help_ = action.help or ""
        default = action.default
        if (
            "%(default)" in help_
            or "default:" in help_
            or action.required
            or not action.option_strings
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
        ):
            return help_
        return f"{help_} (default: %(default)s)"


def _set_formatter(parser: argparse.ArgumentParser) -> None:
    """Use :class:`HelpFormatter` for ``parser`` and every subcommand's parser below it."""
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _set_formatter(sub)


RUN_EPILOG = """Every argument after `run` goes to Snakemake unchanged: any option of `snakemake --help`
works, e.g.
  dgpbench run --cores 2 --profile workflow/profiles/local
  dgpbench run --cores 8 --configfile config/paper.yaml --config datasets=[mnist] -n
  dgpbench run --profile workflow/profiles/slurm --default-resources slurm_partition=P
  dgpbench run --directory DIR --unlock     (a lock this command will not remove itself)
Run it in a clone of the repository (the workflow ships there, not in the package)."""


#: The module that registers each subcommand (tests/cli/test_cli_help.py checks this table
#: against the registrations): ``dgpbench score ...`` imports only its own module, not the
#: workflow's (pandas, scipy.ndimage, ...), so a command starts as fast as it can.
COMMAND_MODULES: dict[str, str] = {
    "score": "monitor",
    "fit": "monitor",
    "analysis": "analysis",
    "compare-paper": "compare",
    **{
        f"fl-{name}": "failing_loudly"
        for name in ("images", "shift", "features", "detect", "report", "figure")
    },
    **{
        name: "paper"
        for name in (
            "train",
            "train-cnn",
            "images",
            "corrupt",
            "features",
            "detect",
            "aggregate",
            "tables",
            "figures",
            "compare",
        )
    },
    "run": "run",
}

#: Every step module, in the order of ``dgpbench --help``.
_MODULES: tuple[str, ...] = ("analysis", "compare", "failing_loudly", "monitor", "paper", "run")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Return the top-level argument parser.

    Parameters
    ----------
    command : str, optional
        Register only the module of this subcommand (see :data:`COMMAND_MODULES`); every
        subcommand when None or unknown (``--help``, a typo: argparse then lists them all).
    """
    import importlib

    # Each step module registers its subcommands in dgpbench.cli.registry when imported.
    module = COMMAND_MODULES.get(command or "")
    for name in _MODULES if module is None else (module,):
        importlib.import_module(f"dgpbench.cli.{name}")
    wanted = None if module is None else {k for k, v in COMMAND_MODULES.items() if v == module}

    parser = argparse.ArgumentParser(
        prog="dgpbench",
        description="Deep graph persistence and baselines for covariate-shift detection.",
    )
    parser.add_argument("--version", action="version", version=f"dgpbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, add_args, run) in SUBCOMMANDS.items():
        if wanted is not None and name not in wanted:
            continue
        p = sub.add_parser(name, help=help_, description=help_)
        add_args(p)
        p.set_defaults(_run=run)
        if name == "run":
            p.epilog = RUN_EPILOG
    _set_formatter(parser)
    return parser


class _ClosedStream:
    """Stands in for a standard stream the process was started without (``>&-``): Python
    sets ``sys.stdout`` to None and ``print`` then drops the output without a word.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed, cannot write the results")

    def flush(self) -> None:
        pass


def _say(message: str) -> None:
    """Print one line on stderr if stderr can take it (it may be closed or a broken pipe)."""
    try:
        print(message, file=sys.__stderr__ if sys.stderr is None else sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


def _describe(exc: BaseException) -> str:
    """One line for an exception: its message's first line, with the type when unexpected."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, (CommandError, ValueError, TypeError, OSError)):
        return text or type(exc).__name__
    # a KeyError's message is the bare key ('y_test'): the type says what it means
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _flush_stdout() -> None:
    """Flush stdout now, so a closed or broken pipe is reported as a failure (exit 2)
    instead of surfacing at interpreter exit.
    """
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        # Python would try again at exit and print a traceback: point stdout at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError):
            os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise


def _same_file(a: object, b: object) -> bool:
    try:
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except (OSError, TypeError, ValueError):
        return False


def refuse_output_over_input(args: argparse.Namespace) -> None:
    """Refuse an ``--out``/``--out-dir`` that is one of the command's inputs, before any work.

    Every option value of the parsed command is compared with the output path (the same
    file, through links too): ``fit --out cnn.pt2 --model cnn.pt2`` would otherwise replace
    the model with the detector, ``--out clean.npz`` the images.

    Raises
    ------
    CommandError
        Naming both options.
    """
    for out_key in ("out", "out_dir"):
        target = getattr(args, out_key, None)
        if not isinstance(target, (str, os.PathLike)):
            continue
        for key, value in vars(args).items():
            if key in ("out", "out_dir") or key.startswith("_"):
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, (str, os.PathLike)) and _same_file(item, target):
                    raise CommandError(
                        f"--{out_key.replace('_', '-')} {target} is also the input "
                        f"--{key.replace('_', '-')}: writing it would destroy that input; "
                        "choose another output path"
                    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dgpbench`` console script; returns the exit status.

    0 on success, 1 only when a command defines it (``score``: shift detected), 2 on any
    failure (one line on stderr), 130 on Ctrl-C.
    """
    if sys.stdout is None:
        sys.stdout = _ClosedStream("stdout")
    command = "dgpbench"
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        first = next((a for a in argv if not a.startswith("-")), None)
        parser = build_parser(first)
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
        if not args.verbose:
            # torch logs at INFO through the root logger (e.g. "FakeTensor cache stats" at
            # exit after Ctrl-C, 28.23): its messages are for torch's developers
            logging.getLogger("torch").setLevel(logging.WARNING)
        if os.environ.get("SLURM_JOB_ID"):
            log.info("running in SLURM job %s", os.environ["SLURM_JOB_ID"])
        if getattr(args, "_run", None) is None:  # no command: usage and exit 2, as git does
            parser.print_help(sys.stderr)
            return 2
        command = f"dgpbench {args.command}"
        refuse_output_over_input(args)
        status = int(args._run(args) or 0)
        _flush_stdout()
        return status
    except KeyboardInterrupt:
        _say(f"{command}: interrupted")
        return 130
    except SystemExit as exc:
        if command == "dgpbench":  # argparse: --help, --version or a usage error (status 2)
            raise
        # a command (or a custom method's code) called sys.exit: never a verdict
        _say(f"{command}: error: the command exited early (sys.exit({exc.code!r}))")
        return 2
    except BaseException as exc:  # every failure is status 2, never 1 (= "shift")
        _say(f"{command}: error: {_describe(exc)}")
        if log.isEnabledFor(logging.DEBUG):
            log.debug("traceback", exc_info=exc)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
