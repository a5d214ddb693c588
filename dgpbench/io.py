"""Atomic file output: write to a temporary file in the target folder, then rename.

A run killed mid-write leaves either the old file or no file, never a truncated one, so an
interrupted workflow resumes cleanly. Files get the permissions a plain ``open()`` would give
them (``0666`` minus the umask), not the private ``0600`` of a temporary file.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported by the callers that write tables, not here
    import pandas as pd


def _umask() -> int:
    """The process's umask (read from /proc where possible: setting it is not thread-safe)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success move it onto ``path``.

    Parameters
    ----------
    path : path-like
        The final destination. Missing parent folders are created.
    suffix : str, optional
        Suffix of the temporary file (some writers, like ``np.savez``, append one otherwise).

    Yields
    ------
    pathlib.Path
        Where the caller writes. It is removed if the block raises.

    Raises
    ------
    OSError
        As raised by the writer; one without a file name (a full disk) gets ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=suffix or ".tmp", dir=path.parent
        )
    except OSError as exc:  # e.g. a read-only folder: name the output, not a temporary file
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
    tmp_path = Path(tmp)
    try:
        # mkstemp creates the file 0600 and os.replace keeps that mode: give it the mode a
        # plain open() would (0666 minus the umask), so colleagues can read the outputs.
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        if exc.errno is None or exc.filename not in (None, str(tmp_path), tmp_path):
            raise
        # Writers report a full disk (ENOSPC) without a file name, or with the temporary
        # one: name the output that could not be written.
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        tmp_path.unlink(missing_ok=True)


def save_npz(path: str | os.PathLike, **arrays: Any) -> None:
    """Save arrays to an uncompressed ``.npz`` atomically."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays)


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Load every array of an ``.npz`` into memory, with a clear error for a bad file (see
    :mod:`dgpbench.npz` for the size limit).
    """
    from dgpbench.npz import open_npz

    with open_npz(path) as f:  # sizes checked first; any failure names the file and array
        return {k: f[k] for k in f.files}


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_csv(path: str | os.PathLike, frame: pd.DataFrame, **kwargs: Any) -> None:
    """Write a DataFrame as CSV atomically (no index unless asked).

    A ``.gz`` path is gzip-compressed with no timestamp and no file name in the header, so
    reruns give identical bytes (pandas' own gzip stores the temporary file's name).
    """
    kwargs.setdefault("index", False)
    with atomic_path(path) as tmp:
        if str(path).endswith(".gz"):
            tmp.write_bytes(gzip.compress(frame.to_csv(**kwargs).encode(), mtime=0))
        else:
            frame.to_csv(tmp, **kwargs)


def save_figure(fig: Any, stem: str | os.PathLike, **savefig_kwargs: Any) -> list[Path]:
    """Write a matplotlib figure to ``<stem>.png`` (150 dpi) and ``<stem>.pdf`` atomically.

    Metadata dates and software versions are dropped so that reruns give identical files.
    Further keyword arguments go to ``Figure.savefig`` (e.g. ``bbox_inches="tight"``).
    """
    stem = Path(stem)
    paths = []
    for ext, meta in ((".png", {"Software": None}), (".pdf", {"CreationDate": None})):
        target = stem.with_name(stem.name + ext)
        with atomic_path(target, suffix=ext) as tmp:
            fig.savefig(tmp, dpi=150, metadata=meta, format=ext[1:], **savefig_kwargs)
        paths.append(target)
    return paths
