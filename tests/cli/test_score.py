"""`dgpbench score`: one real batch from the command line, exit 0 / 1 / 2, text and JSON."""

import json

import numpy as np
import pytest

from dgpbench import KSShiftDetector
from dgpbench.cli.main import main
from dgpbench.data.datasets import load_dataset
from dgpbench.features.registry import make_features
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.train import TrainConfig, train_mlp
from dgpbench.shifts.corruptions import corrupt


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small digits MLP and the three .npz files of the command (uint8 and float images)."""
    out = tmp_path_factory.mktemp("score")
    x_train, y_train = load_dataset("digits", split="train")
    x_test, _ = load_dataset("digits", split="test")
    arch = ArchConfig(n_inputs=64, hidden=32, n_layers=2, n_classes=10)
    config = TrainConfig(epochs=10, seed=0, lr=3e-3, threads=1)
    ckpt = train_mlp(x_train, y_train, arch, config, out / "model", progress=False)
    paths = {"model": ckpt}
    arrays = {
        "refs": {"x": x_train[:500, 0], "y": y_train[:500]},  # (N, H, W) float
        "clean": {"x": x_test[:250]},  # (N, C, H, W)
        "batch": {"x": (x_test[250:350] * 255).round().astype(np.uint8)},  # uint8
        "noisy": {"x": corrupt(x_test[250:350], "GN", 6, dataset="digits", seed=0)},
    }
    for name, content in arrays.items():
        paths[name] = out / f"{name}.npz"
        np.savez(paths[name], **content)
    return paths


def _args(files, batch, *extra):
    return ["score", "--model", str(files["model"]), "--refs", str(files["refs"]),
            "--clean", str(files["clean"]), "--batch", str(files[batch]), *extra]  # fmt: skip


def test_clean_batch_exits_0_and_noisy_batch_exits_1(files, capsys):
    assert main(_args(files, "batch")) == 0
    out = capsys.readouterr().out
    assert out.startswith("no shift: smallest adjusted p-value")
    assert "dgp_dist_class0" in out and "p_value_adjusted" in out
    assert main(_args(files, "noisy")) == 1
    assert capsys.readouterr().out.startswith("SHIFT")


@pytest.mark.parametrize("method", ["softmax", "tu", "magdiff", "dgp_nonorm"])
def test_json_matches_the_python_api(files, capsys, method):
    code = main(_args(files, "noisy", "--method", method, "--json", "--correction", "fdr"))
    report = json.loads(capsys.readouterr().out)
    # The same test through the API, images read independently of the command's reader.
    refs, clean = np.load(files["refs"]), np.load(files["clean"])
    feats = make_features(method, files["model"]).fit(refs["x"], refs["y"])
    det = KSShiftDetector(correction="fdr").fit(feats.transform(clean["x"]))
    result = det.test(feats.transform(np.load(files["noisy"])["x"]))
    assert code == int(result.is_drift) and report["shift"] == bool(result.is_drift)
    assert report["p_value"] == pytest.approx(result.min_p_val_adjusted)
    assert [f["p_value"] for f in report["features"]] == pytest.approx(result.p_val.tolist())
    rejected = [f["rejected"] for f in report["features"]]
    assert rejected == (result.p_val < result.threshold).tolist()
    assert (report["method"], report["n_refs"], report["n_clean"], report["n_batch"]) == (
        method, 500, 250, 100,
    )  # fmt: skip


def test_uint8_batch_is_scaled_like_float(files, capsys, tmp_path):
    as_float = tmp_path / "float.npz"
    np.savez(as_float, x=np.load(files["batch"])["x"].astype(np.float32) / 255)
    main(_args(files, "batch", "--json"))
    from_uint8 = json.loads(capsys.readouterr().out)
    files = {**files, "float": as_float}
    main(_args(files, "float", "--json"))
    from_float = json.loads(capsys.readouterr().out)
    for record in (from_uint8, from_float):  # the file and the time differ, nothing else
        del record["batch"], record["provenance"]["time"]
    assert from_float == from_uint8


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a zip archive", "not an .npz file"),
        ({"images": np.zeros((4, 8, 8))}, "has no array 'x'"),
        ({"x": np.zeros((4, 64))}, "must have shape"),
        ({"x": np.full((4, 8, 8), 2.0)}, "must lie in [0, 1]"),
    ],
)
def test_malformed_batch_exits_2_naming_the_file(files, capsys, tmp_path, content, message):
    bad = tmp_path / "malformed.npz"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        np.savez(bad, **content)
    code = main(_args({**files, "bad": bad}, "bad"))
    err = capsys.readouterr().err
    assert code == 2
    assert "malformed.npz" in err and message in err and err.count("\n") == 1


def test_unlabelled_refs_use_predicted_classes_and_wrong_image_size_exits_2(
    files, capsys, tmp_path
):
    # one --refs rule, the Python API's: without y, the predicted classes
    no_labels = tmp_path / "refs_nolabels.npz"
    refs = np.load(files["refs"])
    np.savez(no_labels, x=refs["x"])
    assert main(_args({**files, "refs": no_labels}, "batch", "--json")) == 0
    shell = json.loads(capsys.readouterr().out)
    feats = make_features("dgp", files["model"]).fit(refs["x"])  # y=None: predicted classes
    det = KSShiftDetector().fit(feats.transform(np.load(files["clean"])["x"]))
    result = det.test(feats.transform(np.load(files["batch"])["x"]))
    assert [f["p_value"] for f in shell["features"]] == pytest.approx(result.p_val.tolist())
    wrong = tmp_path / "big.npz"
    np.savez(wrong, x=np.zeros((4, 28, 28)))
    assert main(_args({**files, "big": wrong}, "big")) == 2
    assert "784" in capsys.readouterr().err
    assert main(_args(files, "batch", "--method", "persistence")) == 2
    assert "persistence" in capsys.readouterr().err
