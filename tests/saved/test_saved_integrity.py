"""Saved detectors that cannot lie, and inputs that cannot mislead them: hostile or damaged
detector and .pt2 files are refused by name, every restored value is checked, and the MMD and
classifier tests stay exact and calibrated on tiny or degenerate samples.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from dgpbench.detectors import make_detector
from dgpbench.features.registry import METHODS, make_features
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.checkpoints import save_checkpoint
from dgpbench.saved import FittedDetector, load_detector, save_detector
from dgpbench.saved.scoring import load_scorer


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8))
    y = np.arange(150) % 3
    x = (centres[y] + 0.5 * rng.normal(size=(150, 8))).astype(np.float32)
    return {"refs": x[:60], "y": y[:60], "clean": x[60:120], "batch": x[120:] + 1.0}


def _net(act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 6), act(), nn.Linear(6, 3)).eval()


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "model.pt"
    save_checkpoint(path, _net(), {"arch": ArchConfig(8, 6, 2, 3)})
    return path


def _fit(method: str, model, data, test: str = "ks") -> FittedDetector:
    feats = make_features(method, model).fit(data["refs"], data["y"])
    det = make_detector(test, alpha=0.1).fit(feats.transform(data["clean"]))
    return FittedDetector(feats, det, {"method": method})


def _edit(path: Path, edit) -> None:
    """Rewrite a detector file after ``edit(meta, arrays)`` (a hostile or damaged file)."""
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    edit(meta, arrays)
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


@pytest.fixture()
def saved(tmp_path: Path, checkpoint: Path, data) -> Path:
    path = tmp_path / "det.npz"
    save_detector(path, _fit("dgp", str(checkpoint), data))
    return path


# -- classes only from the registry ---------------------------------------------------
@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("features", "dgpbench.__main__:X"),
        ("detector", "dgpbench.__main__:X"),
        ("detector", "dgpbench.features.dgp:DGPFeatures"),
        ("features", "KSShiftDetector"),  # a registered class in the wrong role
        ("detector", ["KSShiftDetector"]),
    ],
)
def test_a_class_outside_the_registry_is_refused(saved: Path, role: str, name) -> None:
    def edit(meta, arrays):
        meta[role]["class"] = name

    _edit(saved, edit)
    with pytest.raises(ValueError, match="is not a saveable dgpbench"):
        load_detector(saved)  # never SystemExit: nothing is imported by path


# -- every restored parameter and array is checked -----------------------------------
@pytest.mark.parametrize(
    ("what", "edit", "match"),
    [
        ("NaN reference", lambda m, a: a["detector/X_ref_"].__setitem__(0, np.nan), "NaN"),
        ("alpha -1", lambda m, a: m["detector"]["params"].update(alpha=-1), "alpha"),
        ("alpha 1.5", lambda m, a: m["detector"]["params"].update(alpha=1.5), "alpha"),
        (
            "1-row reference",
            lambda m, a: a.update({"detector/X_ref_": a["detector/X_ref_"][:1]}),
            "minimum of 2|at least 2",
        ),
        (
            "NaN class means",
            lambda m, a: a["features/class_means_/0"].__setitem__((0, 0), np.inf),
            "NaN or infinite",
        ),
        (
            "class means of the wrong width",
            lambda m, a: a.update({"features/class_means_/0": a["features/class_means_/0"][:, :2]}),
            "do not fit",
        ),
        (
            "detector narrower than the features",
            lambda m, a: a.update({"detector/X_ref_": a["detector/X_ref_"][:, :2]}),
            "takes 2 features but the transformer gives 3",
        ),
        ("unknown parameter", lambda m, a: m["features"]["params"].update(foo=1), "parameters"),
        (
            "representation",
            lambda m, a: m["features"]["params"].update(representation="x"),
            "representation",
        ),
    ],
)
def test_every_restored_parameter_and_array_is_checked(saved: Path, what, edit, match) -> None:
    _edit(saved, edit)
    with pytest.raises(ValueError, match=match):
        load_detector(saved)


# -- malformed metadata, one clear ValueError each ----------------------------------
@pytest.mark.parametrize(
    "edit",
    [
        lambda m, a: m["model"].pop("sha256"),
        lambda m, a: m["features"]["state"].update(transform=3),  # was "'int' not callable"
        lambda m, a: m["detector"]["params"].update(alpha="0.05"),  # failed only at test time
        lambda m, a: m.update(info=[1]),
        lambda m, a: m.update(features=7),
        lambda m, a: m["features"]["state"].update(n_features_in_="8"),
        lambda m, a: m["features"]["state"].update(image_shape_=[[1]]),
        lambda m, a: m.pop("detector"),
    ],
)
def test_malformed_metadata_is_refused(saved: Path, data, edit) -> None:
    _edit(saved, edit)
    with pytest.raises(ValueError, match=r"det\.npz"):
        load_detector(saved).test(data["batch"])


def test_metadata_that_is_not_json_is_refused(saved: Path) -> None:
    def edit(meta, arrays):
        meta.clear()

    _edit(saved, edit)
    with np.load(saved) as store:
        arrays = {k: store[k] for k in store.files}
    arrays["__meta__"] = np.array("[" * 100000)  # deep nesting: RecursionError in json
    np.savez(saved, **arrays)
    with pytest.raises(ValueError, match="not valid JSON"):
        load_detector(saved)


# -- the fitted network is hashed, never loaded again ------------------------------
def test_a_model_factory_is_called_once(tmp_path: Path, data, monkeypatch) -> None:
    (tmp_path / "nets_rel4_a.py").write_text(
        "import torch\nCALLS = []\n"
        "def net():\n"
        "    CALLS.append(1)\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), "
        "torch.nn.Linear(6, 3))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fitted = _fit("softmax", "nets_rel4_a:net", data)
    import nets_rel4_a

    calls = len(nets_rel4_a.CALLS)
    save_detector(tmp_path / "det.npz", fitted)
    assert len(nets_rel4_a.CALLS) == calls  # the factory is not called a second time


def test_a_model_replaced_after_fit_is_detected(tmp_path: Path, checkpoint: Path, data) -> None:
    fitted = _fit("dgp", str(checkpoint), data)
    other = _net()
    with torch.no_grad():
        other[0].weight.mul_(2.0)
    save_checkpoint(checkpoint, other, {"arch": ArchConfig(8, 6, 2, 3)})  # replaced during fit
    save_detector(tmp_path / "det.npz", fitted)
    with pytest.raises(ValueError, match="do not match"):
        load_detector(tmp_path / "det.npz")
    assert load_detector(tmp_path / "det.npz", model=_net()).test(data["batch"]).n == 30


# -- the architecture is part of the fingerprint -----------------------------------
def test_same_weights_with_another_activation_differ(tmp_path: Path, data) -> None:
    save_detector(tmp_path / "det.npz", _fit("softmax", _net(), data))
    tanh = _net(nn.Tanh)
    assert all(
        (a == b).all()
        for a, b in zip(tanh.state_dict().values(), _net().state_dict().values(), strict=True)
    )
    with pytest.raises(ValueError, match="layers or weights do not match"):
        load_detector(tmp_path / "det.npz", model=tanh)


def _cnn(pool: type[nn.Module]) -> nn.Sequential:
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), pool(2), nn.Flatten(), nn.Linear(8, 3)
    ).eval()


def test_same_weights_with_another_pooling_differ(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.random((40, 1, 4, 4)).astype(np.float32)
    feats = make_features("softmax", _cnn(nn.MaxPool2d)).fit(x[:20])
    det = make_detector("ks").fit(feats.transform(x[20:]))
    save_detector(tmp_path / "det.npz", FittedDetector(feats, det))
    assert load_detector(tmp_path / "det.npz", model=_cnn(nn.MaxPool2d)).detector is not None
    with pytest.raises(ValueError, match="layers or weights do not match"):
        load_detector(tmp_path / "det.npz", model=_cnn(nn.AvgPool2d))


# -- size-checked reading of the expected arrays only ------------------------------
def test_size_limit_and_extra_arrays_are_refused(saved: Path, monkeypatch) -> None:
    with np.load(saved) as store:
        arrays = {k: store[k] for k in store.files}
    big = dict(arrays, junk=np.zeros(2_000_000, dtype=np.uint8))
    np.savez_compressed(saved, **big)  # a small file that inflates to 2 MB
    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", "1000000")
    with pytest.raises(ValueError, match="more than the limit"):
        load_detector(saved)
    monkeypatch.delenv("DGPBENCH_MAX_INPUT_BYTES")
    np.savez(saved, **dict(arrays, junk=np.zeros(3)))
    with pytest.raises(ValueError, match="unexpected arrays"):
        load_detector(saved)


# -- every method and every test saves and loads ----------------------
_IMAGES = np.random.default_rng(1).random((90, 1, 8, 8)).astype(np.float32)


def _image_net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 6), nn.ReLU(), nn.Linear(6, 3)).eval()


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_round_trips(tmp_path: Path, method: str) -> None:
    params = {"epochs": 1} if method == "tae" else {}
    refs, clean, batch = _IMAGES[:30], _IMAGES[30:60], _IMAGES[60:] * 0.5
    feats = make_features(method, _image_net(), **params).fit(refs, np.arange(30) % 3)
    # MMD for the autoencoders: a dead ReLU unit of a random encoder is a constant feature
    test = {"bbsdh": "chi2", "uae": "mmd", "tae": "mmd"}.get(method, "ks")
    params = {"n_permutations": 49, "random_state": 0} if test == "mmd" else {}
    det = make_detector(test, **params).fit(feats.transform(clean))
    fitted = FittedDetector(feats, det, {"method": method})
    save_detector(tmp_path / "det.npz", fitted, model=None)
    loaded = load_detector(tmp_path / "det.npz", model=_image_net())
    np.testing.assert_array_equal(feats.transform(batch), loaded.features.transform(batch))
    a, b = fitted.test(batch), loaded.test(batch)
    np.testing.assert_array_equal(a.p_val, b.p_val)
    assert a.is_drift == b.is_drift
    assert loaded.features.get_params().keys() == feats.get_params().keys()


@pytest.mark.parametrize("test", ["ks", "mmd", "chi2", "classif"])
def test_every_two_sample_test_round_trips(tmp_path: Path, test: str) -> None:
    refs, clean, batch = _IMAGES[:30], _IMAGES[30:60], _IMAGES[60:] * 0.5
    params = {"random_state": 0} if test in ("mmd", "classif") else {}
    if test == "mmd":
        params["n_permutations"] = 99
    if test == "classif":
        params["epochs"] = 2
        feats = None
        det = make_detector(test, **params).fit(clean)
    else:
        feats = make_features("bbsdh" if test == "chi2" else "softmax", _image_net()).fit(refs)
        det = make_detector(test, **params).fit(feats.transform(clean))
    fitted = FittedDetector(feats, det, {"test": test})
    save_detector(tmp_path / "det.npz", fitted)
    loaded = load_detector(tmp_path / "det.npz", model=_image_net())
    assert type(loaded.detector) is type(det) and loaded.detector.get_params() == det.get_params()
    a, b = fitted.test(batch), loaded.test(batch)
    np.testing.assert_array_equal(a.statistic, b.statistic)
    assert (a.p_value, a.is_drift) == (b.p_value, b.is_drift)
    assert loaded.info == {"test": test}


def test_classifier_with_sklearn_object_not_saveable(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression

    det = make_detector("classif", classifier=LogisticRegression()).fit(_IMAGES[:20])
    with pytest.raises(TypeError, match="classifier=None"):
        save_detector(tmp_path / "det.npz", FittedDetector(None, det))
    assert not (tmp_path / "det.npz").exists()


def test_model_free_features_need_no_model(tmp_path: Path) -> None:
    feats = make_features("pca", None, n_components=3).fit(_IMAGES[:30])
    det = make_detector("mmd", n_permutations=19, random_state=0).fit(
        feats.transform(_IMAGES[30:60])
    )
    save_detector(tmp_path / "det.npz", FittedDetector(feats, det), model="/no/such/model.pt")
    loaded = load_detector(tmp_path / "det.npz")
    assert loaded.model_sha256 is None
    assert loaded.test(_IMAGES[60:]).p_value == det.test(feats.transform(_IMAGES[60:])).p_value


# -- a moved model names --model -------------------------------------
def test_a_moved_model_file_gets_a_hint(saved: Path, checkpoint: Path) -> None:
    checkpoint.rename(checkpoint.with_name("moved.pt"))
    with pytest.raises(ValueError, match=r"does not exist \(moved or deleted\?\).*--model"):
        load_detector(saved)
    assert load_detector(saved, model=checkpoint.with_name("moved.pt")).detector is not None


# -- MMD p-values are valid on tiny samples ------------------------------------------
def test_mmd_tiny_samples_are_exact_and_calibrated() -> None:
    """n = m = 3: 20 splits, each tied with its swap, so the exact p-value is a multiple of
    0.1 and at least 0.1; under the null it is uniform on {0.1, ..., 1}."""
    from dgpbench.detectors import MMDShiftDetector

    rng = np.random.default_rng(0)
    results = []
    for r in range(200):
        X, Y = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
        results.append(MMDShiftDetector(n_permutations=4000, random_state=r).fit(X).test(Y))
    ps = np.asarray([res.p_val for res in results])
    assert ps.min() >= 0.1 - 1e-12  # was 0.00025: ties with the swapped split were lost
    assert np.mean(ps < 0.05) == 0.0
    np.testing.assert_allclose(ps * 10, np.round(ps * 10), atol=1e-9)
    # P(p <= 0.5) = 0.5 under the null; 200 draws: sd 0.035
    assert abs(np.mean(ps <= 0.5 + 1e-9) - 0.5) < 0.11
    assert all(res.details["exact"] and res.details["n_permutations"] == 20 for res in results)


def test_mmd_random_splits_keep_ties() -> None:
    """C(8, 4) = 70 > B = 39: random splits; the null rejection rate at 0.05 stays <= 0.05
    (+3 sd)."""
    from dgpbench.detectors import MMDShiftDetector

    rng = np.random.default_rng(1)
    rejected = 0
    reps = 200
    for r in range(reps):
        X, Y = rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
        res = MMDShiftDetector(n_permutations=39, random_state=r).fit(X).test(Y)
        rejected += res.p_val < 0.05
        assert res.p_val >= 1 / 40 and res.details.get("exact") is False
    assert rejected / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


def test_mmd_swapped_halves_count_as_ties() -> None:
    from dgpbench.detectors.mmd import _permutation_mmd2, _tie_tolerance

    rng = np.random.default_rng(2)
    Z = rng.normal(size=(6, 3))
    stats = _permutation_mmd2(Z, 3, 1.0, [np.array([[0, 1, 2], [3, 4, 5]])], "cpu")
    assert abs(stats[0] - stats[1]) <= _tie_tolerance(6, stats[0])


# -- a non-finite statistic, an unusable bandwidth ----------------------------
def test_a_non_finite_statistic_is_an_error() -> None:
    from dgpbench.detectors import MMDShiftDetector

    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(20, 2)) * 1e160, rng.normal(size=(20, 2)) * 1e160
    with pytest.raises(ValueError, match=r"not finite.*rescale"):
        MMDShiftDetector(n_permutations=19, random_state=0).fit(X).test(Y)


@pytest.mark.parametrize("bandwidth", [1e-300, 1e200])
def test_mmd_bandwidth_out_of_range_is_refused(bandwidth: float) -> None:
    from dgpbench.detectors import MMDShiftDetector

    rng = np.random.default_rng(4)
    det = MMDShiftDetector(bandwidth=bandwidth, n_permutations=19).fit(rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match=r"bandwidth .* out of float64's range"):
        det.test(rng.normal(size=(10, 2)))


# -- the classifier test on an empty batch ------------------------------------------
@pytest.mark.parametrize("shape", [(0, 1, 8, 8), (0, 64), (0, 8, 8)])
def test_classifier_empty_batch_is_refused(shape) -> None:
    from dgpbench.detectors import ClassifierShiftDetector

    det = ClassifierShiftDetector(epochs=1).fit(_IMAGES[:10])
    with pytest.raises(ValueError, match=r"X \(the batch under test\) is empty.*at least 4"):
        det.test(np.zeros(shape, dtype=np.float32))
    with pytest.raises(ValueError, match=r"X_ref \(the reference batch\) is empty"):
        ClassifierShiftDetector().fit(np.zeros(shape, dtype=np.float32))


# -- .pt2 archives ------------------------------------------------------
def _pt2(path: Path) -> Path:
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()
    torch.export.save(torch.export.export(net, (torch.zeros(2, 4),)), path)
    return path


def _rewrite_pt2(src: Path, dst: Path, edit) -> Path:
    """Copy a .pt2, passing each (name, bytes) through ``edit`` (a list of pairs adds)."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            out = edit(info.filename, zin.read(info.filename))
            for name, data in out if isinstance(out, list) else [(info.filename, out)]:
                if data is not None:
                    zout.writestr(name, data)
    return dst


def _edit_weights_config(edit):
    def inner(name: str, data: bytes):
        if name.endswith("weights_config.json"):
            config = json.loads(data)
            edit(config["config"])
            return json.dumps(config).encode()
        return data

    return inner


def test_pt2_strided_weight_amplification_is_refused(tmp_path: Path) -> None:
    """A few bytes declaring a (30000, 1000) weight with strides (0, 0): refused before any
    allocation (the old reader materialised 120 MB; 3.3 GB with larger sizes)."""
    from dgpbench.models.exported import ExportedModelError, load_exported

    def edit(config):
        meta = config["0.weight"]["tensor_meta"]
        meta["sizes"] = [{"as_int": 30000}, {"as_int": 1000}]
        meta["strides"] = [{"as_int": 0}, {"as_int": 0}]

    bad = _rewrite_pt2(_pt2(tmp_path / "a.pt2"), tmp_path / "b.pt2", _edit_weights_config(edit))
    with pytest.raises(ExportedModelError, match=r"declares shape \[30000, 1000\].*holds 12"):
        load_exported(bad)


def test_pt2_weight_shape_is_checked_against_its_layer(tmp_path: Path) -> None:
    from dgpbench.models.exported import ExportedModelError, load_exported

    def edit(config):  # a bias stored as the 12 values of a (3, 4) matrix
        config["0.bias"] = dict(config["0.weight"])

    bad = _rewrite_pt2(_pt2(tmp_path / "a.pt2"), tmp_path / "b.pt2", _edit_weights_config(edit))
    with pytest.raises(
        ExportedModelError, match=r"linear layer has shape \[3, 4\], expected \[3\]"
    ):
        load_exported(bad)


def test_pt2_input_size_limit_applies(tmp_path: Path, monkeypatch) -> None:
    from dgpbench.models.exported import ExportedModelError, load_exported

    path = _pt2(tmp_path / "a.pt2")
    monkeypatch.setenv("DGPBENCH_MAX_INPUT_BYTES", "2000")
    with pytest.raises(ExportedModelError, match="more than the limit"):
        load_exported(path)


def _nodes_as_strings(data: bytes) -> bytes:
    program = json.loads(data)
    program["graph_module"]["graph"]["nodes"] = ["x"]
    return json.dumps(program).encode()


@pytest.mark.parametrize(
    ("edit", "cause"),
    [
        (lambda n, d: b"[" * 100000 if n.endswith("models/model.json") else d, "RecursionError"),
        (lambda n, d: _nodes_as_strings(d) if n.endswith("models/model.json") else d, "Attr"),
        (lambda n, d: d[:-1] if n.endswith("weights/weight_0") else d, "whole number|holds"),
        (lambda n, d: b'{"config": []}' if n.endswith("weights_config.json") else d, "malformed"),
    ],
)
def test_a_malformed_pt2_is_named(tmp_path: Path, edit, cause: str) -> None:
    from dgpbench.models.exported import ExportedModelError, load_exported

    bad = _rewrite_pt2(_pt2(tmp_path / "a.pt2"), tmp_path / "bad.pt2", edit)
    with pytest.raises(ExportedModelError, match=rf"bad\.pt2.*({cause})"):
        load_exported(bad)


def test_pt2_duplicate_members_are_refused(tmp_path: Path) -> None:
    import warnings

    from dgpbench.models.exported import ExportedModelError, load_exported

    def edit(name: str, data: bytes):
        if name.endswith("weights/weight_0"):
            return [(name, data), (name, bytes(len(data)))]  # torch reads the first
        return data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        bad = _rewrite_pt2(_pt2(tmp_path / "a.pt2"), tmp_path / "b.pt2", edit)
    with pytest.raises(ExportedModelError, match="duplicate entries"):
        load_exported(bad)


def test_bfloat16_weights_are_named(tmp_path: Path) -> None:
    from dgpbench.models.exported import ExportedModelError, load_exported

    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval().to(torch.bfloat16)
    path = tmp_path / "bf16.pt2"
    torch.export.save(torch.export.export(net, (torch.zeros(2, 4, dtype=torch.bfloat16),)), path)
    with pytest.raises(ExportedModelError, match=r"dtype bfloat16 .*model\.float\(\)"):
        load_exported(path)


# -- compare-paper on a wrong CSV, a folder, a binary file ----------------------------
@pytest.mark.parametrize("table", ["table2_ablation", "calibration", "bounds", "r2"])
@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("wrong", r"lacks columns \[.*\].*pass "),
        ("folder", "is a folder: pass the CSV file itself"),
        ("binary", "is not a text CSV file"),
    ],
)
def test_compare_paper_names_a_wrong_input(tmp_path: Path, capsys, table, kind, message) -> None:
    from dgpbench.cli.main import main

    path = tmp_path / "input.csv"
    if kind == "wrong":
        path.write_text("a,b\n1,2\n")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(bytes(range(128, 256)) * 10)
    argv = ["compare-paper", table, "--input", str(path), "--out-dir", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "input.csv" in err
    assert re.search(message, err), err
    assert not (tmp_path / "o").exists()


def test_compare_paper_reads_a_published_folder(tmp_path: Path, capsys) -> None:
    import pandas as pd

    from dgpbench.cli.main import main

    study = tmp_path / "study.csv"
    pd.DataFrame({"np": [0.5], "lower": [0.4], "upper": [0.6]}).to_csv(study, index=False)
    (tmp_path / "pub").mkdir()
    argv = ["compare-paper", "bounds", "--input", str(study), "--published", str(tmp_path / "pub")]
    assert main([*argv, "--out-dir", str(tmp_path / "o")]) == 2
    assert "published table file" in capsys.readouterr().err


def test_is_saveable_and_json_info(tmp_path: Path, data) -> None:
    from sklearn.linear_model import LogisticRegression

    from dgpbench.saved import is_saveable

    fitted = _fit("softmax", _net(), data)
    assert is_saveable(fitted.features) and is_saveable(fitted.detector)
    assert not is_saveable(make_detector("classif", classifier=LogisticRegression()))
    assert not is_saveable(LogisticRegression())
    fitted.info = {"method": "softmax", "refs": {"n": 60, "labelled": True}}
    save_detector(tmp_path / "det.npz", fitted)
    assert load_detector(tmp_path / "det.npz", model=_net()).info == {**fitted.info, "test": "ks"}
    fitted.info = {"bad": float("nan")}
    with pytest.raises(TypeError, match="cannot save info"):
        save_detector(tmp_path / "other.npz", fitted)


# -- one meaning per file: duplicates, labels, shapes, info, costs --------------------------
def _append_member(path: Path, name: str, array: np.ndarray) -> None:
    """Add a second member ``name`` to a zip (the last one wins for zipfile readers)."""
    import io
    import warnings
    import zipfile

    buffer = io.BytesIO()
    np.save(buffer, array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(name, buffer.getvalue())


def test_a_duplicate_member_of_a_detector_file_is_refused(saved: Path) -> None:
    with np.load(saved) as store:
        meta = json.loads(str(store["__meta__"]))
    meta["detector"]["params"]["alpha"] = 0.9
    _append_member(saved, "__meta__.npy", np.array(json.dumps(meta)))
    with pytest.raises(ValueError, match=r"duplicate entries \['__meta__'\]"):
        load_detector(saved)


def test_a_duplicate_array_of_a_batch_is_refused(tmp_path: Path) -> None:
    from dgpbench.data.datasets import load_npz_images

    path = tmp_path / "batch.npz"
    np.savez(path, x=np.zeros((4, 8), np.float32))
    _append_member(path, "x", np.ones((4, 8), np.float32))  # "x" and "x.npy": one array
    with pytest.raises(ValueError, match=r"batch\.npz has duplicate entries \['x'\]"):
        load_npz_images(path)


@pytest.mark.parametrize("label", [-20, 3, 100, 2**62])
def test_chi2_reference_labels_must_be_classes_of_the_network(
    tmp_path: Path, checkpoint: Path, data, label: int
) -> None:
    path = tmp_path / "det.npz"
    save_detector(path, _fit("bbsdh", str(checkpoint), data, test="chi2"))
    _edit(path, lambda m, a: a["detector/y_ref_"].__setitem__(0, label))
    with pytest.raises(ValueError, match=r"det\.npz.*classes of the network \(0 to 2\)"):
        load_detector(path)


@pytest.mark.parametrize(
    "state",
    [
        {"body_input_shape_": [1, 4, 16]},
        {"body_input_shape_": [8, 8]},  # the body wants a channel axis
        {"input_shape_": [1, 8, 8], "body_input_shape_": [1, 4, 16]},
        {"input_shape_": [1, 8, 8], "image_shape_": [4, 16], "body_input_shape_": [1, 8, 8]},
        {"image_shape_": None},  # rows: the body would be given (64,)
    ],
)
def test_shapes_must_agree_not_only_their_sizes(tmp_path: Path, state: dict) -> None:
    def conv_net() -> nn.Sequential:
        torch.manual_seed(0)
        conv = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten())
        return nn.Sequential(conv, nn.Linear(128, 6), nn.ReLU(), nn.Linear(6, 3)).eval()

    feats = make_features("softmax", conv_net()).fit(_IMAGES[:30, 0], np.arange(30) % 3)
    det = make_detector("ks").fit(feats.transform(_IMAGES[30:60, 0]))
    path = tmp_path / "det.npz"
    save_detector(path, FittedDetector(feats, det, {"method": "softmax"}))
    load_detector(path, model=conv_net())  # as saved: (8, 8) images, (1, 8, 8) to the body
    _edit(path, lambda m, a: m["features"]["state"].update(state))
    with pytest.raises(ValueError, match=r"does not fit|is not the shape the body is given"):
        load_detector(path, model=conv_net())


@pytest.mark.parametrize(
    ("info", "match"),
    [
        ({"test": "mmd"}, "info test 'mmd' is not its detector's test 'ks'"),
        ({"test": "classif"}, "info test 'classif'"),
        ({"method": "softmax"}, "info method 'softmax' is not the method of its transformer"),
        ({"method": "dgp_nonorm"}, "info method 'dgp_nonorm'"),  # standardize=True: dgp
        ({"method": "my-dgp"}, "info method 'my-dgp'"),
        ({"method": ["dgp"]}, "info method must be a string"),
        ({"n_refs": -5}, "info n_refs must be a positive count"),
        ({"n_refs": "60"}, "info n_refs must be an integer"),
        ({"n_refs": True}, "info n_refs must be an integer"),
        ({"labelled_refs": 1}, "info labelled_refs must be true or false"),
    ],
)
def test_info_is_checked_against_the_restored_estimators(saved: Path, info, match) -> None:
    _edit(saved, lambda m, a: m["info"].update(info))
    with pytest.raises(ValueError, match=re.escape(match)):
        load_detector(saved)


def test_info_test_comes_from_the_detector(tmp_path: Path, data) -> None:
    fitted = _fit("softmax", _net(), data, test="mmd")
    fitted.detector.set_params(n_permutations=19)
    fitted.info = {"n_refs": 60}
    save_detector(tmp_path / "det.npz", fitted)
    info = load_detector(tmp_path / "det.npz", model=_net()).info
    assert info == {"n_refs": 60, "test": "mmd"}  # not "ks", the score record's default


@pytest.mark.parametrize(
    ("test", "param", "value"),
    [
        ("mmd", "n_permutations", 10**9),
        ("classif", "epochs", 10**9),
        ("classif", "learning_rate", 1e300),
        ("classif", "learning_rate", 11.0),
    ],
)
def test_costs_read_from_a_file_are_capped(tmp_path: Path, test: str, param: str, value) -> None:
    params = {"epochs": 1, "random_state": 0} if test == "classif" else {"n_permutations": 19}
    det = make_detector(test, **params).fit(_IMAGES[:20].reshape(20, -1))
    path = tmp_path / "det.npz"
    save_detector(path, FittedDetector(None, det, {"test": test}))
    _edit(path, lambda m, a: m["detector"]["params"].update({param: value}))
    with pytest.raises(ValueError, match=rf"det\.npz: invalid detector file: .*{param}"):
        load_detector(path)


def test_the_input_shape_must_be_the_models(tmp_path: Path) -> None:
    torch.manual_seed(0)
    ckpt = tmp_path / "mnist.pt"
    net = nn.Sequential(nn.Linear(784, 6), nn.ReLU(), nn.Linear(6, 3)).eval()
    save_checkpoint(ckpt, net, {"arch": ArchConfig(784, 6, 2, 3), "dataset": "mnist"})
    images = np.random.default_rng(2).random((60, 1, 28, 28)).astype(np.float32)
    feats = make_features("softmax", str(ckpt)).fit(images[:30], np.arange(30) % 3)
    assert feats.input_shape_ == (1, 28, 28)
    det = make_detector("ks").fit(feats.transform(images[30:]))
    path = tmp_path / "det.npz"
    save_detector(path, FittedDetector(feats, det, {"method": "softmax"}))
    load_detector(path)
    _edit(path, lambda m, a: m["features"]["state"].update(input_shape_=[1, 14, 56]))
    _edit(path, lambda m, a: m["features"]["state"].update(image_shape_=[14, 56]))
    with pytest.raises(ValueError, match=r"input_shape_ \[1, 14, 56\] is not the model's"):
        load_detector(path)


@pytest.mark.parametrize("test", ["ks", "mmd", "classif"])
def test_a_constant_reference_sample_is_refused_for_every_test(tmp_path: Path, test) -> None:
    params = {"epochs": 1, "random_state": 0} if test == "classif" else {}
    X = _IMAGES[:20].reshape(20, -1)
    det = make_detector(test, **params).fit(X)
    path = tmp_path / "det.npz"
    save_detector(path, FittedDetector(None, det, {"test": test}))
    _edit(path, lambda m, a: a.__setitem__("detector/X_ref_", np.ones_like(a["detector/X_ref_"])))
    match = r"det\.npz: invalid detector file: .*constant"
    for load in (load_detector, load_scorer):
        with pytest.raises(ValueError, match=match):
            load(path)
    if test != "mmd":  # its own fit refuses it first
        det.X_ref_ = np.ones_like(det.X_ref_)
        with pytest.raises(ValueError, match=r"cannot save the detector: .*constant"):
            save_detector(tmp_path / "ones.npz", FittedDetector(None, det, {"test": test}))


@pytest.mark.filterwarnings("ignore:1 of 64 features are constant")
def test_a_constant_feature_of_a_ks_reference_still_loads(tmp_path: Path) -> None:
    X = _IMAGES[:20].reshape(20, -1).copy()
    X[:, 0] = 1.0  # one dead unit; the other features vary
    path = tmp_path / "det.npz"
    save_detector(path, FittedDetector(None, make_detector("ks").fit(X), {"test": "ks"}))
    assert load_scorer(path).test(X).p_value == 1.0
