"""Reading ``.npz`` files (and checkpoint archives) we did not write: every declared size is
checked before data is read.

An ``.npz`` is a zip archive of ``.npy`` arrays, and both layers declare sizes that a reader
trusts: a 4 KB file can declare a 3.6 TiB array, and a few hundred kB of deflated zeros
inflate to gigabytes. :func:`open_npz` refuses, before reading any data,

* a path that is not a regular file once links are followed (a fifo blocks the reader, a
  device such as ``/dev/zero`` never ends), checked before the file is opened;
* a member that is encrypted or uses a compression method other than stored or deflate;
* two members of one name (``x`` and ``x.npy`` name one array): readers disagree on which
  one counts;
* an archive whose members declare more than :func:`max_input_bytes` bytes in all;
* an array whose header declares more than that many bytes, or Python objects (which would
  need unpickling: dgpbench never unpickles a file).

The limit is 1 GiB by default; set the environment variable ``DGPBENCH_MAX_INPUT_BYTES``
(a number of bytes, e.g. ``4e9``) to raise or lower it. Every failure is a ``ValueError``
naming the file and the array. :func:`check_zip_archive` applies the archive-level rules to
a checkpoint (a zip archive too) before torch reads it.
"""

from __future__ import annotations

import math
import os
import stat
import zipfile
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "MAX_INPUT_BYTES_ENV",
    "NpzReader",
    "check_regular_file",
    "check_zip_archive",
    "file_type",
    "max_input_bytes",
    "open_npz",
]

MAX_INPUT_BYTES_ENV = "DGPBENCH_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 2**30

_SUPPORTED_COMPRESSION = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_HEADER_READERS = {
    (1, 0): npy_format.read_array_header_1_0,
    (2, 0): npy_format.read_array_header_2_0,
}


def max_input_bytes() -> int:
    """The largest number of bytes an input file may declare (``$DGPBENCH_MAX_INPUT_BYTES``).

    Raises
    ------
    ValueError
        If the environment variable is set but not a positive number.
    """
    text = os.environ.get(MAX_INPUT_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{MAX_INPUT_BYTES_ENV} must be a positive number of bytes, got {text!r}")
    return int(value)


def file_type(mode: int) -> str:
    """What a file mode (``os.stat(path).st_mode``) says a path is, for error messages.

    Examples
    --------
    >>> import stat
    >>> file_type(stat.S_IFIFO), file_type(stat.S_IFREG)
    ('a named pipe (fifo)', 'a regular file')
    """
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (fifo)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(path: str | os.PathLike[str], what: str = "") -> None:
    """Refuse a path that exists but is not a regular file, without opening it.

    Links are followed (``os.stat``): a link to a regular file passes, a link to ``/dev/zero``
    does not. A missing path passes, for the caller to report.

    Parameters
    ----------
    path : path-like
        The input file.
    what : str, optional
        What the file is, put before its name in the message (``"checkpoint"``).

    Raises
    ------
    ValueError
        Naming ``path`` and what it is (a fifo, a device, a socket, a directory).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        name = f"{what} {path}" if what else str(path)
        raise ValueError(
            f"{name} is {file_type(mode)}, not a regular file: dgpbench reads its inputs "
            "only from regular files"
        )


def _size(n: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _refuse_duplicates(path: Path, names: list[str]) -> None:
    """Refuse an archive with two members of one name (``x`` and ``x.npy`` are one array):
    zip readers disagree on which one counts, so the file means two things.
    """
    keys = [name[:-4] if name.endswith(".npy") else name for name in names]
    dup = sorted({key for key in keys if keys.count(key) > 1})
    if dup:
        raise ValueError(
            f"{path} has duplicate entries {dup[:3]}: readers disagree on which one counts; "
            "write the file again (numpy.savez)"
        )


class NpzReader:
    """A checked ``.npz`` archive: ``files``, ``key in reader``, ``reader[key]``, ``with``.

    Use :func:`open_npz` to open one.
    """

    def __init__(self, path: Path, archive: zipfile.ZipFile, limit: int) -> None:
        self.path = path
        self._zip = archive
        self._limit = limit
        members = [info for info in archive.infolist() if not info.is_dir()]
        self._members = {
            (info.filename[:-4] if info.filename.endswith(".npy") else info.filename): info
            for info in members
        }
        if len(self._members) != len(members):
            _refuse_duplicates(path, [info.filename for info in members])
        for key, info in self._members.items():
            if info.flag_bits & 0x1:
                raise ValueError(f"{path}: array {key!r} is encrypted; dgpbench reads plain .npz")
            if info.compress_type not in _SUPPORTED_COMPRESSION:
                raise ValueError(
                    f"{path}: array {key!r} uses zip compression method {info.compress_type}; "
                    "an .npz is stored or deflated (numpy.savez or numpy.savez_compressed)"
                )
        declared = sum(info.file_size for info in self._members.values())
        self._check_size(declared, "its arrays declare")
        self.files = list(self._members)

    def _check_size(self, n: int, what: str) -> None:
        if n > self._limit:
            raise ValueError(
                f"{self.path}: {what} {_size(n)}, more than the limit of {_size(self._limit)} "
                f"(set {MAX_INPUT_BYTES_ENV} to a larger number of bytes if the file is genuine)"
            )

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __iter__(self) -> Any:
        return iter(self.files)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._members:
            raise KeyError(f"{self.path} has no array {key!r}; it has {sorted(self.files)}")
        info = self._members[key]
        where = f"array {key!r} of {self.path}"
        try:
            with self._zip.open(info) as fh:
                version = npy_format.read_magic(fh)
                if version not in _HEADER_READERS:
                    raise ValueError(f"unsupported .npy format version {version}")
                shape, _, dtype = _HEADER_READERS[version](fh)
            if dtype.hasobject:
                raise ValueError(
                    f"{where} holds Python objects, which dgpbench never unpickles; "
                    "store numbers (e.g. uint8 or float32 images, integer labels)"
                )
            self._check_size(
                math.prod(shape) * dtype.itemsize, f"{where} declares shape {shape} {dtype} ="
            )
            with self._zip.open(info) as fh:
                return npy_format.read_array(fh, allow_pickle=False)
        except ValueError as exc:
            if str(self.path) in str(exc):
                raise
            raise ValueError(f"cannot read {where}: {exc}") from exc
        except Exception as exc:  # zlib, CRC, EOF, MemoryError...: a damaged or hostile file
            raise ValueError(
                f"cannot read {where}: {type(exc).__name__}: {exc} (corrupt file?)"
            ) from exc

    def close(self) -> None:
        """Close the archive."""
        self._zip.close()

    def __enter__(self) -> NpzReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_npz(path: str | os.PathLike[str]) -> NpzReader:
    """Open an ``.npz`` file after checking what it declares (see the module docstring).

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    NpzReader
        Read arrays with ``reader[key]``; close it (or use ``with``).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If ``path`` is a folder, a fifo, a device or a socket, not an ``.npz`` archive, or
        breaks a rule above.

    Examples
    --------
    >>> import io, numpy as np, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.npz"
    >>> np.savez(path, x=np.arange(3))
    >>> with open_npz(path) as f:
    ...     f.files, f["x"].tolist()
    (['x'], [0, 1, 2])
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not an .npz file")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    check_regular_file(path)  # before opening: a fifo would block, /dev/zero never end
    limit = max_input_bytes()
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        with open(path, "rb") as fh:
            is_npy = fh.read(6) == b"\x93NUMPY"
        what = "it is a single .npy array" if is_npy else "not a zip archive, or truncated"
        raise ValueError(
            f"cannot read {path}: not an .npz file (a zip archive of .npy arrays, as "
            f"numpy.savez writes): {what}"
        ) from exc
    try:
        return NpzReader(path, archive, limit)
    except BaseException:
        archive.close()
        raise


def check_zip_archive(path: str | os.PathLike[str], what: str = "file") -> None:
    """Apply the archive rules above (no encryption, stored or deflate, declared sizes within
    :func:`max_input_bytes`) to a zip file such as a torch checkpoint; other files pass.

    Raises
    ------
    ValueError
        Naming ``path`` and the member that breaks a rule.
    """
    path = Path(path)
    check_regular_file(path, what)  # is_zipfile opens it: a fifo would block
    if not zipfile.is_zipfile(path):
        return
    limit = max_input_bytes()
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.flag_bits & 0x1:
                raise ValueError(f"{what} {path}: member {info.filename!r} is encrypted")
            if info.compress_type not in _SUPPORTED_COMPRESSION:
                raise ValueError(
                    f"{what} {path}: member {info.filename!r} uses zip compression method "
                    f"{info.compress_type}"
                )
        names = archive.namelist()
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(
                f"{what} {path} has duplicate entries {dup[:3]}: readers disagree on which "
                "one counts"
            )
        declared = sum(info.file_size for info in archive.infolist())
    if declared > limit:
        raise ValueError(
            f"{what} {path}: its members declare {_size(declared)}, more than the limit of "
            f"{_size(limit)} (set {MAX_INPUT_BYTES_ENV} to a larger number of bytes if the file "
            "is genuine)"
        )
