"""The boundary between the workflow's steps and a feature method (built-in or custom).

A custom method (``package.module:ClassName``) is the user's code: it may raise anything,
return fewer rows than images, a 1-D or complex array, NaN, or feature names of the wrong
length. :func:`fit_method` and :func:`transform_method` call it and check what comes back,
so that every such case ends in one ``ValueError`` naming the method and the image set,
never in a wrong result (features of 150 images saved for 300) or an error from deep inside
scikit-learn or pandas.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_features", "feature_names", "fit_method", "transform_method"]


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, ValueError) and text:  # our own checks and scikit-learn's say enough
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fit_method(estimator: Any, X: Any, y: Any, method: str) -> None:
    """``estimator.fit(X, y)``; any failure becomes a ``ValueError`` naming ``method``."""
    try:
        estimator.fit(X, y)
    except Exception as exc:
        raise ValueError(
            f"method {method!r} failed to fit the reference images: {_first_line(exc)}"
        ) from exc


def check_features(values: Any, n_images: int, method: str, what: str) -> np.ndarray:
    """Check a method's output for ``n_images`` images and return it as float64.

    Parameters
    ----------
    values : array-like
        What ``transform`` returned.
    n_images : int
        Images it was given.
    method : str
        The method's name (for the message).
    what : str
        The image set (for the message), e.g. ``"the clean images"``.

    Returns
    -------
    ndarray of float64, shape (n_images, n_features)

    Raises
    ------
    ValueError
        Unless ``values`` is a 2-D array of real numbers, one finite row per image, with at
        least one column.

    Examples
    --------
    >>> check_features([[1, 2], [3, 4]], 2, "m", "x").dtype
    dtype('float64')
    >>> check_features([[1, 2]], 2, "m", "the batch")
    Traceback (most recent call last):
    ...
    ValueError: method 'm' returned 1 rows for 2 images of the batch: one row of features per image is needed
    """
    where = f"method {method!r} returned"
    try:
        array = np.asarray(values)
    except Exception as exc:
        raise ValueError(
            f"{where} {type(values).__name__} for {what}, not an array: {exc}"
        ) from exc
    if array.dtype == bool or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise ValueError(
            f"{where} values of dtype {array.dtype} for {what}; features must be real numbers "
            "(integer or floating)"
        )
    if array.ndim != 2:
        raise ValueError(
            f"{where} an array of shape {array.shape} for {what}; expected "
            f"(n_images, n_features) = ({n_images}, ...)"
        )
    if array.shape[0] != n_images:
        raise ValueError(
            f"{where} {array.shape[0]} rows for {n_images} images of {what}: one row of "
            "features per image is needed"
        )
    if array.shape[1] == 0:
        raise ValueError(f"{where} no features (0 columns) for {what}")
    finite = np.isfinite(array)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise ValueError(
            f"{where} {int((~finite).sum())} NaN or infinite values for {what} (first at "
            f"image {row}, feature {col}); features must be finite"
        )
    return array.astype(np.float64, copy=False)


def transform_method(estimator: Any, X: Any, method: str, what: str) -> np.ndarray:
    """``estimator.transform(X)``, checked by :func:`check_features`.

    Raises
    ------
    ValueError
        If ``transform`` raises (message naming ``method`` and ``what``) or its output fails
        :func:`check_features`.
    """
    try:
        values = estimator.transform(X)
    except Exception as exc:
        raise ValueError(f"method {method!r} failed on {what}: {_first_line(exc)}") from exc
    return check_features(values, len(X), method, what)


def feature_names(estimator: Any, n_features: int, method: str) -> list[str]:
    """The estimator's ``get_feature_names_out()`` (or ``feature<k>``), one per feature.

    Raises
    ------
    ValueError
        If the method gives a number of names other than ``n_features``, or raises.
    """
    if not hasattr(estimator, "get_feature_names_out"):
        return [f"feature{k}" for k in range(n_features)]
    try:
        names = [str(n) for n in np.asarray(estimator.get_feature_names_out()).reshape(-1)]
    except Exception as exc:
        raise ValueError(
            f"method {method!r}: get_feature_names_out failed: {_first_line(exc)}"
        ) from exc
    if len(names) != n_features:
        raise ValueError(
            f"method {method!r}: get_feature_names_out gives {len(names)} names for "
            f"{n_features} features"
        )
    return names
