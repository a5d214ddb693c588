"""Tests of dgpbench.data.datasets: real MNIST against torchvision, small files written here for the
other formats, and the error paths (missing, truncated, corrupt)."""

from __future__ import annotations

import gzip
import logging
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgpbench.data import datasets as data
from dgpbench.data.datasets import (
    DATASETS,
    DatasetNotFoundError,
    load_dataset,
    n_classes,
    resolve_data_root,
    sample_image_sets,
    stratified_choice,
)


# ------------------------------------------------------------------------------------------
# writers of small files in the layouts torchvision uses
# ------------------------------------------------------------------------------------------
def write_idx(path: Path, array: np.ndarray) -> Path:
    """IDX: magic 0 0 0x08 ndim, big-endian uint32 dims, then the bytes."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + array.tobytes())
    return path


def write_mnist_like(root: Path, folder: str, prefix: dict[str, str], n: int, k: int, seed=0):
    """Write train/test IDX pairs; returns the arrays written (images as stored)."""
    rng = np.random.default_rng(seed)
    written = {}
    for split, stem in prefix.items():
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, k, size=n).astype(np.uint8)
        write_idx(root / folder / f"{stem}-images-idx3-ubyte", images)
        write_idx(root / folder / f"{stem}-labels-idx1-ubyte", labels)
        written[split] = (images, labels)
    return written


def write_cifar(root: Path, n_per_batch: int = 3, seed: int = 0, bytes_keys: bool = False):
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    written = {"train": [], "test": []}
    names = [(f"data_batch_{i}", "train") for i in range(1, 6)] + [("test_batch", "test")]
    for name, split in names:
        flat = rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n_per_batch).tolist()
        entry = {"data": flat, "labels": labels, "batch_label": name}
        if bytes_keys:  # how the original Python-2 pickles look when read with encoding="bytes"
            entry = {k.encode(): v for k, v in entry.items()}
        with (folder / name).open("wb") as fh:
            pickle.dump(entry, fh)
        written[split].append((flat, labels))
    return written


# ------------------------------------------------------------------------------------------
# data root
# ------------------------------------------------------------------------------------------
def test_resolve_data_root_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("DGPBENCH_DATA_ROOT", raising=False)
    assert resolve_data_root() == Path("data")
    monkeypatch.setenv("DGPBENCH_DATA_ROOT", str(tmp_path / "env"))
    assert resolve_data_root() == tmp_path / "env"
    assert resolve_data_root(tmp_path / "explicit") == tmp_path / "explicit"


def test_env_root_is_used_by_load_dataset(monkeypatch, tmp_path):
    written = write_mnist_like(tmp_path, "MNIST/raw", {"test": "t10k"}, n=5, k=10, seed=3)
    monkeypatch.setenv("DGPBENCH_DATA_ROOT", str(tmp_path))
    x, _ = load_dataset("mnist", split="test")
    np.testing.assert_array_equal(x[:, 0], written["test"][0] / np.float32(255))


# ------------------------------------------------------------------------------------------
# real MNIST / Fashion-MNIST
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_real_data_equals_torchvision(shared_data_root, name):
    from torchvision import datasets

    cls = datasets.MNIST if name == "mnist" else datasets.FashionMNIST
    ref = cls(str(shared_data_root), train=False, download=False)
    x, y = load_dataset(name, shared_data_root, split="test")
    assert x.shape == (10000, 1, 28, 28) and x.dtype == np.float32
    assert y.dtype == np.int64 and x.min() == 0.0 and x.max() == 1.0
    np.testing.assert_array_equal(x[:, 0], ref.data.numpy() / np.float32(255))
    np.testing.assert_array_equal(y, ref.targets.numpy())


def test_real_mnist_train_split(shared_data_root):
    x, y = load_dataset("mnist", shared_data_root, split="train")
    assert x.shape == (60000, 1, 28, 28)
    assert np.bincount(y).tolist()[:2] == [5923, 6742]  # the official class counts
    assert y[:5].tolist() == [5, 0, 4, 1, 9]


def test_sample_image_sets_real_mnist(shared_data_root):
    sets = sample_image_sets("mnist", shared_data_root, n_refs=1000, n_test=1000, seed=112)
    x_train, y_train = load_dataset("mnist", shared_data_root, split="train")
    x_test, y_test = load_dataset("mnist", shared_data_root, split="test")
    assert len(np.unique(sets["ref_index"])) == 1000  # without replacement
    np.testing.assert_array_equal(sets["x_ref"], x_train[sets["ref_index"]])
    np.testing.assert_array_equal(sets["y_ref"], y_train[sets["ref_index"]])
    np.testing.assert_array_equal(sets["x_test"], x_test[sets["test_index"]])
    np.testing.assert_array_equal(sets["y_test"], y_test[sets["test_index"]])
    # Stratified: each class within one image of its proportional share.
    share = 1000 * np.bincount(y_train) / len(y_train)
    assert np.all(np.abs(np.bincount(sets["y_ref"]) - share) < 1)


# ------------------------------------------------------------------------------------------
# missing, truncated, corrupt
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mnist", "MNIST/raw/train-images-idx3-ubyte"),
        ("fashion-mnist", "FashionMNIST/raw/train-labels-idx1-ubyte"),
        ("emnist", "EMNIST/raw/emnist-balanced-train-images-idx3-ubyte"),
        ("cifar10", "cifar-10-batches-py/data_batch_5"),
    ],
)
def test_missing_dataset_names_files_and_download_option(tmp_path, name, expected):
    with pytest.raises(DatasetNotFoundError) as exc:
        load_dataset(name, tmp_path, split="train")
    msg = str(exc.value)
    assert str(tmp_path / expected) in msg
    assert "download=True" in msg and "--download" in msg
    assert isinstance(exc.value, FileNotFoundError)  # the CLI turns these into one line


def test_missing_npz_file(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="x_train, y_train, x_test, y_test"):
        load_dataset(f"npz:{tmp_path / 'nope.npz'}")


def test_truncated_idx_file(tmp_path):
    write_mnist_like(tmp_path, "MNIST/raw", {"test": "t10k"}, n=4, k=10)
    path = tmp_path / "MNIST/raw/t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="truncated") as exc:
        load_dataset("mnist", tmp_path, split="test")
    assert str(path) in str(exc.value)


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        (b"\x01\x02\x08\x03" + b"\x00" * 20, "magic"),
        (b"\x00\x00\x0d\x03" + struct.pack(">3I", 1, 2, 2) + b"\x00" * 16, "unsigned-byte"),
        (b"\x00\x00\x08\x01" + struct.pack(">I", 4) + b"\x00" * 4, "3 dimensions"),
        (b"\x00\x00\x08", "magic"),
    ],
)
def test_corrupt_idx_headers(tmp_path, blob, match):
    write_mnist_like(tmp_path, "MNIST/raw", {"test": "t10k"}, n=4, k=10)
    (tmp_path / "MNIST/raw/t10k-images-idx3-ubyte").write_bytes(blob)
    with pytest.raises(ValueError, match=match):
        load_dataset("mnist", tmp_path, split="test")


def test_image_label_count_mismatch(tmp_path):
    write_mnist_like(tmp_path, "MNIST/raw", {"test": "t10k"}, n=4, k=10)
    write_idx(tmp_path / "MNIST/raw/t10k-labels-idx1-ubyte", np.zeros(3, dtype=np.uint8))
    with pytest.raises(ValueError, match=r"4 images but .* 3 labels"):
        load_dataset("mnist", tmp_path, split="test")


def test_gzipped_idx_and_truncated_gzip(tmp_path):
    written = write_mnist_like(tmp_path, "FashionMNIST/raw", {"test": "t10k"}, n=6, k=10)
    for stem in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        plain = tmp_path / "FashionMNIST/raw" / stem
        Path(f"{plain}.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    x, y = load_dataset("fashion-mnist", tmp_path, split="test")
    np.testing.assert_array_equal(x[:, 0], written["test"][0] / np.float32(255))
    np.testing.assert_array_equal(y, written["test"][1])
    gz = tmp_path / "FashionMNIST/raw/t10k-images-idx3-ubyte.gz"
    gz.write_bytes(gz.read_bytes()[:40])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        load_dataset("fashion-mnist", tmp_path, split="test")


def test_labels_out_of_range_are_rejected(tmp_path):
    write_mnist_like(tmp_path, "MNIST/raw", {"test": "t10k"}, n=4, k=10)
    write_idx(tmp_path / "MNIST/raw/t10k-labels-idx1-ubyte", np.array([0, 1, 2, 10]))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 10\)"):
        load_dataset("mnist", tmp_path, split="test")


# ------------------------------------------------------------------------------------------
# EMNIST (balanced)
# ------------------------------------------------------------------------------------------
def test_emnist_balanced_is_returned_upright(tmp_path):
    stems = {"train": "emnist-balanced-train", "test": "emnist-balanced-test"}
    written = write_mnist_like(tmp_path, "EMNIST/raw", stems, n=7, k=47, seed=1)
    for split in ("train", "test"):
        x, y = load_dataset("emnist", tmp_path, split=split)
        stored, labels = written[split]
        assert x.shape == (7, 1, 28, 28)
        np.testing.assert_array_equal(x[:, 0], stored.transpose(0, 2, 1) / np.float32(255))
        np.testing.assert_array_equal(y, labels)
    assert n_classes("emnist") == 47


def test_emnist_matches_torchvision_reader_up_to_transpose(tmp_path):
    from torchvision import datasets

    stems = {"train": "emnist-balanced-train", "test": "emnist-balanced-test"}
    write_mnist_like(tmp_path, "EMNIST/raw", stems, n=5, k=47, seed=2)
    ref = datasets.EMNIST(str(tmp_path), split="balanced", train=False, download=False)
    x, y = load_dataset("emnist", tmp_path, split="test")
    np.testing.assert_array_equal(x[:, 0], ref.data.numpy().transpose(0, 2, 1) / np.float32(255))
    np.testing.assert_array_equal(y, ref.targets.numpy())


# ------------------------------------------------------------------------------------------
# CIFAR-10
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bytes_keys", [False, True])
def test_cifar10_pickles(tmp_path, bytes_keys):
    written = write_cifar(tmp_path, n_per_batch=3, bytes_keys=bytes_keys)
    for split, n in (("train", 15), ("test", 3)):
        x, y = load_dataset("cifar10", tmp_path, split=split)
        assert x.shape == (n, 3, 32, 32) and x.dtype == np.float32
        flat = np.concatenate([b[0] for b in written[split]])
        # CIFAR rows are 1024 red, then 1024 green, then 1024 blue values, row-major.
        for i in range(n):
            for c in range(3):
                expected = flat[i, c * 1024 : (c + 1) * 1024].reshape(32, 32) / np.float32(255)
                np.testing.assert_array_equal(x[i, c], expected)
        np.testing.assert_array_equal(y, [lab for b in written[split] for lab in b[1]])


def test_cifar10_truncated_batch(tmp_path):
    write_cifar(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match="data_batch_3") as exc:
        load_dataset("cifar10", tmp_path, split="train")
    assert "truncated or corrupt" in str(exc.value)


def test_cifar10_pickle_cannot_run_code(tmp_path):
    write_cifar(tmp_path)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with (tmp_path / "cifar-10-batches-py" / "test_batch").open("wb") as fh:
        pickle.dump({"data": Evil(), "labels": []}, fh)
    with pytest.raises(ValueError, match="unexpected object"):
        load_dataset("cifar10", tmp_path, split="test")
    assert not marker.exists()


def test_cifar10_pickle_cannot_run_code_through_a_numpy_global(tmp_path):
    # numpy itself has functions that execute code; only the array constructors may load.
    from numpy.testing._private.utils import runstring

    write_cifar(tmp_path)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (runstring, (f"open({str(marker)!r}, 'w').close()", {}))

    with (tmp_path / "cifar-10-batches-py" / "test_batch").open("wb") as fh:
        pickle.dump({"data": Evil(), "labels": []}, fh)
    with pytest.raises(ValueError, match=r"unexpected object numpy\.testing"):
        load_dataset("cifar10", tmp_path, split="test")
    assert not marker.exists()


@pytest.mark.parametrize("numpy1_names", [False, True])
def test_cifar10_protocol_2_pickles_load(tmp_path, numpy1_names):
    # The original batches are Python-2 pickles (protocol 2) naming numpy.core.multiarray.
    written = write_cifar(tmp_path)
    flat, labels = written["test"][0]
    blob = pickle.dumps({b"data": flat, b"labels": labels}, protocol=2)
    if numpy1_names:
        blob = blob.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
        assert b"numpy.core.multiarray\n_reconstruct" in blob
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(blob)
    x, y = load_dataset("cifar10", tmp_path, split="test")
    np.testing.assert_array_equal(x.reshape(len(x), -1), flat / np.float32(255))
    np.testing.assert_array_equal(y, labels)


def test_cifar10_wrong_array_shape(tmp_path):
    write_cifar(tmp_path)
    with (tmp_path / "cifar-10-batches-py" / "test_batch").open("wb") as fh:
        pickle.dump({"data": np.zeros((2, 100), dtype=np.uint8), "labels": [0, 1]}, fh)
    with pytest.raises(ValueError, match=r"\(N, 3072\)"):
        load_dataset("cifar10", tmp_path, split="test")


# ------------------------------------------------------------------------------------------
# npz
# ------------------------------------------------------------------------------------------
def test_npz_uint8_grayscale(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (6, 5, 4), dtype=np.uint8),
        "y_train": np.array([0, 1, 2, 0, 1, 2]),
        "x_test": rng.integers(0, 256, (3, 5, 4), dtype=np.uint8),
        "y_test": np.array([2, 3, 0]),
    }
    path = tmp_path / "own.npz"
    np.savez(path, **arrays)
    x, y = load_dataset(f"npz:{path}", split="train")
    assert x.shape == (6, 1, 5, 4) and x.dtype == np.float32
    np.testing.assert_array_equal(x[:, 0], arrays["x_train"] / np.float32(255))
    np.testing.assert_array_equal(y, arrays["y_train"])
    assert n_classes(f"npz:{path}") == 4  # max label over both splits + 1
    assert data.image_shape(f"npz:{path}") == (1, 5, 4)


@pytest.mark.parametrize(
    ("y_train", "y_test", "declared", "match"),
    [
        ([0, 1, 0, 10_000_000], [1, 0], None, r"c = 10000001 classes \(no image of class 2"),
        ([0, 1, 2, 0], [2, 4], None, "no image of class 3"),
        ([0, 1, 1, 0], [1, 0], 10_000_000, "no image of class 2"),
        ([0, 1, 2, 0], [2, 1], 2, "n_classes is 2 but the labels reach 2"),
    ],
)
def test_npz_labels_must_be_dense(tmp_path, y_train, y_test, declared, match):
    path = tmp_path / "own.npz"
    extra = {} if declared is None else {"n_classes": np.array(declared)}
    np.savez(path, x_train=np.zeros((4, 2, 2), np.uint8), y_train=np.array(y_train),
             x_test=np.zeros((2, 2, 2), np.uint8), y_test=np.array(y_test), **extra)  # fmt: skip
    with pytest.raises(ValueError, match=match) as exc:
        n_classes(f"npz:{path}")
    assert str(path) in str(exc.value)


def test_npz_float_channels_last_and_first(tmp_path):
    rng = np.random.default_rng(1)
    nchw = rng.random((4, 3, 6, 6)).astype(np.float32)
    arrays = {"y_train": np.arange(4), "y_test": np.arange(4)}
    np.savez(tmp_path / "a.npz", x_train=nchw, x_test=nchw.transpose(0, 2, 3, 1), **arrays)
    xa, _ = load_dataset(f"npz:{tmp_path / 'a.npz'}", split="train")
    xb, _ = load_dataset(f"npz:{tmp_path / 'a.npz'}", split="test")
    np.testing.assert_array_equal(xa, nchw)
    np.testing.assert_array_equal(xb, nchw)


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        ({"x_train": np.full((2, 4, 4), 2.0), "y_train": [0, 1]}, r"must lie in \[0, 1\]"),
        ({"x_train": np.zeros((2, 4, 4)), "y_train": [0]}, "must have shape"),
        ({"x_train": np.zeros((2, 4, 4)), "y_train": [0, -1]}, "negative labels"),
        ({"x_train": np.zeros((2, 4, 4)), "y_train": [0.5, 1]}, "integer labels"),
        ({"x_train": np.zeros((2, 16)), "y_train": [0, 1]}, r"\(N, H, W\)"),
        ({"x_train": np.full((2, 4, 4), np.nan), "y_train": [0, 1]}, "NaN"),
        ({"y_train": [0, 1]}, "has no array 'x_train'"),
    ],
)
def test_npz_invalid_contents(tmp_path, arrays, match):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=match):
        load_dataset(f"npz:{path}", split="train")


def test_npz_truncated_file(tmp_path):
    path = tmp_path / "t.npz"
    np.savez(path, x_train=np.zeros((50, 8, 8), np.uint8), y_train=np.zeros(50, int))
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(ValueError, match="cannot read"):
        load_dataset(f"npz:{path}", split="train")


# ------------------------------------------------------------------------------------------
# digits
# ------------------------------------------------------------------------------------------
def test_digits_are_scikit_learns_read_without_importing_it():
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    from dgpbench.data.datasets import _digits_arrays

    bunch = load_digits()
    images, target = _digits_arrays()
    np.testing.assert_array_equal(images, bunch.images)
    np.testing.assert_array_equal(target, bunch.target)
    assert images.dtype == bunch.images.dtype and target.dtype == bunch.target.dtype
    code = (
        "import sys; from dgpbench.data.datasets import load_dataset; "
        "load_dataset('digits', split='test'); print('sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_digits_split_is_deterministic_disjoint_and_stratified():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    xtr, ytr = load_dataset("digits", split="train")
    xte, yte = load_dataset("digits", split="test")
    assert xtr.shape[1:] == (1, 8, 8) and len(xtr) + len(xte) == len(bunch.target)
    assert xtr.dtype == np.float32 and xtr.max() == 1.0 and xtr.min() == 0.0
    # Every image appears exactly once across the two splits, as pixel/16.
    all_x = np.concatenate([xtr, xte])[:, 0].reshape(len(bunch.target), -1)
    expected = (bunch.images / 16.0).astype(np.float32).reshape(len(bunch.target), -1)
    order_a = np.lexsort(all_x.T)
    order_b = np.lexsort(expected.T)
    np.testing.assert_array_equal(all_x[order_a], expected[order_b])
    # 30 % of every class (rounded) in the test split.
    per_class = np.bincount(bunch.target)
    np.testing.assert_array_equal(np.bincount(yte), np.round(0.3 * per_class).astype(int))
    np.testing.assert_array_equal(np.bincount(ytr) + np.bincount(yte), per_class)
    xte2, yte2 = load_dataset("digits", split="test")
    np.testing.assert_array_equal(xte, xte2)
    np.testing.assert_array_equal(yte, yte2)


def test_sample_image_sets_digits_clamps_with_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="dgpbench.data.datasets"):
        sets = sample_image_sets("digits", n_refs=1000, n_test=1000, seed=112)
    n_test_split = len(load_dataset("digits", split="test")[1])
    assert len(sets["x_test"]) == n_test_split < 1000
    assert len(sets["x_ref"]) == 1000
    assert "fewer than the 1000" in caplog.text


def test_sample_image_sets_seeding():
    a = sample_image_sets("digits", n_refs=200, n_test=100, seed=5)
    b = sample_image_sets("digits", n_refs=200, n_test=100, seed=5)
    c = sample_image_sets("digits", n_refs=200, n_test=100, seed=6)
    d = sample_image_sets("digits", n_refs=200, n_test=50, seed=5)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["ref_index"], c["ref_index"])
    np.testing.assert_array_equal(a["ref_index"], d["ref_index"])  # refs independent of n_test
    x_train, _ = load_dataset("digits", split="train")
    np.testing.assert_array_equal(a["x_ref"], x_train[a["ref_index"]])


def test_sample_image_sets_unstratified():
    sets = sample_image_sets("digits", n_refs=300, n_test=20, seed=0, stratify=False)
    assert len(np.unique(sets["ref_index"])) == 300


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_sample_image_sets_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="n_refs"):
        sample_image_sets("digits", n_refs=bad)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=1, max_size=6).filter(lambda c: sum(c) > 0),
    frac=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_stratified_choice_properties(counts, frac, seed):
    labels = np.repeat(np.arange(len(counts)), counts)
    labels = np.random.default_rng(seed).permutation(labels)
    n = round(frac * len(labels))
    chosen = stratified_choice(labels, n, np.random.default_rng(seed))
    assert len(chosen) == n == len(np.unique(chosen))
    got = np.bincount(labels[chosen], minlength=len(counts))
    ideal = n * np.asarray(counts) / len(labels)
    assert np.all(got >= np.floor(ideal)) and np.all(got <= np.ceil(ideal))


# ------------------------------------------------------------------------------------------
# names
# ------------------------------------------------------------------------------------------
def test_known_names_and_classes():
    assert set(DATASETS) == {"mnist", "fashion-mnist", "cifar10", "emnist", "digits"}
    assert [n_classes(n) for n in DATASETS] == [10, 10, 10, 47, 10]
    assert data.image_shape("mnist") == (1, 28, 28)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "svhn"}, "unknown data set 'svhn'"),
        ({"name": "npz:"}, "needs a path"),
        ({"name": "digits", "split": "val"}, "split must be"),
    ],
)
def test_bad_names(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_dataset(**kwargs)


def test_download_option_calls_torchvision_then_reads_the_files(tmp_path, monkeypatch):
    # No network in tests: stand in for torchvision's downloader with one that writes files.
    from torchvision import datasets

    calls = []

    class FakeMNIST:
        def __init__(self, root, train, download):
            calls.append((root, train, download))
            write_mnist_like(Path(root), "MNIST/raw", {"test": "t10k"}, n=3, k=10, seed=9)

    monkeypatch.setattr(datasets, "MNIST", FakeMNIST)
    x, _ = load_dataset("mnist", tmp_path / "new", split="test", download=True)
    assert calls == [(str(tmp_path / "new"), False, True)]
    assert x.shape == (3, 1, 28, 28)
