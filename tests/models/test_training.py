"""Tests of dgpbench.models.stacked (several seeds at once) and of the ``device`` option.

The oracle of the stacked trainer is :func:`dgpbench.models.train.train_mlp`: every seed of a
stacked run must be the run ``train_mlp`` makes with that seed alone (same files, same
initial weights bit for bit, the trained weights and metrics to float tolerance).
"""

from __future__ import annotations

import csv
import dataclasses
import pickle
import shlex
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from _workflow import SNAKEFILE, tiny_config, venv_env

from dgpbench._device import resolve_device
from dgpbench.cli.main import main
from dgpbench.data.datasets import load_dataset
from dgpbench.features.dgp import DGPFeatures
from dgpbench.features.registry import make_features
from dgpbench.models.architectures import ArchConfig, build_mlp
from dgpbench.models.checkpoints import list_checkpoints, load_checkpoint
from dgpbench.models.stacked import StackedMLP, train_mlp_seeds
from dgpbench.models.train import TrainConfig, train_mlp
from dgpbench.topology.graphs import MLPGraph

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
without_cuda = pytest.mark.skipif(CUDA, reason="checks the refusal on a machine without CUDA")

ARCH = ArchConfig(64, 16, 3, 10)
# Two epochs with a checkpoint every half epoch: 64 Adam steps on digits.
CONFIG = TrainConfig(lr=3e-3, epochs=2, checkpoints_per_epoch=2, keep="all", threads=1)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", split="train")


def _metrics(path) -> list[dict[str, float]]:
    with open(path) as fh:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def _states(out_dir) -> list[tuple[float, dict[str, torch.Tensor], dict]]:
    return [(e, *load_checkpoint(p)) for e, p in list_checkpoints(out_dir)]


def _assert_bit_identical_runs(a, b) -> None:
    """Same checkpoints (bit for bit), metrics (but the wall time) and split."""
    for (ea, ma, _), (eb, mb, _) in zip(_states(a), _states(b), strict=True):
        assert ea == eb
        sa, sb = ma.state_dict(), mb.state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa), f"epoch {ea} differs"
    rows = []
    for run in (a, b):
        with open(run / "metrics.csv") as fh:  # as text: every digit counts, "nan" == "nan"
            rows.append([{**r, "seconds": ""} for r in csv.DictReader(fh)])
    assert rows[0] == rows[1]
    assert (a / "split.npz").read_bytes() == (b / "split.npz").read_bytes()


# ------------------------------------------------------------------------------------------
# the stacked model
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_stacked_mlp_is_its_models(activation):
    nets = [
        build_mlp(7, 5, 3, 4, activation, generator=torch.Generator().manual_seed(s))
        for s in range(3)
    ]
    stacked = StackedMLP(nets, activation)
    x = torch.rand(6, 7, generator=torch.Generator().manual_seed(9))
    xs = torch.rand(3, 6, 7, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        for k, net in enumerate(nets):
            torch.testing.assert_close(stacked(x)[k], net(x))  # one batch for all
            torch.testing.assert_close(stacked(xs)[k], net(xs[k]))  # a batch each
            state, expected = stacked.state_dict_of(k), net.state_dict()
            assert state.keys() == expected.keys()
            assert all(torch.equal(state[key], expected[key]) for key in expected)


@pytest.mark.parametrize(
    "kw", [{"batchnorm": True}, {"dropout": 0.4}, {"batchnorm": True, "dropout": 0.4}]
)
def test_stacked_mlp_with_regularisers_is_its_models(kw):
    """Batch norm per model (own batch statistics, running statistics, affine parameters) and
    dropout masks from each model's generator, drawn as F.dropout draws them."""
    nets = [
        build_mlp(7, 5, 3, 4, **kw, generator=torch.Generator().manual_seed(s)) for s in range(3)
    ]
    stacked = StackedMLP(nets, "relu", [torch.Generator().manual_seed(20 + s) for s in range(3)])
    xs = torch.rand(3, 6, 7, generator=torch.Generator().manual_seed(10))
    got = stacked(xs)  # training mode: batch statistics, dropout
    for k, net in enumerate(nets):
        net.train()
        with torch.random.fork_rng():
            torch.manual_seed(20 + k)
            torch.testing.assert_close(got[k], net(xs[k]))
        state, expected = stacked.state_dict_of(k), net.state_dict()
        assert state.keys() == expected.keys()
        for key in expected:  # running statistics updated alike
            torch.testing.assert_close(state[key], expected[key], msg=key)
    stacked.eval()
    with torch.no_grad():
        for k, net in enumerate(nets):
            net.eval()
            torch.testing.assert_close(stacked(xs)[k], net(xs[k]))


def test_stacked_mlp_refuses_other_layers():
    drop = build_mlp(7, 5, 3, 4, dropout=0.5, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="dropout generator"):
        StackedMLP([drop], "relu")
    odd = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Sigmoid(), torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="Sigmoid"):
        StackedMLP([odd], "relu")
    nets = [build_mlp(7, h, 2, 4, generator=torch.Generator().manual_seed(0)) for h in (5, 6)]
    with pytest.raises(ValueError, match=r"models\[1\]"):
        StackedMLP(nets, "relu")
    with pytest.raises(ValueError, match="at least one"):
        StackedMLP([], "relu")


# ------------------------------------------------------------------------------------------
# training several seeds at once
# ------------------------------------------------------------------------------------------
def test_each_stacked_seed_is_its_single_model_run(digits, tmp_path):
    x, y = digits
    seeds = [3, 0, 11]
    finals = train_mlp_seeds(
        x, y, ARCH, CONFIG, seeds, [tmp_path / "stacked" / f"s{s}" for s in seeds],
        dataset="digits", progress=False,
    )  # fmt: skip
    for seed, final in zip(seeds, finals, strict=True):
        stacked = final.parent
        single = train_mlp(
            x, y, ARCH, dataclasses.replace(CONFIG, seed=seed), tmp_path / f"single{seed}",
            dataset="digits", progress=False,
        ).parent  # fmt: skip
        assert final.name == "epoch_02.00.pt"
        assert sorted(p.name for p in stacked.iterdir()) == sorted(p.name for p in single.iterdir())
        assert (stacked / "split.npz").read_bytes() == (single / "split.npz").read_bytes()
        runs = list(zip(_states(stacked), _states(single), strict=True))
        assert [e for (e, _, _), _ in runs] == [0.0, 0.5, 1.0, 1.5, 2.0]
        for (epoch, m_st, meta_st), (_, m_si, meta_si) in runs:
            s_st, s_si = m_st.state_dict(), m_si.state_dict()
            for key in s_si:
                if epoch == 0:  # the same initial weights, bit for bit
                    assert torch.equal(s_st[key], s_si[key]), key
                else:
                    torch.testing.assert_close(s_st[key], s_si[key], rtol=1e-4, atol=2e-5)
            metrics_st, metrics_si = meta_st.pop("metrics"), meta_si.pop("metrics")
            assert meta_st == meta_si  # arch, train_config (its seed), data set, sizes
            assert metrics_st.keys() == metrics_si.keys()
        rows_st, rows_si = _metrics(stacked / "metrics.csv"), _metrics(single / "metrics.csv")
        assert len(rows_st) == len(rows_si) == 5
        for r_st, r_si in zip(rows_st, rows_si, strict=True):
            assert (r_st["epoch"], r_st["step"]) == (r_si["epoch"], r_si["step"])
            for col in ("train_loss", "train_acc", "val_loss", "val_acc"):
                np.testing.assert_allclose(r_st[col], r_si[col], rtol=1e-5, err_msg=col)
        # Training moved the weights and learned: the comparison is not of idle models.
        assert rows_st[-1]["val_acc"] > 0.5 > 0.3 > rows_st[0]["val_acc"]


def test_stacked_training_is_deterministic(digits, tmp_path):
    x, y = digits
    runs = []
    for name in ("a", "b"):
        dirs = [tmp_path / name / f"s{s}" for s in (1, 2)]
        train_mlp_seeds(x, y, ARCH, CONFIG, [1, 2], dirs, progress=False)
        runs.append(dirs)
    for a, b in zip(*runs, strict=True):
        _assert_bit_identical_runs(a, b)
    # ... and the seeds are different models.
    first = [load_checkpoint(d / "epoch_02.00.pt")[0].state_dict()["0.weight"] for d in runs[0]]
    assert not torch.equal(*first)


def test_train_mlp_seeds_validates_its_arguments(digits, tmp_path):
    x, y = digits
    dirs = [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(ValueError, match="distinct"):
        train_mlp_seeds(x, y, ARCH, CONFIG, [1, 1], dirs)
    with pytest.raises(ValueError, match="one per seed"):
        train_mlp_seeds(x, y, ARCH, CONFIG, [1, 2, 3], dirs)
    with pytest.raises(ValueError, match="out_dirs must be distinct"):
        train_mlp_seeds(x, y, ARCH, CONFIG, [1, 2], [tmp_path / "a", tmp_path / "b" / ".." / "a"])
    with pytest.raises(ValueError, match=r"seeds\[1\]"):
        train_mlp_seeds(x, y, ARCH, CONFIG, [1, -2], dirs)
    with pytest.raises(ValueError, match="at least one seed"):
        train_mlp_seeds(x, y, ARCH, CONFIG, [], [])
    with pytest.raises(ValueError, match="n_inputs"):
        train_mlp_seeds(x, y, ArchConfig(63, 16, 3, 10), CONFIG, [1, 2], dirs)
    assert list(tmp_path.iterdir()) == []  # refused before writing anything


def test_cli_trains_every_seed_into_its_folder(digits, tmp_path):
    common = ["train", "--dataset", "digits", "--hidden", "16", "--layers", "3", "--lr", "3e-3",
              "--epochs", "1", "--threads", "1"]  # fmt: skip
    assert main([*common, "--seeds", "4", "0", "--out-dir", str(tmp_path / "all")]) == 0
    assert main([*common, "--seed", "4", "--out-dir", str(tmp_path / "one")]) == 0
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["h16-l3-s0", "h16-l3-s4"]
    for folder in (tmp_path / "all" / "h16-l3-s0", tmp_path / "all" / "h16-l3-s4"):
        assert sorted(p.name for p in folder.iterdir()) == ["metrics.csv", "model.pt", "split.npz"]
    stacked, meta = load_checkpoint(tmp_path / "all" / "h16-l3-s4" / "model.pt")
    single, _ = load_checkpoint(tmp_path / "one" / "model.pt")
    assert meta["train_config"]["seed"] == 4 and meta["epoch"] == 1.0
    for key, value in single.state_dict().items():
        torch.testing.assert_close(stacked.state_dict()[key], value, rtol=1e-4, atol=2e-5)
    with pytest.raises(SystemExit):  # argparse: --seed and --seeds exclude each other
        main([*common, "--seeds", "1", "--seed", "2", "--out-dir", str(tmp_path / "both")])
    assert not (tmp_path / "both").exists()


def test_workflow_trains_each_architecture_in_one_job(tmp_path):
    models = {"hidden": [16], "layers": [2, 3], "seeds": [0, 4, 1], "activation": "relu"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(tiny_config(models=models)))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--cores", "1",
         "-n", "-p"],
        cwd=tmp_path, env=venv_env(), capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    commands = [
        shlex.split(line.removeprefix("Shell command: "))
        for line in proc.stdout.splitlines()
        # the rules call the dgpbench of the interpreter running Snakemake
        if line.startswith(
            f"Shell command: {shlex.join([sys.executable, '-m', 'dgpbench'])} train "
        )
    ]
    assert len(commands) == 2  # one job per architecture, not per seed
    for command in commands:
        args = command[: command.index(">")]
        seeds = args[args.index("--seeds") + 1 : args.index("--activation")]
        assert seeds == ["0", "4", "1"] and "--seed" not in args
        assert args[args.index("--out-dir") + 1] == "results/models/digits"
        assert args[args.index("--device") + 1] == "cpu"
    # Every seed's model is the output of its architecture's job (features read them).
    for layers in (2, 3):
        for seed in (0, 4, 1):
            assert f"results/models/digits/h16-l{layers}-s{seed}/model.pt" in proc.stdout


# ------------------------------------------------------------------------------------------
# device
# ------------------------------------------------------------------------------------------
def test_resolve_device_names():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if CUDA else "cpu")
    for bad in ("gpu", "tpu", "", 0, None):
        with pytest.raises(ValueError, match="device must be one of"):
            resolve_device(bad)


@without_cuda
def test_cuda_is_refused_clearly_without_cuda(digits, tmp_path):
    x, y = digits
    for device in ("cuda", "cuda:0"):
        with pytest.raises(ValueError, match="no usable CUDA device"):
            train_mlp(x, y, ARCH, CONFIG, tmp_path / "one", device=device)
        with pytest.raises(ValueError, match="no usable CUDA device"):
            train_mlp_seeds(x, y, ARCH, CONFIG, [0], [tmp_path / "many"], device=device)
    net = ARCH.build(generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="no usable CUDA device"):
        DGPFeatures(net, device="cuda").fit(x[:50], y[:50])
    with pytest.raises(ValueError, match="no usable CUDA device"):
        MLPGraph.from_module(net, device="cuda")
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    assert MLPGraph.from_module(net, device="auto").device == "cpu"


def test_cli_refuses_cuda_without_cuda_in_one_line(tmp_path, capsys):
    if CUDA:
        pytest.skip("checks the refusal on a machine without CUDA")
    code = main(["train", "--dataset", "digits", "--hidden", "8", "--layers", "2", "--seeds",
                 "0", "--device", "cuda", "--out-dir", str(tmp_path / "m")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "CUDA" in err and "\n" not in err
    assert not (tmp_path / "m").exists()


def test_graph_keeps_its_device_through_pickling():
    net = ARCH.build(generator=torch.Generator().manual_seed(0))
    graph = MLPGraph.from_module(net, device="auto")
    copy = pickle.loads(pickle.dumps(graph))
    assert copy.device == graph.device == ("cuda" if CUDA else "cpu")
    x = np.random.default_rng(0).random((5, 64), dtype=np.float32)
    np.testing.assert_array_equal(copy.forward(x), graph.forward(x))


@needs_cuda
def test_cuda_training_matches_cpu_and_is_deterministic(digits, tmp_path):
    x, y = digits
    runs = {}
    for name, device in (("cpu", "cpu"), ("gpu1", "cuda"), ("gpu2", "cuda")):
        runs[name] = [tmp_path / name / f"s{s}" for s in (0, 1)]
        train_mlp_seeds(x, y, ARCH, CONFIG, [0, 1], runs[name], progress=False, device=device)
    for a, b in zip(runs["gpu1"], runs["gpu2"], strict=True):
        _assert_bit_identical_runs(a, b)
    for a, b in zip(runs["cpu"], runs["gpu1"], strict=True):
        for (_, ma, _), (_, mb, _) in zip(_states(a), _states(b), strict=True):
            for key, value in ma.state_dict().items():
                torch.testing.assert_close(mb.state_dict()[key], value, rtol=1e-4, atol=5e-5)
    single = train_mlp(x, y, ARCH, CONFIG, tmp_path / "single", progress=False, device="cuda")
    cpu = load_checkpoint(runs["cpu"][0] / "epoch_02.00.pt")[0].state_dict()
    for key, value in load_checkpoint(single)[0].state_dict().items():
        torch.testing.assert_close(value, cpu[key], rtol=1e-4, atol=5e-5)


@needs_cuda
@pytest.mark.parametrize("method", ["softmax", "tu", "magdiff", "dgp"])
def test_features_on_cuda_match_cpu(digits, method):
    x, y = digits
    net = ARCH.build(generator=torch.Generator().manual_seed(0))
    cpu = make_features(method, net).fit(x[:300], y[:300]).transform(x[300:500])
    gpu = make_features(method, net, device="cuda").fit(x[:300], y[:300]).transform(x[300:500])
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-6)
