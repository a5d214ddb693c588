"""Weight-based criteria over training: one row per quarter-epoch evaluation.

The early-stopping analysis (Appendix G.2) and the DGP-vs-variance correlations
(Appendix G.4) need, for every evaluation of every training run, NP, the variance of the
normalised weights, DGP, the validation accuracy/loss and the test accuracy. Two ways to
get them:

* :func:`criterion_curves` reads a run folder of :func:`dgpbench.models.train.train_mlp` with
  ``keep="all"`` (``epoch_XX.XX.pt`` files and ``metrics.csv``);
* :class:`CurveRecorder` is a ``train_mlp(callback=...)`` that computes the same row while
  training, so the 161 checkpoints per run need not be stored (at the paper's scale they
  would take hundreds of GB).

Columns: the run columns of :func:`dgpbench.analysis.weights.run_info` (``dataset,
n_layers, hidden, activation, ..., seed``), ``run`` (an identifier), ``epoch, np, variance,
log_variance, dgp, val_accuracy, val_loss, test_accuracy``.

Its command-line targets ``dgpbench analysis train`` and ``dgpbench analysis curves`` are in
:mod:`dgpbench.cli.analysis_curves`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from dgpbench._validation import as_float_array
from dgpbench.analysis.weights import (
    model_metrics,
    run_info,
    tidy_run_columns,
    torch_linear_weights,
)

__all__ = ["CurveRecorder", "concat_curves", "criterion_curves", "evaluate_accuracy"]


def _test_tensors(x: Any, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate and convert a test set once (it is evaluated at every checkpoint)."""
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x, y
    xs = torch.from_numpy(as_float_array(x, "x_test", dtype=np.float32).reshape(len(x), -1))
    ys = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    if len(xs) != len(ys) or len(xs) == 0:
        raise ValueError(
            f"x_test and y_test must have the same non-zero length, got {len(xs)}, {len(ys)}"
        )
    return xs, ys


def evaluate_accuracy(model: nn.Module, x: Any, y: Any, *, chunk: int = 4096) -> float:
    """Accuracy of ``model`` (put in eval mode for the call) on images ``x`` with labels ``y``.

    Parameters
    ----------
    model : torch.nn.Module
    x : array-like of shape (N, ...)
        Images in [0, 1]; flattened here.
    y : array-like of shape (N,)
        Integer labels.
    chunk : int, default=4096
        Images per forward pass.

    Returns
    -------
    float
        In [0, 1].
    """
    xs, ys = _test_tensors(x, y)
    was_training = model.training
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(xs), chunk):
            logits = model(xs[start : start + chunk])
            correct += int((logits.argmax(1) == ys[start : start + chunk]).sum())
    model.train(was_training)
    return correct / len(xs)


def _row(model: nn.Module, p: float, x_test: Any, y_test: Any, dgp: bool) -> dict[str, float]:
    row: dict[str, float] = dict(
        model_metrics(torch_linear_weights(model), p=p, layers=False, dgp=dgp)
    )
    row["test_accuracy"] = (
        evaluate_accuracy(model, x_test, y_test) if x_test is not None else float("nan")
    )
    return row


class CurveRecorder:
    """``train_mlp`` callback collecting the criteria at every evaluation.

    Parameters
    ----------
    x_test, y_test : array-like, optional
        Test images and labels for ``test_accuracy`` (NaN without them).
    p : float, default=2
    dgp : bool, default=True
        Compute DGP as well.
    info : dict, optional
        Constant columns added to every row (e.g. ``run_info`` of the run, ``run``).

    Examples
    --------
    >>> rec = CurveRecorder(info={"run": "demo"})
    >>> # train_mlp(x, y, arch, cfg, out_dir, callback=rec); rec.frame()
    """

    def __init__(
        self,
        x_test: Any = None,
        y_test: Any = None,
        *,
        p: float = 2.0,
        dgp: bool = True,
        info: dict[str, Any] | None = None,
    ):
        self.x_test, self.y_test = (None, None) if x_test is None else _test_tensors(x_test, y_test)
        self.p = p
        self.dgp = dgp
        self.info = dict(info or {})
        self.rows: list[dict[str, Any]] = []

    def __call__(self, epoch: float, model: nn.Module, row: dict[str, Any]) -> None:
        """Record the curves' values of ``model`` at ``epoch`` beside the training ``row``."""
        values = _row(model, self.p, self.x_test, self.y_test, self.dgp)
        self.rows.append(
            {
                **self.info,
                "epoch": float(epoch),
                **values,
                "val_accuracy": float(row.get("val_acc", np.nan)),
                "val_loss": float(row.get("val_loss", np.nan)),
            }
        )

    def frame(self) -> pd.DataFrame:
        """The collected rows as a DataFrame (one row per evaluation)."""
        return pd.DataFrame(self.rows)


def criterion_curves(
    run_dir: str | os.PathLike[str],
    *,
    x_test: Any = None,
    y_test: Any = None,
    p: float = 2.0,
    dgp: bool = True,
    include_initial: bool = False,
    run: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Criteria at every checkpoint of one training run folder.

    Parameters
    ----------
    run_dir : path-like
        Output folder of :func:`dgpbench.models.train.train_mlp` with ``keep="all"``.
    x_test, y_test : array-like, optional
        Test set for ``test_accuracy`` (NaN without it).
    p : float, default=2
    dgp : bool, default=True
        Compute DGP as well.
    include_initial : bool, default=False
        Keep the epoch-0 checkpoint (the untrained initialisation).
    run : str, optional
        Value of the ``run`` column (default: ``run_dir``).
    progress : bool, default=True

    Returns
    -------
    pandas.DataFrame
        One row per checkpoint, sorted by epoch (see the module docstring for columns).

    Raises
    ------
    FileNotFoundError
        If ``run_dir`` has no checkpoint.
    """
    from dgpbench.models.checkpoints import list_checkpoints, load_checkpoint

    run_dir = Path(run_dir)
    if x_test is not None:
        x_test, y_test = _test_tensors(x_test, y_test)
    found = [(e, path) for e, path in list_checkpoints(run_dir) if include_initial or e > 0]
    if not found:
        raise FileNotFoundError(f"no epoch_*.pt checkpoints in {run_dir}")
    metrics = None
    if (run_dir / "metrics.csv").is_file():
        metrics = pd.read_csv(run_dir / "metrics.csv")
        metrics = metrics.set_index(metrics["epoch"].round(6))
    rows = []
    for epoch, path in tqdm(
        found, desc=f"curves {run_dir.name}", disable=None if progress else True
    ):
        model, meta = load_checkpoint(path)
        row = {**run_info(meta), "run": run or str(run_dir), "epoch": float(epoch)}
        row.update(_row(model, p, x_test, y_test, dgp))
        key = round(float(epoch), 6)
        if metrics is not None and key in metrics.index:
            row["val_accuracy"] = float(metrics.at[key, "val_acc"])
            row["val_loss"] = float(metrics.at[key, "val_loss"])
        else:
            stored = meta.get("metrics") or {}
            row["val_accuracy"] = float(stored.get("val_acc", np.nan))
            row["val_loss"] = float(stored.get("val_loss", np.nan))
        rows.append(row)
    return tidy_run_columns(pd.DataFrame(rows).sort_values("epoch", ignore_index=True))


def concat_curves(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Stack the curves of several runs (checks that ``run`` identifiers are distinct)."""
    if not frames:
        raise ValueError("frames must not be empty")
    runs = [set(f["run"].unique()) for f in frames if "run" in f]
    if len(runs) == len(frames) and len(set().union(*runs)) != sum(len(r) for r in runs):
        raise ValueError("two frames share a run identifier; set run= to tell them apart")
    return pd.concat(frames, ignore_index=True)
