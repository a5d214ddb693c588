"""A feature method's output is checked where it enters the workflow (score, features).

A custom method is the user's code: rows must match images, values must be finite real
numbers in a 2-D array, names one per feature; every violation names the method.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dgpbench.cli.main import main
from dgpbench.data.datasets import load_dataset
from dgpbench.features.output import check_features
from dgpbench.models.architectures import build_mlp
from dgpbench.models.checkpoints import save_checkpoint

_TEMPLATE = (
    "import numpy as np\n"
    "class M:\n"
    "    def __init__(self, model=None): pass\n"
    "    def fit(self, X, y=None): return self\n"
    "    def transform(self, X):\n"
    "        X = np.asarray(X).reshape(len(X), -1)[:, 26:29].astype(np.float64)\n"
    "        return {body}\n"
    "    def get_feature_names_out(self):\n"
    "        return {names}\n"
)

BAD_OUTPUTS = {
    "half_rows": ("X[: len(X) // 2]", "rows for"),
    "one_d": ("X[:, 0]", "of shape"),
    "complex": ("X + 1j", "complex"),
    "nan": ("np.where(X > 0.5, np.nan, X)", "NaN or infinite"),
    "objects": ("np.array([object()] * len(X))[:, None]", "dtype object"),
    "no_columns": ("X[:, :0]", "no features"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("method_output")
    net = build_mlp(64, 16, 2, 10, generator=torch.Generator().manual_seed(0))
    arch = {"n_inputs": 64, "hidden": 16, "n_layers": 2, "n_classes": 10}
    paths = {"model": save_checkpoint(out / "model.pt", net, {"arch": arch})}
    x, y = load_dataset("digits", split="test")
    for name, content in {
        "refs": {"x": x[:200], "y": y[:200]},
        "clean": {"x": x[200:300]},
        "batch": {"x": x[300:350]},
        "images": {"x_ref": x[:200], "y_ref": y[:200], "x_test": x[200:300], "y_test": y[200:300]},
        "gn_a": {"corruption": np.array("GN"), "intensity_3": x[200:300]},
        "gn_b": {"corruption": np.array("GN"), "intensity_3": x[200:300] * 0.5},
    }.items():
        paths[name] = out / f"{name}.npz"
        np.savez(paths[name], **content)
    return paths


def _method(tmp_path, monkeypatch, name, body="X", names="[f'f{k}' for k in range(3)]"):
    (tmp_path / f"{name}.py").write_text(_TEMPLATE.format(body=body, names=names))
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:M"


def _score(files, method, *extra):
    return ["score", "--model", str(files["model"]), "--refs", str(files["refs"]),
            "--clean", str(files["clean"]), "--batch", str(files["batch"]),
            "--method", method, *extra]  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_OUTPUTS))
def test_check_features_refuses_each_bad_output(case):
    X = np.random.default_rng(0).uniform(size=(10, 3))
    body, message = BAD_OUTPUTS[case]
    values = eval(body, {"np": np, "X": X})  # the same expressions the custom methods return
    with pytest.raises(ValueError, match="method 'mine' returned") as exc:
        check_features(values, 10, "mine", "the batch")
    assert message in str(exc.value)
    assert len(str(exc.value)) < 300  # never the whole array


def test_check_features_accepts_and_converts_good_output():
    out = check_features(np.arange(6, dtype=np.int32).reshape(3, 2), 3, "m", "x")
    assert out.dtype == np.float64 and out.tolist() == [[0, 1], [2, 3], [4, 5]]


@pytest.mark.parametrize("case", sorted(BAD_OUTPUTS))
def test_score_refuses_a_bad_custom_output_naming_the_method(
    files, capsys, tmp_path, monkeypatch, case
):
    method = _method(tmp_path, monkeypatch, f"dgpb_out_{case}", BAD_OUTPUTS[case][0])
    assert main(_score(files, method)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and method in err and BAD_OUTPUTS[case][1] in err


def test_score_refuses_feature_names_of_the_wrong_length(files, capsys, tmp_path, monkeypatch):
    method = _method(tmp_path, monkeypatch, "dgpb_out_names", names="['a', 'b']")
    assert main(_score(files, method)) == 2
    err = capsys.readouterr().err
    assert method in err and "2 names for 3 features" in err


def test_score_accepts_a_good_custom_method(files, capsys, tmp_path, monkeypatch):
    method = _method(tmp_path, monkeypatch, "dgpb_out_good")
    assert main(_score(files, method, "--json")) in (0, 1)
    assert '"n_batch": 50' in capsys.readouterr().out


def _features(files, method, out, *corrupted):
    return ["features", "--method", method, "--model", str(files["model"]),
            "--clean", str(files["images"]), "--corrupted", *map(str, corrupted),
            "--out", str(out)]  # fmt: skip


def test_features_step_refuses_half_the_rows_and_writes_nothing(
    files, capsys, tmp_path, monkeypatch
):
    method = _method(tmp_path, monkeypatch, "dgpb_out_half_features", BAD_OUTPUTS["half_rows"][0])
    out = tmp_path / "feats.npz"
    assert main(_features(files, method, out, files["gn_a"])) == 2
    err = capsys.readouterr().err
    assert method in err and "50 rows for 100 images" in err
    assert not out.exists()


def test_features_step_refuses_a_corruption_given_twice(files, capsys, tmp_path):
    out = tmp_path / "feats.npz"
    assert main(_features(files, "softmax", out, files["gn_a"], files["gn_b"])) == 2
    err = capsys.readouterr().err
    assert "GN_3" in err and "gn_a.npz" in err and "gn_b.npz" in err
    assert not out.exists()
    assert main(_features(files, "softmax", out, files["gn_a"])) == 0
    assert set(np.load(out).files) == {"classes", "clean", "GN_3"}


def test_detect_labels_without_y_test_names_the_file(files, capsys, tmp_path):
    feats = tmp_path / "feats.npz"
    assert main(_features(files, "softmax", feats, files["gn_a"])) == 0
    capsys.readouterr()
    code = main(["detect", "--features", str(feats), "--ns", "5", "--deltas", "0.5",
                 "--draws", "2", "--labels", str(files["refs"]), "--knockout-intensities", "1",
                 "--out", str(tmp_path / "rec.csv")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "refs.npz has no array 'y_test'" in err


@pytest.mark.parametrize("alpha", ["0", "1", "1.5", "-0.1", "nan", "x"])
def test_alpha_is_checked_before_any_work(files, capsys, monkeypatch, alpha):
    import dgpbench.features.registry

    def never(*args, **kwargs):
        raise AssertionError("features computed before --alpha was checked")

    monkeypatch.setattr(dgpbench.features.registry, "make_features", never)
    with pytest.raises(SystemExit) as exc:
        main(_score(files, "dgp", "--alpha", alpha))
    assert exc.value.code == 2
    assert "--alpha" in capsys.readouterr().err
