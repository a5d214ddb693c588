"""MLPGraph: reading torch MLPs, forward passes and explicit activation graphs."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench.topology.graphs import MLPGraph


def _net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(6, 5),
        nn.ReLU(),
        nn.Dropout(0.3),
        nn.Linear(5, 4),
        nn.Tanh(),
        nn.Sequential(nn.Linear(4, 4, bias=False), nn.LeakyReLU(0.2)),
        nn.Linear(4, 3),
        nn.Sigmoid(),
    ).eval()


def test_from_module_reads_weights_in_graph_orientation():
    net = _net()
    g = MLPGraph.from_module(net)
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert g.layer_sizes == (6, 5, 4, 4, 3)
    assert (g.n_inputs, g.n_outputs, g.n_layers) == (6, 3, 4)
    assert g.activations == ("relu", "tanh", "leaky_relu(0.2)", "sigmoid")
    for w, b, lin in zip(g.weights, g.biases, linears, strict=True):
        assert w.dtype == np.float32 and w.flags.c_contiguous
        assert np.array_equal(w, lin.weight.detach().numpy().T)
        expected_b = np.zeros(lin.out_features) if lin.bias is None else lin.bias.detach().numpy()
        assert np.array_equal(b, expected_b)
    for w, wt in zip(g.weights, g.weights_t, strict=True):
        assert np.array_equal(wt, w.T) and wt.flags.c_contiguous


def test_forward_and_layer_inputs_match_torch():
    net = _net(1)
    g = MLPGraph.from_module(net)
    X = np.random.default_rng(0).normal(size=(17, 6)).astype(np.float32)
    captured = []
    hooks = [
        m.register_forward_pre_hook(lambda mod, inp: captured.append(inp[0].detach().numpy()))
        for m in net.modules()
        if isinstance(m, nn.Linear)
    ]
    with torch.no_grad():
        out = net(torch.from_numpy(X)).numpy()
    for h in hooks:
        h.remove()
    inputs = g.layer_inputs(X)
    assert len(inputs) == 4
    for a, ref in zip(inputs, captured, strict=True):
        assert a.dtype == np.float32 and a.shape == ref.shape
        np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-6)
    assert np.array_equal(inputs[0], X)
    np.testing.assert_allclose(g.forward(X), out, rtol=1e-5, atol=1e-6)


def test_layer_inputs_do_not_depend_on_the_batch():
    g = MLPGraph.from_module(_net(2))
    X = np.random.default_rng(1).normal(size=(40, 6)).astype(np.float32)
    whole = g.layer_inputs(X)
    parts = [g.layer_inputs(X[i : i + 7]) for i in range(0, 40, 7)]
    for layer, a in enumerate(whole):
        np.testing.assert_allclose(
            a, np.concatenate([p[layer] for p in parts]), rtol=1e-6, atol=1e-7
        )


def test_activation_graphs_explicit():
    g = MLPGraph.from_module(_net(3))
    x = np.random.default_rng(2).normal(size=6)
    inputs = g.layer_inputs(x[None, :].astype(np.float32))
    graphs = g.activation_graphs(x)
    signed = g.activation_graphs(x, signed=True)
    assert [G.shape for G in graphs] == [(6, 5), (5, 4), (4, 4), (4, 3)]
    for a, w, G, Gs in zip(inputs, g.weights, graphs, signed, strict=True):
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                assert Gs[i, j] == np.float32(a[0, i] * w[i, j])
                assert G[i, j] == abs(Gs[i, j])
    assert (graphs[1] >= 0).all() and (signed[0] < 0).any()


def test_gelu_identity_and_chained_activations():
    net = nn.Sequential(
        nn.Linear(3, 3), nn.GELU(approximate="tanh"), nn.Identity(), nn.Linear(3, 2)
    )
    net2 = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.ReLU(), nn.Linear(3, 2), nn.GELU())
    g = MLPGraph.from_module(net)
    g2 = MLPGraph.from_module(net2)
    assert g.activations == ("gelu(tanh)", "identity")
    assert g2.activations == ("tanh+relu", "gelu")
    X = np.random.default_rng(3).normal(size=(5, 3)).astype(np.float32)
    with torch.no_grad():
        for graph, model in [(g, net), (g2, net2)]:
            np.testing.assert_allclose(
                graph.forward(X), model(torch.from_numpy(X)).numpy(), rtol=1e-5, atol=1e-6
            )


@pytest.mark.parametrize(
    ("modules", "match"),
    [
        ([nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)], r"layer 1 \(BatchNorm1d\)"),
        ([nn.Linear(3, 3), nn.Softmax(dim=1)], r"layer 1 \(Softmax\)"),
        ([nn.Linear(3, 3), nn.Sequential(nn.ReLU(), nn.Conv1d(1, 1, 1))], r"layer 1\.1 \(Conv1d\)"),
        ([nn.ReLU(), nn.Linear(3, 2)], r"layer 0 \(ReLU\).*before the first"),
    ],
)
def test_unsupported_layers_raise_type_error(modules, match):
    with pytest.raises(TypeError, match=match):
        MLPGraph.from_module(nn.Sequential(*modules))


def test_non_sequential_and_empty_models():
    with pytest.raises(TypeError, match=r"nn\.Sequential"):
        MLPGraph.from_module(nn.Linear(3, 2))
    with pytest.raises(ValueError, match=r"no nn\.Linear"):
        MLPGraph.from_module(nn.Sequential(nn.Dropout()))
    with pytest.raises(ValueError, match="in_features=4"):
        MLPGraph.from_module(nn.Sequential(nn.Linear(3, 3), nn.Linear(4, 2)))


def test_constructor_validation():
    w = [np.ones((3, 2)), np.ones((2, 2))]
    b = [np.zeros(2), np.zeros(2)]
    g = MLPGraph(w, b, ["relu", "identity"])
    assert isinstance(g.weights, tuple) and g.weights[0].dtype == np.float32
    with pytest.raises(ValueError, match=r"weights\[1\] has shape \(3, 2\).*ragged"):
        MLPGraph([np.ones((3, 2)), np.ones((3, 2))], b, ["relu", "identity"])
    with pytest.raises(ValueError, match=r"biases\[0\] has shape"):
        MLPGraph(w, [np.zeros(3), np.zeros(2)], ["relu", "identity"])
    with pytest.raises(ValueError, match="equal lengths"):
        MLPGraph(w, b, ["relu"])
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        MLPGraph(w, b, ["swish", "identity"])
    with pytest.raises(ValueError, match=r"weights\[0\] contains NaN"):
        MLPGraph([np.full((3, 2), np.nan), np.ones((2, 2))], b, ["relu", "identity"])
    with pytest.raises(ValueError, match="at least one"):
        MLPGraph([], [], [])


def test_pickle_round_trip():
    g = MLPGraph.from_module(_net(4))
    X = np.random.default_rng(5).normal(size=(3, 6)).astype(np.float32)
    out = g.forward(X)  # fills the caches, which must not break pickling
    h = pickle.loads(pickle.dumps(g))
    assert h.activations == g.activations and h.layer_sizes == g.layer_sizes
    assert np.array_equal(h.forward(X), out)
    assert not h.weights[0].flags.writeable


def test_graph_is_frozen_and_read_only():
    g = MLPGraph.from_module(_net())
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.weights = ()  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        g.weights[0][0, 0] = 1.0
    assert MLPGraph.from_module(g) is g


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.ones((2, 5)), "X has 5 features per sample, the network expects 6"),
        (np.ones(6), "X must have 2 dimensions"),
        (np.full((2, 6), np.nan), "X contains NaN"),
        (np.ones((0, 6)), "X must not be empty"),
    ],
)
def test_layer_inputs_bad_input(X, match):
    g = MLPGraph.from_module(_net())
    with pytest.raises(ValueError, match=match):
        g.layer_inputs(X)


def test_activation_graphs_bad_input():
    g = MLPGraph.from_module(_net())
    with pytest.raises(ValueError, match="x must have 1 dimensions"):
        g.activation_graphs(np.ones((1, 6)))
    with pytest.raises(ValueError, match="x has 5 features"):
        g.activation_graphs(np.ones(5))


class _Doubling(nn.Sequential):
    def forward(self, x):
        return 2 * super().forward(x)


class _ScaledLinear(nn.Linear):
    def forward(self, x):
        return 3 * super().forward(x)


class _ShiftedReLU(nn.ReLU):
    def forward(self, x):
        return super().forward(x) + 1


class _PlainSubclass(nn.Sequential):
    """A subclass that only adds a method: its forward is nn.Sequential's."""

    def describe(self):
        return "plain"


@pytest.mark.parametrize(
    ("model", "where"),
    [
        (_Doubling(nn.Linear(3, 2)), r"^model \(_Doubling\)"),
        (nn.Sequential(_Doubling(nn.Linear(3, 2))), r"model layer 0 \(_Doubling\)"),
        (nn.Sequential(_ScaledLinear(3, 2)), r"model layer 0 \(_ScaledLinear\)"),
        (nn.Sequential(nn.Linear(3, 2), _ShiftedReLU()), r"model layer 1 \(_ShiftedReLU\)"),
    ],
)
def test_a_custom_forward_is_refused_not_ignored(model, where):
    with pytest.raises(TypeError, match=where + ".*overrides.*forward"):
        MLPGraph.from_module(model)


def test_a_subclass_without_its_own_forward_is_read():
    model = _PlainSubclass(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 2))
    x = torch.rand(4, 3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        np.testing.assert_allclose(MLPGraph.from_module(model).forward(x), model(x), rtol=1e-6)
