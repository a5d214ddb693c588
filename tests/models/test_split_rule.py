"""The body/head rule never cuts an MLP short: a one-layer graph only when asked for.

The head (the layers TU/DGP/MAGDiff read) must hold every ``nn.Linear`` unless the part
before it holds a layer no MLP graph can (convolution, pooling, ...), or the user passes
``(body, head)``; otherwise the error names the unsupported layer.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench import DGPFeatures, TUFeatures
from dgpbench.models.body_head import split_network


def _seeded(*modules):
    torch.manual_seed(0)
    return nn.Sequential(*modules)


@pytest.mark.parametrize(
    ("layer", "name"),
    [
        (nn.SiLU(), "SiLU"),
        (nn.ELU(), "ELU"),
        (nn.Softplus(), "Softplus"),
    ],
)
def test_an_unsupported_layer_between_linear_maps_is_an_error_naming_it(layer, name):
    net = _seeded(nn.Linear(4, 6), layer, nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3)).eval()
    with pytest.raises(TypeError, match=rf"model layer 1 \({name}\).*drop the linear map\(s\) 0"):
        split_network(net)
    X, y = np.random.default_rng(0).uniform(size=(12, 4)).astype(np.float32), [0, 1, 2] * 4
    with pytest.raises(TypeError, match=name):
        TUFeatures(net).fit(X, y)


@pytest.mark.parametrize("norm", [nn.BatchNorm1d(6), nn.LayerNorm(6)], ids=["batch", "layer"])
def test_a_normalisation_layer_between_linear_maps_makes_a_body_with_a_warning(norm, caplog):
    # BatchNorm/LayerNorm mix a sample's units (or batch statistics): not an
    # element-wise layer of the graph but a body; the warning names the linear map left there
    net = _seeded(nn.Linear(4, 6), norm, nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3)).eval()
    with caplog.at_level(logging.INFO, logger="dgpbench.models.body_head"):
        body, graph = split_network(net)
    assert body is not None and graph.layer_sizes == (6, 6, 3)
    [record] = [r for r in caplog.records if r.name == "dgpbench.models.body_head"]
    assert record.levelno == logging.WARNING and "linear map(s) 0" in record.getMessage()
    X = np.random.default_rng(0).uniform(size=(12, 4)).astype(np.float32)
    assert TUFeatures(net).fit(X, [0, 1, 2] * 4).transform(X).shape == (12, 3)


def test_a_silu_mlp_is_refused_not_cut_to_its_last_map():
    net = _seeded(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 6), nn.SiLU(), nn.Linear(6, 3))
    with pytest.raises(TypeError, match=r"model layer 3 \(SiLU\).*linear map\(s\) 0, 2"):
        split_network(net)


def test_an_explicit_body_head_pair_still_chooses_the_graph():
    body = nn.Sequential(nn.Linear(4, 6), nn.SiLU())
    head = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3))
    found_body, graph = split_network((body, head))
    assert found_body is not None and graph.layer_sizes == (6, 6, 3)


def test_a_conv_body_with_linear_maps_is_allowed_and_warns_which_layers_form_the_graph(caplog):
    net = _seeded(
        nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(),
        nn.Linear(32, 8), nn.SiLU(), nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3),
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="dgpbench.models.body_head"):
        body, graph = split_network(net)
    assert body is not None and graph.layer_sizes == (8, 6, 3)
    [record] = [r for r in caplog.records if r.name == "dgpbench.models.body_head"]
    assert record.levelno == logging.WARNING
    assert "5..7" in record.getMessage() and "linear map(s) 3" in record.getMessage()


def test_a_plain_cnn_split_logs_the_graph_at_info(caplog):
    net = _seeded(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 5),
                  nn.ReLU(), nn.Linear(5, 3))  # fmt: skip
    with caplog.at_level(logging.INFO, logger="dgpbench.models.body_head"):
        split_network(net)
    [record] = [r for r in caplog.records if r.name == "dgpbench.models.body_head"]
    assert (
        record.levelno == logging.INFO
        and "TU/DGP/MAGDiff use the layers 3..5" in record.getMessage()
    )


def test_supported_mlps_and_input_side_layers_keep_every_linear_map():
    # a BatchNorm1d before the first linear map is a body; every linear map is in the graph
    net = _seeded(nn.BatchNorm1d(4), nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 3)).eval()
    body, graph = split_network(net)
    assert body is not None and graph.layer_sizes == (4, 6, 3)
    mlp = _seeded(nn.Flatten(), nn.Linear(4, 6), nn.Tanh(), nn.Dropout(0.1), nn.Linear(6, 3))
    body, graph = split_network(mlp)
    assert body is None and graph.layer_sizes == (4, 6, 3)
    X = np.random.default_rng(0).uniform(size=(9, 4)).astype(np.float32)
    assert DGPFeatures(mlp).fit(X, [0, 1, 2] * 3).transform(X).shape == (9, 3)
