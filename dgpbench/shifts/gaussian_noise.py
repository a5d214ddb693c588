"""Failing loudly's Gaussian-noise shifts (``small/medium/large_gn_shift``).

Rabanser et al.'s ``gaussian_noise_subset``: ``ceil(fraction * N)`` random images of the
test pool get ``clip(x + e, 0, 1)`` with ``e ~ N(0, (std / 255)^2)`` per pixel, ``std`` in
units of the 0-255 scale: 1 (small), 10 (medium), 100 (large).
"""

from __future__ import annotations

import numpy as np

from dgpbench.shifts._base import ShiftedPool, alter_subset

__all__ = ["GN_STDS", "gaussian_noise_shift"]

GN_STDS: dict[str, float] = {"small": 1.0, "medium": 10.0, "large": 100.0}
"""Noise standard deviation (0-255 scale) per size."""


def gaussian_noise_shift(
    x: np.ndarray, y: np.ndarray, fraction: float, rng: np.random.Generator, *, std: float
) -> ShiftedPool:
    """Add clipped Gaussian noise of standard deviation ``std / 255`` to a fraction of ``x``.

    Parameters
    ----------
    x : ndarray of shape (N, C, H, W)
        Clean images in [0, 1].
    y : ndarray of shape (N,)
        Their labels (unchanged).
    fraction : float
        Share of images altered, in (0, 1].
    rng : numpy.random.Generator
        Picks the rows and draws the noise.
    std : float
        Noise standard deviation on the 0-255 scale.

    Returns
    -------
    ShiftedPool
    """

    def noisy(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        noise = rng.normal(0.0, std / 255.0, size=images.shape)
        return np.clip(images + noise, 0.0, 1.0).astype(np.float32)

    return alter_subset(x, y, fraction, rng, noisy)
