"""Image data sets as float32 arrays in [0, 1]: one loader for every experiment.

Supported names (:data:`DATASETS`):

``mnist``, ``fashion-mnist``
    Read from a torchvision root (``<root>/MNIST/raw``, ``<root>/FashionMNIST/raw``, the
    uncompressed IDX files torchvision keeps after a download; ``.gz`` copies also work).
``cifar10``
    ``<root>/cifar-10-batches-py/{data_batch_1..5,test_batch}`` (torchvision's layout).
``emnist``
    The *balanced* split, ``<root>/EMNIST/raw/emnist-balanced-{train,test}-*-ubyte``.
    It has 47 classes (the paper says 49; the official balanced split has 47, as in the
    authors' code). The IDX files store every image transposed; they are returned upright
    (H and W swapped back), unlike torchvision's ``EMNIST`` which returns them as stored.
``digits``
    scikit-learn's embedded 8x8 digits (1797 images, no download). Pixels are ``value/16``.
    The train/test split is stratified and deterministic: 30 % of every class (rounded)
    goes to the test split, drawn with ``numpy.random.default_rng(0)``.
``npz:<path>``
    A user's own ``.npz`` file with arrays ``x_train, y_train, x_test, y_test``. Images are
    ``(N, H, W)`` or ``(N, C, H, W)`` (a 4-D array whose last axis has 1, 3 or 4 entries
    and whose second axis has more is taken as channels-last and transposed); ``uint8``
    pixels are divided by 255, floating pixels must already lie in [0, 1]. Labels are
    non-negative integers; the number of classes is ``max(label) + 1`` over both splits,
    or the scalar array ``n_classes`` when the file has one, and every class below it must
    occur (dense labels ``0..c-1``; a stray huge label would build a huge model).

The files are parsed here rather than through torchvision's dataset classes so that a
missing, truncated or corrupt file produces one clear error naming the file;
torchvision is used only to download (``download=True``).
"""

from __future__ import annotations

import gzip
import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dgpbench._validation import check_int
from dgpbench.npz import open_npz

log = logging.getLogger(__name__)

DATASETS: tuple[str, ...] = ("mnist", "fashion-mnist", "cifar10", "emnist", "digits")
"""Names accepted by :func:`load_dataset`, besides ``npz:<path>``."""

SPLITS: tuple[str, ...] = ("train", "test")
ENV_DATA_ROOT = "DGPBENCH_DATA_ROOT"
DIGITS_TEST_FRACTION = 0.3
DIGITS_SPLIT_SEED = 0
VALIDATION_SPLIT_SEED = 42
"""The default seed of the training images' validation split (``TrainConfig.split_seed``)."""

_N_CLASSES = {"mnist": 10, "fashion-mnist": 10, "cifar10": 10, "emnist": 47, "digits": 10}
_N_TEST = {"mnist": 10000, "fashion-mnist": 10000, "cifar10": 10000, "emnist": 18800, "digits": 539}
_IMAGE_SHAPES = {
    "mnist": (1, 28, 28),
    "fashion-mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
    "emnist": (1, 28, 28),
    "digits": (1, 8, 8),
}
_IDX_FILES = {
    # name: (torchvision class name, raw folder, {split: (images file, labels file)})
    "mnist": (
        "MNIST",
        "MNIST/raw",
        {
            "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
            "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
        },
    ),
    "fashion-mnist": (
        "FashionMNIST",
        "FashionMNIST/raw",
        {
            "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
            "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
        },
    ),
    "emnist": (
        "EMNIST",
        "EMNIST/raw",
        {
            "train": (
                "emnist-balanced-train-images-idx3-ubyte",
                "emnist-balanced-train-labels-idx1-ubyte",
            ),
            "test": (
                "emnist-balanced-test-images-idx3-ubyte",
                "emnist-balanced-test-labels-idx1-ubyte",
            ),
        },
    ),
}
_CIFAR_FOLDER = "cifar-10-batches-py"
_CIFAR_FILES = {
    "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
    "test": ("test_batch",),
}


class DatasetNotFoundError(FileNotFoundError):
    """A data set's files are not where they were expected (the message says how to get them)."""


@dataclass(frozen=True)
class _Raw:
    """Images as stored (uint8 or float in [0, 1], shape (N, C, H, W)) with int64 labels."""

    images: np.ndarray
    labels: np.ndarray

    def to_float(self, index: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        x = self.images if index is None else self.images[index]
        y = self.labels if index is None else self.labels[index]
        if x.dtype == np.uint8:
            # Divide in float32: the same values as torchvision's ToTensor (x / 255).
            x = x.astype(np.float32) / np.float32(255.0)
        else:
            x = x.astype(np.float32, copy=index is None)
        return np.ascontiguousarray(x), np.ascontiguousarray(y, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def resolve_data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Return the data root: ``root`` if given, else ``$DGPBENCH_DATA_ROOT``, else ``./data``.

    Parameters
    ----------
    root : str or path-like, optional
        An explicit root (for example the workflow config's ``data_root``).

    Returns
    -------
    pathlib.Path
        The chosen folder (not checked for existence).

    Examples
    --------
    >>> resolve_data_root("/tmp/somewhere").as_posix()
    '/tmp/somewhere'
    """
    if root is not None and str(root) != "":
        return Path(root).expanduser()
    env = os.environ.get(ENV_DATA_ROOT, "")
    if env:
        return Path(env).expanduser()
    return Path("data")


def n_classes(name: str, root: str | os.PathLike[str] | None = None) -> int:
    """Return the number of classes of data set ``name``.

    Parameters
    ----------
    name : str
        A name from :data:`DATASETS` or ``npz:<path>`` (the file is read to count labels).
    root : ignored
        Accepted for symmetry with :func:`load_dataset`.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        On an unknown name.

    Examples
    --------
    >>> n_classes("emnist")
    47
    """
    del root
    name = _check_name(name)
    if name.startswith("npz:"):
        return _npz_n_classes(Path(name[4:]))
    return _N_CLASSES[name]


def n_test_images(name: str) -> int | None:
    """Return how many images the test split of data set ``name`` holds.

    Built-in data sets have fixed splits (digits: the 539 images of its 30 % test part);
    an ``npz:`` file is asked for the length of its ``y_test`` (None if it cannot be read:
    loading it later gives the precise error).

    Examples
    --------
    >>> n_test_images("mnist"), n_test_images("digits")
    (10000, 539)
    """
    name = _check_name(name)
    if name.startswith("npz:"):
        try:
            with _open_npz(Path(name[4:])) as store:
                return len(_npz_array(store, Path(name[4:]), "y_test"))
        except (OSError, ValueError, TypeError):
            return None
    return _N_TEST[name]


def image_shape(name: str) -> tuple[int, int, int]:
    """Return the ``(C, H, W)`` shape of one image of data set ``name``.

    Examples
    --------
    >>> image_shape("cifar10")
    (3, 32, 32)
    """
    name = _check_name(name)
    if name.startswith("npz:"):
        raw = _load_npz(Path(name[4:]), "test")
        return tuple(int(s) for s in raw.images.shape[1:])  # type: ignore[return-value]
    return _IMAGE_SHAPES[name]


def load_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    split: str = "train",
    download: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Load one split of a data set as float32 images in [0, 1] and int64 labels.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS` or ``npz:<path>``.
    root : str or path-like, optional
        Data root (see :func:`resolve_data_root`). Ignored for ``digits`` and ``npz:``.
    split : {"train", "test"}
        Which split.
    download : bool, default=False
        Let torchvision download missing files into ``root`` first (needs network).

    Returns
    -------
    images : numpy.ndarray of shape (N, C, H, W), float32
        Pixel values in [0, 1].
    labels : numpy.ndarray of shape (N,), int64
        Class indices in ``[0, n_classes(name))``.

    Raises
    ------
    DatasetNotFoundError
        If files are missing; the message lists them and how to download them.
    ValueError
        On an unknown name or split, or a truncated/corrupt file.

    Examples
    --------
    >>> x, y = load_dataset("digits", split="test")
    >>> x.shape[1:], x.dtype, float(x.max()) <= 1.0, y.dtype
    ((1, 8, 8), dtype('float32'), True, dtype('int64'))
    """
    return _load_raw(name, root, split, download).to_float()


def sample_image_sets(
    name: str,
    root: str | os.PathLike[str] | None = None,
    *,
    n_refs: int = 1000,
    n_test: int = 1000,
    seed: int = 112,
    stratify: bool = True,
    download: bool = False,
) -> dict[str, np.ndarray]:
    """Draw the labelled reference images and the clean test images of one experiment.

    References come from the train split, test images from the test split, both without
    replacement. With ``stratify`` (default, as the authors' ``train_test_split(...,
    stratify=y)``) every class gets its proportional share (largest-remainder rounding), so
    every class mean used by TU/MAGDiff/DGP exists. If a split has fewer images than asked
    (``digits``), all of it is used and a warning is logged.

    Parameters
    ----------
    name, root, download
        As in :func:`load_dataset`.
    n_refs, n_test : int
        Numbers of images to draw.
    seed : int, default=112
        Seed of the draw (the authors' data seed).
    stratify : bool, default=True
        Draw proportionally per class instead of uniformly.

    Returns
    -------
    dict
        ``x_ref`` (n_refs, C, H, W) float32, ``y_ref`` (n_refs,) int64, ``x_test``,
        ``y_test`` likewise, and ``ref_index``/``test_index`` (int64 positions in the
        train/test split) for provenance.

    Raises
    ------
    ValueError
        If ``n_refs`` or ``n_test`` is not a positive integer.

    Examples
    --------
    >>> sets = sample_image_sets("digits", n_refs=100, n_test=50, seed=0)
    >>> sets["x_ref"].shape, sets["y_test"].shape
    ((100, 1, 8, 8), (50,))
    """
    n_refs, n_test = check_int(n_refs, "n_refs"), check_int(n_test, "n_test")
    # One independent stream per split, so changing n_test never changes the refs.
    ref_seq, test_seq = np.random.SeedSequence(seed).spawn(2)
    out: dict[str, np.ndarray] = {}
    for split, n, seq, key in (
        ("train", n_refs, ref_seq, "ref"),
        ("test", n_test, test_seq, "test"),
    ):
        raw = _load_raw(name, root, split, download)
        total = len(raw.labels)
        if n > total:
            log.warning(
                "%s %s split has only %d images, fewer than the %d asked for: using all of them",
                name,
                split,
                total,
                n,
            )
            n = total
        rng = np.random.default_rng(seq)
        if stratify:
            index = stratified_choice(raw.labels, n, rng)
        else:
            index = rng.choice(total, size=n, replace=False)
        index = np.asarray(index, dtype=np.int64)
        x, y = raw.to_float(index)
        out[f"x_{key}"], out[f"y_{key}"], out[f"{key}_index"] = x, y, index
    return out


def stratified_choice(labels: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Pick ``n`` distinct positions, each class represented in proportion to its size.

    Class quotas are ``floor(n * n_c / N)``; the remaining slots go to the classes with the
    largest fractional parts (ties: lower class label first). The result is shuffled.

    Parameters
    ----------
    labels : numpy.ndarray of shape (N,)
        Integer class labels.
    n : int
        How many positions, ``0 <= n <= N``.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray of shape (n,), int64

    Raises
    ------
    ValueError
        If ``n`` is outside ``[0, N]``.

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 2)
    >>> np.bincount(y[stratified_choice(y, 5, np.random.default_rng(0))]).tolist()
    [4, 1]
    """
    labels = np.asarray(labels)
    total = len(labels)
    if not 0 <= n <= total:
        raise ValueError(f"n must be between 0 and {total}, got {n}")
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    ideal = n * counts / total
    quota = np.floor(ideal).astype(np.int64)
    remainder = n - int(quota.sum())
    if remainder:
        order = np.argsort(-(ideal - quota), kind="stable")
        quota[order[:remainder]] += 1
    picks = [
        rng.choice(np.flatnonzero(inverse == k), size=int(q), replace=False)
        for k, q in enumerate(quota)
        if q
    ]
    chosen = np.concatenate(picks) if picks else np.empty(0, dtype=np.int64)
    return rng.permutation(chosen).astype(np.int64)


# --------------------------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------------------------
def _check_name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name.startswith("npz:"):
        if len(name) == 4:
            raise ValueError("name 'npz:' needs a path, e.g. 'npz:/data/my_images.npz'")
        return name
    key = name.lower()
    if key not in DATASETS:
        raise ValueError(
            f"unknown data set {name!r}; expected one of {', '.join(DATASETS)} or 'npz:<path>'"
        )
    return key


def _check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return split


def _load_raw(name: str, root: str | os.PathLike[str] | None, split: str, download: bool) -> _Raw:
    name = _check_name(name)
    split = _check_split(split)
    if name.startswith("npz:"):
        return _load_npz(Path(name[4:]), split)
    if name == "digits":
        return _load_digits(split)
    base = resolve_data_root(root)
    if download:
        _download(name, base, split)
    if name == "cifar10":
        return _load_cifar10(base, split)
    return _load_idx_dataset(name, base, split)


def _missing_message(name: str, split: str, base: Path, missing: list[Path]) -> str:
    files = ", ".join(str(p) for p in missing)
    return (
        f"{name} {split} split not found: missing {files}. Download it with "
        f"load_dataset({name!r}, root={str(base)!r}, split={split!r}, download=True) "
        f"(command line: the --download option), or point {ENV_DATA_ROOT} / the config's "
        f"data_root at a torchvision data root that has these files."
    )


def _download(name: str, base: Path, split: str) -> None:
    """Fetch the files with torchvision's own downloader (network needed)."""
    from torchvision import datasets  # deferred: importing torchvision takes ~1 s

    base.mkdir(parents=True, exist_ok=True)
    train = split == "train"
    log.info("downloading %s %s split into %s (torchvision)", name, split, base)
    if name == "cifar10":
        datasets.CIFAR10(str(base), train=train, download=True)
    elif name == "emnist":
        datasets.EMNIST(str(base), split="balanced", train=train, download=True)
    else:
        cls = getattr(datasets, _IDX_FILES[name][0])
        cls(str(base), train=train, download=True)


# --------------------------------------------------------------------------------------------
# IDX (MNIST, Fashion-MNIST, EMNIST)
# --------------------------------------------------------------------------------------------
def _find(path: Path) -> Path | None:
    if path.is_file():
        return path
    gz = path.with_name(path.name + ".gz")
    return gz if gz.is_file() else None


def read_idx(path: str | os.PathLike[str], ndim: int | None = None) -> np.ndarray:
    """Read an IDX file (the MNIST family's format) of unsigned bytes, checking its size.

    Parameters
    ----------
    path : str or path-like
        The file; a name ending in ``.gz`` is decompressed.
    ndim : int, optional
        Required number of dimensions (3 for images, 1 for labels).

    Returns
    -------
    numpy.ndarray of uint8

    Raises
    ------
    ValueError
        If the header is malformed, the element type is not ubyte, the number of
        dimensions differs from ``ndim``, or the file is shorter or longer than its header
        says (a truncated download).
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                data = fh.read()
        else:
            data = path.read_bytes()
    except (EOFError, OSError, gzip.BadGzipFile) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"cannot read {path}: {exc} (truncated or corrupt download?)") from exc
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path} is not an IDX file (bad magic number)")
    dtype_code, nd = data[2], data[3]
    if dtype_code != 0x08:
        raise ValueError(f"{path}: expected unsigned-byte IDX data (0x08), got 0x{dtype_code:02x}")
    if ndim is not None and nd != ndim:
        raise ValueError(f"{path}: expected {ndim} dimensions, the header says {nd}")
    header = 4 + 4 * nd
    if len(data) < header:
        raise ValueError(f"{path} is truncated: {len(data)} bytes, header alone needs {header}")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=nd, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64))
    if len(data) != expected:
        raise ValueError(
            f"{path} has {len(data)} bytes but its header {shape} implies {expected}: "
            "the file is truncated or corrupt; delete it and download again"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _load_idx_dataset(name: str, base: Path, split: str) -> _Raw:
    _, folder, files = _IDX_FILES[name]
    wanted = [base / folder / f for f in files[split]]
    found = [_find(p) for p in wanted]
    missing = [w for w, f in zip(wanted, found, strict=True) if f is None]
    if missing:
        raise DatasetNotFoundError(_missing_message(name, split, base, missing))
    img_path, lab_path = found
    assert img_path is not None and lab_path is not None
    images = read_idx(img_path, ndim=3)
    labels = read_idx(lab_path, ndim=1).astype(np.int64)
    if len(images) != len(labels):
        raise ValueError(
            f"{img_path} has {len(images)} images but {lab_path} has {len(labels)} labels"
        )
    _check_labels(labels, _N_CLASSES[name], str(lab_path))
    if name == "emnist":
        # The EMNIST IDX files hold each image transposed; swap H/W to get it upright.
        images = images.transpose(0, 2, 1)
    return _Raw(np.ascontiguousarray(images[:, None, :, :]), labels)


def _check_labels(labels: np.ndarray, k: int, where: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= k):
        raise ValueError(
            f"{where}: labels must lie in [0, {k}), found [{labels.min()}, {labels.max()}] "
            "(corrupt file?)"
        )


# --------------------------------------------------------------------------------------------
# CIFAR-10 (python pickles)
# --------------------------------------------------------------------------------------------
class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that only rebuilds numpy arrays and plain containers (no arbitrary code).

    Only the exact globals a CIFAR-10 batch refers to are resolved: the array constructors
    (``_reconstruct`` of the original Python-2 pickles, ``_frombuffer`` of protocol-5
    re-pickles, each under its numpy-1 and numpy-2 module name), ``ndarray``, ``dtype`` and
    ``_codecs.encode`` (how Python 3 writes ``bytes`` at protocol 2). Any other global,
    numpy's included (``numpy.testing`` can run code), is refused.
    """

    _ALLOWED = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.numeric", "_frombuffer"),
            ("numpy._core.numeric", "_frombuffer"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("_codecs", "encode"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR-10 batch")


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with path.open("rb") as fh:
            entry = _ArrayUnpickler(fh, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"cannot read CIFAR-10 batch {path}: {exc} (truncated or corrupt?)"
        ) from exc
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: expected a dict, got {type(entry).__name__}")
    entry = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}
    if "data" not in entry or not ({"labels", "fine_labels"} & entry.keys()):
        raise ValueError(f"{path}: expected keys 'data' and 'labels', found {sorted(entry)}")
    data = np.asarray(entry["data"])
    labels = np.asarray(entry.get("labels", entry.get("fine_labels")), dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(
            f"{path}: 'data' must be uint8 of shape (N, 3072), got {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],):
        raise ValueError(f"{path}: {data.shape[0]} images but {labels.shape} labels")
    return data.reshape(-1, 3, 32, 32), labels


def _load_cifar10(base: Path, split: str) -> _Raw:
    wanted = [base / _CIFAR_FOLDER / f for f in _CIFAR_FILES[split]]
    missing = [p for p in wanted if not p.is_file()]
    if missing:
        raise DatasetNotFoundError(_missing_message("cifar10", split, base, missing))
    parts = [_read_cifar_batch(p) for p in wanted]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    _check_labels(labels, 10, str(base / _CIFAR_FOLDER))
    return _Raw(images, labels)


# --------------------------------------------------------------------------------------------
# scikit-learn digits
# --------------------------------------------------------------------------------------------
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as ``load_digits`` gives them: images (1797, 8, 8) float64 in
    0..16 and the labels as int.

    Read from scikit-learn's own ``digits.csv.gz`` without importing scikit-learn (with SciPy,
    a second of start-up in every job on digits); ``load_digits`` where that file is not
    where it should be.
    """
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(roots[0], "datasets", "data", "digits.csv.gz") if roots else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.images, bunch.target
    with gzip.open(path, mode="rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _digits_split_indices(y: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(DIGITS_SPLIT_SEED)
    test = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        k = round(DIGITS_TEST_FRACTION * len(members))
        test.append(rng.choice(members, size=k, replace=False))
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(len(y)), test_idx)
    return {"train": train_idx, "test": test_idx}


def _load_digits(split: str) -> _Raw:
    images, target = _digits_arrays()
    index = _digits_split_indices(target)[split]
    return _Raw(
        (images[index] / 16.0).astype(np.float32)[:, None, :, :], target[index].astype(np.int64)
    )


# --------------------------------------------------------------------------------------------
# npz files
# --------------------------------------------------------------------------------------------
def _open_npz(path: Path) -> Any:
    if not path.exists():  # a fifo or device exists: open_npz refuses it by name
        raise DatasetNotFoundError(
            f"npz data set not found: {path} does not exist (expected a .npz file with arrays "
            "x_train, y_train, x_test, y_test)"
        )
    return open_npz(path)  # checks every declared size first (dgpbench.npz)


def _npz_array(store: Any, path: Path, key: str) -> np.ndarray:
    if key not in store.files:
        raise ValueError(f"{path} has no array {key!r}; it has {sorted(store.files)}")
    return store[key]  # a ValueError naming the file and the array on any failure


def _load_npz(path: Path, split: str) -> _Raw:
    with _open_npz(path) as store:
        x = _npz_array(store, path, f"x_{split}")
        y = _npz_array(store, path, f"y_{split}")
    x = _npz_images(x, f"{path}:x_{split}")
    return _Raw(x, _npz_labels(y, len(x), f"{path}:y_{split}"))


def _npz_images(x: np.ndarray, where: str) -> np.ndarray:
    """Images of an ``.npz`` as float32 ``(N, C, H, W)`` in [0, 1] (``where`` names them)."""
    if x.ndim == 3:
        x = x[:, None, :, :]
    elif x.ndim == 4:
        if x.shape[-1] in (1, 3, 4) and x.shape[1] > 4:
            log.info("%s looks channels-last %s: transposing to (N, C, H, W)", where, x.shape)
            x = x.transpose(0, 3, 1, 2)
    else:
        raise ValueError(f"{where} must have shape (N, H, W) or (N, C, H, W), got {x.shape}")
    if len(x) == 0:
        raise ValueError(f"{where} is empty")
    if x.dtype == np.uint8:
        return np.ascontiguousarray(x)
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise ValueError(f"{where} must be uint8 or floating, got {x.dtype}")
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise ValueError(f"{where} contains NaN or inf")
    lo, hi = float(x.min()), float(x.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(
            f"{where} has values in [{lo}, {hi}]; non-uint8 images must lie in [0, 1] "
            "(store 0-255 pixels as uint8, or divide by 255)"
        )
    return np.ascontiguousarray(x)


def _npz_labels(y: np.ndarray, n: int, where: str) -> np.ndarray:
    """Labels of an ``.npz`` as int64 ``(n,)``, non-negative (``where`` names them)."""
    if y.ndim != 1 or len(y) != n:
        raise ValueError(f"{where} must have shape ({n},), got {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        if not np.issubdtype(y.dtype, np.floating) or not np.array_equal(y, np.round(y)):
            raise ValueError(f"{where} must hold integer labels, got {y.dtype}")
    y = y.astype(np.int64)
    if y.min() < 0:
        raise ValueError(f"{where} has negative labels")
    return y


def load_npz_images(
    path: str | os.PathLike[str], *, labels: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Read one image batch from an ``.npz`` with array ``x`` (and ``y`` if ``labels``).

    Images follow the rules of the ``npz:`` data sets: ``(N, H, W)``, ``(N, C, H, W)`` or
    channels-last ``(N, H, W, C)``; ``uint8`` pixels are divided by 255, floating pixels
    must lie in [0, 1]. Labels are non-negative integers, one per image.

    Parameters
    ----------
    path : path-like
        The ``.npz`` file.
    labels : bool, default=False
        Also read and return the labels ``y``.

    Returns
    -------
    x : ndarray of float32, shape (N, C, H, W)
        The images in [0, 1].
    y : ndarray of int64, shape (N,)
        The labels (only if ``labels``).

    Raises
    ------
    DatasetNotFoundError
        If ``path`` does not exist.
    ValueError
        On an unreadable file, a missing array or an invalid shape, dtype or value, naming
        the file and the array.
    """
    path = Path(path)
    if not path.exists():
        raise DatasetNotFoundError(f"{path} does not exist (expected a .npz file with array 'x')")
    with open_npz(path) as store:
        x = _npz_array(store, path, "x")
        y = _npz_array(store, path, "y") if labels else None
    x = _npz_images(x, f"{path}:x")
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / np.float32(255.0)  # as the data sets (torchvision's ToTensor)
    if y is None:
        return x
    return x, _npz_labels(y, len(x), f"{path}:y")


def _npz_n_classes(path: Path) -> int:
    """Number of classes of an npz data set; the labels must be dense class indices.

    A model gets one output per class, so every class ``0..c-1`` must occur (in either
    split): one stray label (say 10,000,000) would otherwise build a ten-million-class model.
    """
    with _open_npz(path) as store:
        declared = int(_npz_array(store, path, "n_classes")) if "n_classes" in store.files else None
        ys = {k: _npz_array(store, path, k).astype(np.int64) for k in ("y_train", "y_test")}
    top = max(int(y.max()) for y in ys.values() if y.size)
    c = top + 1 if declared is None else declared
    if declared is not None and (declared < 1 or top >= declared):
        raise ValueError(f"{path}: n_classes is {declared} but the labels reach {top}")
    present = np.unique(np.concatenate(list(ys.values())))
    if len(present) != c:
        gaps = np.flatnonzero(present != np.arange(len(present)))
        first = int(gaps[0]) if gaps.size else len(present)
        raise ValueError(
            f"{path}: labels must be the dense class indices 0..c-1, but y_train and y_test "
            f"hold {len(present)} distinct labels for c = {c} classes (no image of class "
            f"{first}; largest label {top}). Relabel them, e.g. with "
            "numpy.unique(y, return_inverse=True)"
        )
    return c
