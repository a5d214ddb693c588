"""Scoring a saved softmax + KS detector without scikit-learn.

:func:`dgpbench.saved.scoring.load_scorer` restores such a file into light objects that run the
estimators' code without importing scikit-learn. Each check scikit-learn makes for the
estimators is held here to the estimators' own outcome: parameter values against the
``_parameter_constraints`` themselves, tampered files against :func:`load_detector`,
batches and results against the estimators'.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints
from torch import nn

from dgpbench import KSShiftDetector, SoftmaxFeatures
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.checkpoints import save_checkpoint
from dgpbench.saved import FittedDetector, load_detector, save_detector
from dgpbench.saved.scoring import RestoredKS, RestoredSoftmax, load_scorer

REPO = Path(__file__).resolve().parents[2]

FACTORY = """
import torch


def convnet():
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(144, 10), torch.nn.LogSoftmax(dim=1),
    ).eval()
"""


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10)).eval()


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(200, 1, 8, 8)).astype(np.float32)
    return {"refs": x[:60], "y": np.arange(60) % 10, "clean": x[60:120], "batch": x[120:160],
            "shifted": 0.4 * x[160:200]}  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("scoring")
    (folder / "scoring_net.py").write_text(FACTORY)
    save_checkpoint(folder / "mlp.pt", _mlp(), {"arch": ArchConfig(64, 16, 2, 10)})
    sys.path.insert(0, str(folder))
    yield {"checkpoint": str(folder / "mlp.pt"), "factory": "scoring_net:convnet"}
    sys.path.remove(str(folder))


def _save(path, model, data, *, representation="softmax", correction="bonferroni",
          labelled=True, alpha=0.05) -> Path:  # fmt: skip
    feats = SoftmaxFeatures(model, representation=representation)
    feats.fit(data["refs"], data["y"] if labelled else None)
    det = KSShiftDetector(alpha=alpha, correction=correction).fit(feats.transform(data["clean"]))
    save_detector(path, FittedDetector(feats, det, {"method": "softmax", "test": "ks"}))
    return Path(path)


def _model_arg(models, kind):
    return {"checkpoint": None, "factory": models["factory"], "memory": _mlp()}[kind]


@pytest.mark.parametrize(
    ("kind", "representation", "correction", "labelled"),
    [("checkpoint", "softmax", "bonferroni", True), ("checkpoint", "distances", "fdr", False),
     ("factory", "softmax", None, True), ("factory", "distances", "bonferroni", True),
     ("memory", "softmax", "fdr", False)],
)  # fmt: skip
def test_restored_detector_gives_the_estimators_results(
    tmp_path, models, data, kind, representation, correction, labelled
):
    model = models["checkpoint"] if kind == "checkpoint" else _model_arg(models, kind)
    path = _save(tmp_path / "det.npz", model, data, representation=representation,
                 correction=correction, labelled=labelled)  # fmt: skip
    full = load_detector(path, model=_model_arg(models, kind))
    light = load_scorer(path, model=_model_arg(models, kind))
    assert isinstance(light.features, RestoredSoftmax) and isinstance(light.detector, RestoredKS)
    assert light.info == full.info and light.model_sha256 == full.model_sha256
    np.testing.assert_array_equal(
        light.features.get_feature_names_out(), full.features.get_feature_names_out()
    )
    for name in ("batch", "shifted"):
        for x in (data[name], (data[name] * 255).astype(np.uint8), data[name][:, 0]):
            a, b = full.test(x), light.test(x)
            for key in ("distance", "p_val", "p_val_adjusted"):
                np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
            assert a.to_dict()["meta"] == b.to_dict()["meta"]
            assert (a.is_drift, a.threshold) == (b.is_drift, b.threshold)
    assert full.test(data["shifted"]).is_drift or kind == "factory"


def test_other_detectors_load_as_estimators(tmp_path, models, data):
    feats = SoftmaxFeatures(models["checkpoint"]).fit(data["refs"], data["y"])
    from dgpbench.detectors import MMDShiftDetector

    det = MMDShiftDetector(n_permutations=20).fit(feats.transform(data["clean"]))
    save_detector(tmp_path / "mmd.npz", FittedDetector(feats, det, {}))
    loaded = load_scorer(tmp_path / "mmd.npz")
    assert type(loaded.features) is SoftmaxFeatures and type(loaded.detector) is MMDShiftDetector


# -- parameters: the same verdict as scikit-learn's constraints, value by value -------------
VALUES = [None, True, False, 0, 1, -1, 2, 256, -3, 0.0, 0.05, 0.5, 1.0, 1.5, -0.5, 1e-300,
          float("nan"), float("inf"), "0.05", "", "x", "softmax", "distances", "raw", "bonferroni",
          "fdr", "none", "cpu", "cuda", "auto", "CPU", [1], {"a": 1}, np.bool_(True),
          np.int64(3), np.float64(0.1)]  # fmt: skip


@pytest.mark.parametrize(("light", "estimator"), [(RestoredKS, KSShiftDetector),
                                                 (RestoredSoftmax, SoftmaxFeatures)])  # fmt: skip
def test_parameter_checks_match_scikit_learn_constraints(light, estimator):
    constraints = estimator._parameter_constraints
    assert set(light._checks) == set(constraints)
    assert light().get_params() == estimator().get_params()
    for key, constraint in constraints.items():
        for value in VALUES:
            try:
                validate_parameter_constraints({key: constraint}, {key: value}, "x")
                accepted = True
            except InvalidParameterError:
                accepted = False
            assert light._checks[key][0](value) == accepted, (key, value)


# -- files: refused exactly when load_detector refuses them ---------------------------------
def _edit(path: Path, change) -> None:
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays["__meta__"]))
    change(meta, arrays)
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)


def _param(role, key, value):
    return lambda meta, arrays: meta[role]["params"].__setitem__(key, value)


def _array(key, make):
    return lambda meta, arrays: arrays.__setitem__(key, make(arrays[key]))


TAMPERINGS = {
    **{f"alpha={v!r}": _param("detector", "alpha", v) for v in (0, 1, 1.5, -0.1, "0.05", True,
                                                               None, 0.2)},
    **{f"correction={v!r}": _param("detector", "correction", v) for v in ("holm", 1, None, "fdr")},
    **{f"representation={v!r}": _param("features", "representation", v)
       for v in ("raw", "distances", 3)},
    **{f"batch_size={v!r}": _param("features", "batch_size", v) for v in (0, 1.5, True, -1, 7)},
    **{f"n_jobs={v!r}": _param("features", "n_jobs", v) for v in (0, -1, "2", 4)},
    **{f"progress={v!r}": _param("features", "progress", v) for v in (1, "yes", True)},
    **{f"device={v!r}": _param("features", "device", v) for v in ("gpu", "cuda:0")},
    "extra param": _param("detector", "n_permutations", 10),
    "missing param": lambda meta, arrays: meta["features"]["params"].pop("batch_size"),
    "X_ref NaN": _array("detector/X_ref_", lambda a: np.where(a > a.mean(), np.nan, a)),
    "X_ref one row": _array("detector/X_ref_", lambda a: a[:1]),
    "X_ref 1-D": _array("detector/X_ref_", lambda a: a[:, 0]),
    "X_ref 3-D": _array("detector/X_ref_", lambda a: a[:, :, None]),
    "X_ref no column": _array("detector/X_ref_", lambda a: a[:, :0]),
    "X_ref narrower": _array("detector/X_ref_", lambda a: a[:, :9]),
    "X_ref strings": _array("detector/X_ref_", lambda a: a.astype(str)),
    "X_ref bool": _array("detector/X_ref_", lambda a: a > np.median(a)),
    "X_ref constant": _array("detector/X_ref_", lambda a: np.ones_like(a)),
    "X_ref int": _array("detector/X_ref_", lambda a: (a * 100).astype(np.int64)),
    "X_ref float32": _array("detector/X_ref_", lambda a: a.astype(np.float32)),
    "X_ref inf": _array("detector/X_ref_", lambda a: np.where(a > a.mean(), np.inf, a)),
    "class means shape": _array("features/class_means_/0", lambda a: a[:, :5]),
    "class means NaN": _array("features/class_means_/0", lambda a: a * np.nan),
    "classes repeated": _array("features/classes_", lambda a: np.zeros_like(a)),
    "extra array": lambda meta, arrays: arrays.__setitem__("detector/extra", np.zeros(2)),
    "missing array": lambda meta, arrays: arrays.pop("features/classes_"),
    "fingerprint": lambda meta, arrays: meta["model"].__setitem__("sha256", "0" * 64),
    "unknown state": lambda meta, arrays: meta["features"]["state"].__setitem__("x", 1),
    "n_features_out": lambda meta, arrays: meta["features"]["state"].__setitem__(
        "n_features_out", 3),
    "input shape": lambda meta, arrays: meta["features"]["state"].__setitem__(
        "image_shape_", [4, 4]),
}  # fmt: skip


#: The edits that leave a valid file (the rest must be refused).
VALID = {"alpha=0.2", "correction=None", "correction='fdr'", "representation='distances'",
         "batch_size=True", "batch_size=7", "n_jobs=-1", "n_jobs=4", "progress=True",
         "X_ref bool", "X_ref int", "X_ref float32"}  # fmt: skip


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_a_tampered_file_is_refused_exactly_when_load_detector_refuses_it(
    tmp_path, models, data, name
):
    path = _save(tmp_path / "det.npz", models["checkpoint"], data)
    _edit(path, TAMPERINGS[name])
    outcomes = []
    for load in (load_detector, load_scorer):
        try:
            fitted = load(path)
        except ValueError as exc:
            outcomes.append(("refused", str(exc).split(":")[0]))
            continue
        result = fitted.test(data["batch"])
        outcomes.append(("loaded", tuple(result.p_val), result.is_drift, result.threshold))
    assert outcomes[0] == outcomes[1], (name, outcomes)
    assert (outcomes[0][0] == "loaded") == (name in VALID), (name, outcomes)


# -- batches: refused exactly when the estimators refuse them ------------------------------
BATCHES = {
    "one image": lambda x: x[:1],
    "no image": lambda x: x[:0],
    "NaN": lambda x: np.where(x > 0.5, np.nan, x),
    "huge": lambda x: x * 1e39,
    "channels last": lambda x: np.repeat(x.transpose(0, 2, 3, 1), 3, axis=3),
    "wrong size": lambda x: x[:, :, :7, :7],
    "flat": lambda x: x.reshape(len(x), -1),
    "flat wrong width": lambda x: x.reshape(len(x), -1)[:, :60],
    "1-D": lambda x: x.reshape(-1),
    "5-D": lambda x: x[:, None],
    "strings": lambda x: x.astype(str),
    "words": lambda x: np.full(x.shape, "pixel"),
    "objects": lambda x: x.astype(object),
    "complex": lambda x: x.astype(np.complex64),
    "bool": lambda x: x > 0.5,
    "int": lambda x: (x * 3).astype(np.int32),
    "float64": lambda x: x.astype(np.float64),
    "torch": lambda x: torch.from_numpy(x),
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_a_bad_batch_is_refused_exactly_when_the_estimators_refuse_it(tmp_path, models, data, name):
    path = _save(tmp_path / "det.npz", models["checkpoint"], data)
    x = BATCHES[name](data["batch"])
    outcomes = []
    for load in (load_detector, load_scorer):
        fitted = load(path)
        try:
            result = fitted.test(x)
        except ValueError:
            outcomes.append("refused")
            continue
        outcomes.append(tuple(result.p_val))
    assert outcomes[0] == outcomes[1], (name, outcomes)


# -- the command line ------------------------------------------------------------------------
def test_score_detector_runs_without_importing_scikit_learn_or_pandas(tmp_path, models, data):
    det = _save(tmp_path / "det.npz", models["factory"], data)
    np.savez(tmp_path / "b.npz", x=data["shifted"])
    argv = ["dgpbench", "score", "--detector", str(det), "--model", models["factory"],
            "--batch", str(tmp_path / "b.npz"), "--json"]  # fmt: skip
    code = (
        f"import runpy, sys; sys.argv = {argv!r}\n"
        "try:\n    runpy.run_module('dgpbench', run_name='__main__')\n"
        "except SystemExit as exc:\n    status = exc.code\n"
        "print(json.dumps([status, sorted(m for m in ('sklearn', 'pandas') if m in sys.modules)]))"
    )
    env = {"PYTHONPATH": f"{REPO}:{Path(models['checkpoint']).parent}", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True,
                         text=True, env=env, check=True)  # fmt: skip
    *records, last = out.stdout.strip().splitlines()
    status, imported = json.loads(last)
    assert imported == [] and status in (0, 1)
    record = json.loads(records[0])
    full = load_detector(det, model=models["factory"]).test(data["shifted"])
    assert record["p_value"] == full.p_value and record["shift"] == full.is_drift == (status == 1)
    assert [f["p_value"] for f in record["features"]] == full.p_val.tolist()
