"""The detector file format: one ``.npz`` file, a JSON header and named arrays, no pickle.

A saved detector is one ``.npz`` file:

* ``__meta__``: a JSON string (at most :data:`MAX_META_BYTES`) with the format tag
  :data:`FORMAT`, the dgpbench version, the network (its path or ``package.module:factory``,
  and the SHA-256 of the fitted network's layers and weights), and for the transformer and
  the detector: a registry name, its constructor parameters (JSON values) and its fitted
  state's JSON values;
* optionally ``calibration``: the measured false alarms of ``dgpbench calibrate``
  (:mod:`dgpbench.saved.calibration`; its own layout tag, checked on load). An optional key
  keeps :data:`FORMAT`: files without it load as before;
* the fitted arrays, one array each, named ``<role>/<name>`` (``features/class_means_/0``,
  ``detector/X_ref_``, ...).

The file is read with the size-checked reader of :mod:`dgpbench.npz` (no pickle, declared
sizes within ``$DGPBENCH_MAX_INPUT_BYTES``); every array read is recorded, so that an array
no estimator asked for is an error (:class:`RoleArrays`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from dgpbench.io import atomic_path

__all__ = [
    "FORMAT",
    "MAX_META_BYTES",
    "META",
    "OPTIONAL_KEYS",
    "RoleArrays",
    "json_value",
    "read_meta",
    "write",
]

#: Format tag of a saved detector file (2: registry names, fitted-network fingerprint).
FORMAT = "dgpbench-detector/2"
#: The name of the JSON header in the file.
META = "__meta__"
#: The largest JSON header read (the JSON of a detector is kilobytes).
MAX_META_BYTES = 16 * 2**20
_META_KEYS = frozenset(("format", "version", "model", "features", "detector", "info"))
#: Keys a header may add to :data:`_META_KEYS` (files without them load as before).
OPTIONAL_KEYS = frozenset(("calibration",))


class _Invalid(ValueError):
    """A detector file whose content breaks the format (load_detector adds the path)."""


def json_value(value: Any) -> bool:
    """Whether JSON stores ``value`` exactly: scalars and (nested) lists of scalars."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, list | tuple) and all(map(json_value, value))


class RoleArrays(Mapping):
    """The arrays of one role (``features`` or ``detector``) of an open file, by their
    names within the role, read on demand; every name read is added to ``used``.
    """

    def __init__(self, role: str, store: Any, used: set[str]) -> None:
        self._role = role
        self._store = store
        self._used = used
        self._names = [n[len(role) + 1 :] for n in store.files if n.startswith(f"{role}/")]

    def __getitem__(self, key: str) -> np.ndarray:
        name = f"{self._role}/{key}"
        if name not in self._store:
            raise _Invalid(f"missing array {name!r}")
        self._used.add(name)
        try:
            return self._store[name]
        except ValueError as exc:
            raise _Invalid(str(exc)) from exc

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def read_meta(store: Any) -> dict[str, Any]:
    """The checked JSON header of an open detector file (:func:`dgpbench.npz.open_npz`).

    Raises
    ------
    ValueError
        If there is no header, it is not one JSON object of the expected keys, or it has
        another format tag (an older one: the file must be fitted again).
    """
    if META not in store:
        raise _Invalid("no __meta__ entry")
    try:
        raw = store[META]
    except ValueError as exc:
        raise _Invalid(str(exc)) from exc
    if raw.dtype.kind != "U" or raw.ndim != 0 or raw.nbytes > 4 * MAX_META_BYTES:
        raise _Invalid("__meta__ is not one JSON string")
    try:
        meta = json.loads(str(raw))
    except (ValueError, RecursionError) as exc:
        raise _Invalid(f"__meta__ is not valid JSON ({type(exc).__name__})") from exc
    if not isinstance(meta, dict):
        raise _Invalid("__meta__ is not a JSON object")
    if meta.get("format") != FORMAT:
        older = str(meta.get("format", "")).startswith("dgpbench-detector/")
        raise _Invalid(
            f"format {meta.get('format')!r}, expected {FORMAT!r}"
            + ("; it was written by an older dgpbench: fit it again" if older else "")
        )
    if not _META_KEYS <= set(meta) <= _META_KEYS | OPTIONAL_KEYS:
        raise _Invalid(
            f"__meta__ has keys {sorted(meta)}, expected {sorted(_META_KEYS)} (and optionally "
            f"{sorted(OPTIONAL_KEYS)})"
        )
    if not isinstance(meta["version"], str):
        raise _Invalid(f"version must be a string, got {meta['version']!r}")
    if not isinstance(meta["info"], dict):
        raise _Invalid("info must be a JSON object")
    model = meta["model"]
    if model is not None:
        if not isinstance(model, dict) or set(model) != {"reference", "sha256"}:
            raise _Invalid("model must be null or an object with reference and sha256")
        ref, sha = model["reference"], model["sha256"]
        if not (ref is None or isinstance(ref, str)):
            raise _Invalid(f"model reference must be a string or null, got {ref!r}")
        if not (
            isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)
        ):
            raise _Invalid(f"model sha256 must be 64 hex digits, got {sha!r}")
    return meta


def write(
    path: str | os.PathLike[str], meta: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    """Write a header and arrays as one ``.npz`` file, atomically (no pickle)."""
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **{META: np.array(json.dumps(meta))}, **arrays)
