"""Permutation test for spatial structure (Sections 4.2-4.3, ~lines 340 and 373).

The NP of each trained weight matrix is compared with the NP of randomly shuffled copies
(all entries of the matrix permuted uniformly, rows and columns alike), which destroys any
spatial concentration of large weights but keeps the multiset of weights, hence the
variance. Weights are normalised over the whole network before (``|W| / max |W|``); a
permutation within a layer does not change that maximum, so the permuted layer's NP is
directly comparable.

Per (architecture, layer) a two-sample Kolmogorov-Smirnov test compares the NP values
without permutation (one per model) with the NP values after permutation. Choice (the paper
does not say which permuted values enter the test): by default each model contributes the
mean NP over its permutations (``sample="mean"``: two samples of equal size, one value per
model in each), so the test is not inflated by treating the permutations of one model as
independent models; ``sample="all"`` uses every permuted value instead.

Also here: its figures :func:`plot_permutation_linear`, :func:`plot_permutation_dnn`; its
command-line target ``dgpbench analysis permutation`` is in
:mod:`dgpbench.cli.analysis_permutation`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numba
import numpy as np
import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from dgpbench._validation import check_int
from dgpbench.analysis.common import (
    new_figure,
    ordered_values,
    quiet_seaborn,
    require_columns,
)
from dgpbench.analysis.persistence import batch_neural_persistence
from dgpbench.analysis.weights import load_weights, normalised_weights, tidy_run_columns
from dgpbench.io import save_figure
from dgpbench.labels import dataset_label

__all__ = [
    "ARCHITECTURE_COLUMNS",
    "ks_rejection_summary",
    "permutation_ks_tests",
    "permutation_np",
    "permutation_study",
    "plot_permutation_dnn",
    "plot_permutation_linear",
    "shuffled_copies",
]

ARCHITECTURE_COLUMNS = ("dataset", "activation", "n_layers", "hidden")
# Entries per batch of shuffled copies (the copies and their uniforms: 2 x 8 B each).
_SHUFFLE_ELEMENTS = 5_000_000


@numba.njit(cache=True)
def _shuffled_copies(flat: np.ndarray, u: np.ndarray, out: np.ndarray) -> None:
    """Fisher-Yates: ``out[b]`` = ``flat`` shuffled with the uniforms ``u[b]`` in [0, 1).

    Position i swaps with ``j = floor(u[b, i] * (i + 1))``; with exact uniforms every
    permutation is equally likely. 5-6x faster than ``Generator.permuted`` on a batch, and
    the randomness still comes from the caller's numpy Generator.
    """  # pragma: no cover - compiled; uniformity is tested
    n = flat.size
    for b in range(out.shape[0]):
        row = out[b]
        for i in range(n):
            row[i] = flat[i]
        for i in range(n - 1, 0, -1):
            j = int(u[b, i] * (i + 1))
            tmp = row[i]
            row[i] = row[j]
            row[j] = tmp


def shuffled_copies(flat: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` independent uniformly random permutations of the 1-D array ``flat``."""
    flat = np.ascontiguousarray(flat)
    out = np.empty((count, flat.size), dtype=flat.dtype)
    _shuffled_copies(flat, rng.random((count, flat.size)), out)
    return out


def permutation_np(
    weights: Sequence[np.ndarray],
    n_permutations: int,
    rng: np.random.Generator,
    *,
    p: float = 2.0,
) -> pd.DataFrame:
    """NP of every layer and of ``n_permutations`` shuffled copies of it.

    Parameters
    ----------
    weights : sequence of array-like
        Raw weight matrices of one network, ``(n_in, n_out)`` each, forward order.
    n_permutations : int
        Number of shuffled copies per layer, >= 1.
    rng : numpy.random.Generator
        Source of the permutations.
    p : float, default=2
        Persistence exponent.

    Returns
    -------
    pandas.DataFrame
        One row per (layer, permutation): ``layer`` (0-based), ``n_rows, n_cols,
        permutation, np, np_permuted, delta`` with ``delta = np_permuted - np`` (the paper's
        "NP Δ").
    """
    from dgpbench.topology import neural_persistence

    n_permutations = check_int(n_permutations, "n_permutations")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    frames = []
    for layer, W in enumerate(normalised_weights(weights)):
        original = float(neural_persistence(W, p=p, normalize=True))
        flat = W.ravel()
        per_batch = max(1, _SHUFFLE_ELEMENTS // flat.size)
        permuted = []
        for start in range(0, n_permutations, per_batch):
            b = min(per_batch, n_permutations - start)
            batch = shuffled_copies(flat, b, rng)
            permuted.append(batch_neural_persistence(batch.reshape(b, *W.shape), p))
        permuted = np.concatenate(permuted)
        frames.append(
            pd.DataFrame(
                {
                    "layer": layer,
                    "n_rows": W.shape[0],
                    "n_cols": W.shape[1],
                    "permutation": np.arange(n_permutations),
                    "np": original,
                    "np_permuted": permuted,
                    "delta": permuted - original,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def permutation_study(
    checkpoints: Sequence[str | os.PathLike[str]],
    *,
    n_permutations: int = 100,
    seed: int = 0,
    p: float = 2.0,
    progress: bool = True,
) -> pd.DataFrame:
    """:func:`permutation_np` for many trained models (target 1).

    Parameters
    ----------
    checkpoints : sequence of path-like
        Final checkpoints (e.g. ``epoch_40.00.pt``) of the models to analyse.
    n_permutations : int, default=100
        Shuffled copies per layer and model.
    seed : int, default=0
        Seeds the permutations (model i uses the i-th child of ``SeedSequence(seed)``,
        so adding models does not change the permutations of the others).
    p : float, default=2
    progress : bool, default=True
        Show a progress bar on a TTY.

    Returns
    -------
    pandas.DataFrame
        :func:`permutation_np` rows with the run columns of
        :func:`dgpbench.analysis.weights.run_info` (``dataset, n_layers, hidden,
        activation, seed, ...``) and ``model`` (index into ``checkpoints``).
    """
    children = np.random.SeedSequence(seed).spawn(len(checkpoints))
    frames = []
    for i, path in enumerate(
        tqdm(checkpoints, desc="permutation", disable=None if progress else True)
    ):
        weights, info = load_weights(path)
        frame = permutation_np(weights, n_permutations, np.random.default_rng(children[i]), p=p)
        for key, value in reversed(list({"model": i, **info}.items())):
            frame.insert(0, key, value)
        frames.append(frame)
    if not frames:
        raise ValueError("checkpoints must not be empty")
    return tidy_run_columns(pd.concat(frames, ignore_index=True))


def permutation_ks_tests(
    perm: pd.DataFrame,
    *,
    by: Sequence[str] = ARCHITECTURE_COLUMNS,
    sample: str = "mean",
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Two-sample KS test of NP with vs. without permutation per (architecture, layer).

    Parameters
    ----------
    perm : pandas.DataFrame
        Output of :func:`permutation_study`.
    by : sequence of str, default=("dataset", "activation", "n_layers", "hidden")
        Columns defining an architecture; ``layer`` is added. Columns that are all missing
        (e.g. ``hidden`` of linear classifiers) are kept as NaN groups.
    sample : {"mean", "all"}, default="mean"
        Permuted sample: per-model mean over permutations, or every permuted value.
    alpha : float, default=0.05
        Level for the ``reject`` column.

    Returns
    -------
    pandas.DataFrame
        One row per group: ``*by, layer, is_first_layer, is_last_layer, n_models,
        n_permuted, statistic, pvalue, reject``.
    """
    if sample not in ("mean", "all"):
        raise ValueError(f"sample must be 'mean' or 'all', got {sample!r}")
    keys = [*by, "layer"]
    missing = [c for c in [*keys, "model", "np", "np_permuted"] if c not in perm.columns]
    if missing:
        raise ValueError(f"perm lacks columns {missing}")
    rows = []
    for key, group in perm.groupby(keys, dropna=False, sort=True):
        per_model = group.groupby("model")
        original = per_model["np"].first().to_numpy()
        permuted = (
            per_model["np_permuted"].mean().to_numpy()
            if sample == "mean"
            else group["np_permuted"].to_numpy()
        )
        with warnings.catch_warnings():
            # With ties scipy may fall back from the exact to the asymptotic p-value; it
            # says so with a RuntimeWarning per test, which is noise in a table of hundreds.
            warnings.filterwarnings("ignore", "ks_2samp: Exact calculation", RuntimeWarning)
            res = stats.ks_2samp(original, permuted)
        n_layers = group["n_layers"].iloc[0] if "n_layers" in group else np.nan
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "is_first_layer": key[-1] == 0,
                "is_last_layer": bool(key[-1] == n_layers - 1) if pd.notna(n_layers) else None,
                "n_models": original.size,
                "n_permuted": permuted.size,
                "statistic": float(res.statistic),
                "pvalue": float(res.pvalue),
                "reject": bool(res.pvalue < alpha),
            }
        )
    return pd.DataFrame(rows)


def ks_rejection_summary(ks: pd.DataFrame, *, by: str = "dataset") -> pd.DataFrame:
    """Count rejected KS tests by layer position, as reported in Sections 4.2-4.3.

    Returns
    -------
    pandas.DataFrame
        Per ``by`` value and ``layers`` in {"linear classifier", "first", "later"} (the
        single layer of linear classifiers; the input layer of DNNs; their other layers):
        ``n_tests, n_rejected``.
    """
    missing = [c for c in (by, "is_first_layer", "n_layers", "reject") if c not in ks.columns]
    if missing:
        raise ValueError(f"ks lacks columns {missing}")
    layers = np.where(
        ks["n_layers"] == 1, "linear classifier", np.where(ks["is_first_layer"], "first", "later")
    )
    return (
        ks.assign(layers=layers)
        .groupby([by, "layers"], dropna=False)["reject"]
        .agg(n_tests="size", n_rejected="sum")
        .reset_index()
    )


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


@quiet_seaborn
def plot_permutation_linear(perm: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """NP Δ (permuted - original) of linear classifiers per data set (fig:np:linear:spatial).

    Parameters
    ----------
    perm : pandas.DataFrame
        :func:`dgpbench.analysis.permutation.permutation_study` rows; only ``n_layers == 1``
        are drawn.
    stem : path-like
        Output path without suffix.
    """
    import seaborn as sns

    require_columns(perm, ["dataset", "n_layers", "delta", "model"], "perm")
    linear = perm[perm["n_layers"] == 1].assign(Dataset=lambda d: d["dataset"].map(dataset_label))
    require_columns(linear, ["delta"], "perm (linear classifiers)")
    fig, axes = new_figure(1, 1, width=4.2, height=3.2)
    ax = axes[0, 0]
    order = [dataset_label(d) for d in ordered_values(linear["dataset"])]
    sns.boxplot(
        data=linear, x="Dataset", y="delta", order=order, ax=ax, color="#9ecae1", showfliers=False
    )
    per_model = linear.groupby(["Dataset", "model"], as_index=False)["delta"].mean()
    sns.stripplot(
        data=per_model,
        x="Dataset",
        y="delta",
        order=order,
        ax=ax,
        color="#08519c",
        size=3,
        label="per-model mean",
    )
    ax.axhline(0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("data set")
    ax.set_ylabel("NP Δ (permuted \u2212 original)")
    ax.set_title("Linear classifiers: permuted weights")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles[:1], labels[:1], loc="best", fontsize="small")
    return save_figure(fig, stem)


@quiet_seaborn
def plot_permutation_dnn(perm: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """NP Δ of DNN layers by data set and layer index (fig:np:dnn:permute).

    Columns: data sets; x: layer index (1 = connected to the inputs); hue: number of layers.
    """
    import seaborn as sns

    require_columns(perm, ["dataset", "n_layers", "layer", "delta"], "perm")
    deep = perm[perm["n_layers"] > 1].assign(
        **{"layer index": lambda d: d["layer"] + 1, "layers": lambda d: d["n_layers"].astype(int)}
    )
    require_columns(deep, ["delta"], "perm (DNNs)")
    datasets = ordered_values(deep["dataset"])
    fig, axes = new_figure(1, len(datasets), width=3.6, height=3.2, sharey=True)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = deep[deep["dataset"] == dataset]
        sns.boxplot(
            data=sub,
            x="layer index",
            y="delta",
            hue="layers",
            ax=ax,
            showfliers=False,
            palette="crest",
        )
        ax.axhline(0, color="grey", lw=0.8, ls="--")
        ax.set_title(dataset_label(dataset))
        ax.set_xlabel("layer index")
        ax.set_ylabel("NP Δ (permuted \u2212 original)")
        if ax.get_legend() is not None:
            ax.get_legend().set_title("number of layers")
    return save_figure(fig, stem)
