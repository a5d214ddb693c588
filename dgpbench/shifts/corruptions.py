"""Image corruptions at six intensities: the paper's four and four image transformations.

============  =================  ==========================================================
code          name               definition (images in [0, 1], shape (N, C, H, W))
============  =================  ==========================================================
``GB``        gaussian_blur      torchvision's ``gaussian_blur`` (reflect padding) with the
                                 table's kernel size κ and σ; deterministic
``GN``        gaussian_noise     ``clip(x + σ·z, 0, 1)``, z ~ N(0, 1) per value
``PD``        pixel_dropout      a pixel is set to 0 in every channel with probability p
``UN``        uniform_noise      ``clip(x + u, 0, 1)``, u ~ U(-σ, σ) per value
``RO``        rotation           rotation by ±θ degrees about the centre (sign per image)
``ZO``        zoom               scaling by 1 ± z about the centre (sign per image: 1 + z
                                 zooms in, 1 - z zooms out)
``TR``        translation        shift by ``t`` times the image size in a random direction
                                 φ ~ U(0, 2π) per image: (t·W·cos φ, t·H·sin φ) pixels
``SH``        shear              horizontal shear by ±s degrees (sign per image)
============  =================  ==========================================================

The last four (beyond the paper, which names rotation and zoom as shifts DGP may miss) use
torchvision's ``transforms.v2.functional.affine`` with bilinear interpolation and fill 0 (the
background of MNIST-like images), clipped to [0, 1]. Their magnitudes follow Rabanser et al.,
"Failing loudly" (NeurIPS 2019), whose small / medium / large image shifts use Keras's
``ImageDataGenerator`` with rotation 10 / 40 / 90 degrees, width and height shift 0.05 /
0.2 / 0.4, shear 0.1 / 0.2 / 0.3 and zoom 0.1 / 0.2 / 0.4 (their ``shift_applicator.py``):
those values are intensities II, IV and VI here, and I, III and V are filled in between
(:data:`GEOMETRIC_TABLE`)::

    intensity          I      II     III    IV     V      VI
    RO  θ (degrees)    5      10     20     40     65     90
    ZO  z              0.05   0.1    0.15   0.2    0.3    0.4
    TR  t (of size)    0.025  0.05   0.1    0.2    0.3    0.4
    SH  s (radians)    0.05   0.1    0.15   0.2    0.25   0.3

Two deliberate differences from Keras's augmentation: every image gets the full magnitude of
its intensity (random direction only), not a uniform draw from [-θ, θ], so that an intensity
is one size of shift; and each code is one transformation (Rabanser et al. combine all of them
with flips). Keras's ``shear_range`` is read in radians (its unit in early Keras 2 releases;
later releases read degrees, in which 0.1-0.3 would be invisible on 28x28 images). The table
is the same for every data set (the magnitudes are relative to the image).

Kernel sizes: the table's κ = (a, b) is passed to torchvision unchanged, as the authors
did (``GaussianBlur(kernel_size=κ)``). torchvision reads ``kernel_size`` as ``[kx, ky]``:
``a`` is the kernel's width (along W, columns) and ``b`` its height (along H, rows); so
CIFAR-10's (3, 5) is 3 pixels wide and 5 tall. σ is the same along both axes.

Intensity tables (:data:`INTENSITY_TABLE`) of the paper's four are exactly the paper's for ``mnist``,
``fashion-mnist`` and ``cifar10`` (identical to the authors' ``shift_configurations.py``).
``digits``, ``emnist`` and ``npz:`` data sets have no table in the paper and use MNIST's
values (documented default); pass ``params=`` to :func:`corrupt` for other values.

Randomness: every (seed, corruption, intensity) gets its own stream,
``numpy.random.default_rng([seed, code_index, intensity])`` with ``code_index`` the position
of the code in :data:`CODES` (``GB, GN, PD, UN, RO, ZO, TR, SH``; the new codes come last, so
the paper's four keep their streams), so the same seed always gives the same images and no
two cells share noise. The blur is deterministic; the geometric codes draw only each image's
direction from the stream.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dgpbench._validation import as_float_array, check_int

log = logging.getLogger(__name__)

CORRUPTIONS: dict[str, str] = {
    "GB": "gaussian_blur",
    "GN": "gaussian_noise",
    "PD": "pixel_dropout",
    "UN": "uniform_noise",
    "RO": "rotation",
    "ZO": "zoom",
    "TR": "translation",
    "SH": "shear",
}
"""Short code -> long name; both forms are accepted everywhere."""

PAPER_CODES: tuple[str, ...] = ("GB", "GN", "PD", "UN")
"""The paper's four corruptions (Table 1); the others are :data:`GEOMETRIC_CODES`."""
GEOMETRIC_CODES: tuple[str, ...] = ("RO", "ZO", "TR", "SH")
"""Image transformations beyond the paper (torchvision affine maps)."""

CODES: tuple[str, ...] = tuple(CORRUPTIONS)
INTENSITIES: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
DEFAULT_TABLE_DATASET = "mnist"
"""Data sets without their own table (digits, emnist, npz:...) use this one's values."""


def _noise(values: tuple[int, ...]) -> list[dict[str, float]]:
    return [{"sigma": v / 255.0} for v in values]


def _blur(sigmas: tuple[float, ...], kernels: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    return [{"sigma": s, "kernel_size": k} for s, k in zip(sigmas, kernels, strict=True)]


_DROPOUT = [{"p": p} for p in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)]

GEOMETRIC_TABLE: dict[str, list[dict[str, float]]] = {
    "rotation": [{"degrees": float(d)} for d in (5, 10, 20, 40, 65, 90)],
    "zoom": [{"zoom": z} for z in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4)],
    "translation": [{"shift": t} for t in (0.025, 0.05, 0.1, 0.2, 0.3, 0.4)],
    "shear": [{"degrees": math.degrees(r)} for r in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)],
}
"""Parameters of the geometric codes at intensities I..VI, the same for every data set
(Rabanser et al.'s small / medium / large image shifts are II / IV / VI; see the module
docstring)."""
_SMALL_BLUR = _blur((0.35, 0.4, 0.5, 0.6, 0.7, 0.8), ((3, 3),) * 6)

INTENSITY_TABLE: dict[str, dict[str, list[dict[str, Any]]]] = {
    "mnist": {
        "gaussian_blur": _SMALL_BLUR,
        "gaussian_noise": _noise((25, 40, 55, 70, 85, 100)),
        "pixel_dropout": _DROPOUT,
        "uniform_noise": _noise((25, 40, 55, 70, 85, 100)),
        **GEOMETRIC_TABLE,
    },
    "fashion-mnist": {
        "gaussian_blur": _SMALL_BLUR,
        "gaussian_noise": _noise((10, 20, 30, 40, 50, 60)),
        "pixel_dropout": _DROPOUT,
        "uniform_noise": _noise((10, 20, 30, 40, 50, 60)),
        **GEOMETRIC_TABLE,
    },
    "cifar10": {
        "gaussian_blur": _blur(
            (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), ((3, 3), (3, 5), (5, 5), (5, 7), (7, 7), (9, 9))
        ),
        "gaussian_noise": _noise((30, 60, 85, 100, 120, 140)),
        "pixel_dropout": _DROPOUT,
        "uniform_noise": _noise((30, 60, 85, 100, 120, 140)),
        **GEOMETRIC_TABLE,
    },
}
"""Per data set and long corruption name, the parameters of intensities I..VI (index 0..5)."""

_DEFAULTED = ("digits", "emnist")
_GEOMETRIC_NAMES = frozenset(CORRUPTIONS[c] for c in GEOMETRIC_CODES)
# Valid magnitudes (low, high, high included): a zoom of 1 would scale to nothing, a shear of
# 90 degrees is degenerate.
_GEOMETRIC_RANGES = {
    "rotation": (0.0, 180.0, True),
    "zoom": (0.0, 1.0, False),
    "translation": (0.0, 1.0, True),
    "shear": (0.0, 90.0, False),
}
_PARAM_KEYS = {
    "gaussian_blur": {"sigma", "kernel_size"},
    "gaussian_noise": {"sigma"},
    "pixel_dropout": {"p"},
    "uniform_noise": {"sigma"},
    "rotation": {"degrees"},
    "zoom": {"zoom"},
    "translation": {"shift"},
    "shear": {"degrees"},
}


def corruption_code(corruption: str) -> str:
    """Return the short code (``"GB"``...) of a corruption given by code or long name.

    Raises
    ------
    ValueError
        On an unknown corruption.

    Examples
    --------
    >>> corruption_code("pixel_dropout"), corruption_code("gn")
    ('PD', 'GN')
    """
    if isinstance(corruption, str):
        key = corruption.strip()
        if key.upper() in CORRUPTIONS:
            return key.upper()
        for code, long in CORRUPTIONS.items():
            if key.lower().replace("-", "_").replace(" ", "_") == long:
                return code
    choices = ", ".join(f"{c} ({n})" for c, n in CORRUPTIONS.items())
    raise ValueError(f"unknown corruption {corruption!r}; expected one of {choices}")


def corruption_name(corruption: str) -> str:
    """Return the long name (``"gaussian_blur"``...) of a corruption given by code or name."""
    return CORRUPTIONS[corruption_code(corruption)]


def _check_intensity(intensity: Any) -> int:
    if (
        isinstance(intensity, bool)
        or not isinstance(intensity, (int, np.integer))
        or intensity not in INTENSITIES
    ):
        raise ValueError(f"intensity must be an integer from 1 to 6, got {intensity!r}")
    return int(intensity)


def table_dataset(dataset: str) -> str:
    """Return the data set whose row of the intensity table ``dataset`` uses.

    Examples
    --------
    >>> table_dataset("cifar10"), table_dataset("digits"), table_dataset("npz:my.npz")
    ('cifar10', 'mnist', 'mnist')
    """
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str, got {type(dataset).__name__}")
    key = dataset.lower()
    if key in INTENSITY_TABLE:
        return key
    if key in _DEFAULTED or dataset.startswith("npz:"):
        return DEFAULT_TABLE_DATASET
    known = ", ".join([*INTENSITY_TABLE, *_DEFAULTED, "npz:<path>"])
    raise ValueError(f"no corruption table for data set {dataset!r}; expected one of {known}")


def corruption_params(dataset: str, corruption: str, intensity: int) -> dict[str, Any]:
    """Return the parameters of ``corruption`` at ``intensity`` (1-6) for ``dataset``.

    Parameters
    ----------
    dataset : str
        ``mnist``, ``fashion-mnist``, ``cifar10``; ``digits``, ``emnist`` and ``npz:...``
        get MNIST's values.
    corruption : str
        Code (``GB``, ``GN``, ``PD``, ``UN``, ``RO``, ``ZO``, ``TR``, ``SH``) or long name.
    intensity : int
        1 (I) to 6 (VI).

    Returns
    -------
    dict
        ``{"sigma": float}`` for the noises, ``{"p": float}`` for pixel dropout,
        ``{"sigma": float, "kernel_size": (kx, ky)}`` for the blur, ``{"degrees": float}``
        for rotation and shear, ``{"zoom": float}`` for zoom and ``{"shift": float}`` (a
        fraction of the image size) for translation (a fresh copy).

    Raises
    ------
    ValueError
        On an unknown data set or corruption, or an intensity outside 1-6.

    Examples
    --------
    >>> corruption_params("cifar10", "GB", 2)
    {'sigma': 2.0, 'kernel_size': (3, 5)}
    >>> round(corruption_params("mnist", "uniform_noise", 1)["sigma"] * 255)
    25
    """
    name = corruption_name(corruption)
    level = _check_intensity(intensity)
    return dict(INTENSITY_TABLE[table_dataset(dataset)][name][level - 1])


def _check_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    missing = _PARAM_KEYS[name] - set(params)
    extra = set(params) - _PARAM_KEYS[name]
    if missing or extra:
        raise ValueError(
            f"params for {name} must have keys {sorted(_PARAM_KEYS[name])}, got {sorted(params)}"
        )
    out = dict(params)
    if name in _GEOMETRIC_NAMES:
        (key,) = _PARAM_KEYS[name]
        value = out[key]
        low, high, closed = _GEOMETRIC_RANGES[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (low <= value <= high if closed else low <= value < high)
        ):
            bracket = "]" if closed else ")"
            raise ValueError(f"{name} {key} must be in [{low:g}, {high:g}{bracket}, got {value!r}")
        out[key] = float(value)
        return out
    if name == "pixel_dropout":
        p = out["p"]
        if not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"pixel dropout p must be in [0, 1], got {p!r}")
        return out
    sigma = out["sigma"]
    if not isinstance(sigma, (int, float)) or not np.isfinite(sigma) or sigma < 0:
        raise ValueError(f"{name} sigma must be a non-negative number, got {sigma!r}")
    if name == "gaussian_blur":
        if sigma <= 0:
            raise ValueError(f"gaussian_blur sigma must be positive, got {sigma!r}")
        k = out["kernel_size"]
        k = (k, k) if isinstance(k, (int, np.integer)) else tuple(k)
        if len(k) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 or v % 2 == 0
            for v in k
        ):
            raise ValueError(f"kernel_size must be two odd positive integers, got {k!r}")
        out["kernel_size"] = (int(k[0]), int(k[1]))
    return out


def corruption_rng(seed: int, corruption: str, intensity: int) -> np.random.Generator:
    """Return the random stream of one (seed, corruption, intensity) cell.

    Examples
    --------
    >>> a = corruption_rng(0, "GN", 3).random()
    >>> a == corruption_rng(0, "gaussian_noise", 3).random() != corruption_rng(0, "UN", 3).random()
    True
    """
    code = corruption_code(corruption)
    level = _check_intensity(intensity)
    check_int(seed, "seed", minimum=0)
    return np.random.default_rng([int(seed), CODES.index(code), level])


def corrupt(
    images: Any,
    corruption: str,
    intensity: int,
    *,
    dataset: str = "mnist",
    seed: int = 0,
    params: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """Return a corrupted copy of ``images``.

    Parameters
    ----------
    images : array-like of shape (N, C, H, W)
        Pixel values in [0, 1]; not modified.
    corruption : str
        ``GB``, ``GN``, ``PD``, ``UN``, ``RO``, ``ZO``, ``TR``, ``SH`` or the long names.
    intensity : int
        1 to 6; selects the table's parameters and the random stream.
    dataset : str, default="mnist"
        Which row of :data:`INTENSITY_TABLE` (see :func:`corruption_params`).
    seed : int, default=0
        Base seed; the stream is :func:`corruption_rng` ``(seed, corruption, intensity)``.
    params : mapping, optional
        Explicit parameters overriding the table (same keys as :func:`corruption_params`
        returns), e.g. from the workflow config.

    Returns
    -------
    numpy.ndarray of shape (N, C, H, W), float32
        Values in [0, 1].

    Raises
    ------
    ValueError
        On an unknown corruption or data set, an intensity outside 1-6, invalid params, or
        images that are not 4-D, contain NaN/inf or leave [0, 1].

    Examples
    --------
    >>> x = np.full((2, 1, 4, 4), 0.5, dtype=np.float32)
    >>> y = corrupt(x, "PD", 6, seed=1)
    >>> y.shape, y.dtype, set(np.unique(y).tolist()) <= {0.0, 0.5}
    ((2, 1, 4, 4), dtype('float32'), True)
    """
    name = corruption_name(corruption)
    level = _check_intensity(intensity)
    if params is None:
        params = corruption_params(dataset, name, level)
    else:
        table_dataset(dataset)  # still reject unknown data sets
    params = _check_params(name, params)
    x = as_float_array(
        images, "images", ndim=4, dtype=np.float32, min_value=0.0, max_value=1.0, allow_empty=True
    )
    if name == "gaussian_blur":
        return _gaussian_blur(x, params["kernel_size"], float(params["sigma"]))
    rng = corruption_rng(seed, name, level)
    if name in _GEOMETRIC_NAMES:
        return _affine(x, name, params, rng)
    if name == "gaussian_noise":
        noise = rng.standard_normal(x.shape, dtype=np.float32)
        noise *= np.float32(params["sigma"])
        return np.clip(x + noise, 0.0, 1.0, out=noise)
    if name == "uniform_noise":
        s = float(params["sigma"])
        noise = rng.uniform(-s, s, size=x.shape).astype(np.float32)
        return np.clip(x + noise, 0.0, 1.0, out=noise)
    # pixel_dropout: one Bernoulli draw per pixel position, shared by its channels.
    n, _, h, w = x.shape
    drop = rng.random((n, 1, h, w)) < float(params["p"])
    return np.where(drop, np.float32(0.0), x).astype(np.float32, copy=False)


def _gaussian_blur(x: np.ndarray, kernel_size: tuple[int, int], sigma: float) -> np.ndarray:
    import torch
    from torchvision.transforms.functional import gaussian_blur

    kx, ky = kernel_size
    h, w = x.shape[2:]
    # Reflect padding needs pad < size along each axis (kx pads W, ky pads H).
    if kx // 2 >= w or ky // 2 >= h:
        raise ValueError(
            f"kernel_size {kernel_size} (width, height) is too large for {h}x{w} images"
        )
    if x.size == 0:
        return x.copy()
    out = gaussian_blur(torch.from_numpy(x), kernel_size=[kx, ky], sigma=[sigma, sigma])
    # Reflect-padded convolution with a normalised kernel stays in [0, 1] up to rounding.
    return np.clip(out.numpy(), 0.0, 1.0).astype(np.float32, copy=False)


def _affine(x: np.ndarray, name: str, params: dict[str, float], rng: np.random.Generator):
    """One affine map per image (the intensity's magnitude, a random direction per image)."""
    import torch
    from torchvision.transforms.v2 import functional as TF

    n, _, h, w = x.shape
    angle, scale, shear = np.zeros(n), np.ones(n), np.zeros(n)
    tx, ty = np.zeros(n), np.zeros(n)
    if name == "translation":
        phi = rng.uniform(0.0, 2.0 * math.pi, size=n)
        tx, ty = params["shift"] * w * np.cos(phi), params["shift"] * h * np.sin(phi)
    else:
        sign = rng.choice(np.array([-1.0, 1.0]), size=n)
        if name == "rotation":
            angle = sign * params["degrees"]
        elif name == "zoom":
            scale = 1.0 + sign * params["zoom"]
        else:  # shear
            shear = sign * params["degrees"]
    out = np.empty_like(x)
    # Images with equal parameters are transformed together (rotation, zoom and shear have
    # two groups; translation has one per image).
    keys = np.stack([angle, scale, shear, tx, ty], axis=1)
    groups, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    for g, (a, s, sh, dx, dy) in enumerate(groups):
        idx = np.flatnonzero(inverse == g)
        moved = TF.affine(
            torch.from_numpy(x[idx]),
            angle=float(a),
            translate=[float(dx), float(dy)],
            scale=float(s),
            shear=[float(sh), 0.0],
            interpolation=TF.InterpolationMode.BILINEAR,
            fill=0.0,
        )
        out[idx] = moved.numpy()
    # Bilinear interpolation of values in [0, 1] stays in [0, 1] up to rounding.
    return np.clip(out, 0.0, 1.0, out=out)
