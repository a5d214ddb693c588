"""Atomic file output: write to a temporary file in the target folder, then rename.

A run killed mid-write leaves either the old file or no file, never a truncated one, so an
interrupted workflow resumes cleanly. Files get the permissions a plain ``open()`` would give
them (``0666`` minus the umask), not the private ``0600`` of a temporary file.

Only a regular file is ever replaced: an existing output path that is a directory, a fifo, a
device (``/dev/null``, ``/dev/full``) or a socket is refused before anything is written, since
renaming over it would destroy it. A link to a regular file is followed, as ``open()`` follows
it: the file it points to is replaced and the link kept.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dgpbench.npz import file_type

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


def output_problem(path: str | os.PathLike, *, folder: bool = False) -> str | None:
    """Why ``path`` cannot be written as an output, or None if it can; nothing is written.

    Links are followed. An existing path must be a regular file (with ``folder``, a
    directory); otherwise its nearest existing parent must be a directory this process may
    write into (it gets the missing folders below it).

    Parameters
    ----------
    path : path-like
        The output file (or folder).
    folder : bool, default=False
        Whether ``path`` is an output folder.

    Returns
    -------
    str or None
        The reason, a phrase about ``path`` without its name (``"it is a directory, not a
        regular file"``), or None.

    Examples
    --------
    >>> import tempfile
    >>> output_problem(tempfile.gettempdir())
    'it is a directory, not a regular file'
    >>> output_problem(tempfile.gettempdir(), folder=True) is None
    True
    """
    real = Path(os.path.realpath(path))
    try:
        mode = os.stat(real).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None  # missing, or below a file (reported below)
    except OSError as exc:  # a link loop, no permission
        return f"it cannot be checked ({exc.strerror or exc})"
    if mode is not None:
        wanted = stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)
        if not wanted:
            return f"it is {file_type(mode)}, not {'a directory' if folder else 'a regular file'}"
        where = real if folder else real.parent
    else:
        where = next(p for p in real.parents if os.path.lexists(p))
        if not where.is_dir():
            return f"{where} is not a directory"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"the folder {where} is not writable (read-only, or no permission)"
    return None


def _regular_target(path: Path) -> Path:
    """The file an output at ``path`` replaces (links followed); an error if not a regular one."""
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"cannot write {path}: it is {file_type(mode)}, not a regular file; dgpbench "
            "replaces only regular files (choose a file path)"
        )
    return real


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success move it onto ``path``.

    Parameters
    ----------
    path : path-like
        The final destination: a regular file or a new path (a link to a regular file
        is followed). Missing parent folders are created.
    suffix : str, optional
        Suffix of the temporary file (some writers, like ``np.savez``, append one otherwise).

    Yields
    ------
    pathlib.Path
        Where the caller writes. It is removed if the block raises.

    Raises
    ------
    ValueError
        If ``path`` exists and is not a regular file (a directory, a fifo, a device such as
        ``/dev/null``, a socket), before anything is written.
    OSError
        As raised by the writer; one without a file name (a full disk) gets ``path``.
    """
    path = _regular_target(Path(path))
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


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 hex digest of a file's bytes, read in blocks (a features file is gigabytes)."""
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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
