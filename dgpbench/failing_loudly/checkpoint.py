"""Resuming a long ``fl-detect`` job at its last finished unit.

:func:`dgpbench.failing_loudly.grid.method_records` runs one unit (every draw of one cell of
one run) after another, and a unit's records depend only on the unit and the job's inputs and
settings: its draws, the permutations and the domain classifier's training are seeded from
the cell and run (:mod:`dgpbench.failing_loudly.grid`), never from a stream shared with the
units before it. The records of the units an interrupted job finished are therefore those an
uninterrupted job computes. :class:`UnitCheckpoint` keeps them beside the output in an
``.npz`` of plain arrays (no pickles: reading one runs no code), with a fingerprint of all
that decides them (:func:`fingerprint`: the features file's contents, the method and every
setting). A rerun whose fingerprint matches skips those units; any other checkpoint, or one
that cannot be read, is ignored with a log line and the job starts over. Each write goes to a
temporary file moved into place, so a kill at any instant leaves the old checkpoint or the
new one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dgpbench.failing_loudly.grid import Unit
from dgpbench.io import file_sha256, load_npz, save_npz

log = logging.getLogger(__name__)

__all__ = ["FORMAT_VERSION", "SAVE_INTERVAL_S", "UnitCheckpoint", "checkpoint_path", "fingerprint"]

FORMAT_VERSION = 1
"""The checkpoint layout's version (part of the fingerprint: another layout is ignored)."""
SAVE_INTERVAL_S = 10.0
"""Least seconds between two writes. A write of a whole MNIST job's records (155 units, 6,330
rows) takes ~16 ms: a domain-classifier unit (~20 s) is written as it ends (0.1 %), while
writing each of the fastest jobs' units (bbsdh+chi2, 155 units in ~10 s) would add 30 %."""


def checkpoint_path(out: str | os.PathLike[str]) -> Path:
    """The checkpoint of the job writing ``out``: ``<out>.partial.npz`` in the same folder.

    Examples
    --------
    >>> checkpoint_path("records/mnist/none/classif.csv").name
    'classif.csv.partial.npz'
    """
    return Path(f"{os.fspath(out)}.partial.npz")


def fingerprint(features: str | os.PathLike[str], settings: Mapping[str, Any]) -> str:
    """A digest of what decides a job's records: the features file's bytes and ``settings``.

    Parameters
    ----------
    features : path-like
        The features file (its whole contents are hashed: a file remade with other models or
        images gives another fingerprint, one rewritten with the same bytes the same).
    settings : mapping of str to JSON-serialisable values
        The method and every option (values that JSON does not know are written as their
        ``repr``).

    Returns
    -------
    str
        A SHA-256 hex digest.
    """
    text = json.dumps({"format": FORMAT_VERSION, **settings}, sort_keys=True, default=repr)
    h = hashlib.sha256(text.encode())
    h.update(bytes.fromhex(file_sha256(features)))  # the features file's raw digest
    return h.hexdigest()


class UnitCheckpoint:
    """The finished units' records of one job, written atomically to ``path``.

    Parameters
    ----------
    path : path-like
        The checkpoint (:func:`checkpoint_path` of the job's output).
    fingerprint : str
        The job's :func:`fingerprint`; a checkpoint with another one is ignored.
    interval_s : float, optional
        Least seconds between two writes (default :data:`SAVE_INTERVAL_S`); 0 writes after
        every unit.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> ckpt = UnitCheckpoint(checkpoint_path(f"{folder}/r.csv"), "abc", interval_s=0)
    >>> ckpt.add(("none", 0.0, 0), pd.DataFrame({"n": [10, 10], "rejected": [False, True]}))
    >>> UnitCheckpoint(ckpt.path, "abc").load()[("none", 0.0, 0)]["rejected"].tolist()
    [False, True]
    >>> UnitCheckpoint(ckpt.path, "other").load()
    {}
    >>> ckpt.remove(); ckpt.path.exists()
    False
    """

    def __init__(
        self, path: str | os.PathLike[str], fingerprint: str, *, interval_s: float | None = None
    ) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.interval_s = SAVE_INTERVAL_S if interval_s is None else float(interval_s)
        self._units: list[Unit] = []
        self._frames: list[pd.DataFrame] = []
        self._saved = 0
        self._last = time.monotonic()

    def load(self) -> dict[Unit, pd.DataFrame]:
        """The records of the units a matching checkpoint holds (none if there is none).

        A checkpoint of other inputs or settings is ignored (logged); one that cannot be read
        is ignored with a warning. Either is overwritten by the next write.

        Returns
        -------
        dict
            ``(shift, fraction, run)`` -> the unit's records, in the order they were run.
        """
        if not self.path.exists():
            return {}
        try:
            arrays = load_npz(self.path)
            stored = str(arrays["fingerprint"].item())
        except Exception as exc:  # any damage means: start over
            log.warning("ignoring the checkpoint %s, which cannot be read (%s): starting over",
                        self.path, _first_line(exc))  # fmt: skip
            return {}
        if stored != self.fingerprint:
            log.info("ignoring the checkpoint %s, made from other inputs or settings: "
                     "starting over", self.path)  # fmt: skip
            return {}
        try:
            finished = _decode(arrays)
        except Exception as exc:
            log.warning("ignoring the checkpoint %s, which is damaged (%s): starting over",
                        self.path, _first_line(exc))  # fmt: skip
            return {}
        self._units, self._frames = list(finished), list(finished.values())
        self._saved = len(self._units)
        return finished

    def add(self, unit: Unit, records: pd.DataFrame) -> None:
        """Record a finished unit; write the checkpoint if the last write is old enough.

        Parameters
        ----------
        unit : tuple
            ``(shift, fraction, run)``.
        records : pandas.DataFrame
            Its records (no rows where no sample size fits its pools).
        """
        self._units.append((str(unit[0]), float(unit[1]), int(unit[2])))
        self._frames.append(records)
        if time.monotonic() - self._last >= self.interval_s:
            self.save()

    def save(self) -> None:
        """Write every unit recorded so far (nothing if the file already holds them)."""
        if len(self._units) == self._saved:
            return
        save_npz(self.path, **_encode(self.fingerprint, self._units, self._frames))
        self._saved = len(self._units)
        self._last = time.monotonic()

    def remove(self) -> None:
        """Delete the checkpoint (the job's output is complete)."""
        self.path.unlink(missing_ok=True)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _encode(fp: str, units: list[Unit], frames: list[pd.DataFrame]) -> dict[str, np.ndarray]:
    filled = [f for f in frames if len(f)]
    records = pd.concat(filled, ignore_index=True) if filled else pd.DataFrame()
    out = {
        "fingerprint": np.array(fp),
        "columns": np.array([str(c) for c in records.columns], dtype=str),
        "unit_shift": np.array([u[0] for u in units], dtype=str),
        "unit_fraction": np.array([u[1] for u in units], dtype=np.float64),
        "unit_run": np.array([u[2] for u in units], dtype=np.int64),
        "unit_rows": np.array([len(f) for f in frames], dtype=np.int64),
    }
    for i, column in enumerate(records.columns):
        values = records[column].to_numpy()
        if values.dtype == object:  # text: a fixed-width array, never a pickle
            if not all(isinstance(v, str) for v in values):
                raise TypeError(f"record column {column!r} mixes text with other values")
            values = values.astype(str)
        out[f"column_{i}"] = values
    return out


def _decode(arrays: Mapping[str, np.ndarray]) -> dict[Unit, pd.DataFrame]:
    columns = [str(c) for c in arrays["columns"]]
    data = [arrays[f"column_{i}"] for i in range(len(columns))]
    shifts, fractions = arrays["unit_shift"], arrays["unit_fraction"]
    runs, rows = arrays["unit_run"], arrays["unit_rows"]
    if not len(shifts) == len(fractions) == len(runs) == len(rows):
        raise ValueError("its unit arrays differ in length")
    if (rows < 0).any() or any(len(d) != int(rows.sum()) for d in data):
        raise ValueError("its records do not add up to its units' rows")
    out: dict[Unit, pd.DataFrame] = {}
    start = 0
    for shift, fraction, run, k in zip(shifts, fractions, runs, rows, strict=True):
        stop = start + int(k)
        frame = pd.DataFrame({c: d[start:stop] for c, d in zip(columns, data, strict=True)})
        out[(str(shift), float(fraction), int(run))] = frame if k else pd.DataFrame()
        start = stop
    return out
