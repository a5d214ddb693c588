"""torch.export programs (.pt2) read without running code, and package.module:factory models."""

from __future__ import annotations

import json
import pickle
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench import DGPFeatures, SoftmaxFeatures
from dgpbench.models.exported import ExportedModelError, load_exported
from dgpbench.models.specs import load_model, model_checksum


class _Payload:
    """Unpickling this creates ``marker``: the proof that a reader ran the file's code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _cnn() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(4 * 4 * 4, 16), nn.Tanh(), nn.Linear(16, 10),
    ).eval()  # fmt: skip


def _save(net: nn.Module, path: Path, shape: tuple[int, ...]) -> Path:
    torch.export.save(torch.export.export(net.eval(), (torch.zeros(2, *shape),)), path)
    return path


def _rewrite(src: Path, dst: Path, edit) -> Path:
    """Copy a .pt2 archive, passing each (name, bytes) through ``edit`` (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


@pytest.mark.parametrize(
    ("net", "shape"),
    [
        (_cnn(), (1, 8, 8)),
        (
            nn.Sequential(
                nn.Linear(6, 5), nn.LeakyReLU(0.2), nn.Linear(5, 3), nn.Sigmoid(), nn.Linear(3, 2)
            ),
            (6,),
        ),
        (
            nn.Sequential(
                nn.Conv2d(2, 3, 3, stride=2, padding=1, dilation=1, groups=1),
                nn.GELU(),
                nn.AvgPool2d(2),
                nn.Flatten(),
                nn.Dropout(0.5),
                nn.Linear(12, 4),
            ),
            (2, 8, 8),
        ),
    ],
)
def test_roundtrip_same_outputs(tmp_path: Path, net: nn.Module, shape: tuple[int, ...]) -> None:
    path = _save(net, tmp_path / "m.pt2", shape)
    module, input_shape = load_exported(path)
    assert input_shape == shape
    x = torch.rand(7, *shape)
    with torch.no_grad():
        assert torch.equal(module(x), net.eval()(x))
    assert model_checksum(module) == model_checksum(net)


def test_features_same_as_the_module(tmp_path: Path) -> None:
    net = _cnn()
    path = _save(net, tmp_path / "cnn.pt2", (1, 8, 8))
    rng = np.random.default_rng(0)
    X, y = rng.random((40, 1, 8, 8), dtype=np.float32), np.arange(40) % 10
    for cls in (DGPFeatures, SoftmaxFeatures):
        a = cls(net).fit(X, y).transform(X)
        b = cls(str(path)).fit(X, y).transform(X)
        np.testing.assert_array_equal(a, b)
    # the exported input shape lets flattened batches through the conv body
    b = SoftmaxFeatures(str(path)).fit(X.reshape(40, -1), y).transform(X.reshape(40, -1))
    np.testing.assert_array_equal(SoftmaxFeatures(net).fit(X, y).transform(X), b)


def test_pickled_weight_is_refused_not_run(tmp_path: Path) -> None:
    """A weight marked use_pickle (torch.export.load unpickles it, weights_only=False)."""
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Payload(marker))
    pickle.loads(payload)  # the payload is live: unpickling it creates the marker
    assert marker.exists()
    marker.unlink()

    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("model_weights_config.json"):
            config = json.loads(data)
            config["config"]["0.weight"]["use_pickle"] = True
            return json.dumps(config).encode()
        if name.endswith("data/weights/weight_0"):
            return payload
        return data

    hostile = _rewrite(_save(_cnn(), tmp_path / "ok.pt2", (1, 8, 8)), tmp_path / "bad.pt2", edit)
    with pytest.raises(ExportedModelError, match="stored as a pickle"):
        load_exported(hostile)
    assert not marker.exists()


def test_pickled_sample_inputs_never_opened(tmp_path: Path) -> None:
    """The sample inputs are a pickle (with a weights_only=False fallback in torch): never read."""
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Payload(marker))

    def edit(name: str, data: bytes) -> bytes:
        return payload if "sample_inputs" in name else data

    net = _cnn()
    hostile = _rewrite(_save(net, tmp_path / "ok.pt2", (1, 8, 8)), tmp_path / "bad.pt2", edit)
    module, _ = load_exported(hostile)
    assert not marker.exists()
    x = torch.rand(3, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(module(x), net(x))


def test_opaque_constant_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("model_constants_config.json"):
            return json.dumps(
                {
                    "config": {
                        "c": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True}
                    }
                }
            ).encode()
        return data

    src = _save(_cnn(), tmp_path / "ok.pt2", (1, 8, 8))
    hostile = _rewrite(src, tmp_path / "bad.pt2", edit)
    with zipfile.ZipFile(hostile, "a") as zf:
        top = zf.namelist()[0].split("/")[0]
        zf.writestr(f"{top}/data/constants/opaque_obj_0", pickle.dumps(_Payload(marker)))
    with pytest.raises(ExportedModelError, match="constants"):
        load_exported(hostile)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.write_bytes(b"garbage"), "not a torch.export archive"),
        (lambda p: p.write_bytes(b""), "not a torch.export archive"),
    ],
)
def test_not_an_archive(tmp_path: Path, make, match: str) -> None:
    path = tmp_path / "m.pt2"
    make(path)
    with pytest.raises(ExportedModelError, match=match):
        load_exported(path)


def test_unsupported_ops_named(tmp_path: Path) -> None:
    class Softmaxed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.fc(x), dim=1)

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)) + x)

    with pytest.raises(ExportedModelError, match=r"operator torch\.ops\.aten\.softmax"):
        load_exported(_save(Softmaxed(), tmp_path / "s.pt2", (4,)))
    with pytest.raises(ExportedModelError, match=r"aten\.add"):
        load_exported(_save(Residual(), tmp_path / "r.pt2", (4,)))
    bn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(72, 3))
    with pytest.raises(ExportedModelError, match="BatchNorm buffer"):
        load_exported(_save(bn, tmp_path / "bn.pt2", (1, 8, 8)))


def test_missing_pt2_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_model(str(tmp_path / "nope.pt2"))


# -- package.module:factory ---------------------------------------------------------------------
@pytest.fixture
def factory_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "user_nets_20a.py").write_text(
        "import torch\n"
        "def mlp():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))\n"
        "def not_a_module():\n"
        "    return 42\n"
        "VALUE = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "user_nets_20a"
    sys.modules.pop("user_nets_20a", None)


def test_factory_builds_the_module(factory_module: str) -> None:
    module, shape = load_model(f"{factory_module}:mlp")
    assert isinstance(module, nn.Sequential) and not module.training and shape is None
    X, y = np.random.default_rng(0).random((30, 4), dtype=np.float32), np.arange(30) % 3
    torch.manual_seed(0)
    same = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    np.testing.assert_array_equal(
        DGPFeatures(f"{factory_module}:mlp").fit(X, y).transform(X),
        DGPFeatures(same).fit(X, y).transform(X),
    )


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no_such_module_20a:build", "cannot import module 'no_such_module_20a'"),
        ("user_nets_20a:missing", "has no 'missing'"),
        ("user_nets_20a:not_a_module", r"returned int, not a torch\.nn\.Module"),
        ("user_nets_20a:VALUE", "neither callable nor a module"),
    ],
)
def test_factory_errors(factory_module: str, spec: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_model(spec)
