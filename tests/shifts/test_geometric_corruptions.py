"""Tests of the image-transformation corruptions RO, ZO, TR, SH: the intensity table against
Rabanser et al.'s values, exact geometry on synthetic images (90-degree rotation, centre of
mass, radius of gyration), monotone distances on real images, identity and determinism."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dgpbench.data.datasets import load_dataset
from dgpbench.shifts.corruptions import (
    CODES,
    GEOMETRIC_CODES,
    INTENSITIES,
    PAPER_CODES,
    corrupt,
    corruption_params,
)

# Rabanser et al., "Failing loudly", shift_applicator.py: image_generator(rotation, width
# shift, height shift, shear, zoom) of the small / medium / large image shifts.
RABANSER = {
    "small": {"RO": 10, "TR": 0.05, "SH": 0.1, "ZO": 0.1},
    "medium": {"RO": 40, "TR": 0.2, "SH": 0.2, "ZO": 0.2},
    "large": {"RO": 90, "TR": 0.4, "SH": 0.3, "ZO": 0.4},
}


def _blob(size: int = 32, centre=(16.0, 16.0), width: float = 2.0) -> np.ndarray:
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float64)
    img = np.exp(-((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2) / (2 * width**2))
    return img.astype(np.float32)[None, None]


def _moments(img: np.ndarray) -> tuple[float, float, float]:
    """Centre of mass (row, col) and radius of gyration of a 2-D image."""
    rows, cols = np.mgrid[0 : img.shape[0], 0 : img.shape[1]]
    mass = img.sum()
    r, c = (img * rows).sum() / mass, (img * cols).sum() / mass
    gyration = math.sqrt((img * ((rows - r) ** 2 + (cols - c) ** 2)).sum() / mass)
    return float(r), float(c), gyration


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    return load_dataset("digits", split="test")[0][:200]


def test_new_codes_come_after_the_papers_so_old_streams_are_unchanged():
    assert CODES[:4] == PAPER_CODES == ("GB", "GN", "PD", "UN")
    assert CODES[4:] == GEOMETRIC_CODES


@pytest.mark.parametrize(("size", "level"), [("small", 2), ("medium", 4), ("large", 6)])
def test_table_holds_rabanser_values_at_intensities_two_four_six(size, level):
    want = RABANSER[size]
    for dataset in ("mnist", "fashion-mnist", "cifar10", "digits"):
        assert corruption_params(dataset, "RO", level) == {"degrees": want["RO"]}
        assert corruption_params(dataset, "TR", level) == {"shift": want["TR"]}
        assert corruption_params(dataset, "ZO", level) == {"zoom": want["ZO"]}
        # Keras's shear_range read in radians, stored in degrees for torchvision.
        sh = corruption_params(dataset, "SH", level)["degrees"]
        assert sh == pytest.approx(want["SH"] * 180 / math.pi)


@pytest.mark.parametrize("code", GEOMETRIC_CODES)
def test_magnitudes_increase_with_intensity(code):
    (key,) = corruption_params("mnist", code, 1)
    values = [corruption_params("mnist", code, i)[key] for i in INTENSITIES]
    assert all(a < b for a, b in itertools.pairwise(values))


@pytest.mark.parametrize("code", GEOMETRIC_CODES)
def test_distance_to_clean_images_grows_with_intensity(code, digits):
    dist = [
        float(
            np.linalg.norm(
                (corrupt(digits, code, i, seed=3) - digits).reshape(200, -1), axis=1
            ).mean()
        )
        for i in INTENSITIES
    ]
    assert dist[0] > 0
    assert all(a < b for a, b in itertools.pairwise(dist)), dist


@pytest.mark.parametrize(
    ("code", "params"),
    [("RO", {"degrees": 0}), ("ZO", {"zoom": 0.0}), ("TR", {"shift": 0.0}), ("SH", {"degrees": 0})],
)
def test_zero_magnitude_is_the_identity(code, params, digits):
    out = corrupt(digits, code, 3, params=params)
    np.testing.assert_array_equal(out, digits)
    assert out is not digits


@pytest.mark.parametrize("code", GEOMETRIC_CODES)
def test_same_seed_same_images_other_seed_other_images(code, digits):
    a = corrupt(digits, code, 4, seed=7)
    np.testing.assert_array_equal(a, corrupt(digits, code, 4, seed=7))
    assert not np.array_equal(a, corrupt(digits, code, 4, seed=8))


def test_rotation_by_ninety_degrees_is_rot90():
    x = np.random.default_rng(0).random((40, 2, 9, 9), dtype=np.float32)
    y = corrupt(x, "RO", 6, seed=0)  # 90 degrees, direction per image
    directions = set()
    for xi, yi in zip(x, y, strict=True):
        ccw, cw = np.rot90(xi, 1, axes=(1, 2)), np.rot90(xi, -1, axes=(1, 2))
        if np.allclose(yi, ccw, atol=1e-5):
            directions.add("ccw")
        else:
            np.testing.assert_allclose(yi, cw, atol=1e-5)
            directions.add("cw")
    assert directions == {"ccw", "cw"}


def test_translation_moves_the_centre_of_mass_by_the_shift():
    x = np.repeat(_blob(), 30, axis=0)
    y = corrupt(x, "TR", 3, seed=1)  # 0.1 of 32 pixels = 3.2 pixels
    r0, c0, _ = _moments(x[0, 0])
    angles = []
    for img in y[:, 0]:
        r, c, _ = _moments(img)
        assert math.hypot(r - r0, c - c0) == pytest.approx(3.2, abs=0.02)
        angles.append(math.atan2(r - r0, c - c0))
    assert np.ptp(angles) > 1.0  # random directions


def test_zoom_scales_the_radius_of_gyration():
    x = np.repeat(_blob(size=48, centre=(24.0, 24.0), width=4.0), 20, axis=0)
    y = corrupt(x, "ZO", 5, seed=2)  # z = 0.3
    g0 = _moments(x[0, 0])[2]
    ratios = np.array([_moments(img)[2] / g0 for img in y[:, 0]])
    # 1 - z zooms out, 1 + z zooms in; bilinear interpolation blurs by a fraction of a pixel
    zoomed_in = ratios > 1
    np.testing.assert_allclose(ratios[zoomed_in], 1.3, atol=0.01)
    np.testing.assert_allclose(ratios[~zoomed_in], 0.7, atol=0.01)
    assert 0 < zoomed_in.sum() < len(ratios)


def test_shear_keeps_rows_and_the_mass_centre_of_a_centred_blob():
    x = np.repeat(_blob(size=33, centre=(16.0, 16.0), width=2.5), 10, axis=0)
    y = corrupt(x, "SH", 6, seed=0)
    for img in y[:, 0]:
        # a horizontal shear about the centre moves each row sideways, not up or down
        np.testing.assert_allclose(img.sum(axis=1), x[0, 0].sum(axis=1), rtol=0.02, atol=1e-3)
        r, c, _ = _moments(img)
        assert (r, c) == pytest.approx((16.0, 16.0), abs=0.05)
        assert not np.allclose(img, x[0, 0], atol=1e-2)


@pytest.mark.parametrize(
    ("code", "params", "match"),
    [
        ("RO", {"degrees": -1.0}, r"rotation degrees must be in \[0, 180\]"),
        ("ZO", {"zoom": 1.0}, r"zoom zoom must be in \[0, 1\)"),
        ("TR", {"shift": 1.5}, "translation shift"),
        ("SH", {"degrees": 90}, "shear degrees"),
        ("SH", {"angle": 3}, "must have keys"),
    ],
)
def test_bad_geometric_params(code, params, match):
    with pytest.raises(ValueError, match=match):
        corrupt(np.zeros((1, 1, 8, 8), np.float32), code, 1, params=params)


def test_empty_batch():
    out = corrupt(np.zeros((0, 1, 8, 8), np.float32), "TR", 2)
    assert out.shape == (0, 1, 8, 8)
