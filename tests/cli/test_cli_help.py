"""``--help`` of every subcommand: a description for every option, defaults shown; no command
exits 2 after the usage."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from dgpbench.cli.main import build_parser, main


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("dgpbench",)):
    """Every (command path, parser) pair of the tree, subcommands' options loaded."""
    parser.format_help()  # analysis targets add their options when first formatted
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


PARSERS = dict(_parsers(build_parser()))


def test_every_subcommand_is_covered():
    commands = {" ".join(path[1:]) for path in PARSERS}
    for name in ("train", "features", "detect", "score", "run", "analysis train", "tables"):
        assert name in commands


@pytest.mark.parametrize("path", sorted(PARSERS), ids=" ".join)
def test_every_option_has_help_and_shows_its_default(path):
    parser = PARSERS[path]
    text = parser.format_help()
    assert parser.description, f"{' '.join(path)} has no description"
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            assert all(a.help for a in action._choices_actions), path
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{' '.join(path)} {name}: no help"
        default = action.default
        if (
            action.option_strings
            and not action.required
            and default not in (None, False, [], argparse.SUPPRESS)
        ):
            shown = f"(default: {default})" in " ".join(text.split())
            assert shown or "default" in action.help, f"{' '.join(path)} {name}: default hidden"


def test_defaults_are_shown_in_the_formatted_help():
    text = " ".join(PARSERS[("dgpbench", "detect")].format_help().split())
    assert "(default: 100)" in text and "(default: bonferroni)" in text


def test_train_help_says_seeds_train_several():
    text = " ".join(PARSERS[("dgpbench", "train")].format_help().split())
    assert "one MLP" not in text and "several seeds" in text


def test_run_help_shows_how_to_pass_snakemake_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "snakemake --help" in out and "--configfile" in out and "--unlock" in out


def test_no_command_prints_the_usage_and_exits_2():
    proc = subprocess.run(
        [sys.executable, "-m", "dgpbench"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: dgpbench") and "score" in proc.stderr
    assert proc.stdout == ""
