"""Failing loudly's representations and dgp_approx: scikit-learn's own output for PCA/SRP,
the authors' definition for dgp_approx, the model's argmax for bbsdh, the autoencoders'
architectures, training, checkpoints, and the shared transformer contract."""

import inspect

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.random_projection import SparseRandomProjection

from dgpbench.features import (
    BBSDhFeatures,
    DGPApproxFeatures,
    NoRedFeatures,
    PCAFeatures,
    SRPFeatures,
    TAEFeatures,
    UAEFeatures,
)
from dgpbench.features.autoencoders import load_autoencoder, save_autoencoder
from dgpbench.features.registry import METHODS, make_features
from dgpbench.topology import summary_matrix

NEW = ["noredu", "pca", "srp", "uae", "tae", "bbsds", "bbsdh", "dgp_approx"]


@pytest.fixture(scope="module")
def digits():
    from dgpbench.data.datasets import load_dataset

    x, y = load_dataset("digits", split="train")  # (N, 1, 8, 8) in [0, 1]
    return x[:400], y[:400], x[400:600]


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 12), torch.nn.ReLU(), torch.nn.Linear(12, 7), torch.nn.ReLU(),
        torch.nn.Linear(7, 10),
    )  # fmt: skip


def test_registered_by_name_with_labels():
    for name in NEW:
        assert name in METHODS and METHODS[name][2]
    assert METHODS["bbsds"][0] is METHODS["softmax"][0]


def test_noredu_is_the_flattened_pixels(digits):
    x_ref, _, x = digits
    out = NoRedFeatures().fit(x_ref).transform(x)
    np.testing.assert_array_equal(out, x.reshape(len(x), -1).astype(np.float64))


def test_pca_equals_scikit_learn(digits):
    x_ref, _, x = digits
    flat_ref, flat = x_ref.reshape(len(x_ref), -1), x.reshape(len(x), -1)
    ours = PCAFeatures().fit(x_ref)
    theirs = PCA(n_components=0.8, svd_solver="full").fit(flat_ref.astype(np.float64))
    assert ours.pca_.n_components_ == theirs.n_components_ > 1
    np.testing.assert_allclose(ours.transform(x), theirs.transform(flat), rtol=1e-10, atol=1e-10)
    assert PCAFeatures(n_components=5).fit(x_ref).transform(x).shape == (200, 5)


def test_srp_equals_scikit_learn_at_pcas_dimension(digits):
    x_ref, _, x = digits
    flat_ref = x_ref.reshape(len(x_ref), -1).astype(np.float64)
    k = PCA(n_components=0.8, svd_solver="full").fit(flat_ref).n_components_
    theirs = SparseRandomProjection(n_components=k, random_state=3, dense_output=True)
    theirs.fit(flat_ref)
    ours = SRPFeatures(random_state=3).fit(x_ref)
    np.testing.assert_allclose(
        ours.transform(x), theirs.transform(x.reshape(len(x), -1).astype(np.float64))
    )
    other = SRPFeatures(random_state=4).fit(x_ref).transform(x)
    assert not np.allclose(other, ours.transform(x))  # the seed matters


def test_bbsdh_is_the_models_argmax(digits, mlp):
    x_ref, y_ref, x = digits
    out = make_features("bbsdh", mlp).fit(x_ref, y_ref).transform(x)
    with torch.no_grad():
        expected = mlp(torch.as_tensor(x.reshape(len(x), -1))).argmax(1).numpy()
    assert out.shape == (len(x), 1) and out.dtype == np.int64
    np.testing.assert_array_equal(out[:, 0], expected)


def _activation_graphs(mlp, x):
    """Explicit |a_l[i] * W_l[i, j]| per linear map, graph orientation, one sample."""
    graphs, a = [], torch.as_tensor(x, dtype=torch.float64)
    for layer in mlp:
        if isinstance(layer, torch.nn.Linear):
            W = layer.weight.detach().double().T
            graphs.append((a[:, None] * W).abs().numpy())
            a = a @ W + layer.bias.detach().double()
        else:
            a = layer(a)
    return graphs


@pytest.mark.parametrize("normalize", [False, True])
def test_dgp_approx_is_row_and_column_maxima_of_the_summary_matrix(digits, mlp, normalize):
    _, _, x = digits
    flat = x.reshape(len(x), -1)[:15]
    est = DGPApproxFeatures(mlp, representation="raw", normalize=normalize).fit(flat, None)
    out = est.transform(flat)
    assert out.shape == (15, 64 + 10)
    for row, sample in zip(out, flat, strict=True):
        graphs = _activation_graphs(mlp, sample)
        S = summary_matrix(graphs)
        expected = np.concatenate([S.max(axis=1), S.max(axis=0)])
        if normalize:
            expected = expected / max(g.max() for g in graphs)
        np.testing.assert_allclose(row, expected, rtol=2e-5, atol=1e-6)


def test_dgp_approx_distances_follow_the_protocol(digits, mlp):
    x_ref, y_ref, x = digits
    est = make_features("dgp_approx", mlp).fit(x_ref, y_ref)
    assert est.transform(x).shape == (len(x), 10) and est.standardize is False


@pytest.mark.parametrize(
    ("shape", "arch", "code"),
    [((1, 28, 28), "mnist", 32), ((3, 32, 32), "cifar10", 256), ((1, 8, 8), "mnist_usps", 8)],
)
def test_autoencoder_architectures(shape, arch, code):
    X = np.random.default_rng(0).random((3, *shape), dtype=np.float32)
    uae = UAEFeatures().fit(X)
    assert uae.architecture_ == arch and uae.transform(X).shape == (3, code)
    with torch.no_grad():  # the decoder gives back the image size
        out = uae.decoder_(uae.encoder_(torch.as_tensor(X)))
    assert tuple(out.shape[1:]) == shape


def test_uae_is_seeded(digits):
    x_ref, _, x = digits
    a = UAEFeatures(random_state=1).fit(x_ref).transform(x)
    np.testing.assert_array_equal(a, UAEFeatures(random_state=1).fit(x_ref).transform(x))
    assert not np.allclose(a, UAEFeatures(random_state=2).fit(x_ref).transform(x))
    flat = UAEFeatures(random_state=1).fit(x_ref.reshape(len(x_ref), -1))  # 64 = 8 x 8
    np.testing.assert_array_equal(flat.transform(x.reshape(len(x), -1)), a)


def test_tae_trains_reproducibly_and_round_trips_a_checkpoint(digits, tmp_path):
    x_ref, _, x = digits
    tae = TAEFeatures(epochs=4, random_state=0).fit(x_ref)
    assert tae.loss_curve_[-1] < tae.loss_curve_[0]  # the reconstruction improves
    again = TAEFeatures(epochs=4, random_state=0).fit(x_ref)
    np.testing.assert_array_equal(tae.transform(x), again.transform(x))
    path = save_autoencoder(tmp_path / "ae.pt", tae)
    loaded = TAEFeatures(autoencoder=path).fit(x_ref)
    np.testing.assert_allclose(loaded.transform(x), tae.transform(x), rtol=1e-6)
    assert loaded.loss_curve_ == []
    with pytest.raises(ValueError, match="trained on images of shape"):
        TAEFeatures(autoencoder=path).fit(np.zeros((4, 1, 28, 28), dtype=np.float32))


def test_tae_refuses_a_corrupt_checkpoint_and_pixels_outside_0_1(digits, tmp_path):
    x_ref, _, _ = digits
    path = save_autoencoder(tmp_path / "ae.pt", UAEFeatures().fit(x_ref))
    _, _, arch, shape = load_autoencoder(path)
    assert arch == "mnist_usps" and shape == (1, 8, 8)
    state = torch.load(path, weights_only=True)
    state["state_dict"]["encoder.0.bias"] += 1.0
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="SHA-256"):
        TAEFeatures(autoencoder=tmp_path / "bad.pt").fit(x_ref)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        TAEFeatures(epochs=1).fit(x_ref * 3)
    with pytest.raises(ValueError, match="image shape"):
        UAEFeatures().fit(np.zeros((4, 10)))


#: The workflow's forward-pass parameters that each representation uses: the model-free
#: ones take no model; the others take it, and the compiled kernels' n_jobs and progress
#: only where they run them (TAE reports its training).
_TAKES = {
    "noredu": set(),
    "pca": set(),
    "srp": set(),
    "uae": {"batch_size", "device"},
    "tae": {"batch_size", "device", "progress"},
    "bbsds": {"batch_size", "device"},
    "bbsdh": {"batch_size", "device"},
    "dgp_approx": {"batch_size", "n_jobs", "progress", "device"},
}
_MODEL_FREE = {"noredu", "pca", "srp", "uae", "tae"}


@pytest.mark.parametrize("name", NEW)
def test_each_representation_gets_only_the_parameters_it_names(name, mlp):
    params = {"batch_size": 7, "n_jobs": 1, "progress": False, "device": "cpu"}
    est = make_features(name, mlp, **params)
    got = clone(est).get_params()
    takes = _TAKES[name]
    assert {k: got[k] for k in set(got) & set(params)} == {k: params[k] for k in takes}
    assert ("model" in got) == (name not in _MODEL_FREE)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        est.transform(np.zeros((2, 64), dtype=np.float32))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_get_params_names_exactly_the_constructor_parameters(name):
    cls = METHODS[name][0]
    assert set(cls().get_params()) == set(inspect.signature(cls).parameters)


def test_registry_passes_seeds_to_the_seeded_only(mlp):
    assert make_features("pca", mlp, random_state=5, n_jobs=2).random_state == 5
    assert "random_state" not in make_features("noredu", mlp, random_state=5).get_params()
    with pytest.raises(TypeError, match="standardize"):
        make_features("tu_norm", mlp, standardize=False)  # the method fixes it


@pytest.mark.parametrize("name", ["noredu", "pca", "srp", "uae", "tae"])
def test_saved_model_free_detector_with_the_older_parameters_loads(name, digits, tmp_path):
    """Files written when the model-free representations took (and ignored) ``model``,
    ``batch_size``, ``n_jobs``, ``progress`` and ``device`` record those parameters: they
    load, with the same p-values."""
    import json

    from dgpbench.detectors import MMDShiftDetector
    from dgpbench.saved import FittedDetector, load_detector, save_detector

    x_ref, _, x = digits
    params = {"epochs": 1} if name == "tae" else {}
    feats = make_features(name, None, **params).fit(x_ref[:60])
    det = MMDShiftDetector(n_permutations=19, random_state=0).fit(feats.transform(x_ref[60:90]))
    fitted = FittedDetector(feats, det, {"method": name})
    path = tmp_path / "det.npz"
    save_detector(path, fitted)
    with np.load(path) as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays["__meta__"]))
    older = {"batch_size": 256, "n_jobs": None, "progress": False, "device": "cpu"}
    meta["features"]["params"].update(older)
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    loaded = load_detector(path)
    assert loaded.features.get_params() == feats.get_params()
    np.testing.assert_array_equal(loaded.test(x[:30]).p_val, fitted.test(x[:30]).p_val)


@pytest.mark.parametrize("name", ["noredu", "pca", "srp", "uae"])
def test_model_free_representations_need_no_model(name, digits):
    x_ref, _, x = digits
    out = make_features(name, None).fit(x_ref).transform(x)
    assert out.shape[0] == len(x) and np.isfinite(out).all()


def test_bbsdh_needs_a_model(digits):
    with pytest.raises(ValueError, match="model is None"):
        BBSDhFeatures().fit(digits[0])


@pytest.mark.parametrize("method", ["srp", "uae", "bbsdh"])
def test_features_command_knows_the_new_names(method, digits, mlp, tmp_path):
    from dgpbench.cli.main import main
    from dgpbench.io import load_npz
    from dgpbench.models.architectures import ArchConfig
    from dgpbench.models.checkpoints import save_checkpoint

    x_ref, y_ref, x = digits
    images = tmp_path / "images.npz"
    np.savez(images, x_ref=x_ref, y_ref=y_ref, x_test=x)
    arch = ArchConfig(n_inputs=64, hidden=12, n_layers=3, n_classes=10)
    net = torch.nn.Sequential(
        torch.nn.Linear(64, 12), torch.nn.ReLU(), torch.nn.Linear(12, 12), torch.nn.ReLU(),
        torch.nn.Linear(12, 10),
    )  # fmt: skip
    ckpt = save_checkpoint(tmp_path / "m.pt", net, {"arch": arch})
    out = tmp_path / "f.npz"
    argv = ["features", "--method", method, "--model", str(ckpt), "--clean", str(images)]
    assert main([*argv, "--out", str(out)]) in (0, None)
    feats = load_npz(out)["clean"]
    expected = make_features(method, net).fit(x_ref, y_ref).transform(x)
    np.testing.assert_allclose(feats, expected, rtol=1e-6)
