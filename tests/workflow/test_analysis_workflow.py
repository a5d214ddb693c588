"""`dgpbench analysis TARGET` on tiny inputs, and the `analysis` workflow target (dry run).

The models are real 2-epoch digits MLPs trained through the CLI (in-process, ~0.3 s each);
results are checked against independent computations (scipy, numpy) where cheap.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from dgpbench.analysis.weights import load_weights, model_metrics
from dgpbench.cli.main import main

REPO = Path(__file__).resolve().parents[2]
CURVE_COLUMNS = [
    "run", "dataset", "n_layers", "hidden", "activation", "batchnorm", "dropout",
    "regulariser", "seed", "epoch", "np", "variance", "log_variance", "dgp",
    "test_accuracy", "val_accuracy", "val_loss",
]  # fmt: skip
EPOCHS = 2


def _run(*argv: object) -> None:
    assert main(["analysis", *(str(a) for a in argv)]) == 0


def _train(out: Path, *arch: object, curves: bool = True) -> Path:
    extra = ["--curves", out / "curves.csv"] if curves else []
    _run(
        "train",
        "--dataset",
        "digits",
        "--epochs",
        EPOCHS,
        "--threads",
        1,
        *arch,
        *extra,
        "--out-dir",
        out,
    )
    return out / "model.pt"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """3 linear classifiers, 6 two-layer MLPs (relu, tanh) and 6 regularised 4-layer MLPs."""
    root = tmp_path_factory.mktemp("analysis")
    main_runs = [_train(root / "m" / f"linear-s{s}", "--layers", 1, "--seed", s) for s in range(3)]
    for act, s in itertools.product(("relu", "tanh"), range(3)):
        arch = f"--layers 2 --hidden 8 --activation {act} --seed {s}".split()
        main_runs.append(_train(root / "m" / f"{act}-s{s}", *arch))
    options = {"none": "", "batchnorm": "--batchnorm", "dropout": "--dropout 0.5"}
    reg_runs = [
        _train(
            root / "r" / f"{kind}-s{s}",
            *f"--layers 4 --hidden 8 --seed {s} {options[kind]}".split(),
            curves=False,
        )
        for kind, s in itertools.product(options, range(2))
    ]
    curves = root / "curves.csv.gz"
    _run("curves", *(p.parent / "curves.csv" for p in main_runs), "--out", curves)
    models = root / "models.csv"
    run_curves = [p.parent / "curves.csv" for p in main_runs]
    _run("models", "--checkpoints", *main_runs, "--curves", *run_curves, "--out", models)
    return {"root": root, "main": main_runs, "reg": reg_runs, "curves": curves, "models": models}


def _figure_ok(stem: Path) -> None:
    for ext in (".png", ".pdf"):
        path = stem.with_name(stem.name + ext)
        assert path.is_file() and path.stat().st_size > 1000, path


def _table_ok(stem: Path, tex: bool = False) -> pd.DataFrame:
    assert stem.with_name(stem.name + ".md").read_text().startswith("### ")
    if tex:
        text = stem.with_name(stem.name + ".tex").read_text()
        assert r"\begin{tabular}" in text and r"\label{tab:" in text
    else:
        assert not stem.with_name(stem.name + ".tex").exists()
    return pd.read_csv(stem.with_name(stem.name + ".csv"))


def test_train_writes_model_metrics_and_curves(runs):
    model = runs["main"][3]  # relu-s0
    run_dir = model.parent
    assert {p.name for p in run_dir.iterdir()} >= {"model.pt", "metrics.csv", "curves.csv"}
    curves = pd.read_csv(run_dir / "curves.csv")
    assert list(curves.columns) == CURVE_COLUMNS
    assert np.allclose(curves["epoch"], np.arange(1, 4 * EPOCHS + 1) / 4)  # no epoch 0
    assert curves["run"].unique().tolist() == ["digits/relu-s0"]
    assert curves[["test_accuracy", "val_accuracy"]].stack().between(0, 1).all()
    # the last evaluation is the final checkpoint: same NP, variance and DGP
    weights, info = load_weights(model)
    expected = model_metrics(weights, layers=False)
    for key in ("np", "variance", "dgp"):
        assert curves[key].iloc[-1] == pytest.approx(expected[key], rel=1e-6)
    assert (info["n_layers"], info["hidden"], info["activation"]) == (2, 8, "relu")
    linear = pd.read_csv(runs["main"][0].parent / "curves.csv")
    assert linear["hidden"].isna().all() and (linear["n_layers"] == 1).all()


def test_models_from_curves_equal_models_recomputed(runs, tmp_path):
    # the workflow reads NP, variance and DGP from the curves; recomputing them from the
    # checkpoints gives the same file, byte for byte
    fresh = tmp_path / "models.csv"
    _run("models", "--checkpoints", *runs["main"], "--out", fresh)
    assert fresh.read_bytes() == runs["models"].read_bytes()


def test_models_and_np_variance(runs):
    models = pd.read_csv(runs["models"])
    assert len(models) == len(runs["main"])
    assert {"np", "variance", "log_variance", "dgp", "np_layer_0"} <= set(models.columns)
    out = runs["root"] / "np_variance"
    _run("np-variance", "--models", runs["models"], "--figure-layers", 2, "--out-dir", out)
    table = _table_ok(out / "table_r2", tex=True)
    assert list(table.columns) == ["hidden_layers", "hidden", "Digits/relu", "Digits/tanh"]
    # R² of NP ~ log-variance over the three relu runs, by scipy
    relu = models[(models["activation"] == "relu") & (models["n_layers"] == 2)]
    r = stats.linregress(relu["log_variance"], relu["np"]).rvalue
    assert table["Digits/relu"].iloc[0] == pytest.approx(100 * r**2, rel=1e-4)
    assert r"\multicolumn{2}{c}{Digits}" in (out / "table_r2.tex").read_text()
    linear = _table_ok(out / "table_r2_linear")
    assert linear.columns.tolist() == ["dataset", "n", "slope", "intercept", "r2_pct"]
    for name in ("linear", "dnn", "relu", "tanh"):
        _figure_ok(out / f"fig_np_vs_log_variance_{name}")


def test_permutation(runs):
    out = runs["root"] / "permutation"
    _run("permutation", "--checkpoints", *runs["main"], "--n-permutations", 3, "--out-dir", out)
    perm = pd.read_csv(out / "permutation.csv.gz")
    n_layers = 3 * 1 + 6 * 2
    assert len(perm) == 3 * n_layers
    assert {"model", "layer", "np", "np_permuted", "delta"} <= set(perm.columns)
    assert np.allclose(perm["delta"], perm["np_permuted"] - perm["np"])
    ks = pd.read_csv(out / "ks_tests.csv")
    assert len(ks) == 1 + 2 * 2  # linear layer; (relu, tanh) x 2 layers
    assert {"statistic", "pvalue", "reject", "n_models"} <= set(ks.columns)
    summary = _table_ok(out / "table_ks_rejections")
    assert summary["n_tests"].sum() == len(ks)
    _figure_ok(out / "fig_permutation_linear")
    _figure_ok(out / "fig_permutation_dnn")


def test_synthetic_targets(tmp_path):
    _run(
        "bounds",
        "--n-matrices",
        12,
        "--size-range",
        5,
        12,
        "--seed",
        1,
        "--out-dir",
        tmp_path / "b",
    )
    study = pd.read_csv(tmp_path / "b" / "study.csv")
    table = _table_ok(tmp_path / "b" / "table_bounds", tex=True).set_index("bound")
    assert len(study) == 12 and study["n_rows"].between(5, 12).all()
    err = (study["lower"] - study["np"]).abs()
    assert table.loc["Lower bound", "absolute error/mean"] == pytest.approx(err.mean(), rel=1e-5)
    assert table.loc["Lower bound", "absolute error/max"] == pytest.approx(err.max(), rel=1e-5)
    _figure_ok(tmp_path / "b" / "fig_bounds_tightness")

    _run("np-factors", "--sizes", 6, 8, "--n-per-size", 8, "--out-dir", tmp_path / "f")
    r2 = _table_ok(tmp_path / "f" / "table_r2")
    assert set(r2["size"]) == {6, 8} and "all" in set(r2["family"])
    _figure_ok(tmp_path / "f" / "fig_np_factors")

    _run(
        "size",
        "--distributions",
        "uniform",
        "pareto(5)",
        "--sizes",
        4,
        6,
        "--n-samples",
        3,
        "--out-dir",
        tmp_path / "s",
    )
    grid = pd.read_csv(tmp_path / "s" / "grid.csv")
    assert len(grid) == 2 * 2 * 2 and grid["mean_np"].between(0, 1).all()
    _figure_ok(tmp_path / "s" / "fig_size_heatmaps")


def test_weights(runs):
    out = runs["root"] / "weights"
    _run("weights", "--checkpoints", *runs["main"][:4], "--out-dir", out)
    fits = pd.read_csv(out / "fits.csv")
    assert len(fits) == 3 * 1 + 1 * 2
    rates = _table_ok(out / "table_win_rates")
    families = ["beta", "exponential", "normal", "pareto"]
    assert np.allclose(rates[families].sum(axis=1), 1.0)
    for name in ("fig_win_rates", "fig_pareto_b", "fig_normal_sigma"):
        _figure_ok(out / name)


def test_early_stopping_and_dgp_variance(runs):
    curves = pd.read_csv(runs["curves"])
    assert curves["run"].nunique() == len(runs["main"]) and len(curves) == 9 * 4 * EPOCHS
    out = runs["root"] / "early_stopping"
    _run(
        "early-stopping",
        "--curves",
        runs["curves"],
        "--max-burn-in",
        1,
        "--max-patience",
        3,
        "--heatmap-where",
        "n_layers=2",
        "--out-dir",
        out,
    )
    grid = pd.read_csv(out / "grid.csv.gz")
    assert len(grid) == 9 * 5 * 2 * 3  # runs x criteria x burn-ins x patiences
    for name, first in (("table_np", "NP"), ("table_dgp", "DGP")):
        table = _table_ok(out / name, tex=True)
        assert table.columns.tolist() == ["difference", "Digits"] and len(table) == 6
        assert table["difference"].iloc[0].startswith(f"Δ_epoch({first}, ")
    assert r"$\Delta_{\text{accuracy}}$(NP, var)" in (out / "table_np.tex").read_text()
    _figure_ok(out / "fig_heatmaps")

    out = runs["root"] / "dgp_variance"
    _run("dgp-variance", "--curves", runs["curves"], "--models", runs["models"], "--out-dir", out)
    corr = pd.read_csv(out / "correlations.csv")
    assert len(corr) == 9 * 2 and set(corr["metric"]) == {"np", "dgp"}
    one = curves[curves["run"] == "digits/tanh-s1"]
    tau = stats.kendalltau(one["variance"], one["dgp"]).statistic
    got = corr.set_index(["run", "metric"]).loc[("digits/tanh-s1", "dgp"), "tau"]
    assert got == pytest.approx(tau, abs=1e-9)
    assert set(_table_ok(out / "table_correlations")["metric"]) == {"np", "dgp"}
    _figure_ok(out / "fig_training_correlations")
    _figure_ok(out / "fig_dgp_vs_log_variance")


def test_regularisers(runs):
    out = runs["root"] / "regularisers"
    _run("regularisers", "--checkpoints", *runs["reg"], "--out-dir", out)
    models = pd.read_csv(out / "models.csv")
    assert models["regulariser"].tolist() == ["none"] * 2 + ["batchnorm"] * 2 + ["dropout"] * 2
    assert (models["n_layers"] == 4).all()
    summary = _table_ok(out / "table_summary")
    assert summary["regulariser"].tolist() == ["none", "batchnorm", "dropout"]
    assert {"np_mean", "variance_mean", "np_ks_pvalue"} <= set(summary.columns)
    _figure_ok(out / "fig_regularisers")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ("models --checkpoints {root}/nope.pt --out {root}/x.csv", "does not exist"),
        (
            "models --checkpoints {model} --curves {curves} {curves} --out {root}/x.csv",
            "one file per checkpoint",
        ),
        (
            "permutation --checkpoints {model} --n-permutations 0 --out-dir {root}/x",
            "n_permutations",
        ),
        ("np-variance --models {metrics} --out-dir {root}/x", "lacks columns"),
        ("early-stopping --curves {curves} --max-burn-in 9 --out-dir {root}/x", "--max-burn-in 9"),
        (
            "early-stopping --curves {curves} --max-burn-in 0 --heatmap-where colour=red"
            " --out-dir {root}/x",
            "COLUMN",
        ),
        ("train --dataset digits --layers 2 --seed 0 --out-dir {root}/x", "hidden must be"),
        (
            "train --dataset digits --layers 2 --hidden 4 --activation sigmoid --seed 0 --out-dir {root}/x",
            "activation",
        ),
        ("train --dataset nope --layers 1 --seed 0 --out-dir {root}/x", "nope"),
        ("size --distributions cauchy --out-dir {root}/x", "cauchy"),
        ("bounds --n-matrices 3 --size-range 9 2 --out-dir {root}/x", "size_range"),
        ("dgp-variance --curves {root}/empty.csv --models {models} --out-dir {root}/x", "empty"),
    ],
)
def test_bad_input_is_a_one_line_error(runs, capsys, argv, message):
    model = runs["main"][0]
    (runs["root"] / "empty.csv").write_text("")
    values = {
        "root": runs["root"],
        "model": model,
        "curves": runs["curves"],
        "models": runs["models"],
        "metrics": model.parent / "metrics.csv",
    }
    capsys.readouterr()
    assert main(["analysis", *argv.format(**values).split()]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dgpbench analysis: error: ") and "\n" not in err, err
    assert message in err


def _expected_training_jobs(config: dict) -> int:
    an = config["analysis"]
    deep = [n for n in an["layers"] if n > 1]
    # one stacked job per data set and architecture trains all its seeds
    per_dataset = (1 in an["layers"]) + len(an["activations"]) * len(deep) * len(an["hidden"])
    reg = an["regularisers"]  # one stacked job per data set and kind trains all its seeds
    return len(an["datasets"]) * per_dataset, len(reg["datasets"]) * len(reg["kinds"])


@pytest.mark.parametrize("configfile", ["config.yaml", "config/paper.yaml"])
def test_snakemake_dry_run(tmp_path, configfile):
    config = yaml.safe_load((REPO / configfile).read_text())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "analysis",
            "--quiet",
            "rules",
            "-s",
            REPO / "Snakefile",
            "--directory",
            tmp_path,
            "--configfile",
            REPO / configfile,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counts = dict(
        (line.split()[0], int(line.split()[1]))
        for line in result.stdout.splitlines()
        if line.startswith("analysis")
    )
    train, reg = _expected_training_jobs(config)
    assert counts["analysis_train"] == train and counts["analysis_train_regulariser"] == reg
    targets = {
        "permutation",
        "np_variance",
        "bounds",
        "np_factors",
        "size",
        "weights",
        "early_stopping",
        "regularisers",
        "dgp_variance",
    }
    assert {f"analysis_{t}" for t in targets} <= set(counts)
    assert not (tmp_path / "results").exists()  # a dry run writes nothing


def _schema_defaults(schema: dict) -> dict:
    out = {}
    for key, sub in schema.get("properties", {}).items():
        if sub.get("type") == "object" and "properties" in sub:
            out[key] = _schema_defaults(sub)
        elif "default" in sub:
            out[key] = sub["default"]
    return out


def test_schema_defaults_are_the_default_config():
    """A config without `analysis:` runs the same analyses as config.yaml."""
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert _schema_defaults(schema["properties"]["analysis"]) == config["analysis"]


def test_mnist_relu_column_config_plans_twelve_stacked_paper_scale_jobs(tmp_path):
    """config/analysis_mnist_relu.yaml (docs/analysis-scale.md): the R² table's MNIST relu
    column at the paper's scale, 12 jobs of 20 seeds x 40 epochs, nothing else trained."""
    result = subprocess.run(
        [
            sys.executable, "-m", "snakemake", "-n", "-p", "-s", REPO / "Snakefile",
            "--directory", tmp_path, "--configfile", REPO / "config/paper.yaml",
            REPO / "config/analysis_mnist_relu.yaml", "--",
            "results/analysis/comparisons/comparison_r2.csv",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    marker = "dgpbench analysis train-seeds"
    train = [
        line[line.index(marker) :].split()
        for line in (result.stdout + result.stderr).splitlines()
        if marker in line
    ]
    assert len(train) == 12
    for cmd in train:
        assert cmd[cmd.index("--dataset") + 1] == "mnist"
        assert cmd[cmd.index("--activation") + 1] == "relu"
        assert cmd[cmd.index("--epochs") + 1] == "40"
        seeds = cmd[cmd.index("--seeds") + 1 : cmd.index("--out-dirs")]
        assert seeds == [str(s) for s in range(20)]
    archs = {(c[c.index("--layers") + 1], c[c.index("--hidden") + 1]) for c in train}
    assert archs == {(str(k), str(h)) for k in (2, 3, 4) for h in (50, 100, 250, 650)}
    assert "rule analysis_train:" in result.stdout + result.stderr
    assert "rule analysis_train_regulariser" not in result.stdout + result.stderr
