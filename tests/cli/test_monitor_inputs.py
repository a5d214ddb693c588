"""Inputs of fit/score/features: one scale rule, labels the model cannot output, torch's
own INFO logs after Ctrl-C."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from dgpbench.cli.main import main
from dgpbench.features.registry import make_features


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))


@pytest.mark.parametrize("method", ["dgp", "tu", "softmax", "magdiff"])
def test_labels_the_model_cannot_output_are_refused(method):
    X = np.random.default_rng(0).uniform(size=(12, 4)).astype(np.float32)
    with pytest.raises(ValueError, match=r"labels include \[3\].*3 outputs"):
        make_features(method, _mlp()).fit(X, [0, 1, 2, 3] * 3)
    with pytest.raises(ValueError, match=r"labels include \[-1\]"):
        make_features(method, _mlp()).fit(X, [0, 1, -1] * 4)
    make_features(method, _mlp()).fit(X, [0, 1, 2] * 4)  # in range: fine


def test_features_command_refuses_float_images_outside_0_1(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, size=(10, 1, 2, 2)).astype(np.float32)
    np.savez(tmp_path / "images.npz", x_ref=x, y_ref=np.arange(10) % 3, x_test=x)
    torch.save({"no": "model"}, tmp_path / "m.pt")
    code = main(["features", "--model", str(tmp_path / "m.pt"), "--clean",
                 str(tmp_path / "images.npz"), "--method", "softmax", "--out",
                 str(tmp_path / "f.npz")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "must lie in [0, 1]" in err and "x_ref" in err
    assert not (tmp_path / "f.npz").exists()


def test_torch_info_logs_are_silenced_after_an_interrupt(monkeypatch, capsys):
    import dgpbench.cli.monitor as monitor
    from dgpbench.cli.registry import SUBCOMMANDS

    def interrupted(args):
        raise KeyboardInterrupt

    help_, add_args, _ = SUBCOMMANDS["score"]
    monkeypatch.setitem(SUBCOMMANDS, "score", (help_, add_args, interrupted))
    assert monitor  # registered
    assert main(["score", "--batch", "b.npz"]) == 130
    # what torch logs at exit ("FakeTensor cache stats", INFO) does not reach the user
    assert not logging.getLogger("torch._subclasses.fake_tensor").isEnabledFor(logging.INFO)
    assert capsys.readouterr().err.strip().endswith("interrupted")
