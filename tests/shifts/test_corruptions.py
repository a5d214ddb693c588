"""Tests of dgpbench.shifts.corruptions: each corruption's statistics against its definition, the
blur against an independent convolution and against torchvision's transform, the paper's
table, determinism and the error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dgpbench.shifts.corruptions import (
    CORRUPTIONS,
    INTENSITIES,
    INTENSITY_TABLE,
    corrupt,
    corruption_code,
    corruption_params,
    corruption_rng,
)


def _const(value: float, shape=(200, 3, 16, 16)) -> np.ndarray:
    return np.full(shape, value, dtype=np.float32)


# ------------------------------------------------------------------------------------------
# the paper's table (appendix, "Technical details of image corruptions")
# ------------------------------------------------------------------------------------------
PAPER = {
    "mnist": {
        "GB_sigma": [0.35, 0.4, 0.5, 0.6, 0.7, 0.8],
        "GB_kernel": [(3, 3)] * 6,
        "noise_255": [25, 40, 55, 70, 85, 100],
    },
    "fashion-mnist": {
        "GB_sigma": [0.35, 0.4, 0.5, 0.6, 0.7, 0.8],
        "GB_kernel": [(3, 3)] * 6,
        "noise_255": [10, 20, 30, 40, 50, 60],
    },
    "cifar10": {
        "GB_sigma": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "GB_kernel": [(3, 3), (3, 5), (5, 5), (5, 7), (7, 7), (9, 9)],
        "noise_255": [30, 60, 85, 100, 120, 140],
    },
}


@pytest.mark.parametrize("dataset", list(PAPER))
def test_table_matches_the_paper(dataset):
    want = PAPER[dataset]
    for level in INTENSITIES:
        i = level - 1
        gb = corruption_params(dataset, "GB", level)
        assert gb == {"sigma": want["GB_sigma"][i], "kernel_size": want["GB_kernel"][i]}
        for code in ("GN", "UN"):
            sigma = corruption_params(dataset, code, level)["sigma"]
            assert sigma == pytest.approx(want["noise_255"][i] / 255)
        assert corruption_params(dataset, "PD", level) == {"p": pytest.approx(0.1 * level)}


@pytest.mark.parametrize("dataset", ["digits", "emnist", "npz:/some/file.npz"])
def test_datasets_without_a_table_use_mnist_values(dataset):
    for code in CORRUPTIONS:
        for level in INTENSITIES:
            assert corruption_params(dataset, code, level) == corruption_params(
                "mnist", code, level
            )


def test_params_are_copies():
    corruption_params("mnist", "GN", 1)["sigma"] = 99.0
    assert corruption_params("mnist", "GN", 1)["sigma"] == pytest.approx(25 / 255)
    assert INTENSITY_TABLE["mnist"]["gaussian_noise"][0]["sigma"] == pytest.approx(25 / 255)


def test_codes_and_long_names_are_interchangeable():
    for code, name in CORRUPTIONS.items():
        assert corruption_code(code) == corruption_code(name) == corruption_code(code.lower())
        assert corruption_params("cifar10", code, 4) == corruption_params("cifar10", name, 4)
        x = np.random.default_rng(0).random((3, 1, 8, 8), dtype=np.float32)
        np.testing.assert_array_equal(corrupt(x, code, 2, seed=3), corrupt(x, name, 2, seed=3))


# ------------------------------------------------------------------------------------------
# statistics against the definitions
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [1, 6])
def test_gaussian_noise_statistics(level):
    sigma = corruption_params("mnist", "GN", level)["sigma"]  # up to 100/255: 0.5 +- 1.3 sigma
    x = _const(0.5)
    noise = (corrupt(x, "GN", level, seed=1) - x).ravel().astype(np.float64)
    inside = np.abs(noise) < 0.5 - 1e-6  # values not touched by clipping
    n = noise.size
    assert abs(noise[inside].mean()) < 5 * sigma / math.sqrt(n)
    # Clipped normal: compare with a truncated normal on (-0.5, 0.5) via a KS test.
    trunc = stats.truncnorm(-0.5 / sigma, 0.5 / sigma, scale=sigma)
    assert stats.kstest(noise[inside], trunc.cdf).pvalue > 1e-3
    frac_clipped = 1 - inside.mean()
    assert frac_clipped == pytest.approx(2 * stats.norm.sf(0.5 / sigma), abs=5e-3)


def test_gaussian_noise_std_without_clipping():
    sigma = 10 / 255
    x = _const(0.5)
    noise = corrupt(x, "GN", 1, seed=2, params={"sigma": sigma}) - x
    assert noise.std() == pytest.approx(sigma, rel=0.01)
    assert np.abs(noise).max() < 0.5  # far from the bounds: no clipping happened


@pytest.mark.parametrize("code", ["GN", "UN"])
def test_noise_is_clipped_to_unit_interval(code):
    sigma = corruption_params("cifar10", code, 6)["sigma"]
    for value, bound in ((0.0, 0.0), (1.0, 1.0)):
        y = corrupt(_const(value), code, 6, dataset="cifar10", seed=4)
        assert y.min() >= 0.0 and y.max() <= 1.0
        # Half the draws push past the bound and are clipped onto it.
        assert (y == bound).mean() == pytest.approx(0.5, abs=0.01)
        if code == "UN":  # uniform noise is bounded by sigma; Gaussian noise is not
            assert np.abs(y - value).max() <= sigma + 1e-6


def test_uniform_noise_statistics():
    sigma = corruption_params("mnist", "UN", 6)["sigma"]  # 100/255 < 0.5: no clipping at 0.5
    x = _const(0.5)
    noise = (corrupt(x, "UN", 6, seed=5) - x).ravel().astype(np.float64)
    assert np.abs(noise).max() <= sigma + 1e-6
    assert stats.kstest(noise, stats.uniform(-sigma, 2 * sigma).cdf).pvalue > 1e-3
    assert noise.std() == pytest.approx(sigma / math.sqrt(3), rel=0.01)


@pytest.mark.parametrize("level", INTENSITIES)
def test_pixel_dropout_rate_and_channels(level):
    rng = np.random.default_rng(level)
    x = rng.uniform(0.1, 1.0, size=(100, 3, 16, 16)).astype(np.float32)  # no zero pixels
    y = corrupt(x, "PD", level, dataset="cifar10", seed=6)
    dropped = y == 0
    # A pixel is dropped in every channel or in none.
    assert np.all(dropped.all(axis=1) == dropped.any(axis=1))
    kept = ~dropped
    np.testing.assert_array_equal(y[kept], x[kept])
    p = 0.1 * level
    n = dropped[:, 0].size
    rate = dropped[:, 0].mean()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_pixel_dropout_extremes_via_params():
    x = np.random.default_rng(0).random((4, 2, 5, 5), dtype=np.float32)
    np.testing.assert_array_equal(corrupt(x, "PD", 1, params={"p": 0.0}), x)
    assert not corrupt(x, "PD", 1, params={"p": 1.0}).any()


# ------------------------------------------------------------------------------------------
# Gaussian blur
# ------------------------------------------------------------------------------------------
def _blur_oracle(x: np.ndarray, kx: int, ky: int, sigma: float) -> np.ndarray:
    """Direct definition: normalised sampled Gaussian, kx wide and ky tall, reflect padding."""

    def kernel1d(k):
        t = np.arange(k) - (k - 1) / 2
        g = np.exp(-0.5 * (t / sigma) ** 2)
        return g / g.sum()

    kernel = np.outer(kernel1d(ky), kernel1d(kx))  # rows along H, columns along W
    px, py = kx // 2, ky // 2
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (py, py), (px, px)), mode="reflect")
    out = np.zeros(x.shape, dtype=np.float64)
    h, w = x.shape[2:]
    for i in range(ky):
        for j in range(kx):
            out += kernel[i, j] * padded[:, :, i : i + h, j : j + w]
    return out


@pytest.mark.parametrize(("dataset", "level"), [("mnist", 1), ("cifar10", 2), ("cifar10", 4)])
def test_blur_equals_direct_convolution(dataset, level):
    params = corruption_params(dataset, "GB", level)
    kx, ky = params["kernel_size"]
    rng = np.random.default_rng(level)
    x = rng.random((5, 3, 12, 10), dtype=np.float32)  # H != W, kx != ky: orientation matters
    y = corrupt(x, "GB", level, dataset=dataset)
    np.testing.assert_allclose(y, _blur_oracle(x, kx, ky, params["sigma"]), atol=2e-6)
    if kx != ky:  # the transposed kernel gives something else
        wrong = _blur_oracle(x, ky, kx, params["sigma"])
        assert np.abs(y - wrong).max() > 1e-3


@pytest.mark.parametrize("level", INTENSITIES)
def test_blur_equals_torchvision_transform_per_image(level):
    # The authors' path: torchvision.transforms.GaussianBlur(kernel_size=κ, sigma=σ) per image.
    import torch
    from torchvision.transforms import GaussianBlur

    params = corruption_params("cifar10", "GB", level)
    x = np.random.default_rng(0).random((3, 3, 32, 32), dtype=np.float32)
    transform = GaussianBlur(kernel_size=params["kernel_size"], sigma=params["sigma"])
    expected = np.stack([transform(torch.from_numpy(img)).numpy() for img in x])
    np.testing.assert_allclose(corrupt(x, "GB", level, dataset="cifar10"), expected, atol=1e-6)


def test_blur_is_deterministic_and_keeps_constants():
    x = _const(0.3, (2, 1, 28, 28))
    a = corrupt(x, "GB", 6, seed=0)
    np.testing.assert_allclose(a, 0.3, atol=1e-6)
    y = np.random.default_rng(1).random((2, 1, 28, 28), dtype=np.float32)
    np.testing.assert_array_equal(corrupt(y, "GB", 3, seed=0), corrupt(y, "GB", 3, seed=9))


def test_blur_kernel_too_large_for_image():
    with pytest.raises(ValueError, match="too large"):
        corrupt(_const(0.5, (1, 1, 4, 4)), "GB", 6, dataset="cifar10")


# ------------------------------------------------------------------------------------------
# determinism and streams
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["GN", "UN", "PD"])
def test_same_seed_same_images_other_seed_other_images(code):
    x = np.random.default_rng(0).random((10, 1, 8, 8), dtype=np.float32)
    a = corrupt(x, code, 3, seed=11)
    np.testing.assert_array_equal(a, corrupt(x, code, 3, seed=11))
    assert not np.array_equal(a, corrupt(x, code, 3, seed=12))


def test_each_cell_has_its_own_stream():
    draws = {
        (code, level): corruption_rng(0, code, level).random(8)
        for code in CORRUPTIONS
        for level in INTENSITIES
    }
    flat = np.stack(list(draws.values()))
    assert len(np.unique(flat[:, 0])) == len(draws)
    # Gaussian noise at two intensities is not the same noise rescaled.
    x = _const(0.5, (50, 1, 8, 8))
    n1 = (corrupt(x, "GN", 1, seed=0) - x) / corruption_params("mnist", "GN", 1)["sigma"]
    n2 = (corrupt(x, "GN", 2, seed=0) - x) / corruption_params("mnist", "GN", 2)["sigma"]
    assert abs(np.corrcoef(n1.ravel(), n2.ravel())[0, 1]) < 0.05


def test_input_is_not_modified():
    x = np.random.default_rng(0).random((4, 3, 8, 8), dtype=np.float32)
    before = x.copy()
    for code in CORRUPTIONS:
        corrupt(x, code, 6)
    np.testing.assert_array_equal(x, before)


@settings(max_examples=40, deadline=None)
@given(
    code=st.sampled_from(list(CORRUPTIONS)),
    level=st.sampled_from(INTENSITIES),
    dataset=st.sampled_from(["mnist", "fashion-mnist", "cifar10", "digits"]),
    seed=st.integers(0, 2**31),
    shape=st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(9, 12), st.integers(9, 12)),
)
def test_output_shape_dtype_range(code, level, dataset, seed, shape):
    x = np.random.default_rng(seed).random(shape, dtype=np.float32)
    y = corrupt(x, code, level, dataset=dataset, seed=seed)
    assert y.shape == x.shape and y.dtype == np.float32
    assert y.min() >= 0.0 and y.max() <= 1.0


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["XX", "gaussian", "", None, 3])
def test_unknown_corruption(bad):
    with pytest.raises(ValueError, match="unknown corruption"):
        corrupt(_const(0.5, (1, 1, 8, 8)), bad, 1)


@pytest.mark.parametrize("bad", [0, 7, -1, 2.0, "3", True, None])
def test_intensity_outside_one_to_six(bad):
    with pytest.raises(ValueError, match="intensity must be an integer from 1 to 6"):
        corrupt(_const(0.5, (1, 1, 8, 8)), "GN", bad)
    with pytest.raises(ValueError, match="intensity"):
        corruption_params("mnist", "PD", bad)


def test_unknown_dataset():
    with pytest.raises(ValueError, match="no corruption table for data set 'svhn'"):
        corruption_params("svhn", "GN", 1)
    with pytest.raises(ValueError, match="svhn"):
        corrupt(_const(0.5, (1, 1, 8, 8)), "GN", 1, dataset="svhn", params={"sigma": 0.1})


@pytest.mark.parametrize(
    ("images", "match"),
    [
        (np.full((1, 8, 8), 0.5), "4 dimensions"),
        (np.full((1, 1, 8, 8), 1.5), "<= 1.0"),
        (np.full((1, 1, 8, 8), -0.1), ">= 0.0"),
        (np.full((1, 1, 8, 8), np.nan), "NaN"),
    ],
)
def test_bad_images(images, match):
    with pytest.raises(ValueError, match=match):
        corrupt(images, "UN", 1)


@pytest.mark.parametrize(
    ("code", "params", "match"),
    [
        ("GN", {"p": 0.1}, "must have keys"),
        ("GN", {"sigma": -0.1}, "non-negative"),
        ("PD", {"p": 1.5}, r"\[0, 1\]"),
        ("GB", {"sigma": 1.0, "kernel_size": (4, 3)}, "odd positive"),
        ("GB", {"sigma": 0.0, "kernel_size": (3, 3)}, "positive"),
    ],
)
def test_bad_params(code, params, match):
    with pytest.raises(ValueError, match=match):
        corrupt(_const(0.5, (1, 1, 8, 8)), code, 1, params=params)


def test_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        corrupt(_const(0.5, (1, 1, 8, 8)), "GN", 1, seed=-1)
