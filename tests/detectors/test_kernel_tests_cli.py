"""`dgpbench fit --test` with the LSDD, MMDAgg and learned-kernel tests: a detector file that
`score --detector` reads back, with the p-value of the fitted detector."""

import json
import sys

import numpy as np
import pytest

from dgpbench.cli.main import main
from dgpbench.saved import load_detector

FACTORY = """
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)
    ).eval()
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernelcli")
    (folder / "kernelcli_net.py").write_text(FACTORY)
    rng = np.random.default_rng(0)
    for name, n, shift in (("clean", 80, 0.0), ("dark", 60, 0.7)):
        x = (rng.uniform(size=(n, 1, 8, 8)) * (1 - shift)).astype(np.float32)
        np.savez(folder / f"{name}.npz", x=x)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


@pytest.mark.parametrize("test", ["lsdd", "mmdagg", "mmd_deep"])
def test_fit_then_score_a_detector_file(work, test, capsys):
    out = work / f"{test}.npz"
    extra = [] if test == "mmdagg" else ["--permutations", "99"]
    fit = ["fit", "--model", "kernelcli_net:mlp", "--clean", str(work / "clean.npz"),
           "--method", "softmax", "--test", test, "--seed", "1", *extra, "--out", str(out)]  # fmt: skip
    assert main(fit) == 0
    capsys.readouterr()
    code = main(["score", "--model", "kernelcli_net:mlp", "--detector", str(out),
                 "--batch", str(work / "dark.npz"), "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["test"] == test and code == int(report["shift"]) == 1
    fitted = load_detector(out, model="kernelcli_net:mlp")
    assert fitted.detector.random_state == 1
    batch = np.load(work / "dark.npz")["x"]
    assert fitted.test(batch).p_value == pytest.approx(report["p_value"])


def test_an_option_the_test_does_not_take_is_refused(work, capsys):
    fit = ["fit", "--model", "kernelcli_net:mlp", "--clean", str(work / "clean.npz"),
           "--method", "softmax", "--test", "mmdagg", "--permutations", "9",
           "--out", str(work / "x.npz")]  # fmt: skip
    assert main(fit) == 2
    assert (
        "--permutations is for --test mmd or energy or lsdd or mmd_deep" in capsys.readouterr().err
    )
