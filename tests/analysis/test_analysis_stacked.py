"""Stacked analysis training: every seed's files equal its single `analysis train` run's.

Real 2-epoch digits MLPs through the CLI (in-process): three seeds of a 3-layer relu MLP and
of a linear classifier, stacked, against the same seeds trained one at a time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from dgpbench.analysis.stacked import stacked_criteria
from dgpbench.analysis.weights import model_metrics
from dgpbench.cli.main import main
from dgpbench.models.checkpoints import load_checkpoint
from dgpbench.topology import deep_graph_persistence
from dgpbench.topology.stacked import stacked_persistence

SEEDS = (0, 1, 2)
ARCHS = {"relu-l3-h8": ["--layers", "3", "--hidden", "8"], "linear": ["--layers", "1"]}
COMMON = ["--dataset", "digits", "--epochs", "2", "--threads", "1"]


def _run(*argv: object) -> None:
    assert main(["analysis", *(str(a) for a in argv)]) == 0


def _stacked(root, name):
    outs = [root / f"{name}-s{s}" for s in SEEDS]
    _run(
        "train-seeds",
        *COMMON,
        *ARCHS[name],
        "--seeds",
        *SEEDS,
        "--out-dirs",
        *outs,
        "--runs",
        *(f"digits/{name}-s{s}" for s in SEEDS),
    )
    return outs


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("stacked")
    out = {}
    for name in ARCHS:
        single = []
        for s in SEEDS:
            d = root / "single" / f"{name}-s{s}"
            _run("train", *COMMON, *ARCHS[name], "--seed", s, "--curves", d / "curves.csv",
                 "--run", f"digits/{name}-s{s}", "--out-dir", d)  # fmt: skip
            single.append(d)
        out[name] = (single, _stacked(root / "a", name), _stacked(root / "b", name))
    return out


@pytest.mark.parametrize("name", list(ARCHS))
def test_stacked_seed_equals_single_run(trained, name):
    single, stacked, _ = trained[name]
    for one, many in zip(single, stacked, strict=True):
        assert sorted(p.name for p in one.iterdir()) == sorted(p.name for p in many.iterdir())
        a, b = pd.read_csv(one / "curves.csv"), pd.read_csv(many / "curves.csv")
        assert a.columns.tolist() == b.columns.tolist()
        assert len(a) == 8  # 2 epochs x 4 evaluations, the initialisation left out
        text = ["run", "dataset", "activation", "regulariser"]
        pd.testing.assert_frame_equal(a[text], b[text])
        for col in a.columns.drop(text):
            np.testing.assert_allclose(b[col], a[col], rtol=1e-4, atol=1e-5, err_msg=col)
        ma, mb = pd.read_csv(one / "metrics.csv"), pd.read_csv(many / "metrics.csv")
        cols = ["epoch", "step", "train_loss", "train_acc", "val_loss", "val_acc"]
        np.testing.assert_allclose(mb[cols], ma[cols], rtol=1e-4, atol=1e-5)
        (wa, meta_a), (wb, meta_b) = (
            load_checkpoint(one / "model.pt"),
            load_checkpoint(many / "model.pt"),
        )
        assert meta_a["train_config"] == meta_b["train_config"]
        assert meta_a["arch"] == meta_b["arch"]
        for (ka, va), (kb, vb) in zip(
            wa.state_dict().items(), wb.state_dict().items(), strict=True
        ):
            assert ka == kb
            np.testing.assert_allclose(vb.numpy(), va.numpy(), rtol=1e-4, atol=1e-5)
        assert np.array_equal(np.load(one / "split.npz")["val_index"],
                              np.load(many / "split.npz")["val_index"])  # fmt: skip


@pytest.mark.parametrize("name", list(ARCHS))
def test_stacked_training_is_deterministic(trained, name):
    _, first, second = trained[name]
    for a, b in zip(first, second, strict=True):
        assert (a / "curves.csv").read_bytes() == (b / "curves.csv").read_bytes()
        sa, sb = (
            load_checkpoint(a / "model.pt")[0].state_dict(),
            load_checkpoint(b / "model.pt")[0].state_dict(),
        )
        assert all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)


def test_curves_final_row_is_the_checkpoint(trained):
    """The last curve row is the final model's NP/variance/DGP (oracle: model_metrics)."""
    for many in trained["relu-l3-h8"][1]:
        model, _ = load_checkpoint(many / "model.pt")
        ws = [m.weight.detach().numpy().T for m in model if hasattr(m, "weight")]
        want = model_metrics(ws, layers=False)
        last = pd.read_csv(many / "curves.csv").iloc[-1]
        for key in ("np", "variance", "log_variance", "dgp"):
            assert last[key] == pytest.approx(want[key], rel=1e-6)


@pytest.mark.parametrize("shapes", [[(7, 5), (5, 5), (5, 3)], [(6, 4)], [(3, 9), (9, 2)]])
def test_stacked_persistence_equals_one_network_functions(shapes):
    rng = np.random.default_rng(len(shapes))
    for dtype in (np.float32, np.float64):
        stack = [rng.normal(size=(4, *s)).astype(dtype) for s in shapes]
        stack[0][2] *= 5  # a different scale per network
        got = stacked_persistence(stack)
        crit = stacked_criteria(stack)
        for q in range(4):
            ws = [w[q] for w in stack]
            want = model_metrics(ws, layers=True)
            layers = [want[f"np_layer_{i}"] for i in range(len(shapes))]
            np.testing.assert_allclose(got["np_layers"][q], layers, rtol=1e-12)
            assert got["dgp"][q] == pytest.approx(deep_graph_persistence(ws), rel=1e-12)
            for key in ("np", "variance", "log_variance", "dgp"):
                assert crit[key][q] == pytest.approx(want[key], rel=1e-9), key


def test_stacked_persistence_refuses_bad_stacks():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="ragged"):
        stacked_persistence([rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 2))])
    with pytest.raises(ValueError, match="stacks 3 networks"):
        stacked_persistence([rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4, 2))])
    with pytest.raises(ValueError, match="only zero weights"):
        stacked_persistence([np.zeros((2, 3, 4))])
    with pytest.raises(ValueError, match="finite"):
        stacked_persistence([np.full((2, 3, 4), np.nan)])


def test_train_seeds_bad_input_exits_2(tmp_path, capsys):
    argv = ["analysis", "train-seeds", *COMMON, "--layers", "2", "--hidden", "4",
            "--seeds", "0", "1", "--out-dirs", str(tmp_path / "a")]  # fmt: skip
    assert main(argv) == 2
    assert "--out-dirs" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("option", [["--batchnorm"], ["--dropout", "0.5"]], ids=["bn", "dropout"])
def test_stacked_regulariser_models_equal_single_runs(tmp_path, option):
    """Per-seed batch statistics and dropout masks: each seed is its single run (the
    regulariser jobs record no curves).

    One exception, inherent to batch norm under Adam: the bias of a linear map followed by
    batch norm has an exactly zero gradient, so in both runs it follows rounding noise (Adam
    turns any non-zero gradient into a step of about lr), and the running mean follows it.
    The training-mode function does not depend on that bias; in eval mode only ``bias -
    running_mean`` counts, which agrees up to the running mean's lag behind the bias.
    """
    arch = ["--layers", "4", "--hidden", "8", *option]
    outs = [tmp_path / "stacked" / f"s{s}" for s in (0, 1)]
    _run("train-seeds", *COMMON, *arch, "--seeds", 0, 1, "--out-dirs", *outs, "--no-curves")
    for s, many in zip((0, 1), outs, strict=True):
        one = tmp_path / "single" / f"s{s}"
        _run("train", *COMMON, *arch, "--seed", s, "--out-dir", one)
        assert sorted(p.name for p in one.iterdir()) == sorted(p.name for p in many.iterdir())
        ma, mb = pd.read_csv(one / "metrics.csv"), pd.read_csv(many / "metrics.csv")
        cols = ["epoch", "step", "train_loss", "train_acc"]
        np.testing.assert_allclose(mb[cols], ma[cols], rtol=1e-4, atol=1e-5)
        n_val = len(np.load(one / "split.npz")["val_index"])
        if "--batchnorm" in option:  # eval mode: the running means' lag (see above)
            np.testing.assert_allclose(mb["val_loss"], ma["val_loss"], rtol=5e-3)
            np.testing.assert_allclose(mb["val_acc"], ma["val_acc"], atol=2.5 / n_val)
        else:
            np.testing.assert_allclose(mb[["val_loss", "val_acc"]], ma[["val_loss", "val_acc"]],
                                       rtol=1e-4, atol=1e-5)  # fmt: skip
        net_a, net_b = load_checkpoint(one / "model.pt")[0], load_checkpoint(many / "model.pt")[0]
        sa, sb = net_a.state_dict(), net_b.state_dict()
        assert sa.keys() == sb.keys()
        before_norm = {
            f"{i - 1}.bias": f"{i}.running_mean"
            for i, m in enumerate(net_a)
            if isinstance(m, torch.nn.BatchNorm1d)
        }
        for key in sa:
            if key in before_norm or key in before_norm.values():
                continue
            np.testing.assert_allclose(sb[key].numpy(), sa[key].numpy(), rtol=1e-4, atol=2e-5,
                                       err_msg=key)  # fmt: skip
        for bias, mean in before_norm.items():
            offset_a, offset_b = sa[bias] - sa[mean], sb[bias] - sb[mean]
            np.testing.assert_allclose(offset_b.numpy(), offset_a.numpy(), atol=0.03)
    # the two seeds differ (their masks and initialisations are their own)
    w = [load_checkpoint(d / "model.pt")[0].state_dict()["0.weight"] for d in outs]
    assert not np.allclose(w[0].numpy(), w[1].numpy())


def _profile_module():
    """``benchmarks/analysis_job_profile.py``, which holds the job's code without its
    speed-ups (their oracle, which must change no number) for its same-run ratio: one copy
    for both."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "analysis_job_profile.py"
    spec = importlib.util.spec_from_file_location("analysis_job_profile", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROFILE = _profile_module()


def _use_todays_code(monkeypatch):
    for module, name, value in PROFILE.todays_code():
        monkeypatch.setattr(module, name, value)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_speed_ups_change_no_number(tmp_path, monkeypatch, activation):
    """The job keeps freed gradients in the process (glibc's mallopt) and
    evaluates in small in-place chunks; every file it writes equals today's code's: the
    training bit for bit, the evaluations to float rounding (a product's rows can round
    differently in another chunk size; the digits' 539 test images take three forward
    passes of 256)."""
    argv = [*ARCHS["relu-l3-h8"], "--activation", activation, "--seeds", *SEEDS]

    def run(root):
        outs = [root / f"s{s}" for s in SEEDS]
        _run("train-seeds", *COMMON, *argv, "--out-dirs", *outs)
        return outs

    fast = run(tmp_path / "fast")
    with monkeypatch.context() as m:
        _use_todays_code(m)
        today = run(tmp_path / "today")
    for a, b in zip(fast, today, strict=True):
        assert (a / "split.npz").read_bytes() == (b / "split.npz").read_bytes()
        for name in ("curves.csv", "metrics.csv"):
            ca, cb = pd.read_csv(a / name), pd.read_csv(b / name)
            assert ca.columns.tolist() == cb.columns.tolist() and len(ca) == len(cb) > 0
            for col in ca.columns.drop("seconds", errors="ignore"):
                if pd.api.types.is_numeric_dtype(ca[col]):
                    np.testing.assert_allclose(ca[col], cb[col], rtol=1e-6, atol=1e-7, err_msg=col)
                else:
                    assert ca[col].tolist() == cb[col].tolist(), col
        sa, sb = (load_checkpoint(d / "model.pt")[0].state_dict() for d in (a, b))
        assert all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize(
    "options",
    [{}, {"batchnorm": True, "activation": "tanh"}, {"dropout": 0.5}],
    ids=["relu", "bn-tanh", "dropout"],
)
def test_chunked_evaluation_equals_todays(monkeypatch, options):
    """The validation and test evaluations in forward passes of _FORWARD_CHUNK images, in
    place and without autograd, equal today's (one pass per 4,096 images) to float rounding
    (MKL rounds a row of a small product differently by the number of rows)."""
    import dgpbench.analysis.stacked as an_stacked
    import dgpbench.models.stacked as mstacked
    from dgpbench.models.architectures import ArchConfig

    arch = ArchConfig(12, 9, 3, 4, **options)
    nets, gens = zip(*(mstacked._seed_model(arch, s, s + 7) for s in range(3)), strict=True)
    model = mstacked.StackedMLP(nets, arch.activation, gens)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.rand(53, 12, generator=gen), torch.randint(0, 4, (53,), generator=gen)
    model.train()
    model(x).sum().backward()  # batch norm's running statistics move off their start
    model.eval()
    monkeypatch.setattr(mstacked, "_EVAL_CHUNK", 20)  # sums over 20 + 20 + 13 images
    monkeypatch.setattr(an_stacked, "_TEST_CHUNK", 20)
    want = PROFILE.today_evaluate_stacked(model, x, y), PROFILE.today_stacked_accuracy(model, x, y)
    for chunk in (1, 6, 20, 64):  # forward passes of 6 images: 20 = 6 + 6 + 6 + 2
        monkeypatch.setattr(mstacked, "_FORWARD_CHUNK", chunk)
        got = mstacked._evaluate_stacked(model, x, y)
        np.testing.assert_allclose(got, want[0], rtol=1e-6)
        np.testing.assert_array_equal(an_stacked._stacked_accuracy(model, x, y), want[1])
        logits = mstacked.stacked_logits(model, x)
        assert logits.shape == (3, 53, 4)
        torch.testing.assert_close(logits, model(x).detach(), rtol=1e-6, atol=1e-6)
    # in place without autograd, out of place with it: the same bits (same product sizes)
    with torch.inference_mode():
        in_place = model(x)
    assert torch.equal(in_place, model(x).detach())
    assert all(np.isnan(v).all() for v in mstacked._evaluate_stacked(model, x[:0], y[:0]))


def test_retained_heap_is_a_no_op_without_glibc(monkeypatch):
    import ctypes

    import dgpbench.models.stacked as mstacked

    def no_libc(*args, **kwargs):
        raise OSError("no libc here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    with mstacked._retained_heap():
        x = torch.ones(3) * 2
    assert x.sum() == 6
