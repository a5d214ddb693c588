"""Image batches must have the image shape the model (or the fit) used, exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench import DGPFeatures, SoftmaxFeatures, TUFeatures
from dgpbench.data.datasets import load_dataset
from dgpbench.models.architectures import build_mlp
from dgpbench.models.checkpoints import save_checkpoint


@pytest.fixture(scope="module")
def digits_checkpoint(tmp_path_factory):
    net = build_mlp(64, 8, 2, 10, generator=torch.Generator().manual_seed(0))
    arch = {"n_inputs": 64, "hidden": 8, "n_layers": 2, "n_classes": 10}
    path = tmp_path_factory.mktemp("shapes") / "model.pt"
    return save_checkpoint(path, net, {"arch": arch, "dataset": "digits"})


@pytest.fixture(scope="module")
def digits():
    x, y = load_dataset("digits", split="test")
    return x[:60], y[:60]


@pytest.mark.parametrize("bad", [(1, 4, 16), (16, 4), (4, 16), (2, 8, 4)])
def test_a_checkpoint_with_a_known_image_shape_checks_every_layout(digits_checkpoint, digits, bad):
    x, y = digits
    est = TUFeatures(digits_checkpoint).fit(x, y)
    with pytest.raises(ValueError, match=r"trained on \(C, H, W\) = \(1, 8, 8\)"):
        est.transform(x.reshape(len(x), *bad))


def test_a_checkpoint_accepts_its_own_shape_in_every_spelling(digits_checkpoint, digits):
    x, y = digits
    est = TUFeatures(digits_checkpoint).fit(x, y)
    expected = est.transform(x)
    for shape in ((1, 8, 8), (8, 8), (64,)):
        np.testing.assert_array_equal(est.transform(x.reshape(len(x), *shape)), expected)


def test_a_bare_model_remembers_the_image_shape_of_fit():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(48, 6), nn.ReLU(), nn.Linear(6, 3))
    X = np.random.default_rng(0).uniform(size=(30, 3, 4, 4)).astype(np.float32)
    est = DGPFeatures(net).fit(X, [0, 1, 2] * 10)
    with pytest.raises(ValueError, match=r"fitted on images of shape \(3, 4, 4\)"):
        est.transform(X.reshape(30, 4, 4, 3))
    with pytest.raises(ValueError, match=r"fitted on images of shape"):
        est.transform(X.reshape(30, 3, 2, 8))
    flat = est.transform(X.reshape(30, -1))  # flattened input carries no layout
    np.testing.assert_array_equal(flat, est.transform(X))


def test_a_users_cnn_takes_images_without_a_channel_axis():
    torch.manual_seed(0)
    cnn = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(32, 6), nn.ReLU(), nn.Linear(6, 3),
    )  # fmt: skip
    X = np.random.default_rng(1).uniform(size=(24, 8, 8)).astype(np.float32)
    y = [0, 1, 2] * 8
    for cls in (TUFeatures, SoftmaxFeatures):
        hw = cls(cnn).fit(X, y).transform(X)
        chw = cls(cnn).fit(X[:, None], y).transform(X[:, None])
        np.testing.assert_array_equal(hw, chw)
