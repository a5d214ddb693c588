"""A stream's state on disk: stop a monitored stream and resume it with the same decisions.

One ``.npz`` file (no pickle, written atomically): a JSON header ``__meta__`` with the
format tag :data:`STREAM_FORMAT`, the detector's class name, a SHA-256 of the detector's
fitted state (so that a state resumes only on the detector that wrote it), the stream's
JSON values and the caller's ``info``; then the stream's arrays (window, counts, running
sums) under their names. It is read with :mod:`dgpbench.npz`'s size-checked reader and
every value is checked by the detector's ``set_stream_state``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from dgpbench.io import atomic_path

__all__ = ["STREAM_FORMAT", "detector_digest", "load_stream_state", "save_stream_state"]

#: Format tag of a stream-state file.
STREAM_FORMAT = "dgpbench-stream/1"
_META = "__meta__"


def detector_digest(detector: Any) -> str:
    """SHA-256 of a fitted online detector: class, parameters and fitted state.

    Parameters
    ----------
    detector : OnlineMMDDetector or OnlineCVMDetector
        A fitted detector.

    Returns
    -------
    str
        64 hex digits.
    """
    state, arrays = detector.get_state()
    params = {k: v for k, v in detector.get_params().items() if k != "random_state"}
    h = hashlib.sha256(json.dumps([type(detector).__name__, params, state], sort_keys=True,
                                  default=str).encode())  # fmt: skip
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key], dtype=np.float64)
        h.update(key.encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def save_stream_state(
    path: str | os.PathLike[str], detector: Any, info: dict[str, Any] | None = None
) -> Path:
    """Write the detector's current stream state to ``path``.

    Parameters
    ----------
    path : path-like
        The output ``.npz`` file.
    detector : OnlineMMDDetector or OnlineCVMDetector
        A fitted detector (a fresh stream if it has seen no sample).
    info : dict, optional
        JSON facts to keep with the state (e.g. which files were read).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    state, arrays = detector.get_stream_state()
    meta = {
        "format": STREAM_FORMAT,
        "detector": type(detector).__name__,
        "detector_sha256": detector_digest(detector),
        "stream": state,
        "info": info or {},
    }
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **{_META: np.array(json.dumps(meta, allow_nan=False))}, **arrays)
    return Path(path)


def load_stream_state(path: str | os.PathLike[str], detector: Any) -> dict[str, Any]:
    """Resume ``detector``'s stream from a file written by :func:`save_stream_state`.

    Parameters
    ----------
    path : path-like
        The state file.
    detector : OnlineMMDDetector or OnlineCVMDetector
        The fitted detector that wrote it.

    Returns
    -------
    dict
        The ``info`` saved with the state.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a stream state, belongs to another detector, or a value is
        invalid.
    """
    from dgpbench.npz import open_npz

    with open_npz(path) as store:
        try:
            raw = store[_META] if _META in store else None
            if raw is None or raw.dtype.kind != "U" or raw.ndim != 0:
                raise ValueError("no JSON header")
            meta = json.loads(str(raw))
            if not isinstance(meta, dict) or meta.get("format") != STREAM_FORMAT:
                raise ValueError(f"format is not {STREAM_FORMAT!r}")
            if meta.get("detector") != type(detector).__name__ or meta.get(
                "detector_sha256"
            ) != detector_digest(detector):
                raise ValueError("it was written by another detector (or another fit of it)")
            stream = meta.get("stream")
            if not isinstance(stream, dict):
                raise ValueError("stream must be a JSON object")
            arrays = {k: store[k] for k in store.files if k != _META}
            detector.set_stream_state(stream, arrays)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a stream state of this detector: {exc}") from exc
    info = meta.get("info")
    return info if isinstance(info, dict) else {}
