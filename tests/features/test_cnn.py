"""Networks with a convolutional body: the head's TU/DGP/MAGDiff features equal an MLP's on the
body's outputs (exactly), Softmax uses the whole network, the split rule, the CNN family's
training and checkpoints, and the error paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench.data.datasets import load_dataset
from dgpbench.features.registry import METHODS, make_features
from dgpbench.features.softmax import SoftmaxFeatures
from dgpbench.models.architectures import CNNConfig, build_cnn
from dgpbench.models.body_head import split_network
from dgpbench.models.checkpoints import load_checkpoint, save_checkpoint
from dgpbench.models.train import shift_detection_config, train_mlp

GRAPH_METHODS = ["tu", "tu_norm", "magdiff", "magdiff_signed", "dgp", "dgp_nonorm"]


@pytest.fixture(scope="module")
def images():
    x, y = load_dataset("digits", split="test")
    return x[:120], y[:120], x[120:180]


def _cnn(seed: int = 0) -> nn.Sequential:
    net = build_cnn(
        CNNConfig((1, 8, 8), hidden=12, n_layers=3, n_classes=10),
        torch.Generator().manual_seed(seed),
    )
    return net.eval()


def _custom_cnn() -> nn.Sequential:
    """Convolutions first (image input), nested containers, an activation before Flatten."""
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3),
        nn.Tanh(),
        nn.Sequential(nn.Conv2d(4, 3, 3), nn.ReLU(), nn.Flatten()),
        nn.Sequential(nn.Linear(48, 9), nn.ReLU()),
        nn.Dropout(0.5),
        nn.Linear(9, 10),
    ).eval()


def _body_outputs(body: nn.Module, x: np.ndarray) -> np.ndarray:
    """The documented rule: the body in float32 on zero-padded chunks of NetworkBody.chunk."""
    import copy

    from dgpbench.models.body_head import NetworkBody

    body = copy.deepcopy(body).float().eval()
    c = NetworkBody.chunk
    out = []
    with torch.no_grad():
        for i in range(0, len(x), c):
            padded = torch.zeros((c, *x.shape[1:]))
            padded[: len(x[i : i + c])] = torch.from_numpy(x[i : i + c])
            out.append(body(padded)[: len(x[i : i + c])].numpy())
    return np.concatenate(out)


def _cases():
    cnn = _cnn()
    custom = _custom_cnn()
    return {
        "workflow_cnn": (cnn, cnn.body, cnn.head),
        "custom_sequential": (custom, custom[:3], nn.Sequential(*custom[3], custom[4], custom[5])),
        "pair": ((cnn.body, cnn.head), cnn.body, cnn.head),
    }


@pytest.mark.parametrize("case", ["workflow_cnn", "custom_sequential", "pair"])
@pytest.mark.parametrize("method", GRAPH_METHODS)
@pytest.mark.parametrize("representation", ["distances", "raw"])
def test_head_features_equal_the_mlp_of_the_head_on_body_outputs(
    case, method, representation, images
):
    x_ref, y_ref, x_test = images
    model, body, head = _cases()[case]
    got = make_features(method, model, representation=representation).fit(x_ref, y_ref)
    want = make_features(method, head, representation=representation).fit(
        _body_outputs(body, x_ref), y_ref
    )
    np.testing.assert_array_equal(
        got.transform(x_test), want.transform(_body_outputs(body, x_test))
    )
    assert got.n_features_in_ == 64 and got.graph_.layer_sizes == want.graph_.layer_sizes


def test_softmax_uses_the_whole_network(images):
    x_ref, y_ref, x_test = images
    net = _cnn()
    p = SoftmaxFeatures(net).fit(x_ref, y_ref).transform(x_test)
    with torch.no_grad():
        want = torch.softmax(net.double()(torch.from_numpy(x_test).double()), dim=1).numpy()
    np.testing.assert_allclose(p, want, rtol=1e-5, atol=1e-7)


def test_features_do_not_depend_on_the_batch_size_or_input_layout(images):
    x_ref, y_ref, x_test = images
    net = _cnn(3)
    a = make_features("dgp", net, batch_size=7).fit(x_ref, y_ref).transform(x_test)
    b = make_features("dgp", net, batch_size=256).fit(x_ref, y_ref)
    np.testing.assert_array_equal(a, b.transform(x_test))
    np.testing.assert_array_equal(a, b.transform(x_test.reshape(len(x_test), -1)))


@pytest.mark.parametrize("method", ["softmax", "dgp"])
def test_a_samples_features_do_not_depend_on_its_batch(images, method):
    """The float32 body runs on fixed, padded chunks: alone, reversed or in a batch of 70
    (two chunks), a sample gets bit-identical features."""
    x_ref, y_ref, x_test = images
    est = make_features(method, _cnn(3)).fit(x_ref, y_ref)
    batch = np.concatenate([x_test, x_ref[:10]])
    whole = est.transform(batch)
    np.testing.assert_array_equal(est.transform(batch[::-1]), whole[::-1])
    for i in (0, 1, 63, 64, 69):
        np.testing.assert_array_equal(est.transform(batch[i : i + 1]), whole[i : i + 1])


def test_the_model_is_not_modified(images):
    x_ref, y_ref, _ = images
    net = _cnn()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    make_features("tu", net).fit(x_ref, y_ref)
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) and after[k].dtype == torch.float32 for k in before)


def test_a_plain_mlp_has_no_body():
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.ReLU(), nn.Dropout(), nn.Linear(8, 3))
    body, head = split_network(mlp)
    assert body is None and head.layer_sizes == (64, 8, 3)


def test_the_head_is_the_longest_trailing_mlp():
    body, head = split_network(_custom_cnn())
    assert head.layer_sizes == (48, 9, 10) and head.activations == ("relu", "identity")
    out = body(np.zeros((2, 1, 8, 8), np.float32))
    assert out.shape == (2, 48) and out.dtype == np.float32


@pytest.mark.parametrize(
    ("model", "error", "match"),
    [
        (nn.Sequential(nn.Linear(4, 4), nn.Conv1d(1, 1, 1)), ValueError, "does not end in an MLP"),
        (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Linear(6, 2)), ValueError, "not \\(N, features\\)"),
        ((np.eye(3), nn.Sequential(nn.Linear(3, 2))), TypeError, "body of a \\(body, head\\) pair"),
        # any module is run: one that cannot take the images says so
        (nn.Linear(3, 2), ValueError, r"cannot take input of shape \(120, 8, 8\)"),
    ],
)
def test_bad_models_are_clear_errors(model, error, match, images):
    x_ref, y_ref, _ = images
    with pytest.raises(error, match=match):
        make_features("tu", model).fit(x_ref, y_ref)


def test_sequential_subclass_with_its_own_forward_is_run_not_read():
    # its modules need not run in order, so it is split by running it (find_head)
    class Reversed(nn.Sequential):
        def forward(self, x):
            for m in reversed(self):
                x = m(x)
            return x

    torch.manual_seed(0)
    net = Reversed(nn.Linear(5, 3), nn.ReLU(), nn.Linear(4, 5)).eval()
    body, head = split_network(net)
    assert head is None and body is not None  # the whole network, split on data
    X = np.random.default_rng(0).uniform(size=(12, 4)).astype(np.float32)
    feats = make_features("tu", net).fit(X, [0, 1, 2] * 4)
    assert feats.head_ == ("2", "0") and feats.head_activations_ == ("relu", "identity")
    assert feats.graph_.layer_sizes == (4, 5, 3)


def test_body_that_cannot_take_the_input_names_the_shape(images):
    x_ref, y_ref, _ = images
    with pytest.raises(ValueError, match=r"body cannot take input of shape \(120, 64\)"):
        make_features("tu", _custom_cnn()).fit(x_ref.reshape(120, -1), y_ref)


def test_cnn_family_trains_with_the_mlp_protocol_and_round_trips(tmp_path, images):
    x, y = load_dataset("digits", split="train")
    arch = CNNConfig((1, 8, 8), hidden=16, n_layers=2, n_classes=10)
    config = shift_detection_config(epochs=2, seed=0, lr=1e-2)
    path = train_mlp(x, y, arch, config, tmp_path / "a", dataset="digits", progress=False)
    again = train_mlp(x, y, arch, config, tmp_path / "b", dataset="digits", progress=False)
    model, meta = load_checkpoint(path)
    assert meta["kind"] == "cnn" and CNNConfig(**meta["arch"]) == arch
    assert meta["metrics"]["val_acc"] > 0.3  # chance is 0.1
    # Same seed, same weights: up to float32 rounding, since oneDNN's convolution kernels
    # may sum in another order from one process state to the next (buffer alignment), which
    # shows in the last bit after training. A seeding fault moves weights by far more.
    for key, value in model.state_dict().items():
        torch.testing.assert_close(
            value, load_checkpoint(again)[0].state_dict()[key], rtol=1e-5, atol=1e-6
        )
    x_ref, y_ref, x_test = images
    via_path = make_features("dgp", path).fit(x_ref, y_ref).transform(x_test)
    np.testing.assert_array_equal(
        via_path, make_features("dgp", model).fit(x_ref, y_ref).transform(x_test)
    )


def test_mlp_checkpoints_keep_kind_mlp(tmp_path):
    from dgpbench.models.architectures import ArchConfig

    arch = ArchConfig(n_inputs=4, hidden=3, n_layers=2, n_classes=2)
    save_checkpoint(tmp_path / "m.pt", arch.build(), {"arch": arch})
    _, meta = load_checkpoint(tmp_path / "m.pt")
    assert meta["kind"] == "mlp"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"input_shape": (1, 8)}, "input_shape must be 3"),
        ({"input_shape": (1, 3, 3)}, "at least 4x4"),
        ({"channels": (8,)}, "channels must be 2"),
        ({"activation": "gelu"}, "activation"),
    ],
)
def test_bad_cnn_config(kwargs, match):
    base = {"input_shape": (1, 8, 8), "hidden": 4, "n_layers": 2, "n_classes": 3}
    with pytest.raises(ValueError, match=match):
        CNNConfig(**{**base, **kwargs})


def test_every_method_accepts_a_cnn(images):
    x_ref, y_ref, x_test = images
    for method in METHODS:
        out = make_features(method, _cnn()).fit(x_ref, y_ref).transform(x_test)
        assert out.shape[0] == len(x_test) and np.isfinite(out).all()


def test_fit_without_labels_uses_the_whole_networks_predictions(images):
    x_ref, _, x_test = images
    net = _cnn(2)
    with torch.no_grad():
        predicted = net.double()(torch.from_numpy(x_ref).double()).argmax(1).numpy()
    est = make_features("dgp", _cnn(2)).fit(x_ref)
    np.testing.assert_array_equal(est.classes_, np.unique(predicted))
    assert est.transform(x_test).shape == (len(x_test), len(est.classes_))
