"""`dgpbench fit --test` and `score` with the Cramér-von Mises, Anderson-Darling, energy and
Fisher tests: one saved detector each, scored from the shell, and Fisher's refusal of
features that are not 0/1."""

import json
import sys

import numpy as np
import pytest

from dgpbench.cli.main import main

FACTORY = """
import torch


def _mlp(classes):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, classes)
    ).eval()


def mlp():
    return _mlp(10)


def two_class():
    # class 0 iff the first pixel is above 0.5: half the clean images, none of the dark ones
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2)).eval()
    with torch.no_grad():
        net[1].weight.zero_()
        net[1].weight[0, 0] = 1.0
        net[1].bias.copy_(torch.tensor([0.0, 0.5]))
    return net
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("twosample_cli")
    (folder / "twosample_net.py").write_text(FACTORY)
    rng = np.random.default_rng(0)
    for name, n, scale in (("clean", 60, 1.0), ("dark", 40, 0.3)):
        x = (rng.uniform(size=(n, 1, 8, 8)) * scale).astype(np.float32)
        np.savez(folder / f"{name}.npz", x=x)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


@pytest.mark.parametrize(
    ("test", "model", "extra"),
    [("cvm", "mlp", []), ("ad", "mlp", ["--correction", "fdr"]),
     ("energy", "mlp", ["--permutations", "99"]), ("fisher", "two_class", [])],
)  # fmt: skip
def test_fit_then_score_each_test(work, test, model, extra, capsys):
    out = work / f"{test}.npz"
    method = [] if test == "fisher" else ["--method", "softmax"]  # fisher: bbsdh by default
    fit = ["fit", "--model", f"twosample_net:{model}", "--clean", str(work / "clean.npz"),
           "--test", test, *method, *extra, "--out", str(out)]  # fmt: skip
    assert main(fit) == 0, capsys.readouterr().err
    score = ["score", "--model", f"twosample_net:{model}", "--detector", str(out),
             "--batch", str(work / "dark.npz"), "--json"]  # fmt: skip
    code = main(score)
    record = json.loads(capsys.readouterr().out)
    assert record["test"] == test and code == int(record["shift"])
    assert 0 < record["p_value"] <= 1 and np.isfinite(record["statistic"])
    if test == "energy":
        assert record["features"] is None and record["p_value"] >= 1 / 100
    else:
        assert record["correction"] == ("fdr" if test == "ad" else "bonferroni")
        assert len(record["features"]) == (1 if test == "fisher" else 10)


def test_score_without_a_detector_runs_cvm(work, capsys):
    score = ["score", "--model", "twosample_net:mlp", "--clean", str(work / "clean.npz"),
             "--batch", str(work / "dark.npz"), "--method", "softmax", "--test", "cvm", "--json"]  # fmt: skip
    assert main(score) in (0, 1)
    assert json.loads(capsys.readouterr().out)["test"] == "cvm"


def test_fisher_refuses_features_that_are_not_binary(work, tmp_path, capsys):
    out = tmp_path / "d.npz"
    fit = ["fit", "--model", "twosample_net:mlp", "--clean", str(work / "clean.npz"),
           "--test", "fisher", "--out", str(out)]  # fmt: skip
    assert main(fit) == 2
    assert "values other than 0 and 1" in capsys.readouterr().err and not out.exists()
