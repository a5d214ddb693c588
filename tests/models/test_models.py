"""Tests of dgpbench.models.train: architecture, initialisation, training on digits, checkpoints."""

from __future__ import annotations

import csv
import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from dgpbench.data.datasets import load_dataset
from dgpbench.models.architectures import ArchConfig, build_mlp
from dgpbench.models.checkpoints import (
    checkpoint_name,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from dgpbench.models.train import TrainConfig, analysis_config, shift_detection_config, train_mlp
from dgpbench.threads import set_torch_threads, torch_threads


@pytest.fixture(scope="module")
def digits():
    x, y = load_dataset("digits", split="train")
    return x, y


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------
# architecture and initialisation
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_layers", [1, 2, 3, 4])
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_build_mlp_structure(n_layers, activation):
    net = build_mlp(20, 7, n_layers, 3, activation, generator=_gen())
    act = nn.ReLU if activation == "relu" else nn.Tanh
    expected_types = []
    for i in range(n_layers):
        expected_types.append(nn.Linear)
        if i < n_layers - 1:
            expected_types.append(act)
    assert [type(m) for m in net] == expected_types
    linears = [m for m in net if isinstance(m, nn.Linear)]
    sizes = [(m.in_features, m.out_features) for m in linears]
    chain = [20] + [7] * (n_layers - 1) + [3]
    assert sizes == list(itertools.pairwise(chain))
    assert all(m.bias is not None for m in linears)
    assert net(torch.rand(5, 20)).shape == (5, 3)


def test_build_mlp_optional_modules():
    net = build_mlp(10, 6, 3, 2, batchnorm=True, dropout=0.5, generator=_gen())
    kinds = [type(m).__name__ for m in net]
    assert kinds == [
        "Linear", "BatchNorm1d", "ReLU", "Dropout",
        "Linear", "BatchNorm1d", "ReLU", "Dropout",
        "Linear",
    ]  # fmt: skip


def test_xavier_normal_weights_and_default_bias_distribution():
    net = build_mlp(784, 650, 2, 10, generator=_gen(3))
    w, b = net[0].weight.detach().numpy().ravel(), net[0].bias.detach().numpy()
    std = math.sqrt(2.0 / (784 + 650))
    assert abs(w.mean()) < 3 * std / math.sqrt(w.size)
    assert w.std() == pytest.approx(std, rel=0.01)
    assert stats.kstest(w / std, "norm").pvalue > 1e-3
    bound = 1 / math.sqrt(784)
    assert np.all(np.abs(b) <= bound)
    assert stats.kstest(b, "uniform", args=(-bound, 2 * bound)).pvalue > 1e-3


def test_init_is_determined_by_the_generator():
    a = build_mlp(30, 20, 3, 4, generator=_gen(1))
    b = build_mlp(30, 20, 3, 4, generator=_gen(1))
    c = build_mlp(30, 20, 3, 4, generator=_gen(2))
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters(), strict=True):
        assert torch.equal(pa, pb)
        assert not torch.equal(pa, pc)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 5, 2, 3), {}, "n_inputs"),
        ((4, 0, 2, 3), {}, "hidden"),
        ((4, 5, 0, 3), {}, "n_layers"),
        ((4, 5, 2, 3, "sigmoid"), {}, "activation"),
        ((4, 5, 2, 3), {"dropout": 1.0}, "dropout"),
    ],
)
def test_build_mlp_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_mlp(*args, **kwargs)


def test_linear_classifier_ignores_hidden():
    net = build_mlp(4, 0, 1, 3, generator=_gen())
    assert len(net) == 1 and net[0].weight.shape == (3, 4)


@pytest.mark.parametrize("n_layers", [1, 2, 3, 4])
@pytest.mark.parametrize("batchnorm", [False, True])
def test_n_weights_counts_the_built_networks_weight_matrices(n_layers, batchnorm):
    """The count the SLURM runtimes and the grid projection rest on, against the network."""
    arch = ArchConfig(9, 0 if n_layers == 1 else 7, n_layers, 3, batchnorm=batchnorm)
    net = arch.build(_gen())
    linear = [m.weight.numel() for m in net.modules() if isinstance(m, nn.Linear)]
    assert len(linear) == n_layers and arch.n_weights == sum(linear)


# ------------------------------------------------------------------------------------------
# configuration
# ------------------------------------------------------------------------------------------
def test_presets_follow_the_papers_two_settings():
    s = shift_detection_config()
    assert (s.lr, s.epochs, s.batch_size, s.val_fraction) == (3e-4, 40, 32, 0.2)
    assert (s.betas, s.eps, s.weight_decay, s.checkpoints_per_epoch) == ((0.9, 0.999), 1e-8, 0, 4)
    a = analysis_config("mnist")
    assert (a.lr, a.keep, a.epochs) == (3e-4, "all", 40)  # the authors' analysis code
    assert a.val_fraction == pytest.approx(5000 / 60000)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 0},
        {"epochs": 0},
        {"batch_size": 2.5},
        {"val_fraction": 1.0},
        {"keep": "best"},
        {"threads": 0},
        {"betas": (0.9, 1.5)},
    ],
)
def test_train_config_validation(kwargs):
    with pytest.raises(ValueError):
        TrainConfig(**kwargs)


def test_torch_threads_is_scoped():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert set_torch_threads(None) == before
    with pytest.raises(ValueError):
        set_torch_threads(0)


# ------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------
ARCH = ArchConfig(n_inputs=64, hidden=32, n_layers=3, n_classes=10)


def _train(digits, tmp_path, name="run", **overrides):
    x, y = digits
    cfg = TrainConfig(**{"lr": 3e-3, "epochs": 3, "threads": 1, **overrides})
    return train_mlp(x, y, ARCH, cfg, tmp_path / name, dataset="digits", progress=False)


def _read_metrics(path: Path) -> list[dict[str, float]]:
    with open(path) as fh:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def test_training_writes_quarter_epoch_checkpoints_and_metrics(digits, tmp_path):
    calls = []
    x, y = digits
    cfg = TrainConfig(lr=3e-3, epochs=3, keep="all", threads=1, seed=4)
    final = train_mlp(
        x,
        y,
        ARCH,
        cfg,
        tmp_path / "run",
        dataset="digits",
        progress=False,
        callback=lambda ep, model, row: calls.append((ep, row["val_acc"], model.training)),
    )
    out = tmp_path / "run"
    epochs = [0.0] + [q / 4 for q in range(1, 13)]
    assert [e for e, _ in list_checkpoints(out)] == epochs
    assert final == out / "epoch_03.00.pt" and final.is_file()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no temp files
    rows = _read_metrics(out / "metrics.csv")
    assert [r["epoch"] for r in rows] == epochs
    assert [c[0] for c in calls] == epochs and not any(c[2] for c in calls)
    # Steps: ceil(n_train / 32) per epoch, checkpoints at rounded quarters of it.
    split = np.load(out / "split.npz")
    spe = math.ceil(len(split["train_index"]) / 32)
    assert rows[-1]["step"] == 3 * spe and rows[1]["step"] == round(spe / 4)
    assert math.isnan(rows[0]["train_loss"]) and rows[0]["val_acc"] < 0.5
    assert rows[-1]["val_acc"] > 0.85 and rows[-1]["train_loss"] < rows[1]["train_loss"]

    # The held-out part: 20 % stratified, disjoint from the training part, covering all.
    tr, va = split["train_index"], split["val_index"]
    assert len(va) == round(0.2 * len(y)) and not set(tr) & set(va)
    assert len(tr) + len(va) == len(y)
    assert np.all(np.abs(np.bincount(y[va]) - 0.2 * np.bincount(y)) < 1)

    # Logged validation metrics agree with the stored weights, recomputed independently.
    for epoch, path in list_checkpoints(out)[::4]:
        model, meta = load_checkpoint(path)
        with torch.no_grad():
            logits = model(torch.from_numpy(x[va].reshape(len(va), -1)))
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y[va])).item()
        acc = (logits.argmax(1).numpy() == y[va]).mean()
        row = rows[epochs.index(epoch)]
        assert row["val_loss"] == pytest.approx(loss, rel=1e-5)
        assert row["val_acc"] == pytest.approx(acc)
        assert meta["epoch"] == epoch and meta["dataset"] == "digits"
        assert meta["train_config"]["lr"] == 3e-3 and meta["arch"]["hidden"] == 32


def test_keep_last_writes_only_the_final_checkpoint(digits, tmp_path):
    final = _train(digits, tmp_path, epochs=2, keep="last")
    assert [p.name for _, p in list_checkpoints(final.parent)] == ["epoch_02.00.pt"]
    assert len(_read_metrics(final.parent / "metrics.csv")) == 2 * 4 + 1


def test_training_is_seeded(digits, tmp_path):
    a = _train(digits, tmp_path, "a", epochs=1, seed=7)
    b = _train(digits, tmp_path, "b", epochs=1, seed=7)
    c = _train(digits, tmp_path, "c", epochs=1, seed=8)
    sa, sb, sc = (load_checkpoint(p)[0].state_dict() for p in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["0.weight"], sc["0.weight"])
    # The validation split depends on split_seed only, not on the model seed.
    np.testing.assert_array_equal(
        np.load(a.parent / "split.npz")["val_index"], np.load(c.parent / "split.npz")["val_index"]
    )


def test_first_adam_step_is_lr_times_gradient_sign(digits, tmp_path):
    # Adam's first update is -lr * g / (|g| + eps) (bias corrections cancel): an oracle for
    # lr, betas, eps and the absence of weight decay. One full batch = one step; g comes
    # from autograd on the stored initial weights, independently of the training loop.
    x, y = digits
    cfg = TrainConfig(
        lr=0.01, epochs=1, batch_size=len(y), val_fraction=0.0, checkpoints_per_epoch=1,
        keep="all", threads=1,
    )  # fmt: skip
    train_mlp(x, y, ARCH, cfg, tmp_path / "one", progress=False)
    model0, _ = load_checkpoint(tmp_path / "one" / checkpoint_name(0))
    model1, _ = load_checkpoint(tmp_path / "one" / checkpoint_name(1))
    loss = torch.nn.functional.cross_entropy(
        model0(torch.from_numpy(x.reshape(len(x), -1))), torch.from_numpy(y)
    )
    loss.backward()
    w1 = dict(model1.named_parameters())
    for key, p0 in model0.named_parameters():
        g = p0.grad.double()
        expected = p0.detach().double() - 0.01 * g / (g.abs() + 1e-8)
        torch.testing.assert_close(w1[key].detach().double(), expected, rtol=0, atol=2e-7)
        assert (g.abs() > 1e-6).float().mean() > 0.5  # most weights really moved by lr


def test_train_mlp_validates_inputs(digits, tmp_path):
    x, y = digits
    with pytest.raises(ValueError, match="n_inputs"):
        train_mlp(x, y, ArchConfig(63, 8, 2, 10), TrainConfig(epochs=1), tmp_path)
    with pytest.raises(ValueError, match="y_train must lie"):
        train_mlp(x, y, ArchConfig(64, 8, 2, 5), TrainConfig(epochs=1), tmp_path)
    with pytest.raises(ValueError, match="x_train"):
        train_mlp(np.full_like(x, np.nan), y, ARCH, TrainConfig(epochs=1), tmp_path)
    with pytest.raises(ValueError, match="batches per epoch"):
        train_mlp(x[:40], y[:40], ARCH, TrainConfig(epochs=1, val_fraction=0.0), tmp_path)


# ------------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    arch = ArchConfig(12, 9, 3, 4, activation="tanh")
    model = arch.build(generator=_gen(5))
    path = save_checkpoint(
        tmp_path / "m.pt", model, {"arch": arch, "dataset": "npz:/x.npz", "epoch": 1.5}
    )
    return path, model


def test_checkpoint_round_trip(saved):
    path, model = saved
    loaded, meta = load_checkpoint(path)
    x = torch.rand(6, 12, generator=_gen(0))
    assert torch.equal(loaded(x), model(x))
    assert not loaded.training
    assert meta["arch"]["activation"] == "tanh" and meta["dataset"] == "npz:/x.npz"
    assert meta["format"] == "dgpbench-mlp" and meta["version"] == 1


def test_checkpoint_loads_in_a_fresh_interpreter(saved):
    # No training-code state needed: a new process rebuilds the net from the file alone.
    path, model = saved
    code = (
        "import sys, torch; from dgpbench.models.checkpoints import load_checkpoint;"
        "m, meta = load_checkpoint(sys.argv[1]);"
        "print(float(m(torch.ones(1, 12)).sum()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    with torch.no_grad():
        expected = float(model(torch.ones(1, 12)).sum())
    assert float(out.stdout) == pytest.approx(expected, rel=1e-6)


def test_truncated_checkpoint(saved):
    path, _ = saved
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        load_checkpoint(path)


def test_checkpoint_with_a_flipped_weight_byte_is_refused(saved):
    # torch's zip reader does not check CRCs: without a checksum this loads wrong weights.
    path, model = saved
    raw = bytearray(path.read_bytes())
    weights = model.state_dict()["2.weight"].numpy().tobytes()
    at = raw.find(weights)
    assert at > 0 and raw.find(weights, at + 1) == -1
    raw[at + 5] ^= 0x01  # the lowest mantissa bit of one weight
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="checksum") as exc:
        load_checkpoint(path)
    assert str(path) in str(exc.value)


def test_checkpoint_checksum_covers_batchnorm_buffers(tmp_path):
    arch = ArchConfig(5, 4, 3, 2, batchnorm=True)
    path = save_checkpoint(tmp_path / "bn.pt", arch.build(generator=_gen(1)), {"arch": arch})
    load_checkpoint(path)
    payload = torch.load(path, weights_only=True)
    payload["state_dict"]["1.num_batches_tracked"] += 1
    torch.save(payload, path)
    with pytest.raises(ValueError, match="checksum"):
        load_checkpoint(path)


def test_checkpoint_without_checksum_still_loads(saved, caplog):
    path, model = saved
    payload = torch.load(path, weights_only=True)
    del payload["weights_sha256"]
    torch.save(payload, path)
    loaded, _ = load_checkpoint(path)
    assert torch.equal(loaded[0].weight, model[0].weight)
    assert "no weights checksum" in caplog.text


def test_garbage_checkpoint(tmp_path):
    path = tmp_path / "g.pt"
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load_checkpoint(path)


def test_foreign_checkpoint(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "f.pt")
    with pytest.raises(ValueError, match="not a dgpbench MLP checkpoint"):
        load_checkpoint(tmp_path / "f.pt")


def test_checkpoint_version_mismatch(saved):
    path, _ = saved
    payload = torch.load(path, weights_only=True)
    payload["version"] = 99
    torch.save(payload, path)
    with pytest.raises(ValueError, match="version 99"):
        load_checkpoint(path)


def test_checkpoint_weights_do_not_match_architecture(saved):
    path, _ = saved
    payload = torch.load(path, weights_only=True)
    payload["meta"]["arch"]["hidden"] = 10
    torch.save(payload, path)
    with pytest.raises(ValueError, match="do not match"):
        load_checkpoint(path)


def test_missing_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "absent.pt")


def test_save_checkpoint_needs_arch(tmp_path):
    with pytest.raises(ValueError, match="arch"):
        save_checkpoint(tmp_path / "x.pt", build_mlp(2, 2, 1, 2), {"epoch": 0})


def test_batchnorm_trains_when_the_last_batch_would_hold_one_image(tmp_path):
    """33 training images, batch 32: batch norm must not see a batch of one."""
    from dgpbench.models.architectures import ArchConfig
    from dgpbench.models.checkpoints import load_checkpoint
    from dgpbench.models.train import TrainConfig, train_mlp

    rng = np.random.default_rng(0)
    x = rng.random((33, 6), dtype=np.float32)
    y = np.arange(33) % 3
    arch = ArchConfig(n_inputs=6, hidden=4, n_layers=3, n_classes=3, batchnorm=True)
    config = TrainConfig(epochs=2, batch_size=32, val_fraction=0.0, checkpoints_per_epoch=1)
    ckpt = train_mlp(x, y, arch, config, tmp_path, progress=False)
    model, _ = load_checkpoint(ckpt)
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in model)


def test_torch_threads_does_not_load_torch_and_a_later_import_gets_the_count():
    """A block that never uses torch does not pay its import; one that imports it gets ``n``."""
    code = (
        "import os, sys\n"
        "os.environ.pop('OMP_NUM_THREADS', None)\n"
        "from dgpbench.threads import torch_threads\n"
        "with torch_threads(1):\n"
        "    pass\n"
        "assert 'torch' not in sys.modules and 'OMP_NUM_THREADS' not in os.environ\n"
        "with torch_threads(1):\n"
        "    import torch\n"
        "    assert torch.get_num_threads() == 1, torch.get_num_threads()\n"
        "assert 'OMP_NUM_THREADS' not in os.environ\n"
        "try:\n"
        "    with torch_threads(0):\n"
        "        pass\n"
        "except ValueError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('threads=0 accepted')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
