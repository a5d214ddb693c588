"""Saved detectors: save_detector / load_detector round trips, checksums, no pickle, no code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench.detectors.ks import KSShiftDetector
from dgpbench.features.registry import make_features
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.checkpoints import save_checkpoint
from dgpbench.saved import FittedDetector, load_detector, save_detector


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8))
    y = np.arange(150) % 3
    x = (centres[y] + 0.5 * rng.normal(size=(150, 8))).astype(np.float32)
    return {"refs": x[:60], "y": y[:60], "clean": x[60:120], "batch": x[120:] + 1.0}


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3)).eval()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ckpt") / "model.pt"
    save_checkpoint(path, _net(), {"arch": ArchConfig(8, 6, 2, 3)})
    return path


def _fit(method: str, model, data, correction="bonferroni") -> FittedDetector:
    feats = make_features(method, model).fit(data["refs"], data["y"])
    det = KSShiftDetector(alpha=0.1, correction=correction).fit(feats.transform(data["clean"]))
    return FittedDetector(feats, det, {"method": method})


@pytest.mark.parametrize("method", ["softmax", "tu_norm", "magdiff_signed", "dgp", "dgp_unsorted"])
def test_round_trip_same_result(tmp_path: Path, checkpoint: Path, data, method: str) -> None:
    fitted = _fit(method, str(checkpoint), data, correction="fdr")
    save_detector(tmp_path / "det.npz", fitted)
    loaded = load_detector(tmp_path / "det.npz")
    assert loaded.info == {"method": method, "test": "ks"}
    assert loaded.detector.get_params() == fitted.detector.get_params()
    assert loaded.features.get_params() == fitted.features.get_params()
    a, b = fitted.test(data["batch"]), loaded.test(data["batch"])
    np.testing.assert_array_equal(a.p_val, b.p_val)
    assert a.is_drift == b.is_drift and a.threshold == b.threshold
    np.testing.assert_array_equal(
        fitted.features.get_feature_names_out(), loaded.features.get_feature_names_out()
    )


def test_file_is_npz_without_pickle(tmp_path: Path, checkpoint: Path, data) -> None:
    save_detector(tmp_path / "det.npz", _fit("dgp", str(checkpoint), data))
    with np.load(tmp_path / "det.npz", allow_pickle=False) as store:  # raises on object arrays
        meta = json.loads(str(store["__meta__"]))
        assert all(store[k].dtype.kind != "O" for k in store.files)
    assert meta["model"]["reference"] == str(checkpoint.resolve())
    assert meta["features"]["class"] == "DGPFeatures"
    assert meta["detector"]["params"] == {"alpha": 0.1, "correction": "bonferroni"}


def test_file_from_before_dgp_sort_loads_sorted(tmp_path: Path, checkpoint: Path, data) -> None:
    """DGPFeatures files written before ``sort`` existed lack it: they load as sorted (the
    only behaviour then), with the same decisions."""
    path = tmp_path / "det.npz"
    fitted = _fit("dgp", str(checkpoint), data)
    save_detector(path, fitted)
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays["__meta__"]))
    del meta["features"]["params"]["sort"]
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    loaded = load_detector(path)
    assert loaded.features.sort is True
    np.testing.assert_array_equal(
        loaded.test(data["batch"]).p_val, fitted.test(data["batch"]).p_val
    )


def test_changed_weights_refused(tmp_path: Path, checkpoint: Path, data) -> None:
    save_detector(tmp_path / "det.npz", _fit("dgp", str(checkpoint), data))
    other = _net()
    with torch.no_grad():
        other[0].weight[0, 0] += 1e-3
    with pytest.raises(ValueError, match="do not match"):
        load_detector(tmp_path / "det.npz", model=other)
    assert load_detector(tmp_path / "det.npz", model=_net()).detector is not None


def test_in_memory_model_needs_model_on_load(tmp_path: Path, data) -> None:
    save_detector(tmp_path / "det.npz", _fit("softmax", _net(), data))
    with pytest.raises(ValueError, match="in-memory network: pass model="):
        load_detector(tmp_path / "det.npz")
    loaded = load_detector(tmp_path / "det.npz", model=_net())
    assert loaded.test(data["batch"]).n == 30


@pytest.mark.parametrize(
    "name", ["os:system", "dgpbench.models.body_head:NetworkBody", "dgpbench.io:atomic_path"]
)
def test_foreign_class_in_file_not_imported(tmp_path: Path, checkpoint: Path, data, name) -> None:
    """A file naming anything but a registered estimator is refused, nothing imported."""
    path = tmp_path / "det.npz"
    save_detector(path, _fit("softmax", str(checkpoint), data))
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays["__meta__"]))
    meta["detector"]["class"] = name
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=r"is not a saveable dgpbench detector"):
        load_detector(path)


def test_object_array_in_file_refused(tmp_path: Path) -> None:
    path = tmp_path / "det.npz"
    np.savez(path, __meta__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="not a dgpbench detector file"):
        load_detector(path)


def test_unsavable_state_named(tmp_path: Path, checkpoint: Path, data) -> None:
    fitted = _fit("softmax", str(checkpoint), data)
    fitted.detector.extra_ = object()
    with pytest.raises(TypeError, match="attribute extra_"):
        save_detector(tmp_path / "det.npz", fitted)
    assert not (tmp_path / "det.npz").exists()

    class Mine(KSShiftDetector):
        pass

    mine = Mine().fit(fitted.features.transform(data["clean"]))
    mine.__class__.__module__ = "tests.mine"
    with pytest.raises(TypeError, match="only dgpbench's own"):
        save_detector(tmp_path / "det.npz", FittedDetector(fitted.features, mine))


def test_factory_not_imported_on_the_files_word(tmp_path: Path, data, monkeypatch) -> None:
    (tmp_path / "nets_saved_20a.py").write_text(
        "import torch\n"
        "CALLS = []\n"
        "def net():\n"
        "    CALLS.append(1)\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), "
        "torch.nn.Linear(6, 3))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    save_detector(tmp_path / "det.npz", _fit("dgp", "nets_saved_20a:net", data))
    import nets_saved_20a

    calls = len(nets_saved_20a.CALLS)
    with pytest.raises(ValueError, match="runs that code, so name it yourself"):
        load_detector(tmp_path / "det.npz")
    assert len(nets_saved_20a.CALLS) == calls
    loaded = load_detector(tmp_path / "det.npz", model="nets_saved_20a:net")
    assert loaded.test(data["batch"]).n == 30


def test_truncated_file(tmp_path: Path, checkpoint: Path, data) -> None:
    path = tmp_path / "det.npz"
    save_detector(path, _fit("softmax", str(checkpoint), data))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="not a dgpbench detector file"):
        load_detector(path)


def test_saved_reads_no_private_state_of_the_estimators() -> None:
    """dgpbench.saved stores what each estimator's get_state gives and restores it through
    set_state: it reads no underscore attribute of another object (scikit-learn's
    ``_validate_params``, the estimator protocol, aside)."""
    import ast

    import dgpbench.saved

    allowed = {"_validate_params"}
    for path in sorted(Path(dgpbench.saved.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                assert node.attr in allowed, f"{path.name}:{node.lineno} reads .{node.attr}"
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_")
            ):
                raise AssertionError(f"{path.name}:{node.lineno} reads {node.args[1].value}")
