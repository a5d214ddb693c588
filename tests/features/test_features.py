"""The four feature transformers: scikit-learn behaviour and the paper's detection task."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

from dgpbench import DGPFeatures, KSShiftDetector, MAGDiffFeatures, SoftmaxFeatures, TUFeatures
from dgpbench.data.datasets import load_dataset
from dgpbench.features.registry import METHODS, make_features
from dgpbench.models.architectures import ArchConfig
from dgpbench.models.checkpoints import load_checkpoint
from dgpbench.models.train import TrainConfig, train_mlp
from dgpbench.shifts.corruptions import corrupt
from dgpbench.topology import dgp_representation, magdiff_representation, tu_representation

ALL = (DGPFeatures, TUFeatures, MAGDiffFeatures, SoftmaxFeatures)


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory):
    """A 64-32-32-10 ReLU MLP trained on digits for a few seconds, and the digits splits."""
    x_train, y_train = load_dataset("digits", split="train")
    x_test, y_test = load_dataset("digits", split="test")
    out = tmp_path_factory.mktemp("model")
    arch = ArchConfig(n_inputs=64, hidden=32, n_layers=3, n_classes=10)
    config = TrainConfig(epochs=15, seed=0, lr=3e-3, threads=1)
    ckpt = train_mlp(x_train, y_train, arch, config, out, dataset="digits", progress=False)
    model, _ = load_checkpoint(ckpt)
    return {"model": model, "path": ckpt, "train": (x_train, y_train), "test": (x_test, y_test)}


@pytest.mark.parametrize("cls", ALL)
def test_shapes_names_and_pandas_output(cls, digits_model):
    x, y = digits_model["train"]
    est = cls(digits_model["model"]).fit(x[:200], y[:200])
    out = est.transform(digits_model["test"][0][:7])
    assert out.shape == (7, 10)
    names = est.get_feature_names_out()
    assert len(names) == 10 and len(set(names)) == 10
    frame = clone(est).set_output(transform="pandas").fit(x[:200], y[:200]).transform(x[:3])
    assert list(frame.columns) == list(names)
    assert est.n_features_in_ == 64


@pytest.mark.parametrize("cls", ALL)
def test_image_layouts_and_torch_input_agree(cls, digits_model):
    x, y = digits_model["train"]
    est = cls(digits_model["model"]).fit(x[:100], y[:100])
    flat = est.transform(x[:5].reshape(5, -1))
    np.testing.assert_array_equal(est.transform(x[:5]), flat)  # (N, 1, 8, 8)
    np.testing.assert_array_equal(est.transform(x[:5, 0]), flat)  # (N, 8, 8)
    np.testing.assert_array_equal(est.transform(torch.from_numpy(x[:5])), flat)


@pytest.mark.parametrize("cls", ALL)
def test_errors(cls, digits_model):
    x, y = digits_model["train"]
    with pytest.raises(NotFittedError):
        cls(digits_model["model"]).transform(x[:3])
    est = cls(digits_model["model"]).fit(x[:50], y[:50])
    with pytest.raises(ValueError, match=r"(?s)(49|64).*(49|64)"):
        est.transform(np.zeros((3, 49), dtype=np.float32))
    bad = x[:3].reshape(3, -1).copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.transform(bad)
    with pytest.raises(ValueError, match="model"):
        cls().fit(x[:10], y[:10])


def test_checkpoint_path_pickle_and_clone(digits_model, tmp_path):
    x, y = digits_model["train"]
    est = DGPFeatures(digits_model["path"]).fit(x[:100], y[:100])
    ref = DGPFeatures(digits_model["model"]).fit(x[:100], y[:100]).transform(x[100:110])
    np.testing.assert_allclose(est.transform(x[100:110]), ref)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.transform(x[100:110]), est.transform(x[100:110]))
    assert clone(est).get_params()["model"] == digits_model["path"]


def test_raw_representations_are_the_kernels(digits_model):
    x, y = digits_model["train"]
    model = digits_model["model"]
    flat = x[:20].reshape(20, -1)
    dgp = DGPFeatures(model, representation="raw").fit(flat, y[:20])
    np.testing.assert_array_equal(dgp.transform(flat), dgp_representation(dgp.graph_, flat))
    tu = TUFeatures(model, representation="raw", standardize=True).fit(flat, y[:20])
    np.testing.assert_array_equal(
        tu.transform(flat), np.concatenate(tu_representation(tu.graph_, flat, standardize=True), 1)
    )
    mag = MAGDiffFeatures(model, representation="raw").fit(flat, y[:20])
    np.testing.assert_array_equal(mag.transform(flat), magdiff_representation(mag.graph_, flat))


def test_distances_follow_the_definition(digits_model):
    """Delta_j(x) = ||f(x) - mu_j||_2 with mu_j the class mean of raw representations."""
    x, y = digits_model["train"]
    flat = x[:200].reshape(200, -1)
    tu = TUFeatures(digits_model["model"]).fit(flat, y[:200])
    blocks = tu_representation(tu.graph_, flat)
    expected = np.zeros((5, 10))
    for block in blocks:  # per layer, then averaged over layers
        means = np.stack([block[y[:200] == c].mean(0) for c in range(10)])
        expected += np.linalg.norm(block[:5, None, :] - means[None], axis=2) / len(blocks)
    np.testing.assert_allclose(tu.transform(flat[:5]), expected, rtol=1e-6)


@pytest.mark.parametrize(("activation", "equal"), [(torch.nn.ReLU, True), (torch.nn.Tanh, False)])
def test_signed_magdiff_distances_equal_absolute_ones_only_for_relu(activation, equal):
    # With ReLU the last layer's input is >= 0, so the signed and the absolute graph differ
    # by a fixed sign per coordinate: equal distances. With tanh the signs vary by sample.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8), activation(), torch.nn.Linear(8, 8), activation(),
        torch.nn.Linear(8, 3),
    )  # fmt: skip
    rng = np.random.default_rng(0)
    X, y = rng.random((60, 6)).astype(np.float32), np.arange(60) % 3
    absolute = MAGDiffFeatures(model).fit(X[:30], y[:30]).transform(X[30:])
    signed = MAGDiffFeatures(model, signed=True).fit(X[:30], y[:30]).transform(X[30:])
    assert np.allclose(signed, absolute, rtol=1e-5, atol=1e-6) is equal
    raw = MAGDiffFeatures(model, signed=True, representation="raw").fit(X[:30], y[:30])
    assert (raw.transform(X[30:]) < 0).any()  # the signs are kept
    assert make_features("magdiff_signed", model).signed is True
    assert make_features("magdiff", model).signed is False


def test_unsorted_dgp_features_are_the_sorted_ones_in_node_order(digits_model):
    """DGPFeatures(sort=False): the raw rows are dgp_representation(sort=False), the same
    multiset of tree weights as the default's, and its distances differ from the default's."""
    x, y = digits_model["train"]
    model = digits_model["model"]
    unsorted = DGPFeatures(model, sort=False, representation="raw").fit(x[:100], y[:100])
    raw = unsorted.transform(x[100:130])
    graph = unsorted.graph_
    np.testing.assert_array_equal(
        raw, dgp_representation(graph, x[100:130].reshape(30, -1), sort=False)
    )
    ordered = DGPFeatures(model, representation="raw").fit(x[:100], y[:100]).transform(x[100:130])
    np.testing.assert_array_equal(np.sort(raw, axis=1)[:, ::-1], ordered)
    assert not np.array_equal(raw, ordered)
    dist = DGPFeatures(model, sort=False).fit(x[:100], y[:100]).transform(x[100:130])
    assert dist.shape == (30, 10)
    assert not np.allclose(dist, DGPFeatures(model).fit(x[:100], y[:100]).transform(x[100:130]))


def test_make_features_registry(digits_model):
    assert set(METHODS) == {
        "softmax", "tu", "tu_norm", "magdiff", "magdiff_signed", "dgp", "dgp_nonorm",
        "dgp_unsorted", "noredu", "pca", "srp", "uae", "tae", "bbsds", "bbsdh", "dgp_approx",
    }  # fmt: skip
    assert make_features("dgp_nonorm", digits_model["model"]).standardize is False
    unsorted = make_features("dgp_unsorted", digits_model["model"])
    assert unsorted.sort is False and unsorted.standardize is True
    assert make_features("tu_norm", digits_model["model"]).standardize is True
    with pytest.raises(ValueError, match="unknown method"):
        make_features("persistence", digits_model["model"])


@pytest.mark.parametrize("cls", ALL)
def test_detects_strong_gaussian_noise_and_is_calibrated(cls, digits_model):
    """The paper's task on digits: GN intensity 6 at n = 100; clean vs clean at alpha = 0.05."""
    x_train, y_train = digits_model["train"]
    x_test, _ = digits_model["test"]
    feats = cls(digits_model["model"]).fit(x_train, y_train)
    clean = feats.transform(x_test)
    noisy = feats.transform(corrupt(x_test, "GN", 6, dataset="digits", seed=1))
    rng = np.random.default_rng(0)
    n = 100
    hits = 0
    for _ in range(20):
        ref = rng.choice(len(x_test), n, replace=False)
        test = rng.choice(len(x_test), n, replace=False)
        hits += KSShiftDetector().fit(clean[ref]).predict(noisy[test])
    assert hits >= 15, f"{cls.__name__} detected only {hits}/20 noisy batches"
    false = 0
    for _ in range(100):
        ref = rng.choice(len(x_test), n, replace=False)
        test = rng.choice(len(x_test), n, replace=False)
        false += KSShiftDetector().fit(clean[ref]).predict(clean[test])
    assert false <= 8, f"{cls.__name__} rejected {false}/100 clean batches"


def test_pipeline_predict(digits_model):
    x_train, y_train = digits_model["train"]
    x_test, _ = digits_model["test"]
    feats = DGPFeatures(digits_model["model"]).fit(x_train, y_train)
    det = KSShiftDetector().fit(feats.transform(x_test[:200]))
    pipe = make_pipeline(feats, det)
    noisy = corrupt(x_test[200:400], "UN", 6, dataset="digits", seed=0)
    assert pipe.predict(noisy) == det.predict(feats.transform(noisy))
    assert bool(pipe.predict(noisy)) is True


def _rgb_model(n_inputs: int) -> torch.nn.Sequential:
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(n_inputs, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return model


@pytest.mark.parametrize("cls", ALL)
def test_channels_last_batch_is_refused(cls):
    rng = np.random.default_rng(0)
    x = rng.random((12, 3, 7, 6), dtype=np.float32)  # (N, C, H, W)
    y = np.arange(12) % 3
    est = cls(_rgb_model(3 * 7 * 6)).fit(x, y)
    flat = est.transform(x.reshape(12, -1))
    np.testing.assert_array_equal(est.transform(x), flat)
    for channels_last in (x.transpose(0, 2, 3, 1), torch.from_numpy(x.transpose(0, 2, 3, 1))):
        with pytest.raises(ValueError, match=r"channels-last.*transpose\(0, 3, 1, 2\)"):
            est.transform(channels_last)
    with pytest.raises(ValueError, match="channels-last"):
        cls(_rgb_model(3 * 7 * 6)).fit(x.transpose(0, 2, 3, 1), y)


def test_checkpoint_image_shape_confirms_the_layout(tmp_path):
    from dgpbench.models.checkpoints import save_checkpoint

    arch = ArchConfig(n_inputs=3 * 32 * 32, hidden=4, n_layers=2, n_classes=10)
    path = save_checkpoint(
        tmp_path / "m.pt", arch.build(torch.Generator().manual_seed(0)),
        {"arch": arch, "dataset": "cifar10"},
    )  # fmt: skip
    rng = np.random.default_rng(0)
    x = rng.random((20, 3, 32, 32), dtype=np.float32)
    est = SoftmaxFeatures(path).fit(x, np.arange(20) % 10)
    assert est.input_shape_ == (3, 32, 32)
    with pytest.raises(ValueError, match=r"\(32, 32, 3\).*\(3, 32, 32\).*transpose"):
        est.transform(x.transpose(0, 2, 3, 1))
    with pytest.raises(ValueError, match=r"\(3, 16, 64\).*\(3, 32, 32\)"):
        est.transform(x.reshape(20, 3, 16, 64))  # the right size, not the model's images
    np.testing.assert_array_equal(est.transform(x), est.transform(x.reshape(20, -1)))


@pytest.mark.parametrize("cls", ALL)
def test_fit_without_labels_uses_predicted_classes(cls, digits_model):
    """fit(X) equals fit(X, y) with y = the model's argmax on X, computed independently."""
    x, _ = digits_model["train"]
    with torch.no_grad():
        predicted = digits_model["model"](torch.from_numpy(x[:200].reshape(200, -1))).argmax(1)
    predicted = predicted.numpy()
    unlabelled = cls(digits_model["model"]).fit(x[:200])
    labelled = cls(digits_model["model"]).fit(x[:200], predicted)
    np.testing.assert_array_equal(unlabelled.classes_, np.unique(predicted))
    np.testing.assert_array_equal(unlabelled.transform(x[200:210]), labelled.transform(x[200:210]))
    pipe = make_pipeline(cls(digits_model["model"]), KSShiftDetector()).fit(x[:200])
    assert pipe.predict(x[200:300]) in (True, False)


def test_fit_without_labels_skips_classes_never_predicted():
    # A 2-input model whose output 2 never wins: only classes 0 and 1 get a mean.
    model = torch.nn.Sequential(torch.nn.Linear(2, 3))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]))
        model[0].bias.zero_()
    X = np.random.default_rng(0).random((40, 2)).astype(np.float32)
    est = DGPFeatures(model).fit(X)
    np.testing.assert_array_equal(est.classes_, [0, 1])
    assert est.transform(X).shape == (40, 2)


def test_n_jobs_minus_one_means_all_cores(digits_model):
    x, y = digits_model["train"]
    one = DGPFeatures(digits_model["model"], n_jobs=1).fit(x[:50], y[:50]).transform(x[50:60])
    every = DGPFeatures(digits_model["model"], n_jobs=-1).fit(x[:50], y[:50])
    np.testing.assert_array_equal(every.transform(x[50:60]), one)
    with pytest.raises(ValueError, match="n_jobs"):
        DGPFeatures(digits_model["model"], n_jobs=0).fit(x[:50], y[:50])


def test_custom_method_by_import_path(digits_model, tmp_path, monkeypatch):
    (tmp_path / "user_methods.py").write_text(
        "from dgpbench.features.softmax import SoftmaxFeatures\n"
        "class Probs(SoftmaxFeatures):\n    pass\n"
        "class NoModel:\n    def fit(self, X, y=None):\n        return self\n"
        "    def transform(self, X):\n        return X\n"
        "class NotATransformer:\n    def __init__(self, model=None):\n        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    x, y = digits_model["train"]
    est = make_features("user_methods:Probs", digits_model["path"], batch_size=7, n_jobs=1)
    assert type(est).__name__ == "Probs" and est.batch_size == 7
    expected = SoftmaxFeatures(digits_model["path"]).fit(x[:50], y[:50]).transform(x[:5])
    np.testing.assert_array_equal(est.fit(x[:50], y[:50]).transform(x[:5]), expected)
    for spec, message in [
        ("no_such_module_xyz:Cls", "cannot import module 'no_such_module_xyz'"),
        ("user_methods:Missing", "has no 'Missing'"),
        ("user_methods:NoModel", "takes no 'model' argument"),
        ("user_methods:NotATransformer", "not a transformer"),
        ("dgpbench.features.registry:make_features", "not a class"),
        ("user methods:Cls", "neither a built-in method"),
    ]:
        with pytest.raises(ValueError, match=message):
            make_features(spec, digits_model["path"])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_built_on_the_model_takes_the_workflow_parameters(method):
    # `dgpbench features` passes these to every built-in method; each receives those its
    # constructor names: a method built on the model names its forward pass's, and a method
    # that runs the compiled kernels their threads and progress bar too.
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    params = {"batch_size": 7, "n_jobs": 1, "progress": False, "device": "cpu"}
    est = make_features(method, model, **params)
    got = clone(est).get_params()
    named = {k: v for k, v in params.items() if k in got}
    assert {k: got[k] for k in named} == named
    if "model" in got:
        kernels = method.startswith(("tu", "dgp"))
        assert set(named) == (set(params) if kernels else {"batch_size", "device"})
