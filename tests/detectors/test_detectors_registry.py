"""The detectors as a family: names, one result interface, old import paths, KS calibration,
and `dgpbench score --test`."""

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import dgpbench
from dgpbench.cli.main import main
from dgpbench.detectors import (
    DETECTORS,
    ChiSquareShiftDetector,
    ClassifierShiftDetector,
    DeepKernelMMDShiftDetector,
    KSShiftDetector,
    LSDDShiftDetector,
    MMDAggShiftDetector,
    MMDShiftDetector,
    make_detector,
)


def test_names_and_errors():
    assert list(DETECTORS)[:4] == ["ks", "mmd", "chi2", "classif"]
    assert {"cvm", "ad", "energy", "fisher", "lsdd", "mmdagg", "mmd_deep"} <= set(DETECTORS)
    assert isinstance(make_detector("chi2", alpha=0.01), ChiSquareShiftDetector)
    assert make_detector("mmd", n_permutations=9).n_permutations == 9
    with pytest.raises(ValueError, match="unknown test 'wilcoxon'; choose from ks, mmd, chi2"):
        make_detector("wilcoxon")


def test_each_detector_class_names_its_test_and_can_be_saved():
    """One table of names: the registry; each class's test_name (what a detector file's
    info records) and the saveable classes agree with it."""
    from dgpbench.cli.monitor import TESTS
    from dgpbench.online.registry import ONLINE_DETECTORS
    from dgpbench.saved.files import SAVEABLE

    for name, cls in {**DETECTORS, **ONLINE_DETECTORS}.items():
        assert cls.test_name == name
        assert SAVEABLE[cls.__name__] == f"{cls.__module__}:{cls.__qualname__}"
    assert set(TESTS) == set(DETECTORS) | set(ONLINE_DETECTORS)


def test_public_import_paths_name_one_class():
    import dgpbench.detectors.ks as home

    assert home.__all__ == ["KSShiftDetector"]
    assert home.KSShiftDetector is KSShiftDetector is dgpbench.KSShiftDetector
    assert dgpbench.MMDShiftDetector is MMDShiftDetector
    assert dgpbench.make_detector is make_detector


def _cases(rng):
    labels = rng.integers(0, 3, size=(60, 1))
    x = rng.normal(size=(60, 3))
    return [
        (KSShiftDetector(), x, x[::-1] + 2.0),
        (MMDShiftDetector(n_permutations=99, random_state=0), x, x + 2.0),
        (ChiSquareShiftDetector(), labels, np.where(labels == 0, 1, labels)),
        (ClassifierShiftDetector(classifier=LogisticRegression(), random_state=0), x, x + 2.0),
        (LSDDShiftDetector(n_permutations=99, random_state=0), x, x + 2.0),
        (MMDAggShiftDetector(n_draws_quantile=499, n_draws_level=99, random_state=0), x, x + 2.0),
        (DeepKernelMMDShiftDetector(n_permutations=99, random_state=0), x, x + 2.0),
    ]


def test_every_result_has_the_common_interface():
    for det, ref, shifted in _cases(np.random.default_rng(0)):
        res = det.fit(ref).test(shifted)
        assert res.is_drift is True and res.name == type(det).__name__
        assert isinstance(res.threshold, float) and res.alpha == 0.05
        assert res.statistic is not None and res.p_val is not None
        assert isinstance(res.p_value, float) and res.p_value < 0.05
        assert det.p_value(shifted) == res.p_value and det.predict(shifted) is True
        out = res.to_dict()
        assert out["data"]["is_drift"] is True and out["meta"]["name"] == res.name


def test_ks_result_p_value_is_the_smallest_corrected_p_value():
    rng = np.random.default_rng(1)
    res = KSShiftDetector().fit(rng.normal(size=(50, 4))).test(rng.normal(size=(40, 4)))
    assert res.p_value == res.min_p_val_adjusted == float(res.p_val_adjusted.min())
    assert res.statistic is res.distance


def test_ks_calibrated_under_the_null():
    """Per-feature KS + Bonferroni, 1000 repetitions of two N(0, I) samples (d = 1, so the
    level is KS's own): rejection rate in [0.03, 0.07]."""
    rng = np.random.default_rng(2)
    rejected = sum(
        KSShiftDetector().fit(rng.normal(size=(60, 1))).predict(rng.normal(size=(50, 1)))
        for _ in range(1000)
    )
    assert 0.03 <= rejected / 1000 <= 0.07


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small digits MLP and .npz image files for `dgpbench score`."""
    from dgpbench.data.datasets import load_dataset
    from dgpbench.models.architectures import ArchConfig
    from dgpbench.models.train import TrainConfig, train_mlp

    out = tmp_path_factory.mktemp("score_tests")
    x_train, y_train = load_dataset("digits", split="train")
    x_test, _ = load_dataset("digits", split="test")
    arch = ArchConfig(n_inputs=64, hidden=16, n_layers=2, n_classes=10)
    ckpt = train_mlp(
        x_train, y_train, arch, TrainConfig(epochs=3, seed=0, threads=1), out / "m", progress=False
    )
    paths = {"model": ckpt}
    for name, x in {
        "refs": {"x": x_train[:300], "y": y_train[:300]},
        "clean": {"x": x_test[:150]},
        "batch": {"x": x_test[150:300]},
        "bright": {"x": np.clip(x_test[150:300] + 0.5, 0, 1)},
    }.items():
        paths[name] = out / f"{name}.npz"
        np.savez(paths[name], **x)
    return paths


def _args(files, batch, *extra):
    return ["score", "--model", str(files["model"]), "--refs", str(files["refs"]),
            "--clean", str(files["clean"]), "--batch", str(files[batch]), *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("test", "method"), [("mmd", "pca"), ("chi2", "bbsdh"), ("classif", None), ("mmd", "bbsds")]
)
def test_score_with_each_test(files, capsys, test, method):
    extra = ["--test", test, *(["--method", method] if method else []), "--json"]
    extra += ["--permutations", "99"] if test == "mmd" else []
    code = main(_args(files, "bright", *extra))
    report = json.loads(capsys.readouterr().out)
    assert report["test"] == test and code == int(report["shift"])
    assert 0 < report["p_value"] <= 1 and report["threshold"] == 0.05
    if test == "mmd":
        assert report["p_value"] >= 1 / 100
    if test != "chi2":  # a brightness shift of 0.5 is plain to MMD on PCA and to the classifier
        assert code == 1


def test_score_classif_refuses_a_method_it_would_not_use(files, capsys):
    # the classifier tests the images: a --method would be silently ignored
    assert main(_args(files, "bright", "--test", "classif", "--method", "dgp")) == 2
    assert "--method is not used by --test classif" in capsys.readouterr().err


def test_score_chi2_needs_hard_labels(files, capsys):
    assert main(_args(files, "batch", "--test", "chi2", "--method", "bbsds")) == 2
    assert "one column" in capsys.readouterr().err


def test_score_rejects_an_unknown_test(files, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_args(files, "batch", "--test", "wilcoxon"))
    assert exc.value.code == 2
