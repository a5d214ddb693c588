import subprocess
import sys

import pytest

import dgpbench
from dgpbench.cli.main import main


def test_version_is_installed_metadata():
    assert dgpbench.__version__ != "0.0.0+unknown"


def test_cli_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"dgpbench {dgpbench.__version__}"


def test_console_script_help():
    out = subprocess.run(
        [sys.executable, "-m", "dgpbench.cli.main", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "usage: dgpbench" in out.stdout
