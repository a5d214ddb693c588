"""Model-based analyses on tiny networks: weights, permutation test, NP vs variance, curves."""

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from dgpbench.analysis.curves import CurveRecorder, concat_curves, criterion_curves
from dgpbench.analysis.dgp_variance import training_correlations
from dgpbench.analysis.distributions import FAMILIES, weight_distribution_study, win_rates
from dgpbench.analysis.early_stopping import early_stopping_grid
from dgpbench.analysis.permutation import (
    ks_rejection_summary,
    permutation_ks_tests,
    permutation_np,
    permutation_study,
    shuffled_copies,
)
from dgpbench.analysis.persistence import batch_neural_persistence
from dgpbench.analysis.regularisers import regulariser_summary
from dgpbench.analysis.variance import (
    linear_fit,
    model_study,
    np_variance_r2,
    r2_interval,
    r2_table,
)
from dgpbench.analysis.weights import (
    model_metrics,
    normalised_weights,
    run_info,
    torch_linear_weights,
    weight_variance,
)
from dgpbench.models.architectures import ArchConfig, build_mlp
from dgpbench.models.checkpoints import save_checkpoint
from dgpbench.models.train import TrainConfig, train_mlp
from dgpbench.topology import (
    deep_graph_persistence,
    network_neural_persistence,
    neural_persistence,
)


def _checkpoints(tmp_path, specs):
    """Save randomly initialised MLPs (different seeds) as checkpoints."""
    paths = []
    for i, (n_layers, hidden, activation, dataset, kw) in enumerate(specs):
        arch = ArchConfig(12, hidden, n_layers, 4, activation, **kw)
        model = arch.build(generator=torch.Generator().manual_seed(i))
        with torch.no_grad():  # make the weight scale vary between models
            for m in model.modules():
                if isinstance(m, torch.nn.Linear):
                    m.weight.mul_(1 + i % 5)
                    m.weight[0] += 0.5 * (i % 3)
        meta = {
            "arch": arch,
            "dataset": dataset,
            "epoch": 40.0,
            "train_config": TrainConfig(seed=i),
        }
        paths.append(save_checkpoint(tmp_path / f"m{i}.pt", model, meta))
    return paths


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ckpts")
    specs = []
    for dataset in ("a", "b"):
        for _ in range(5):
            specs.append((1, 8, "relu", dataset, {}))
            specs.append((3, 8, "relu", dataset, {}))
            specs.append((3, 8, "tanh", dataset, {}))
    return _checkpoints(tmp, specs)


def test_linear_weights_orientation_and_run_info():
    model = build_mlp(
        5, 7, 3, 2, "tanh", batchnorm=True, dropout=0.5, generator=torch.Generator().manual_seed(0)
    )
    weights = torch_linear_weights(model)
    assert [w.shape for w in weights] == [(5, 7), (7, 7), (7, 2)]
    assert np.array_equal(weights[0], model[0].weight.detach().numpy().T)
    info = run_info(
        {
            "arch": {
                "n_layers": 3,
                "hidden": 7,
                "activation": "tanh",
                "batchnorm": True,
                "dropout": 0.5,
            },
            "dataset": "x",
            "train_config": {"seed": 3},
            "epoch": 1.5,
        }
    )
    assert info["regulariser"] == "batchnorm+dropout"
    assert info["seed"] == 3
    assert run_info({"arch": {"n_layers": 1, "hidden": 9}})["hidden"] is None


def test_model_metrics_agree_with_topology():
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(6, 5)), rng.normal(size=(5, 4)) * 3, rng.normal(size=(4, 3))]
    metrics = model_metrics(weights)
    assert metrics["np"] == pytest.approx(network_neural_persistence(weights))
    assert metrics["dgp"] == pytest.approx(deep_graph_persistence(weights))
    pooled = np.concatenate([np.abs(w).ravel() for w in weights])
    assert metrics["variance"] == pytest.approx(np.var(pooled / pooled.max()))
    assert metrics["log_variance"] == pytest.approx(np.log(metrics["variance"]))
    normed = normalised_weights(weights)
    for i, w in enumerate(normed):
        assert metrics[f"np_layer_{i}"] == pytest.approx(neural_persistence(w))
    assert weight_variance(normed, normalised=True) == pytest.approx(metrics["variance"])
    with pytest.raises(ValueError, match="zero"):
        normalised_weights([np.zeros((2, 2))])


def test_batch_neural_persistence_matches_single():
    W = np.random.default_rng(1).random((6, 9, 4)) ** 3
    expected = [neural_persistence(w) for w in W]
    assert np.allclose(batch_neural_persistence(W), expected, rtol=1e-12)


def test_shuffled_copies_are_uniform_permutations():
    rng = np.random.default_rng(0)
    copies = shuffled_copies(np.array([0.0, 1.0, 2.0]), 6000, rng)
    assert (np.sort(copies, axis=1) == [0, 1, 2]).all()
    _, counts = np.unique(copies, axis=0, return_counts=True)
    assert len(counts) == 6  # all 3! orders occur, equally often
    assert stats.chisquare(counts).pvalue > 1e-3
    # every position is equally likely to receive the largest entry in a longer array
    big = shuffled_copies(np.arange(10.0), 5000, rng)
    assert stats.chisquare(np.bincount(big.argmax(axis=1), minlength=10)).pvalue > 1e-3
    again = shuffled_copies(np.arange(10.0), 3, np.random.default_rng(7))
    assert np.array_equal(again, shuffled_copies(np.arange(10.0), 3, np.random.default_rng(7)))


def test_permutation_np_properties():
    rng = np.random.default_rng(0)
    # large weights concentrated on 5 rows: the MST can use only 5 + 15 - 1 of them; spread
    # at random they connect (almost) all 35 vertices, so shuffling lowers NP
    concentrated = np.full((20, 15), 0.05) + 0.01 * rng.random((20, 15))
    concentrated[:5] = 0.9 + 0.1 * rng.random((5, 15))
    constant = np.full((4, 5), 0.3)
    frame = permutation_np([concentrated, constant], 30, rng)
    assert len(frame) == 60
    first = frame[frame.layer == 0]
    assert first["np"].iloc[0] == pytest.approx(
        neural_persistence(concentrated / concentrated.max())
    )
    assert (first["delta"] < 0).all()
    assert np.allclose(frame[frame.layer == 1]["delta"], 0.0)
    # the permuted copies really are permutations: same multiset, so NP of a random
    # permutation reproduces the distribution (mean within a few standard errors)
    perm_np = [
        neural_persistence(
            rng.permutation(concentrated.ravel()).reshape(20, 15) / concentrated.max()
        )
        for _ in range(30)
    ]
    se = np.hypot(np.std(perm_np), first["np_permuted"].std()) / np.sqrt(30)
    assert abs(np.mean(perm_np) - first["np_permuted"].mean()) < 5 * se + 1e-12
    with pytest.raises(ValueError, match="n_permutations"):
        permutation_np([constant], 0, rng)


def test_permutation_study_and_ks_tests(checkpoints):
    perm = permutation_study(checkpoints, n_permutations=4, seed=1, progress=False)
    assert set(perm["dataset"]) == {"a", "b"}
    assert len(perm) == 4 * sum(1 if i % 3 == 0 else 3 for i in range(len(checkpoints)))
    again = permutation_study(checkpoints[:2], n_permutations=4, seed=1, progress=False)
    assert np.array_equal(again["np_permuted"], perm[perm.model < 2]["np_permuted"])
    ks = permutation_ks_tests(perm)
    # 2 data sets x (linear: 1 layer, relu: 3 layers, tanh: 3 layers)
    assert len(ks) == 2 * 7
    assert (ks["n_models"] == 5).all() and (ks["n_permuted"] == 5).all()
    assert ks["pvalue"].between(0, 1).all()
    assert ks.loc[ks["n_layers"] == 1, "hidden"].isna().all()
    ks_all = permutation_ks_tests(perm, sample="all")
    assert (ks_all["n_permuted"] == 20).all()
    summary = ks_rejection_summary(ks).set_index(["dataset", "layers"])
    assert summary["n_tests"].sum() == len(ks)
    assert summary.loc[("a", "linear classifier"), "n_tests"] == 1
    assert summary.loc[("a", "first"), "n_tests"] == 2
    assert summary.loc[("a", "later"), "n_tests"] == 4


def test_ks_test_detects_a_shift():
    rows = []
    for model in range(10):
        for layer, shift in ((0, 0.2), (1, 0.0)):
            for k in range(5):
                rows.append(
                    {
                        "dataset": "d",
                        "activation": "relu",
                        "n_layers": 2,
                        "hidden": 4,
                        "layer": layer,
                        "model": model,
                        "np": 0.5 + 0.01 * model,
                        "np_permuted": 0.5 + 0.01 * model - shift + 1e-4 * k,
                    }
                )
    ks = permutation_ks_tests(pd.DataFrame(rows)).set_index("layer")
    assert ks.loc[0, "reject"] and ks.loc[0, "pvalue"] < 1e-4
    assert not ks.loc[1, "reject"]
    with pytest.raises(ValueError, match="sample"):
        permutation_ks_tests(pd.DataFrame(rows), sample="median")


def test_linear_fit_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=30)
    y = 2 * x + rng.normal(size=30)
    slope, intercept, r2 = linear_fit(x, y)
    ref = stats.linregress(x, y)
    assert (slope, intercept, r2) == pytest.approx((ref.slope, ref.intercept, ref.rvalue**2))
    assert np.isnan(linear_fit([1, 1, 1], [1, 2, 3])[2])


def test_model_study_r2_and_table(checkpoints):
    models = model_study(checkpoints, progress=False)
    assert len(models) == len(checkpoints)
    assert str(models["hidden"].dtype) == "Int64"
    for col in ("np", "variance", "log_variance", "dgp", "np_layer_0"):
        assert models[col].notna().all()
    r2 = np_variance_r2(models)
    assert len(r2) == 6 and (r2["n"] == 5).all()
    assert r2["r2"].between(0, 1).all()
    table = r2_table(r2)
    assert list(table.index) == [(2, 8)]
    assert set(table.columns) == {("a", "relu"), ("a", "tanh"), ("b", "relu"), ("b", "tanh")}
    linear = np_variance_r2(models[models.n_layers == 1], by=["dataset"])
    assert list(linear["dataset"]) == ["a", "b"]


def test_np_variance_r2_is_one_on_exact_lines():
    models = pd.DataFrame(
        {
            "dataset": ["x"] * 4 + ["y"] * 4,
            "log_variance": [1, 2, 3, 4] * 2,
            "np": [1, 3, 5, 7, 0, -1, -2, -3],
        }
    )
    r2 = np_variance_r2(models, by=["dataset"])
    assert np.allclose(r2["r2"], 1.0)
    assert np.allclose(r2["slope"], [2.0, -1.0])


def test_r2_interval_covers_the_population_r2():
    """Calibration: with 20 points from a bivariate normal of known correlation, the 95%
    bootstrap interval holds the population R² in about 95% of samples (BCa on n = 20 is a
    little liberal; a broken interval, e.g. of R instead of R², covers far less)."""
    rng = np.random.default_rng(7)
    rho = 0.9
    cov = [[1.0, rho], [rho, 1.0]]
    hits = []
    for _ in range(200):
        x, y = rng.multivariate_normal([0.0, 0.0], cov, size=20).T
        low, high = r2_interval(x, y, n_resamples=1999, seed=int(rng.integers(1 << 31)))
        assert low <= linear_fit(x, y)[2] <= high
        hits.append(low <= rho**2 <= high)
    assert 0.85 <= np.mean(hits) <= 0.99


def test_r2_interval_is_seeded_and_nan_when_undefined():
    rng = np.random.default_rng(0)
    x = rng.normal(size=20)
    y = x + rng.normal(scale=0.5, size=20)
    assert r2_interval(x, y, seed=3) == r2_interval(x, y, seed=3)
    assert r2_interval(x, y, seed=3) != r2_interval(x, y, seed=4)
    assert all(np.isnan(r2_interval([1, 2], [1, 2])))
    assert all(np.isnan(r2_interval(x, np.ones(20))))
    with pytest.raises(ValueError, match="1-D of equal length"):
        r2_interval(x, y[:5])


def test_np_variance_r2_reports_the_interval():
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    models = pd.DataFrame(
        {"dataset": ["a"] * 20 + ["b"] * 20, "log_variance": x, "np": x + rng.normal(size=40)}
    )
    r2 = np_variance_r2(models, by=["dataset"])
    assert (r2["r2_ci_low_pct"] <= r2["r2_pct"]).all()
    assert (r2["r2_pct"] <= r2["r2_ci_high_pct"]).all()
    assert "r2_ci_low_pct" not in np_variance_r2(models, by=["dataset"], confidence=None)


def test_weight_distribution_study(checkpoints):
    fits = weight_distribution_study(checkpoints[:6], progress=False)
    assert len(fits) == 1 + 3 + 3 + 1 + 3 + 3
    assert set(fits["best"]) <= set(FAMILIES)
    rates = win_rates(fits, by=["dataset", "n_layers", "layer"])
    assert np.allclose(rates.groupby(["dataset", "n_layers", "layer"])["win_rate"].sum(), 1)


def test_regulariser_summary(tmp_path):
    specs = [
        (4, 6, "relu", "a", kw)
        for kw in (
            {},
            {},
            {"batchnorm": True},
            {"batchnorm": True},
            {"dropout": 0.5},
            {"dropout": 0.5},
        )
    ]
    models = model_study(_checkpoints(tmp_path, specs), progress=False)
    assert list(models["regulariser"]) == [
        "none",
        "none",
        "batchnorm",
        "batchnorm",
        "dropout",
        "dropout",
    ]
    summary = regulariser_summary(models)
    assert list(summary["regulariser"]) == ["none", "batchnorm", "dropout"]
    assert (summary["n_models"] == 2).all()
    assert np.isnan(summary["np_ks_pvalue"].iloc[0])
    assert summary["np_mean"].iloc[0] == pytest.approx(models["np"].iloc[:2].mean())


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One brief training run on digits (1 epoch, 4 evaluations) with every checkpoint."""
    from dgpbench.data.datasets import load_dataset

    x, y = load_dataset("digits", split="train")
    xt, yt = load_dataset("digits", split="test")
    out = tmp_path_factory.mktemp("run")
    arch = ArchConfig(64, 16, 2, 10, "relu")
    cfg = TrainConfig(lr=3e-3, epochs=1, val_fraction=0.1, keep="all", seed=0)
    rec = CurveRecorder(xt, yt, info={"run": "r0"})
    train_mlp(x, y, arch, cfg, out, dataset="digits", progress=False, callback=rec)
    return out, rec.frame(), (xt, yt)


def test_curves_from_files_match_the_recorder(trained_run):
    out, recorded, (xt, yt) = trained_run
    curves = criterion_curves(out, x_test=xt, y_test=yt, run="r0", progress=False)
    assert list(curves["epoch"]) == [0.25, 0.5, 0.75, 1.0]
    assert recorded["epoch"].iloc[0] == 0.0  # the recorder also sees the initialisation
    rec = recorded[recorded.epoch > 0].reset_index(drop=True)
    cols = ["np", "variance", "dgp", "val_accuracy", "val_loss", "test_accuracy"]
    assert np.allclose(curves[cols].to_numpy(float), rec[cols].to_numpy(float))
    assert curves["test_accuracy"].between(0, 1).all()
    assert curves["dataset"].iloc[0] == "digits"
    with_init = criterion_curves(out, include_initial=True, progress=False)
    assert len(with_init) == 5 and with_init["test_accuracy"].isna().all()
    grid = early_stopping_grid(curves, burn_ins=[0], patiences=[1, 2])
    assert set(grid["criterion"]) == {"np", "variance", "dgp", "val_accuracy", "val_loss"}
    assert (grid["dataset"] == "digits").all() and (grid["hidden"] == 16).all()
    with pytest.raises(ValueError, match="share a run"):
        concat_curves([curves, curves])
    with pytest.raises(FileNotFoundError):
        criterion_curves(out / "missing", progress=False)


def test_model_study_reads_final_values_from_the_curves(trained_run, tmp_path):
    from dgpbench.models.checkpoints import list_checkpoints

    out, recorded, _ = trained_run
    final = list_checkpoints(out)[-1][1]
    # the curves as `dgpbench analysis train` stores them: 8 significant digits
    recorded.to_csv(tmp_path / "curves.csv", index=False, float_format="%.8g")
    curve = pd.read_csv(tmp_path / "curves.csv")
    fresh = model_study([final], progress=False)
    reused = model_study([final], curves=[curve], progress=False)
    assert list(reused.columns) == list(fresh.columns)
    assert reused.to_csv(float_format="%.8g") == fresh.to_csv(float_format="%.8g")
    # the values are read, not recomputed
    marked = curve.copy()
    marked.loc[marked.index[-1], "dgp"] = 0.123
    assert model_study([final], curves=[marked], progress=False)["dgp"].iloc[0] == 0.123
    # curves that end before the checkpoint, or of another run, are refused
    with pytest.raises(ValueError, match="end at epoch"):
        model_study([final], curves=[curve.iloc[:-1]], progress=False)
    with pytest.raises(ValueError, match="do not belong"):
        model_study([final], curves=[curve.assign(np=curve["np"] * 1.01)], progress=False)
    with pytest.raises(ValueError, match="one frame per checkpoint"):
        model_study([final, final], curves=[curve], progress=False)


def test_training_correlations_on_hand_made_curves():
    epochs = np.arange(1, 9) / 4
    variance = np.linspace(0.1, 0.02, 8)
    curves = pd.DataFrame(
        {
            "run": np.repeat(["r1", "r2"], 8),
            "dataset": "d",
            "epoch": np.tile(epochs, 2),
            "variance": np.tile(variance, 2),
            "np": np.r_[1 - variance, 1 - variance],
            "dgp": np.r_[variance**2, [0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4]],
        }
    )
    corr = training_correlations(curves).set_index(["run", "metric"])
    assert corr.loc[("r1", "np"), "tau"] == pytest.approx(-1.0)
    assert corr.loc[("r1", "dgp"), "tau"] == pytest.approx(1.0)
    assert corr.loc[("r2", "dgp"), "tau"] == pytest.approx(
        stats.kendalltau(variance, curves["dgp"].iloc[8:]).statistic
    )
    assert corr.loc[("r2", "np"), "dataset"] == "d"
