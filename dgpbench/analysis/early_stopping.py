"""Early stopping on weight-based criteria (Appendix G.2, ~line 1485).

The stopping rule is Algorithm 2 of Rieck et al. (2019), which the paper applies to
neural persistence (NP), the variance of the normalised weights, deep graph persistence
(DGP) and the validation accuracy, evaluated every quarter epoch, with burn-in 0-25 epochs
and patience 1-10, over at most 40 epochs.

The rule, exactly as implemented here (one compiled pass per run and burn-in serves every
patience; :func:`stop_evaluation` is one cell of it, and the tests check it against a
plain-Python transcription of the rule):

1. Evaluations happen at epochs ``e_1 < e_2 < ...`` (quarter epochs: 0.25, 0.5, ...).
   Evaluations with ``e_k <= burn_in`` are skipped entirely: during the burn-in the callback
   neither tracks the best value nor counts patience.
2. The first evaluation after the burn-in sets the best value ``P`` (Algorithm 2 starts from
   ``P = 0``, which every positive NP value beats; starting from the first value makes the
   rule symmetric for criteria that should decrease).
3. An evaluation *improves* if its value beats ``P`` by more than ``min_delta`` (default 0,
   so any strict improvement counts): ``v > P + min_delta`` for criteria that should
   increase (NP, DGP, validation accuracy) and ``v < P - min_delta`` for criteria that should
   decrease (variance of weights, validation loss). On improvement ``P = v`` and the patience
   counter ``G`` is reset to 0; otherwise ``G += 1``. Ties are "no improvement".
4. Training stops at the first evaluation where ``G >= patience``; patience counts
   *evaluations* (quarter epochs), as the callback of Algorithm 2 increments ``G`` once per
   call. If the rule never fires, training runs to the last evaluation (epoch 40).
5. The test accuracy "at the point of stopping" is that of the checkpoint at the stopping
   evaluation (no rollback to the best checkpoint).

Also here: its figure :func:`plot_early_stopping_heatmaps`; its command-line target ``dgpbench
analysis early-stopping`` is in :mod:`dgpbench.cli.analysis_early_stopping`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from dgpbench._validation import as_float_array, check_int
from dgpbench.analysis.common import (
    new_figure,
    quiet_seaborn,
    require_columns,
    short_number,
)
from dgpbench.io import save_figure

__all__ = [
    "CRITERIA",
    "DGP_TABLE_PAIRS",
    "NP_TABLE_PAIRS",
    "early_stopping_differences",
    "early_stopping_grid",
    "plot_early_stopping_heatmaps",
    "stop_evaluation",
]

# criterion column -> direction in which it should move while the model improves
CRITERIA: dict[str, str] = {
    "np": "max",
    "variance": "min",
    "dgp": "max",
    "val_accuracy": "max",
    "val_loss": "min",
}
CRITERION_LABELS = {
    "np": "NP",
    "variance": "var",
    "dgp": "DGP",
    "val_accuracy": "val",
    "val_loss": "val",
}
# Rows of the paper's two tables (tab:np:earlystopping, tab:appendix:onp:earlystopping).
NP_TABLE_PAIRS = (("np", "val_accuracy"), ("np", "variance"), ("variance", "val_accuracy"))
DGP_TABLE_PAIRS = (("dgp", "val_accuracy"), ("dgp", "variance"), ("dgp", "np"))


def _check_mode(mode: str) -> str:
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' (should increase) or 'min', got {mode!r}")
    return mode


def stop_evaluation(
    values,
    epochs,
    *,
    mode: str,
    patience: int,
    burn_in: float,
    min_delta: float = 0.0,
) -> int:
    """Index of the evaluation at which Algorithm 2 stops training.

    Parameters
    ----------
    values : array-like of shape (K,)
        Criterion value at each evaluation.
    epochs : array-like of shape (K,)
        Epoch of each evaluation, strictly increasing (e.g. ``0.25, 0.5, ..., 40``).
    mode : {"max", "min"}
        Whether the criterion should increase (NP, DGP, accuracy) or decrease (variance,
        loss) while the model improves.
    patience : int
        Number of consecutive non-improving evaluations that triggers the stop, >= 1.
    burn_in : float
        Evaluations at epochs ``<= burn_in`` are ignored.
    min_delta : float, default=0.0
        Margin an evaluation must beat the best value by to count as an improvement.

    Returns
    -------
    int
        Index into ``values`` of the stopping evaluation; the last index if the rule never
        fires (training runs to the end).

    Raises
    ------
    ValueError
        On mismatched lengths, non-increasing epochs, ``patience < 1`` or an unknown mode.

    Examples
    --------
    >>> epochs = np.arange(1, 9) / 4
    >>> stop_evaluation([1, 2, 3, 3, 2, 4, 5, 6], epochs, mode="max", patience=2, burn_in=0)
    4
    """
    values, epochs = _check_curve(values, epochs)
    signed = values * (1.0 if _check_mode(mode) == "max" else -1.0)
    burn_ins = as_float_array([burn_in], "burn_in", ndim=1, dtype=np.float64)
    patiences = np.array([check_int(patience, "patience")], dtype=np.int64)
    return int(_stop_grid(signed, epochs, burn_ins, patiences, float(min_delta))[0, 0])


def _check_curve(values, epochs) -> tuple[np.ndarray, np.ndarray]:
    values = as_float_array(values, "values", ndim=1, dtype=np.float64)
    epochs = as_float_array(epochs, "epochs", ndim=1, dtype=np.float64)
    if values.shape != epochs.shape:
        raise ValueError(
            f"values and epochs must have the same length, got {values.size} and {epochs.size}"
        )
    if np.any(np.diff(epochs) <= 0):
        raise ValueError("epochs must be strictly increasing")
    return values, epochs


@numba.njit(cache=True)
def _stop_grid(
    signed: np.ndarray,
    epochs: np.ndarray,
    burn_ins: np.ndarray,
    patiences: np.ndarray,
    min_delta: float,
) -> np.ndarray:  # pragma: no cover - compiled; checked against the tests' reference
    """Stop indices for every (burn-in, patience): one pass per burn-in."""
    n = signed.size
    out = np.empty((burn_ins.size, patiences.size), dtype=np.int64)
    for i in range(burn_ins.size):
        for j in range(patiences.size):
            out[i, j] = n - 1
        best = 0.0
        started = False
        counter = 0
        remaining = patiences.size
        done = np.zeros(patiences.size, dtype=np.bool_)
        for k in range(n):
            if epochs[k] <= burn_ins[i]:
                continue
            if not started or signed[k] > best + min_delta:
                best = signed[k]
                started = True
                counter = 0
            else:
                counter += 1
            for j in range(patiences.size):
                if not done[j] and counter >= patiences[j]:
                    out[i, j] = k
                    done[j] = True
                    remaining -= 1
            if remaining == 0:
                break
    return out


def early_stopping_grid(
    curves: pd.DataFrame,
    *,
    criteria: Mapping[str, str] | None = None,
    burn_ins: Iterable[float] = range(26),
    patiences: Iterable[int] = range(1, 11),
    run_columns: Sequence[str] = ("run",),
    epoch_column: str = "epoch",
    accuracy_column: str = "test_accuracy",
    min_delta: float = 0.0,
    keep_columns: Sequence[str] = ("dataset", "n_layers", "hidden", "activation", "seed"),
) -> pd.DataFrame:
    """Stopping epoch and test accuracy for every run, criterion, burn-in and patience.

    Parameters
    ----------
    curves : pandas.DataFrame
        One row per (run, evaluation): the ``run_columns`` identifying the training run,
        ``epoch_column``, one column per criterion and ``accuracy_column`` (test accuracy of
        that checkpoint, in [0, 1]). See :func:`dgpbench.analysis.curves.criterion_curves`.
    criteria : mapping of str to {"max", "min"}, optional
        Criterion columns and their directions. Default: those of :data:`CRITERIA` present
        in ``curves``.
    burn_ins : iterable of float, default=0..25
        Burn-in lengths in epochs.
    patiences : iterable of int, default=1..10
        Patience values in evaluations.
    run_columns : sequence of str, default=("run",)
        Columns identifying one training run (add e.g. ``dataset``, ``seed``).
    epoch_column, accuracy_column : str
        Column names.
    min_delta : float, default=0.0
        Improvement margin (see the module docstring).
    keep_columns : sequence of str
        Columns constant within a run (e.g. ``dataset``, which
        :func:`early_stopping_differences` groups by) copied to the output when present.

    Returns
    -------
    pandas.DataFrame
        Columns ``*run_columns, *keep_columns, criterion, burn_in, patience, stop_epoch,
        test_accuracy``.

    Raises
    ------
    ValueError
        On missing columns, NaN criterion values, or bad burn-ins/patiences.
    """
    run_columns = list(run_columns)
    if criteria is None:
        criteria = {c: m for c, m in CRITERIA.items() if c in curves.columns}
    if not criteria:
        raise ValueError(f"curves has none of the criterion columns {list(CRITERIA)}")
    for mode in criteria.values():
        _check_mode(mode)
    needed = [*run_columns, epoch_column, accuracy_column, *criteria]
    missing = [c for c in needed if c not in curves.columns]
    if missing:
        raise ValueError(f"curves lacks columns {missing}")
    burn_arr = as_float_array(list(burn_ins), "burn_ins", ndim=1, dtype=np.float64)
    pat_arr = np.array([check_int(p, "patience") for p in patiences], dtype=np.int64)
    if pat_arr.size == 0:
        raise ValueError("patiences must not be empty")
    keep = [c for c in keep_columns if c in curves.columns and c not in run_columns]
    leading = run_columns + keep

    frames = []
    for key, run in curves.groupby(run_columns, sort=True, observed=True):
        run = run.sort_values(epoch_column)
        epochs = run[epoch_column].to_numpy(np.float64)
        _check_curve(epochs, epochs)
        accuracy = run[accuracy_column].to_numpy(np.float64)
        key = key if isinstance(key, tuple) else (key,)
        constants = [*key, *(run[c].iloc[0] for c in keep)]
        for criterion, mode in criteria.items():
            values = as_float_array(run[criterion].to_numpy(), criterion, ndim=1)
            signed = values.astype(np.float64) * (1.0 if mode == "max" else -1.0)
            idx = _stop_grid(signed, epochs, burn_arr, pat_arr, float(min_delta))
            frame = pd.DataFrame(
                {
                    "criterion": criterion,
                    "burn_in": np.repeat(burn_arr, pat_arr.size),
                    "patience": np.tile(pat_arr, burn_arr.size),
                    "stop_epoch": epochs[idx.ravel()],
                    "test_accuracy": accuracy[idx.ravel()],
                }
            )
            for position, (col, value) in enumerate(zip(leading, constants, strict=True)):
                frame.insert(position, col, value)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def early_stopping_differences(
    grid: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] = NP_TABLE_PAIRS,
    *,
    by: str = "dataset",
    run_columns: Sequence[str] = ("run",),
) -> pd.DataFrame:
    """The paper's early-stopping table: mean differences between two criteria.

    For each pair ``(a, b)``: ``Δ_epoch(a, b)`` is the mean of ``stop_epoch[a] -
    stop_epoch[b]`` and ``Δ_accuracy(a, b)`` the mean of ``test_accuracy[a] -
    test_accuracy[b]`` in percentage points, over runs, burn-ins and patiences (paired by run,
    burn-in and patience). Positive means the first criterion's value is higher.

    Parameters
    ----------
    grid : pandas.DataFrame
        Output of :func:`early_stopping_grid` (must contain ``by`` and ``run_columns``).
    pairs : sequence of (str, str), default=NP_TABLE_PAIRS
        Criterion pairs; :data:`NP_TABLE_PAIRS` gives tab:np:earlystopping and
        :data:`DGP_TABLE_PAIRS` tab:appendix:onp:earlystopping.
    by : str, default="dataset"
        Column whose values become the table's columns.
    run_columns : sequence of str, default=("run",)
        Columns identifying a run (``by`` is added if missing).

    Returns
    -------
    pandas.DataFrame
        Index: ``Δ_epoch(NP, val)``, ..., then ``Δ_accuracy(NP, val)``, ...; columns: the
        values of ``by``.
    """
    keys = list(dict.fromkeys([by, *run_columns, "burn_in", "patience"]))
    missing = [c for c in [*keys, "criterion", "stop_epoch", "test_accuracy"] if c not in grid]
    if missing:
        raise ValueError(f"grid lacks columns {missing}")
    wide = grid.pivot_table(
        index=keys, columns="criterion", values=["stop_epoch", "test_accuracy"], observed=True
    )
    rows: dict[str, pd.Series] = {}
    for quantity, label, scale in (
        ("stop_epoch", "Δ_epoch", 1.0),
        ("test_accuracy", "Δ_accuracy", 100.0),
    ):
        for a, b in pairs:
            for c in (a, b):
                if c not in grid["criterion"].unique():
                    raise ValueError(f"criterion {c!r} not in grid")
            diff = scale * (wide[(quantity, a)] - wide[(quantity, b)])
            name = f"{label}({CRITERION_LABELS.get(a, a)}, {CRITERION_LABELS.get(b, b)})"
            rows[name] = diff.groupby(level=by, observed=True).mean()
    return pd.DataFrame(rows).T.rename_axis(index="difference", columns=by)


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------


@quiet_seaborn
def plot_early_stopping_heatmaps(
    grid: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    pairs: Sequence[tuple[str, str]] = NP_TABLE_PAIRS,
    run_columns: Sequence[str] = ("run",),
) -> list[Path]:
    """Mean differences over (burn-in, patience), Rieck et al.'s Figure 4 style.

    Top row: Δ epochs, bottom row: Δ test accuracy (percentage points), one column per
    criterion pair (fig:appendix:np:earlystopping:heatmap).
    """
    import seaborn as sns

    require_columns(
        grid,
        [*run_columns, "criterion", "burn_in", "patience", "stop_epoch", "test_accuracy"],
        "grid",
    )
    keys = list(dict.fromkeys([*run_columns, "burn_in", "patience"]))
    wide = grid.pivot_table(index=keys, columns="criterion", values=["stop_epoch", "test_accuracy"])
    fig, axes = new_figure(2, len(pairs), width=3.6, height=3.0)
    for j, (a, b) in enumerate(pairs):
        for i, (quantity, scale, name) in enumerate(
            (("stop_epoch", 1.0, "Δ epochs"), ("test_accuracy", 100.0, "Δ test accuracy (pp)"))
        ):
            diff = (scale * (wide[(quantity, a)] - wide[(quantity, b)])).rename("diff")
            table = diff.groupby(level=["burn_in", "patience"]).mean().unstack("patience")
            table.index = [short_number(v) for v in table.index]
            table.columns = [short_number(v) for v in table.columns]
            ax = axes[i, j]
            lim = float(np.nanmax(np.abs(table.to_numpy()))) or 1.0
            sns.heatmap(
                table, ax=ax, cmap="vlag", center=0, vmin=-lim, vmax=lim, cbar_kws={"label": name}
            )
            ax.invert_yaxis()
            la, lb = CRITERION_LABELS.get(a, a), CRITERION_LABELS.get(b, b)
            ax.set_title(f"{name}: {la} \u2212 {lb}", fontsize="small")
            ax.set_xlabel("patience (evaluations)")
            ax.set_ylabel("burn-in (epochs)")
    return save_figure(fig, stem)
