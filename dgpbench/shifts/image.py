"""Failing loudly's image shifts (``small/medium/large_image_shift``), as Keras applies them.

Rabanser et al. draw every image's transformation at random with Keras's
``ImageDataGenerator(rotation_range, width_shift_range, height_shift_range, shear_range,
zoom_range, horizontal_flip, vertical_flip, fill_mode="nearest")``: all transformations at
once, independently per image, on ``ceil(fraction * N)`` random images of the pool.

==========  ========  =============  ======  ======  ========================
size        rotation  width/height   shear   zoom    flips (probability 1/2)
==========  ========  =============  ======  ======  ========================
small       10 deg    0.05           0.1     0.1     none
medium      40 deg    0.2            0.2     0.2     horizontal
large       90 deg    0.4            0.3     0.4     horizontal and vertical
==========  ========  =============  ======  ======  ========================

Per image, as Keras's ``get_random_transform`` / ``apply_affine_transform``: rotation
``θ ~ U(-r, r)`` degrees; shifts ``tx ~ U(-h, h)·H`` rows and ``ty ~ U(-w, w)·W`` columns;
shear ``s ~ U(-σ, σ)``; zooms ``zx, zy ~ U(1 - z, 1 + z)`` independently; then the flips.
The map ``rotation · shift · shear · zoom`` (Keras's order), taken about the image centre
``(H/2 - 0.5, W/2 - 0.5)``, sends output coordinates to input coordinates and is applied with
``scipy.ndimage.affine_transform(order=1, mode="nearest")`` per channel, as Keras does.

Shear unit. Rabanser et al.'s ``requirements.txt`` pins Keras-Preprocessing 1.1.0, whose
``apply_affine_transform`` reads ``shear_range`` in degrees (``np.deg2rad(shear)``): their
shear of 0.1-0.3 degrees moves a 28x28 image by well under a pixel. ``shear_unit="degrees"``
(``protocol: rabanser``) reproduces that; ``"radians"`` (the default, ``protocol: dgpbench``)
reads the same numbers in radians, as dgpbench's ``SH`` code does
(:mod:`dgpbench.shifts.corruptions`), so that the shear is visible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dgpbench.shifts._base import ShiftedPool, alter_subset

__all__ = ["IMAGE_SHIFTS", "ImageShiftParams", "image_shift", "random_affine"]


@dataclass(frozen=True)
class ImageShiftParams:
    """Ranges of one image-shift size (Keras ``ImageDataGenerator`` arguments)."""

    rotation: float  # degrees
    width_shift: float  # fraction of the width
    height_shift: float  # fraction of the height
    shear: float  # radians here; degrees in Rabanser et al.'s Keras (``shear_unit``)
    zoom: float
    horizontal_flip: bool
    vertical_flip: bool


IMAGE_SHIFTS: dict[str, ImageShiftParams] = {
    "small": ImageShiftParams(10.0, 0.05, 0.05, 0.1, 0.1, False, False),
    "medium": ImageShiftParams(40.0, 0.2, 0.2, 0.2, 0.2, True, False),
    "large": ImageShiftParams(90.0, 0.4, 0.4, 0.3, 0.4, True, True),
}
"""Rabanser et al.'s ``shift_applicator.py`` arguments per size."""


def _transform_matrix(
    theta: float, tx: float, ty: float, shear: float, zx: float, zy: float, h: int, w: int
) -> np.ndarray:
    """Keras's output-to-input map (homogeneous, row/column coordinates), about the centre."""
    c, s = np.cos(theta), np.sin(theta)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    shift = np.array([[1.0, 0.0, tx], [0.0, 1.0, ty], [0.0, 0.0, 1.0]])
    shear_m = np.array([[1.0, -np.sin(shear), 0.0], [0.0, np.cos(shear), 0.0], [0.0, 0.0, 1.0]])
    zoom = np.diag([zx, zy, 1.0])
    m = rotation @ shift @ shear_m @ zoom
    ox, oy = h / 2.0 - 0.5, w / 2.0 - 0.5
    to_centre = np.array([[1.0, 0.0, ox], [0.0, 1.0, oy], [0.0, 0.0, 1.0]])
    from_centre = np.array([[1.0, 0.0, -ox], [0.0, 1.0, -oy], [0.0, 0.0, 1.0]])
    return to_centre @ m @ from_centre


def random_affine(
    images: np.ndarray,
    params: ImageShiftParams,
    rng: np.random.Generator,
    shear_unit: str = "radians",
) -> np.ndarray:
    """Transform each image of ``images`` (N, C, H, W) with its own random Keras transform.

    Parameters
    ----------
    images : ndarray of shape (N, C, H, W)
        Images in [0, 1].
    params : ImageShiftParams
        The ranges.
    rng : numpy.random.Generator
        Draws the parameters (8 numbers per image, drawn even where a range is 0, so one
        image's parameters do not depend on the ranges of others).
    shear_unit : {"radians", "degrees"}, default="radians"
        The unit of ``params.shear`` (Rabanser et al.'s Keras: degrees).

    Returns
    -------
    ndarray of float32, same shape, in [0, 1]
    """
    if shear_unit not in ("radians", "degrees"):
        raise ValueError(f"shear_unit must be 'radians' or 'degrees', got {shear_unit!r}")
    from scipy import ndimage  # here: half a second, and every Failing-loudly step imports this

    shear_range = np.deg2rad(params.shear) if shear_unit == "degrees" else params.shear
    n, _, h, w = images.shape
    u = rng.uniform(-1.0, 1.0, size=(n, 6))
    flips = rng.random(size=(n, 2)) < 0.5
    out = np.empty_like(images, dtype=np.float32)
    for i in range(n):
        theta = np.deg2rad(params.rotation * u[i, 0])
        tx = params.height_shift * u[i, 1] * h
        ty = params.width_shift * u[i, 2] * w
        shear = shear_range * u[i, 3]
        zx = 1.0 + params.zoom * u[i, 4]
        zy = 1.0 + params.zoom * u[i, 5]
        m = _transform_matrix(theta, tx, ty, shear, zx, zy, h, w)
        for ch in range(images.shape[1]):
            out[i, ch] = ndimage.affine_transform(
                images[i, ch], m[:2, :2], offset=m[:2, 2], order=1, mode="nearest"
            )
        if params.horizontal_flip and flips[i, 0]:
            out[i] = out[i, :, :, ::-1]
        if params.vertical_flip and flips[i, 1]:
            out[i] = out[i, :, ::-1, :]
    # Linear interpolation of values in [0, 1] stays in [0, 1] up to rounding.
    return np.clip(out, 0.0, 1.0, out=out)


def image_shift(
    x: np.ndarray,
    y: np.ndarray,
    fraction: float,
    rng: np.random.Generator,
    *,
    size: str,
    shear_unit: str = "radians",
) -> ShiftedPool:
    """Apply the random image transformations of ``size`` to a fraction of ``x``.

    Parameters
    ----------
    x : ndarray of shape (N, C, H, W)
        Clean images in [0, 1].
    y : ndarray of shape (N,)
        Labels (unchanged).
    fraction : float
        Share of images altered, in (0, 1].
    rng : numpy.random.Generator
        Picks the rows and the transformations.
    size : {"small", "medium", "large"}
        Key of :data:`IMAGE_SHIFTS`.
    shear_unit : {"radians", "degrees"}, default="radians"
        The unit of the shear range (Rabanser et al.'s Keras: degrees).

    Returns
    -------
    ShiftedPool
    """
    params = IMAGE_SHIFTS[size]
    return alter_subset(
        x, y, fraction, rng, lambda imgs, r: random_affine(imgs, params, r, shear_unit)
    )
