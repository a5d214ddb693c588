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
import re
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
    "calibrate": "calibrate",
    "monitor": "stream",
    "stream": "stream_eval",
    "stream-report": "stream_eval",
    "stream-shifts": "stream_eval",
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
            "tests-power",
            "figures",
            "compare",
        )
    },
    "run": "run",
}

#: Every step module, in the order of ``dgpbench --help``.
_MODULES: tuple[str, ...] = (
    "analysis", "calibrate", "compare", "failing_loudly", "monitor", "paper", "run", "stream",
    "stream_eval",
)  # fmt: skip


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


#: ``package.module:name``, the form of ``--model`` factories and custom ``--method`` classes.
_IMPORT_SPEC = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):[A-Za-z_]\w*")


def _module_file(value: object) -> str | None:
    """The source file of the module a ``package.module:name`` value imports, found without
    importing it (no package's code runs); None for any other value or a module not found.
    """
    match = _IMPORT_SPEC.fullmatch(value) if isinstance(value, str) else None
    if match is None or os.path.exists(value):
        return None
    from importlib.machinery import PathFinder

    loaded = sys.modules.get(match[1])
    if loaded is not None:
        return getattr(loaded, "__file__", None)
    spec, name, search = None, "", None
    for part in match[1].split("."):
        name = f"{name}.{part}" if name else part
        try:
            spec = PathFinder.find_spec(name, search)
        except (ImportError, OSError, ValueError):
            return None
        if spec is None:
            return None
        search = spec.submodule_search_locations
    return spec.origin if spec is not None else None


def refuse_output_over_input(args: argparse.Namespace) -> None:
    """Refuse an ``--out``/``--out-dir`` that is one of the command's inputs, before any work.

    Every option value of the parsed command is compared with the output path (the same
    file, through links too): ``fit --out cnn.pt2 --model cnn.pt2`` would otherwise replace
    the model with the detector, ``--out clean.npz`` the images. The module file of a
    ``package.module:name`` value counts as an input too (``--model mynets:net --out
    mynets.py``).

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
                if not isinstance(item, (str, os.PathLike)):
                    continue
                what = ""
                if not _same_file(item, target):
                    module = _module_file(item)
                    if module is None or not _same_file(module, target):
                        continue
                    what = "the module of "
                raise CommandError(
                    f"--{out_key.replace('_', '-')} {target} is also {what}the input "
                    f"--{key.replace('_', '-')} {item}: writing it would destroy that input; "
                    "choose another output path"
                )


def refuse_unwritable_output(args: argparse.Namespace) -> None:
    """Refuse an ``--out``, ``--out-dir`` or ``--out-dirs`` that cannot be written, before
    any work: an existing path that is not a regular file (a directory, a fifo, a device
    such as ``/dev/null``; with ``--out-dir``, not a directory), or one in a folder that is
    not writable (see :func:`dgpbench.io.output_problem`). A command whose ``--out`` is a
    file-name stem (``fl-figure``) sets ``_out_suffixes``: those files are checked.

    Raises
    ------
    CommandError
        Naming the option, the path and the reason.
    """
    from dgpbench.io import output_problem

    suffixes = getattr(args, "_out_suffixes", ("",))
    for key, folder in (("out", False), ("out_dir", True), ("out_dirs", True)):
        value = getattr(args, key, None)
        for target in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(target, (str, os.PathLike)):
                continue
            for suffix in ("",) if folder else suffixes:
                reason = output_problem(f"{os.fspath(target)}{suffix}", folder=folder)
                if reason is not None:
                    raise CommandError(
                        f"--{key.replace('_', '-')} {os.fspath(target)}{suffix}: {reason}; "
                        "nothing was written"
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
        refuse_unwritable_output(args)
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
