"""The ResNet family: shapes, the residual block against a hand computation, gradients for
FGSM, checkpoints, the body/head split TU/DGP/MAGDiff read, seeded training and refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench.cli.main import main
from dgpbench.models.architectures import BasicBlock, ResNetConfig, build_resnet, model_arch
from dgpbench.models.body_head import split_network
from dgpbench.models.checkpoints import load_checkpoint, save_checkpoint
from dgpbench.models.train import shift_detection_config, train_mlp
from dgpbench.naming import model_id, parse_model_id

TINY = ResNetConfig((3, 8, 8), hidden=6, n_layers=2, n_classes=10, channels=(4, 8),
                    blocks=(1, 2))  # fmt: skip


def _net(config: ResNetConfig = TINY, seed: int = 0) -> nn.Sequential:
    return build_resnet(config, torch.Generator().manual_seed(seed))


def test_shapes_depth_and_layout():
    net = _net().eval()
    x = torch.rand(5, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    assert net(x).shape == (5, 10)
    assert torch.equal(net(x), net(x.reshape(5, -1)))  # flattened or image input
    assert net.body(x).shape == (5, TINY.head_inputs) == (5, 8)
    blocks = [m for m in net.body if isinstance(m, BasicBlock)]
    assert len(blocks) == 3 and TINY.depth == 1 + 2 * 3 + 2
    # the first block keeps size and channels (identity shortcut), a stage's first halves
    assert isinstance(blocks[0].shortcut, nn.Identity)
    assert blocks[1].conv1.stride == (2, 2) and not isinstance(blocks[1].shortcut, nn.Identity)
    assert isinstance(blocks[2].shortcut, nn.Identity)
    resnet18 = ResNetConfig((3, 32, 32), 0, 1, 10, channels=(64, 128, 256, 512),
                            blocks=(2, 2, 2, 2))  # fmt: skip
    assert resnet18.depth == 18


def test_a_block_is_its_formula():
    block = BasicBlock(2, 2, 1, "relu", torch.Generator().manual_seed(0)).eval()
    with torch.no_grad():
        for bn in (block.bn1, block.bn2):  # non-trivial running statistics
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(3, 2, 5, 5, generator=torch.Generator().manual_seed(2))

    def bn(layer, z):
        scale = layer.weight / torch.sqrt(layer.running_var + layer.eps)
        return (z - layer.running_mean[:, None, None]) * scale[:, None, None] + layer.bias[
            :, None, None
        ]

    conv = torch.nn.functional.conv2d
    h = torch.relu(bn(block.bn1, conv(x, block.conv1.weight, padding=1)))
    expected = torch.relu(bn(block.bn2, conv(h, block.conv2.weight, padding=1)) + x)
    torch.testing.assert_close(block(x), expected)


def test_seeded_build_and_input_gradients():
    a, b, c = _net(seed=0), _net(seed=0), _net(seed=1)
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.body[1].weight, c.body[1].weight)
    x = torch.rand(4, 192, requires_grad=True)  # FGSM differentiates the loss in the pixels
    loss = nn.functional.cross_entropy(a.eval()(x), torch.arange(4))
    loss.backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert all(p.grad is not None for p in a.parameters())


def test_checkpoint_round_trip(tmp_path):
    net = _net().eval()
    with torch.no_grad():
        net.body[2].running_mean.fill_(0.25)  # buffers travel too
    save_checkpoint(tmp_path / "m.pt", net, {"arch": TINY, "dataset": None})
    loaded, meta = load_checkpoint(tmp_path / "m.pt")
    assert meta["kind"] == "resnet" and model_arch(meta["arch"], "resnet") == TINY
    x = torch.rand(3, 192)
    assert torch.equal(loaded(x), net(x))


def test_the_head_is_the_mlp_graph_methods_read():
    net = _net().eval()
    body, head = split_network(net)
    assert tuple(head.layer_sizes) == (8, 6, 10)
    x = np.random.default_rng(0).random((4, 3, 8, 8), dtype=np.float32)
    np.testing.assert_allclose(body(x), net.body(torch.from_numpy(x)).detach().numpy(), atol=1e-6)


def test_training_is_seeded_and_drops_a_lone_last_image(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((41, 3, 8, 8), dtype=np.float32)  # 33 training images: 32 + a lone one
    y = np.arange(41) % 10
    config = shift_detection_config(epochs=1, batch_size=32, seed=3, checkpoints_per_epoch=1)
    first = train_mlp(x, y, TINY, config, tmp_path / "a", progress=False)
    second = train_mlp(x, y, TINY, config, tmp_path / "b", progress=False)
    (m1, meta), (m2, _) = load_checkpoint(first), load_checkpoint(second)
    assert meta["kind"] == "resnet" and meta["step"] == 1
    for v1, v2 in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True):
        assert torch.equal(v1, v2)


def test_model_ids_of_the_family():
    assert model_id(100, 2, 0, kind="resnet") == "resnet-h100-l2-s0"
    assert parse_model_id("resnet-h100-l2-s0").kind == "resnet"


def test_train_cnn_kind_resnet_writes_a_resnet(tmp_path):
    args = ["train-cnn", "--kind", "resnet", "--dataset", "digits", "--hidden", "4",
            "--layers", "2", "--epochs", "1", "--batch-size", "128", "--threads", "1",
            "--channels", "4", "8", "--blocks", "1", "1", "--seeds", "0",
            "--out-dir", str(tmp_path)]  # fmt: skip
    assert main(args) == 0
    model, meta = load_checkpoint(tmp_path / "resnet-h4-l2-s0" / "model.pt")
    assert meta["kind"] == "resnet" and tuple(meta["arch"]["blocks"]) == (1, 1)
    assert model(torch.zeros(2, 64)).shape == (2, 10)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"channels": (4, 8), "blocks": (1,)}, "same number of stages"),
        ({"channels": ()}, "channels"),
        ({"blocks": (1, 0)}, "blocks"),
        ({"input_shape": (8, 8)}, "input_shape"),
        ({"activation": "gelu"}, "activation"),
    ],
)
def test_bad_architecture_is_refused_naming_it(change, message):
    fields = {"input_shape": (3, 8, 8), "hidden": 4, "n_layers": 2, "n_classes": 10,
              "channels": (4, 8), "blocks": (1, 1), **change}  # fmt: skip
    with pytest.raises(ValueError, match=message):
        ResNetConfig(**fields)


def test_blocks_with_the_cnn_kind_are_refused(tmp_path, capsys):
    args = ["train-cnn", "--dataset", "digits", "--hidden", "4", "--layers", "2",
            "--blocks", "1", "1", "--seed", "0", "--out-dir", str(tmp_path)]  # fmt: skip
    assert main(args) == 2
    assert "--blocks" in capsys.readouterr().err
