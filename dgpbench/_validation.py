"""Input checks shared by every public function: one place, one wording of errors."""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np


class IntegerError(ValueError, TypeError):
    """A value that is not an integer or is below its minimum.

    Both a ``ValueError`` and a ``TypeError`` (as scikit-learn's ``InvalidParameterError``),
    so callers catching either keep working.
    """


def check_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum``.

    Parameters
    ----------
    value : object
        The input: a Python or numpy integer (``bool`` and integral floats are refused).
    name : str
        The argument's name, used in error messages.
    minimum : int, default=1
        The smallest allowed value (1: a positive integer, 0: a non-negative one).

    Returns
    -------
    int

    Raises
    ------
    IntegerError
        If ``value`` is not an integer or is below ``minimum``.

    Examples
    --------
    >>> check_int(3, "epochs")
    3
    >>> check_int(0, "seed", minimum=0)
    0
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise IntegerError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise IntegerError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def as_float_array(
    x: Any,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    dtype: type | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
    allow_empty: bool = False,
) -> np.ndarray:
    """Convert ``x`` to a floating ndarray and check it, naming ``name`` in every error.

    Parameters
    ----------
    x : array-like or torch.Tensor
        The input.
    name : str
        The argument's name, used in error messages.
    ndim : int or tuple of int, optional
        Allowed numbers of dimensions.
    dtype : numpy dtype, optional
        Target dtype. By default float32 and float64 are kept and everything else becomes
        float64.
    min_value, max_value : float, optional
        Inclusive bounds every entry must respect.
    allow_empty : bool, default=False
        Whether arrays with a zero-length axis are accepted.

    Returns
    -------
    numpy.ndarray
        A C-contiguous floating array.

    Raises
    ------
    ValueError
        On a wrong number of dimensions, an empty array, NaN/inf, or out-of-range values.
    TypeError
        If ``x`` is not numeric.
    """
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if dtype is None:
        dtype = arr.dtype if arr.dtype in (np.float32, np.float64) else np.float64
    arr = np.ascontiguousarray(arr, dtype=dtype)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(str(d) for d in allowed)
            raise ValueError(f"{name} must have {want} dimensions, got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if arr.size and not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "inf"
        raise ValueError(f"{name} contains {bad} values")
    if min_value is not None and arr.size and arr.min() < min_value:
        raise ValueError(f"{name} must be >= {min_value}, found {arr.min()!r}")
    if max_value is not None and arr.size and arr.max() > max_value:
        raise ValueError(f"{name} must be <= {max_value}, found {arr.max()!r}")
    return arr
