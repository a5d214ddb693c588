"""``dgpbench analysis TARGET``: the neural-persistence analyses as workflow steps.

One subcommand, ``analysis``, with one target per step of ``workflow/rules/analysis.smk``;
each reads files, calls :mod:`dgpbench.analysis` and writes its outputs atomically into
``--out-dir`` (fixed file names, listed per target below; tables as ``.csv`` + ``.md``, plus
``.tex`` where the paper has the table; figures as ``.png`` + ``.pdf``):

==================  =====================================================================
``train``           one analysis MLP: ``model.pt``, ``metrics.csv`` and, with ``--curves``,
                    NP / variance / DGP / validation / test accuracy per quarter epoch
``models``          per-model NP, variance, DGP of final checkpoints (one CSV)
``curves``          concatenate the curves of many runs (one CSV)
``permutation``     1: ``permutation.csv.gz, ks_tests.csv, table_ks_rejections,
                    fig_permutation_linear, fig_permutation_dnn``
``np-variance``     2: ``r2.csv, table_r2 (.tex), table_r2_linear,
                    fig_np_vs_log_variance_{linear,dnn,<activation>}``
``bounds``          3: ``study.csv, table_bounds (.tex), fig_bounds_tightness``
``np-factors``      4: ``study.csv, table_r2, fig_np_factors``
``size``            5: ``grid.csv, fig_size_heatmaps``
``weights``         6: ``fits.csv, table_win_rates, fig_win_rates, fig_pareto_b,
                    fig_normal_sigma``
``early-stopping``  7: ``grid.csv.gz, table_np (.tex), table_dgp (.tex), fig_heatmaps``
``regularisers``    8: ``models.csv, table_summary, fig_regularisers``
``dgp-variance``    9: ``correlations.csv, table_correlations, fig_training_correlations,
                    fig_dgp_vs_log_variance``
==================  =====================================================================

Figures and tables of linear classifiers (``n_layers == 1``) or of DNNs are written only
when such models are in the input (the workflow declares them the same way).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dgpbench.commands import SUBCOMMANDS
from dgpbench.io import write_csv, write_text
from dgpbench.tables import column_tuples, tex_escape, to_latex, to_markdown

log = logging.getLogger(__name__)

__all__ = ["TARGETS", "write_table"]

# target -> (help, add-arguments function, run function)
TARGETS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable]] = {}

# Pairs of the early-stopping heatmap figure (fig:appendix:np:earlystopping:heatmap:
# "differences between using accuracy on the validation set and NP, variance, and DGP").
HEATMAP_PAIRS = (("np", "val_accuracy"), ("variance", "val_accuracy"), ("dgp", "val_accuracy"))


def _target(name: str, help_: str, add_args: Callable[[argparse.ArgumentParser], None]):
    def register(run: Callable[[argparse.Namespace], None]) -> Callable:
        TARGETS[name] = (help_, add_args, run)
        return run

    return register


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def write_table(
    wide: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    title: str,
    digits: int = 2,
    caption: str | None = None,
    label: str | None = None,
    row_label: Callable[[object], str] = tex_escape,
) -> list[Path]:
    """Write a table as ``<stem>.csv``, ``<stem>.md`` and, with ``label``, ``<stem>.tex``.

    Parameters
    ----------
    wide : pandas.DataFrame
        The table in its display layout: named row index (one or more levels), columns
        (one or more levels).
    stem : path-like
        Output path without suffix.
    title : str
        Markdown heading (and LaTeX caption unless ``caption`` is given).
    digits : int, default=2
        Decimals of float cells in Markdown and LaTeX (the CSV keeps 6 significant digits).
    caption, label : str, optional
        LaTeX caption and ``\\label``; no ``.tex`` file without a label.
    row_label : callable, default=escape
        Renders row labels in LaTeX (e.g. math for ``Δ_epoch(NP, val)``).

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If ``wide`` is empty.
    """
    if wide.empty:
        raise ValueError(f"table {title!r} is empty")
    stem = Path(stem)

    def fmt(value: Any) -> str:
        if isinstance(value, bool | np.bool_):
            return str(bool(value))
        if isinstance(value, int | np.integer):
            return str(int(value))
        if isinstance(value, float | np.floating):
            return "-" if np.isnan(value) else f"{value:.{digits}f}"
        return "-" if pd.isna(value) else str(value)

    flat = wide.copy()
    flat.columns = ["/".join(str(x) for x in c) for c in column_tuples(wide)]
    paths = [stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".md")]
    write_csv(paths[0], flat.reset_index(), float_format="%.6g")
    write_text(paths[1], to_markdown(wide, title, fmt))
    if label:
        paths.append(stem.with_name(stem.name + ".tex"))
        write_text(paths[2], to_latex(wide, caption or tex_escape(title), label, fmt, row_label))
    return paths


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _out_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", required=True, help="folder for the target's outputs")


def _checkpoints_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoints", nargs="+", required=True, help="final model checkpoints")


def _read_table(path: str, what: str, needed: Sequence[str] = ()) -> pd.DataFrame:
    """Read a CSV written by an earlier target, with a one-line error if it is unusable."""
    from dgpbench.analysis.weights import tidy_run_columns

    if not Path(path).is_file():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{what} file {path} is empty") from exc
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} file {path} lacks columns {missing}")
    if frame.empty:
        raise ValueError(f"{what} file {path} has no rows")
    if "dataset" in frame:
        frame["dataset"] = frame["dataset"].astype(str)
    return tidy_run_columns(frame)


def _split(models: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(linear classifiers, DNNs) rows of a frame with ``n_layers``."""
    return models[models["n_layers"] == 1], models[models["n_layers"] > 1]


def _labels(values: Sequence[str]) -> list[str]:
    from dgpbench.labels import dataset_label

    return [dataset_label(v) for v in values]


# --------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------
def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="digits, mnist, fashion-mnist, emnist, ...")
    p.add_argument("--data-root", default=None, help="torchvision data root")
    p.add_argument("--download", action="store_true", help="download missing data (network)")
    p.add_argument("--layers", type=int, required=True, help="linear maps (1: linear classifier)")
    p.add_argument("--hidden", type=int, default=None, help="hidden units (unless --layers 1)")
    p.add_argument("--activation", default="relu", help="relu or tanh")
    p.add_argument("--batchnorm", action="store_true", help="batch norm after hidden maps")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout after hidden activations")
    p.add_argument("--seed", type=int, required=True, help="model seed")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--checkpoints-per-epoch", type=int, default=4)
    p.add_argument("--curves", default=None, help="also write the per-evaluation curves CSV")
    p.add_argument("--run", default=None, help="run id in the curves (default <dataset>/<dir>)")
    _out_dir(p)


@_target("train", "Train one analysis MLP (lr 0.003); optionally record its curves.", _train_args)
def _train(args: argparse.Namespace) -> None:
    from dgpbench.analysis.curves import CurveRecorder
    from dgpbench.analysis.weights import run_info, tidy_run_columns
    from dgpbench.data import load_dataset, n_classes
    from dgpbench.models import ArchConfig, analysis_config, train_mlp

    out = Path(args.out_dir)
    x, y = load_dataset(args.dataset, args.data_root, "train", download=args.download)
    # A linear classifier has no hidden layer: the stored width is a placeholder.
    hidden = args.hidden if args.hidden is not None or args.layers > 1 else 1
    arch = ArchConfig(
        n_inputs=int(np.prod(x.shape[1:])),
        hidden=hidden,
        n_layers=args.layers,
        n_classes=n_classes(args.dataset, args.data_root),
        activation=args.activation,
        batchnorm=args.batchnorm,
        dropout=args.dropout,
    )
    config = analysis_config(
        args.dataset,
        lr=args.lr,
        epochs=args.epochs,
        batch_size=args.batch_size,
        checkpoints_per_epoch=args.checkpoints_per_epoch,
        keep="last",  # the curves replace the 160 kept checkpoints of the paper's setup
        seed=args.seed,
        threads=args.threads,
    )
    recorder = None
    if args.curves:
        x_test, y_test = load_dataset(args.dataset, args.data_root, "test", download=args.download)
        meta = {"arch": dataclasses.asdict(arch), "train_config": dataclasses.asdict(config)}
        info = run_info({**meta, "dataset": args.dataset})
        info.pop("epoch")
        recorder = CurveRecorder(
            x_test, y_test, info={"run": args.run or f"{args.dataset}/{out.name}", **info}
        )
    final = train_mlp(
        x, y, arch, config, out, dataset=args.dataset, progress=False, callback=recorder
    )
    if recorder is not None:
        curves = recorder.frame()
        # epoch 0 is the untrained initialisation (criterion_curves leaves it out too)
        write_csv(args.curves, tidy_run_columns(curves[curves["epoch"] > 0]), float_format="%.8g")
    os.replace(final, out / "model.pt")  # a stable name for the workflow
    log.info("trained %s -> %s", arch, out / "model.pt")


# --------------------------------------------------------------------------------------------
# models, curves
# --------------------------------------------------------------------------------------------
def _models_args(p: argparse.ArgumentParser) -> None:
    _checkpoints_arg(p)
    p.add_argument("--out", required=True, help="output CSV")


@_target("models", "NP, per-layer NP, variance and DGP of final checkpoints.", _models_args)
def _models(args: argparse.Namespace) -> None:
    from dgpbench.analysis.variance import model_study

    models = model_study(args.checkpoints, progress=False)
    write_csv(args.out, models, float_format="%.8g")
    log.info("%d models -> %s", len(models), args.out)


def _curves_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("curves", nargs="+", help="curves CSVs of `dgpbench analysis train`")
    p.add_argument("--out", required=True, help="output CSV (.csv or .csv.gz)")


@_target("curves", "Concatenate the training curves of many runs.", _curves_args)
def _curves(args: argparse.Namespace) -> None:
    from dgpbench.analysis.curves import concat_curves

    frames = [_read_table(path, "curves", ("run", "epoch")) for path in sorted(args.curves)]
    curves = concat_curves(frames)
    write_csv(args.out, curves, float_format="%.8g")
    log.info("%d evaluations of %d runs -> %s", len(curves), len(frames), args.out)


def _permutation_args(p: argparse.ArgumentParser) -> None:
    _checkpoints_arg(p)
    p.add_argument("--n-permutations", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", default="mean", help="permuted KS sample: mean or all")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the KS tests")
    _out_dir(p)


@_target("permutation", "1: NP of trained vs. permuted weights, KS tests.", _permutation_args)
def _permutation(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.permutation import (
        ks_rejection_summary,
        permutation_ks_tests,
        permutation_study,
    )

    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    out = Path(args.out_dir)
    perm = permutation_study(
        args.checkpoints, n_permutations=args.n_permutations, seed=args.seed, progress=False
    )
    ks = permutation_ks_tests(perm, sample=args.sample, alpha=args.alpha)
    write_csv(out / "permutation.csv.gz", perm, float_format="%.8g")
    write_csv(out / "ks_tests.csv", ks, float_format="%.6g")
    summary = ks_rejection_summary(ks).assign(dataset=lambda d: _labels(d["dataset"]))
    write_table(
        summary.set_index(["dataset", "layers"]),
        out / "table_ks_rejections",
        title=f"KS tests rejecting 'NP unchanged by permutation' (alpha = {args.alpha})",
    )
    linear, deep = _split(perm)
    if len(linear):
        plots.plot_permutation_linear(perm, out / "fig_permutation_linear")
    if len(deep):
        plots.plot_permutation_dnn(perm, out / "fig_permutation_dnn")
    log.info("%d KS tests, %d rejected -> %s", len(ks), int(ks["reject"].sum()), out)


# --------------------------------------------------------------------------------------------
# 2. NP vs. log-variance
# --------------------------------------------------------------------------------------------
def _np_variance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="models CSV of `dgpbench analysis models`")
    p.add_argument("--figure-layers", type=int, nargs="*", default=[], help="main figure: layers")
    p.add_argument("--figure-hidden", type=int, nargs="*", default=[], help="main figure: widths")
    _out_dir(p)


@_target("np-variance", "2: R² of NP ~ log-variance, table and figures.", _np_variance_args)
def _np_variance(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.variance import np_variance_r2, r2_table

    out = Path(args.out_dir)
    models = _read_table(args.models, "models", ("dataset", "n_layers", "np", "log_variance"))
    linear, deep = _split(models)
    if len(linear):
        r2 = np_variance_r2(linear, by=["dataset"]).assign(dataset=lambda d: _labels(d["dataset"]))
        write_table(
            r2.set_index("dataset")[["n", "slope", "intercept", "r2_pct"]],
            out / "table_r2_linear",
            title="Linear classifiers: R² (%) of NP ~ log-variance per data set",
        )
        plots.plot_np_vs_log_variance(
            linear, out / "fig_np_vs_log_variance_linear", title="Linear classifiers"
        )
    if len(deep):
        r2 = np_variance_r2(deep)
        write_csv(out / "r2.csv", r2, float_format="%.6g")
        wide = r2_table(r2)
        labels = _labels(wide.columns.get_level_values("dataset"))
        wide.columns = pd.MultiIndex.from_arrays(
            [labels, wide.columns.get_level_values("activation")], names=wide.columns.names
        )
        wide = wide.sort_index(axis=1)
        write_table(
            wide,
            out / "table_r2",
            title="R² (x100) of NP ~ log-variance per architecture",
            digits=1,
            caption=(
                r"$R^2$ score ($\times 100$) of linear regression fits of NP on the "
                r"$\log$-transformed variance of weights, one fit per architecture over its runs."
            ),
            label="tab:appendix:additional:variancevspersistence:full:r2",
        )
        main = deep
        if args.figure_layers:
            main = main[main["n_layers"].isin(args.figure_layers)]
        if args.figure_hidden:
            main = main[main["hidden"].isin(args.figure_hidden)]
        if main.empty:
            raise ValueError(
                f"no DNN with layers in {args.figure_layers} and hidden in {args.figure_hidden}"
            )
        plots.plot_np_vs_log_variance(
            main, out / "fig_np_vs_log_variance_dnn", row="n_layers", hue="hidden", title="DNNs"
        )
        for activation, sub in deep.groupby("activation", sort=True):
            plots.plot_np_vs_log_variance(
                sub,
                out / f"fig_np_vs_log_variance_{activation}",
                row="n_layers",
                hue="hidden",
                title=f"{activation} networks",
            )
    log.info("NP vs. log-variance of %d models -> %s", len(models), out)


# --------------------------------------------------------------------------------------------
# 3-5. synthetic studies
# --------------------------------------------------------------------------------------------
def _bounds_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-matrices", type=int, default=10_000)
    p.add_argument("--size-range", type=int, nargs=2, default=[50, 500], metavar=("LOW", "HIGH"))
    p.add_argument("--seed", type=int, default=0)
    _out_dir(p)


@_target("bounds", "3: tightness of the NP bounds on synthetic matrices.", _bounds_args)
def _bounds(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.bounds import bounds_error_table, bounds_tightness_study

    out = Path(args.out_dir)
    study = bounds_tightness_study(
        args.n_matrices, size_range=tuple(args.size_range), seed=args.seed, progress=False
    )
    write_csv(out / "study.csv", study, float_format="%.8g")
    table = bounds_error_table(study)
    table = table[["abs_mean", "abs_max", "rel_mean", "rel_max"]]
    table.columns = pd.MultiIndex.from_product(
        [["absolute error", "relative error"], ["mean", "max"]]
    )
    write_table(
        table,
        out / "table_bounds",
        title=f"Errors of the NP bounds on {len(study)} synthetic matrices",
        digits=4,
        caption=(
            f"Absolute and relative errors of the upper bound and lower bound estimated on "
            f"{len(study)} synthetic matrices: mean and maximum deviation from the actual NP."
        ),
        label="tab:appendix:tightnessofbounds",
    )
    plots.plot_bounds_tightness(study, out / "fig_bounds_tightness")
    log.info("bounds of %d matrices -> %s", len(study), out)


def _factors_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 250])
    p.add_argument("--n-per-size", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    _out_dir(p)


@_target("np-factors", "4: NP vs. variance and sortedness of synthetic matrices.", _factors_args)
def _factors(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.factors import np_factors_r2, np_factors_study

    out = Path(args.out_dir)
    study = np_factors_study(args.sizes, args.n_per_size, seed=args.seed, progress=False)
    write_csv(out / "study.csv", study, float_format="%.8g")
    r2 = np_factors_r2(study)
    write_table(
        r2.set_index(["size", "family"])[["n", "r2_pct"]],
        out / "table_r2",
        title="R² (%) of NP ~ log-variance + sortedness",
        digits=1,
    )
    plots.plot_np_factors(study, out / "fig_np_factors", r2)
    log.info("NP factors of %d matrices -> %s", len(study), out)


def _size_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--distributions", nargs="+", required=True, help="e.g. uniform pareto(5)")
    p.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 300, 400, 500])
    p.add_argument("--n-samples", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    _out_dir(p)


@_target("size", "5: expected normalised NP over matrix sizes.", _size_args)
def _size(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.size import expected_np_grid

    out = Path(args.out_dir)
    grid = expected_np_grid(
        args.distributions, args.sizes, args.n_samples, seed=args.seed, progress=False
    )
    write_csv(out / "grid.csv", grid, float_format="%.8g")
    plots.plot_size_heatmaps(grid, out / "fig_size_heatmaps")
    log.info("%d cells -> %s", len(grid), out)


# --------------------------------------------------------------------------------------------
# 6. weight distributions
# --------------------------------------------------------------------------------------------
def _weights_args(p: argparse.ArgumentParser) -> None:
    _checkpoints_arg(p)
    _out_dir(p)


@_target("weights", "6: distribution fits to trained weights, win rates.", _weights_args)
def _weights(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.distributions import weight_distribution_study, win_rates

    out = Path(args.out_dir)
    fits = weight_distribution_study(args.checkpoints, progress=False)
    write_csv(out / "fits.csv", fits, float_format="%.8g")
    rates = win_rates(fits, by=("dataset", "n_layers", "layer"))
    wide = rates.assign(dataset=lambda d: _labels(d["dataset"])).pivot_table(
        index=["dataset", "n_layers", "layer"], columns="family", values="win_rate"
    )
    write_table(wide, out / "table_win_rates", title="Win rates (lowest NLL) per layer")
    plots.plot_win_rates(rates, out / "fig_win_rates")
    plots.plot_fitted_parameters(fits, out / "fig_pareto_b", parameter="pareto_b")
    plots.plot_fitted_parameters(fits, out / "fig_normal_sigma", parameter="normal_sigma")
    log.info("fits of %d matrices -> %s", len(fits), out)


# --------------------------------------------------------------------------------------------
# 7. early stopping
# --------------------------------------------------------------------------------------------
def _early_stopping_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curves", required=True, help="curves CSV of `dgpbench analysis curves`")
    p.add_argument("--max-burn-in", type=int, default=25, help="burn-ins 0..N epochs")
    p.add_argument("--max-patience", type=int, default=10, help="patiences 1..N evaluations")
    p.add_argument(
        "--heatmap-where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="runs of the heatmap figure (repeatable; values of one column are OR-ed)",
    )
    _out_dir(p)


def _where(frame: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    wanted: dict[str, list[str]] = {}
    for cond in conditions:
        key, sep, value = cond.partition("=")
        if not sep or key not in frame.columns:
            raise ValueError(
                f"--heatmap-where must be COLUMN=VALUE with a curves column, got {cond!r}"
            )
        wanted.setdefault(key, []).append(value)
    mask = np.ones(len(frame), dtype=bool)
    for key, values in wanted.items():
        mask &= frame[key].astype(str).isin(values).to_numpy()
    if not mask.any():
        raise ValueError(f"no run matches --heatmap-where {list(conditions)}")
    return frame[mask]


def _delta_tex(label: object) -> str:
    """``Δ_epoch(NP, val)`` -> ``$\\Delta_{\\text{epoch}}$(NP, val)``."""
    name, _, rest = str(label).partition("(")
    sub = name.removeprefix("Δ_")
    return rf"$\Delta_{{\text{{{sub}}}}}$(" + tex_escape(rest) if rest else tex_escape(label)


@_target(
    "early-stopping", "7: early stopping on NP, variance, DGP, validation.", _early_stopping_args
)
def _early_stopping(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.early_stopping import (
        DGP_TABLE_PAIRS,
        NP_TABLE_PAIRS,
        early_stopping_differences,
        early_stopping_grid,
    )

    if args.max_burn_in < 0 or args.max_patience < 1:
        raise ValueError(
            f"--max-burn-in must be >= 0 and --max-patience >= 1, "
            f"got {args.max_burn_in} and {args.max_patience}"
        )
    out = Path(args.out_dir)
    curves = _read_table(args.curves, "curves", ("run", "epoch", "test_accuracy"))
    last = curves.groupby("run")["epoch"].max().min()
    if args.max_burn_in >= last:
        raise ValueError(f"--max-burn-in {args.max_burn_in} leaves no evaluation of {last} epochs")
    grid = early_stopping_grid(
        curves,
        burn_ins=range(args.max_burn_in + 1),
        patiences=range(1, args.max_patience + 1),
    )
    write_csv(out / "grid.csv.gz", grid, float_format="%.6g")
    grid_labelled = grid.assign(dataset=lambda d: _labels(d["dataset"]))
    n_runs = curves["run"].nunique()
    for name, pairs, label, what in (
        ("table_np", NP_TABLE_PAIRS, "tab:np:earlystopping", "validation, NP or variance"),
        ("table_dgp", DGP_TABLE_PAIRS, "tab:appendix:onp:earlystopping", "DGP vs. the others"),
    ):
        table = early_stopping_differences(grid_labelled, pairs)
        write_table(
            table[sorted(table.columns)],
            out / name,
            title=f"Early stopping: {what} ({n_runs} runs)",
            caption=(
                r"Differences in trained epochs ($\Delta_{\text{epoch}}$) and in test accuracy "
                r"at the point of stopping ($\Delta_{\text{accuracy}}$, in \%) between early "
                r"stopping criteria, averaged over runs, burn-ins 0--"
                rf"{args.max_burn_in} and patiences 1--{args.max_patience}; positive: the "
                r"first criterion's value is higher."
            ),
            label=label,
            row_label=_delta_tex,
        )
    selected = _where(curves, args.heatmap_where)["run"].unique() if args.heatmap_where else None
    heat = grid if selected is None else grid[grid["run"].isin(selected)]
    plots.plot_early_stopping_heatmaps(heat, out / "fig_heatmaps", pairs=HEATMAP_PAIRS)
    log.info("early stopping of %d runs -> %s", n_runs, out)


# --------------------------------------------------------------------------------------------
# 8. regularisers
# --------------------------------------------------------------------------------------------
@_target("regularisers", "8: NP and variance under batch norm / dropout.", _weights_args)
def _regularisers(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.regularisers import regulariser_summary
    from dgpbench.analysis.variance import model_study

    out = Path(args.out_dir)
    models = model_study(args.checkpoints, dgp=False, progress=False)
    write_csv(out / "models.csv", models, float_format="%.8g")
    summary = regulariser_summary(models).assign(dataset=lambda d: _labels(d["dataset"]))
    write_table(
        summary.set_index(["dataset", "regulariser"]),
        out / "table_summary",
        title="NP and variance of weights per regulariser (KS p-value vs. none)",
        digits=4,
    )
    plots.plot_regularisers(models, out / "fig_regularisers")
    log.info("%d regularised models -> %s", len(models), out)


# --------------------------------------------------------------------------------------------
# 9. DGP vs. variance
# --------------------------------------------------------------------------------------------
def _dgp_variance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curves", required=True, help="curves CSV of `dgpbench analysis curves`")
    p.add_argument("--models", required=True, help="models CSV of `dgpbench analysis models`")
    _out_dir(p)


@_target("dgp-variance", "9: DGP vs. the variance of weights.", _dgp_variance_args)
def _dgp_variance(args: argparse.Namespace) -> None:
    from dgpbench.analysis import plots
    from dgpbench.analysis.dgp_variance import training_correlations

    out = Path(args.out_dir)
    curves = _read_table(args.curves, "curves", ("run", "np", "dgp", "variance"))
    models = _read_table(args.models, "models", ("dataset", "n_layers", "dgp", "log_variance"))
    corr = training_correlations(curves)
    write_csv(out / "correlations.csv", corr, float_format="%.6g")
    summary = (
        corr.assign(dataset=lambda d: _labels(d["dataset"]))
        .groupby(["dataset", "metric"], sort=True)["tau"]
        .agg(
            runs="size",
            mean_tau="mean",
            median_tau="median",
            share_abs_above_half=lambda t: (t.abs() > 0.5).mean(),
        )
    )
    write_table(
        summary, out / "table_correlations", title="Kendall's τ with the variance over training"
    )
    plots.plot_training_correlations(corr, out / "fig_training_correlations")
    _, deep = _split(models)
    if len(deep):
        plots.plot_dgp_vs_log_variance(deep, out / "fig_dgp_vs_log_variance")
    log.info("correlations of %d runs -> %s", curves["run"].nunique(), out)


# --------------------------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------------------------
def _analysis_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    for name, (help_, add_args, _) in TARGETS.items():
        q = sub.add_parser(name, help=help_, description=help_)
        add_args(q)
        q.add_argument("--threads", type=int, default=None, help="torch and numba threads")


def _analysis(args: argparse.Namespace) -> None:
    from dgpbench.models import torch_threads
    from dgpbench.topology._threads import numba_threads

    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be a positive integer, got {args.threads}")
    # matplotlib logs every categorical axis at INFO: noise in the rules' logs
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    with torch_threads(args.threads), numba_threads(args.threads):
        TARGETS[args.target][2](args)


SUBCOMMANDS.update(
    {
        "analysis": (
            "Neural-persistence analyses (paper Sections 3-4): `dgpbench analysis TARGET -h`.",
            _analysis_args,
            _analysis,
        )
    }
)
