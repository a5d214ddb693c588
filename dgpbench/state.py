"""An estimator's fitted state as plain data, and the checks of state read back.

Every saveable transformer and detector has a ``get_state()`` / ``set_state(state, arrays)``
pair: ``get_state`` returns its fitted state as JSON values (``state``) and numpy arrays
(``arrays``), and ``set_state`` restores it on an estimator built with the same parameters,
checking every value as untrusted input (a detector file may be damaged or hostile).
:mod:`dgpbench.saved` stores the pair in a detector file; the checks here are the ones
every family's ``set_state`` shares, with one wording of errors.

This module sits on the ground floor: it imports nothing of dgpbench.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "StateError",
    "check_attributes",
    "check_keys",
    "state_array",
    "state_int",
    "state_shape",
]


class StateError(ValueError):
    """Fitted state that breaks its estimator's rules (a damaged or foreign detector file)."""


def check_attributes(est: Any, known: Iterable[str]) -> None:
    """Refuse to save an estimator holding a fitted attribute its ``get_state`` does not store.

    Parameters
    ----------
    est : estimator
        A fitted estimator with scikit-learn's ``get_params``.
    known : iterable of str
        The attributes its state holds (parameters are always known).

    Raises
    ------
    TypeError
        Naming every other attribute (a subclass's or a new version's state, which a saved
        file would silently lose).
    """
    params = set(est.get_params(deep=False))
    extra = sorted(k for k in vars(est) if k not in params and k not in set(known))
    if extra:
        raise TypeError(
            f"cannot save {type(est).__name__}: attribute {', '.join(extra)} is not part of "
            "its saved state (dgpbench.saved knows only the state of its own estimators; "
            "extend its get_state and set_state when adding state)"
        )


def check_keys(state: Any, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    """Check that ``state`` is a JSON object with every ``required`` key and no unknown one.

    Raises
    ------
    StateError
        If ``state`` is not a dict, lacks a required key or holds another one.
    """
    if not isinstance(state, dict):
        raise StateError("state must be a JSON object")
    required = list(required)
    for key in required:
        if key not in state:
            raise StateError(f"missing {key!r}")
    extra = sorted(set(state) - set(required) - set(optional))
    if extra:
        raise StateError(f"unknown state {extra}")


def state_int(value: Any, name: str, minimum: int = 0) -> int:
    """``value`` if it is a (JSON) integer ``>= minimum``, else :class:`StateError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StateError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def state_shape(value: Any, name: str, *, optional: bool = True) -> tuple[int, ...] | None:
    """A shape of 1 to 4 positive sizes given as a JSON list (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, list) or not 1 <= len(value) <= 4:
        raise StateError(f"{name} must be a list of 1 to 4 sizes, got {value!r}")
    return tuple(state_int(v, name, 1) for v in value)


def state_array(
    value: Any, name: str, *, kinds: str = "f", ndim: int | None = None, finite: bool = True
) -> np.ndarray:
    """``value`` if it is an array of a dtype kind in ``kinds``, with ``ndim`` dimensions
    and (for floats, when ``finite``) no NaN or infinite value; else :class:`StateError`.
    """
    if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
        dtype = getattr(value, "dtype", type(value).__name__)
        raise StateError(f"{name} has dtype {dtype}, expected kind {kinds!r}")
    if ndim is not None and value.ndim != ndim:
        raise StateError(f"{name} has shape {value.shape}, expected {ndim} dimensions")
    if finite and value.dtype.kind == "f" and not np.isfinite(value).all():
        raise StateError(f"{name} holds NaN or infinite values")
    return value
