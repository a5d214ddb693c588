"""Rabanser et al.'s ("Failing loudly", NeurIPS 2019) shifts, by their own names.

One module per family: :mod:`~dgpbench.shifts.gaussian_noise`, :mod:`~dgpbench.shifts.image`,
:mod:`~dgpbench.shifts.adversarial`, :mod:`~dgpbench.shifts.knockout` and
:mod:`~dgpbench.shifts.combos`. :func:`apply_shift` applies one shift class at one fraction
(0.1, 0.5 or 1.0 in their grid) to a clean test pool and returns a :class:`ShiftedPool`.

=====================================  ==================================================
name                                   definition
=====================================  ==================================================
``small/medium/large_gn_shift``        Gaussian noise, std 1 / 10 / 100 of 255, on a fraction
``small/medium/large_image_shift``     random rotation, shifts, shear, zoom (+ flips), on a
                                       fraction
``adversarial_shift``                  FGSM twins (smallest fooling ε) on a fraction
``ko_shift``                           remove a fraction of class 0
``medium_img_shift+ko_shift``          medium image shift on half, then ``ko_shift``
``only_zero_shift+medium_img_shift``   class 0 only, then medium image shift on a fraction
=====================================  ==================================================

How they relate to dgpbench's own codes: ``GN`` (:mod:`dgpbench.shifts.corruptions`) is the same
clipped noise with the DGP paper's six standard deviations and the protocol's ``delta`` in
place of the fraction; ``RO``/``ZO``/``TR``/``SH`` take Rabanser et al.'s magnitudes but apply
one transformation at its full magnitude, while their image shifts here draw all of them at
random at once, with flips; ``KO`` (:mod:`dgpbench.paper.label_shift`) is ``ko_shift`` on the
protocol's grid. Those codes are unchanged.

Randomness: shift ``s`` at fraction ``f`` with seed ``seed`` in run ``r`` draws from
``default_rng(SeedSequence([seed, 0x464C5348, k, round(f * 1e6), r]))``, ``k`` the position
of ``s`` in :data:`SHIFTS`: the same seed gives the same pool, and no two cells or runs share
a stream (Rabanser et al. re-apply every shift in each of their random runs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dgpbench.shifts._base import ShiftedPool, check_fraction, check_images, identity_pool
from dgpbench.shifts.adversarial import adversarial_shift, max_epsilon_for
from dgpbench.shifts.combos import compose
from dgpbench.shifts.gaussian_noise import GN_STDS, gaussian_noise_shift
from dgpbench.shifts.image import IMAGE_SHIFTS, image_shift
from dgpbench.shifts.knockout import knockout_shift, only_class_shift

__all__ = [
    "FRACTIONS",
    "GN_STDS",
    "IMAGE_SHIFTS",
    "NEEDS_MODEL",
    "SHIFTS",
    "ShiftedPool",
    "apply_shift",
    "identity_pool",
    "max_epsilon_for",
    "shift_rng",
]

SHIFTS: tuple[str, ...] = (
    "small_gn_shift",
    "medium_gn_shift",
    "large_gn_shift",
    "small_image_shift",
    "medium_image_shift",
    "large_image_shift",
    "adversarial_shift",
    "ko_shift",
    "medium_img_shift+ko_shift",
    "only_zero_shift+medium_img_shift",
)
"""Rabanser et al.'s shift classes (``pipeline.py``'s names), in their order."""

FRACTIONS: tuple[float, ...] = (0.1, 0.5, 1.0)
"""Their fractions of the test pool (of class 0 for the knock-outs)."""

NEEDS_MODEL: frozenset[str] = frozenset({"adversarial_shift"})
"""Shifts that attack a classifier (a model per pool)."""

# ASCII "FLSH": separates these streams from the protocol's and the corruptions'.
_STREAM_TAG = 0x464C5348


def shift_rng(seed: int, shift: str, fraction: float, run: int = 0) -> np.random.Generator:
    """The random stream of one (seed, shift, fraction, run) cell."""
    if shift not in SHIFTS:
        raise ValueError(f"unknown shift {shift!r}; choose from {list(SHIFTS)}")
    if isinstance(run, bool) or not isinstance(run, (int, np.integer)) or run < 0:
        raise ValueError(f"run must be an integer >= 0, got {run!r}")
    key = [
        int(seed), _STREAM_TAG, SHIFTS.index(shift), round(float(fraction) * 1_000_000), int(run),
    ]  # fmt: skip
    return np.random.default_rng(np.random.SeedSequence(key))


def apply_shift(
    shift: str,
    fraction: float,
    x: Any,
    y: Any,
    *,
    seed: int = 0,
    run: int = 0,
    model: Any = None,
    max_epsilon: float = 1.0,
    n_epsilons: int = 100,
    shear_unit: str = "radians",
) -> ShiftedPool:
    """Apply one of Rabanser et al.'s shifts at ``fraction`` to a clean pool.

    Parameters
    ----------
    shift : str
        One of :data:`SHIFTS`.
    fraction : float
        In (0, 1]: 0.1, 0.5 and 1.0 in their grid.
    x : array-like of shape (N, C, H, W)
        Clean images in [0, 1].
    y : array-like of shape (N,)
        Their integer labels (the knock-outs remove by label).
    seed : int, default=0
        Seed of the cell's stream (:func:`shift_rng`).
    run : int, default=0
        The independent run (its own stream: the shift is re-applied per run).
    model : torch.nn.Module, optional
        The attacked classifier; required by ``adversarial_shift``.
    max_epsilon, n_epsilons
        FGSM search grid (``adversarial_shift`` only).
    shear_unit : {"radians", "degrees"}, default="radians"
        How the image shifts read their shear ranges (0.1 / 0.2 / 0.3): ``degrees`` as
        Rabanser et al.'s pinned Keras-Preprocessing 1.1.0 does (``np.deg2rad(shear)`` in
        ``apply_affine_transform``), ``radians`` as dgpbench's ``SH`` code.

    Returns
    -------
    ShiftedPool

    Raises
    ------
    ValueError
        On an unknown shift, a fraction outside (0, 1], images outside [0, 1] or labels of
        the wrong length, or ``adversarial_shift`` without a model.

    Examples
    --------
    >>> x = np.random.default_rng(0).random((20, 1, 8, 8), dtype=np.float32)
    >>> y = np.arange(20) % 10
    >>> pool = apply_shift("large_gn_shift", 0.5, x, y, seed=1)
    >>> int(pool.shifted.sum()), len(pool.index)
    (10, 20)
    >>> len(apply_shift("ko_shift", 1.0, x, y).index)
    18
    """
    fraction = check_fraction(fraction)
    x = check_images(x)
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be {len(x)} integer labels, got {y.dtype} {y.shape}")
    if shear_unit not in ("radians", "degrees"):
        raise ValueError(f"shear_unit must be 'radians' or 'degrees', got {shear_unit!r}")
    rng = shift_rng(seed, shift, fraction, run)
    size = shift.partition("_")[0]
    unit = {"shear_unit": shear_unit}
    if shift.endswith("_gn_shift"):
        return gaussian_noise_shift(x, y, fraction, rng, std=GN_STDS[size])
    if shift.endswith("_image_shift"):
        return image_shift(x, y, fraction, rng, size=size, **unit)
    if shift == "adversarial_shift":
        if model is None:
            raise ValueError("adversarial_shift attacks a classifier: pass model=")
        return adversarial_shift(
            x, y, fraction, rng, model=model, max_epsilon=max_epsilon, n_epsilons=n_epsilons
        )
    if shift == "ko_shift":
        return _with_shape(knockout_shift(y, fraction, rng), x)
    if shift == "medium_img_shift+ko_shift":
        first = image_shift(x, y, 0.5, rng, size="medium", **unit)
        return compose(first, _with_shape(knockout_shift(first.y, fraction, rng), x))
    # only_zero_shift+medium_img_shift
    first = _with_shape(only_class_shift(y, kept_class=0), x)
    if len(first.index) == 0:
        raise ValueError("only_zero_shift: the pool has no image of class 0")
    kept = first.images(x)
    return compose(first, image_shift(kept, first.y, fraction, rng, size="medium", **unit))


def _with_shape(pool: ShiftedPool, x: np.ndarray) -> ShiftedPool:
    """Give an empty ``x_new`` the image shape of ``x``."""
    empty = np.empty((0, *x.shape[1:]), dtype=np.float32)
    return ShiftedPool(index=pool.index, shifted=pool.shifted, x_new=empty, y=pool.y)
