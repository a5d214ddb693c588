"""Any torch network: three networks no one here wrote, from Python and the shell.

pytorch/examples' MNIST ``Net`` (two convolutions, max-pool, dropout, fc 9216-128-10,
``log_softmax``, its own ``forward``), torchvision's ``resnet18(num_classes=10)`` and an MLP
with LayerNorm and GELU, all with random weights (no download). The head TU/DGP/MAGDiff read
is found with forward hooks and verified on the references; Softmax and BBSD use the
network's output whole. From the shell: a factory ``anynets:NAME`` written here, two
commands each (``fit --test T``, ``score --detector``) for every test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from dgpbench.cli.main import main
from dgpbench.features.registry import make_features
from dgpbench.models.body_head import find_head, output_kind

torchvision = pytest.importorskip("torchvision")

NETS = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Net(nn.Module):  # pytorch/examples, mnist/main.py
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)


    class LayerNormMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(64)
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, 16)
            self.out = nn.Linear(16, 10)

        def forward(self, x):
            x = self.norm(x.flatten(1))
            return self.out(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


    def net():
        torch.manual_seed(0)
        return Net().eval()


    def resnet():
        import torchvision

        torch.manual_seed(0)
        return torchvision.models.resnet18(num_classes=10).eval()


    def mlp():
        torch.manual_seed(0)
        return LayerNormMLP().eval()
    """
)

#: factory -> image shape; the head the hooks must find and its activations.
SHAPES = {"net": (1, 28, 28), "resnet": (3, 16, 16), "mlp": (1, 8, 8)}  # small: fast
HEADS = {
    "net": (("fc1", "fc2"), ("relu", "identity"), "log_softmax"),
    "resnet": (("fc",), ("identity",), "logits"),
    "mlp": (("fc1", "fc2", "out"), ("gelu", "gelu", "identity"), "logits"),
}


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    folder = tmp_path_factory.mktemp("anynets")
    (folder / "anynets.py").write_text(NETS)
    sys.path.insert(0, str(folder))
    try:
        import anynets

        yield folder, anynets
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("anynets", None)


def _images(shape, n, seed, noise=0.0):
    rng = np.random.default_rng(seed)
    x = rng.beta(2, 5, size=(n, *shape)).astype(np.float32)
    if noise:
        x = np.clip(x + noise * rng.normal(size=x.shape), 0, 1).astype(np.float32)
    return x


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_head_is_found_and_its_graph_computes_the_networks_logits(nets, name):
    _, anynets = nets
    network = getattr(anynets, name)()
    x = _images(SHAPES[name], 12, 0)
    body, graph, split = find_head(network, x)
    head, acts, kind = HEADS[name]
    assert (split["head"], split["activations"], split["output"]) == (head, acts, kind)
    with torch.no_grad():
        out = network(torch.from_numpy(x)).double()
    logits = torch.from_numpy(graph.forward(body(x))).double()
    # the body runs the network up to the head's input; the head's graph gives the logits
    # (softmax(log_softmax(z)) = softmax(z), so the probabilities agree whatever the output)
    torch.testing.assert_close(logits.softmax(1), out.softmax(1), rtol=1e-4, atol=1e-5)
    assert output_kind(out) == kind


def test_a_named_head_that_is_no_chain_is_refused_naming_the_modules(nets):
    _, anynets = nets
    x = _images(SHAPES["mlp"], 8, 0)
    with pytest.raises(ValueError, match=r"head \['fc1', 'out'\] is not a chain.*fc1"):
        find_head(anynets.mlp(), x, head=["fc1", "out"])
    with pytest.raises(ValueError, match=r"not among the model's nn.Linear modules"):
        find_head(anynets.mlp(), x, head=["norm"])
    # a head that is a chain but ends elsewhere than the output
    with pytest.raises(ValueError, match=r"output comes from 'out', not 'fc2'"):
        find_head(anynets.mlp(), x, head=["fc1", "fc2"])
    _, graph, split = find_head(anynets.mlp(), x, head=["fc2", "out"])
    assert split["head"] == ("fc2", "out") and graph.layer_sizes == (32, 16, 10)


def test_a_link_through_a_non_elementwise_layer_is_not_in_the_default_head(caplog):
    class Mixed(torch.nn.Module):  # LayerNorm between the linear maps: not element-wise
        def __init__(self):
            super().__init__()
            self.a, self.norm, self.b = (
                torch.nn.Linear(6, 5),
                torch.nn.LayerNorm(5),
                torch.nn.Linear(5, 3),
            )

        def forward(self, x):
            return self.b(torch.relu(self.norm(self.a(x))))

    torch.manual_seed(0)
    x = np.random.default_rng(0).normal(size=(20, 6)).astype(np.float32)
    _, graph, split = find_head(Mixed().eval(), x)
    assert split["head"] == ("b",) and graph.layer_sizes == (5, 3)
    assert "the linear map(s) a run in the body" in caplog.text
    with pytest.raises(ValueError, match=r"output of 'a'.*is not the input of 'b'"):
        find_head(Mixed().eval(), x, head=["a", "b"])


def test_an_in_place_op_between_the_linear_maps_keeps_them_apart(caplog):
    class InPlace(torch.nn.Module):  # fc1's output is negated in place before fc2 reads it
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)

        def forward(self, x):
            h = self.fc1(x)
            h.neg_()
            return self.fc2(torch.relu(h))

    torch.manual_seed(0)
    network = InPlace().eval()
    x = np.random.default_rng(0).normal(size=(20, 6)).astype(np.float32)
    body, graph, split = find_head(network, x)
    assert split["head"] == ("fc2",) and graph.layer_sizes == (8, 3)
    assert "the linear map(s) fc1 run in the body" in caplog.text
    with torch.no_grad():
        out = network(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(graph.forward(body(x)), out, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"head \['fc1', 'fc2'\] is not a chain"):
        find_head(network, x, head=["fc1", "fc2"])


@pytest.mark.parametrize(
    ("name", "methods"),
    [("net", ["softmax", "magdiff", "bbsdh"]), ("resnet", ["softmax", "dgp"]),
     ("mlp", ["softmax", "tu", "dgp", "magdiff", "bbsdh"])],
)  # fmt: skip
def test_every_method_takes_the_networks_from_python(nets, name, methods):
    _, anynets = nets
    network = getattr(anynets, name)()
    x, y = _images(SHAPES[name], 20, 0), np.arange(20) % 10
    for method in methods:
        feats = make_features(method, network).fit(x, None if method == "bbsdh" else y)
        out = feats.transform(x[:5])
        assert out.shape[0] == 5 and np.isfinite(out).all()
        if method == "softmax":  # the network's own probabilities, log_softmax or not
            with torch.no_grad():
                probs = network(torch.from_numpy(x[:5])).softmax(1).double().numpy()
            np.testing.assert_allclose(out, probs, rtol=1e-4, atol=1e-6)


def test_normalisation_inside_a_sequential_factory_keeps_the_channel_axis():
    # Sequential(Normalize(), conv...) on (N, H, W) images gets (N, 1, H, W)
    class Normalize(torch.nn.Module):
        def forward(self, x):
            return (x - 0.1307) / 0.3081

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        Normalize(), torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 10),
    ).eval()  # fmt: skip
    x = _images((8, 8), 16, 0)  # (N, H, W)
    feats = make_features("tu", net).fit(x, np.arange(16) % 10)
    assert feats.body_input_shape_ == (1, 8, 8) and feats.transform(x).shape == (16, 10)


def _shell_run(folder, name, test, *extra):
    """Two commands: fit a detector, score a clean and a noisy batch with it."""
    shape = SHAPES[name]
    files = {}
    for key, n, seed, noise in (
        ("clean", 40, 1, 0),
        ("b_clean", 30, 2, 0),
        ("b_noisy", 30, 3, 0.5),
    ):
        files[key] = folder / f"{name}_{key}.npz"
        if not files[key].exists():
            np.savez(files[key], x=_images(shape, n, seed, noise))
    det = folder / f"{name}_{test}.npz"
    fit = ["fit", "--model", f"anynets:{name}", "--clean", str(files["clean"]), "--test", test,
           "--out", str(det), "--threads", "1", *extra]  # fmt: skip
    assert main(fit) == 0
    return det, files


@pytest.mark.parametrize("test", ["ks", "mmd", "chi2", "classif"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_every_test_from_the_shell_in_two_commands(nets, name, test, capsys):
    folder, _ = nets
    extra = {"ks": ["--method", "softmax"], "mmd": ["--method", "softmax", "--permutations", "200"]}
    det, files = _shell_run(folder, name, test, *extra.get(test, []))
    code = main(["score", "--detector", str(det), "--model", f"anynets:{name}", "--batch",
                 str(files["b_clean"]), str(files["b_noisy"]), "--json"])  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 and code == int(any(r["shift"] for r in records))
    keys = {"schema", "batch", "shift", "test", "method", "statistic", "p_value", "threshold",
            "alpha", "correction", "across", "n_refs", "n_clean", "n_batch", "features",
            "calibration", "provenance"}  # fmt: skip
    assert all(set(r) == keys and r["test"] == test for r in records)
    assert all(0 <= r["p_value"] <= 1 and r["provenance"]["detector_sha256"] for r in records)
    assert records[0]["batch"].endswith("b_clean.npz") and records[1]["n_batch"] == 30


def test_the_shell_in_a_fresh_process(nets, tmp_path):
    """The two commands as a user types them (a subprocess, the factory on PYTHONPATH)."""
    folder, _ = nets
    det, files = _shell_run(folder, "net", "ks", "--method", "softmax")
    env = {"PYTHONPATH": f"{folder}:{Path(__file__).resolve().parents[2]}", "PATH": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "dgpbench", "score", "--detector", str(det), "--model",
         "anynets:net", "--batch", str(files["b_noisy"]), "--json", "--threads", "1"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["shift"] == bool(proc.returncode)
