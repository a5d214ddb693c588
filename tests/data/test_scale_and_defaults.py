"""One scale rule for uint8 images, one default delta set, a warning for missing classes."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from dgpbench import DGPFeatures, SoftmaxFeatures
from dgpbench.data.datasets import load_npz_images
from dgpbench.paper.protocol import DELTAS, bootstrap_detection

ROOT = Path(__file__).resolve().parents[2]


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(16, 6), nn.ReLU(), nn.Linear(6, 3)).eval()


@pytest.fixture
def images() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(30, 1, 4, 4), dtype=np.uint8), np.arange(30) % 3


@pytest.mark.parametrize("cls", [DGPFeatures, SoftmaxFeatures])
def test_uint8_arrays_scale_like_npz_files(tmp_path, images, cls) -> None:
    x8, y = images
    np.savez(tmp_path / "b.npz", x=x8)
    from_file = load_npz_images(tmp_path / "b.npz")
    est = cls(_net()).fit(from_file, y)
    want = est.transform(from_file)
    np.testing.assert_array_equal(cls(_net()).fit(x8, y).transform(x8), want)
    np.testing.assert_array_equal(est.transform(torch.from_numpy(x8)), want)
    # 0-255 floats are not rescaled: the rule is about the dtype, as for .npz files
    assert not np.array_equal(est.transform(x8.astype(np.float32)), want)


def test_default_deltas_are_the_pooled_default() -> None:
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert list(DELTAS) == [0.25, 0.5, 1.0] == config["report"]["pool_deltas"]
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(200, 2))
    rec = bootstrap_detection(clean, clean + 1.0, ns=[10], n_draws=2)
    assert sorted(rec["delta"].unique()) == [0.25, 0.5, 1.0]


def test_missing_reference_classes_are_named(images) -> None:
    x8, y = images
    keep = y != 1
    with pytest.warns(UserWarning, match=r"reference labels have no image of class \[1\]"):
        est = DGPFeatures(_net()).fit(x8[keep], y[keep])
    assert est.transform(x8).shape == (30, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DGPFeatures(_net()).fit(x8, y)  # every class present: silent
        SoftmaxFeatures(_net()).fit(x8[keep], y[keep])  # softmax vectors: no class means used
