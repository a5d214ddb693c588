"""The input limit of the grid's own files, sized from the files as written.

``dgpbench.npz`` refuses an ``.npz`` whose arrays declare more than
:func:`dgpbench.npz.max_input_bytes` (1 GiB by default): a guard against files we did not
write. The grid's steps read files the steps before them wrote (pools, shifts, features), and
these pass 1 GiB on 3,072-value images (a features file of NoRed holds float64 pixels). The
workflow therefore raises the limit for a step to what its input files declare, read off the
files' zip directories when the step runs: no estimate from the config to fall short of it.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable

from dgpbench.npz import MAX_INPUT_BYTES_ENV, max_input_bytes

__all__ = ["declared_bytes", "input_limit_env"]


def declared_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes the members of a zip archive (an ``.npz``) declare, as ``dgpbench.npz`` counts.

    Parameters
    ----------
    path : path-like
        The archive.

    Returns
    -------
    int
        The sum of the members' uncompressed sizes (the ``.npy`` headers included).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist (yet).
    ValueError
        If ``path`` is not a zip archive.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     np.savez(f"{d}/a.npz", x=np.zeros(1000))
    ...     declared_bytes(f"{d}/a.npz") >= 8000
    True
    """
    try:
        with zipfile.ZipFile(path) as archive:
            return sum(info.file_size for info in archive.infolist() if not info.is_dir())
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not an .npz (zip) archive: {exc}") from None


def input_limit_env(paths: Iterable[str | os.PathLike[str]]) -> str:
    """``DGPBENCH_MAX_INPUT_BYTES=<n> `` for a shell command that reads ``paths``, or ``""``.

    ``n`` is the most any one of the ``.npz`` files declares; nothing is returned when the
    limit in force (:func:`dgpbench.npz.max_input_bytes`) already admits every file, so the
    limit is only ever raised, and only to what the files hold.

    Parameters
    ----------
    paths : iterable of path-like
        The step's input files; those not ending in ``.npz`` are ignored.

    Returns
    -------
    str
        The environment assignment with a trailing space, or an empty string.

    Raises
    ------
    FileNotFoundError
        If a file does not exist yet (Snakemake then evaluates the call again when the job
        runs).
    """
    need = max((declared_bytes(p) for p in map(str, paths) if p.endswith(".npz")), default=0)
    return f"{MAX_INPUT_BYTES_ENV}={need} " if need > max_input_bytes() else ""
