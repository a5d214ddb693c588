"""All seeds of one analysis architecture trained as one stacked model, with their curves.

``dgpbench analysis train`` trains one analysis MLP and records its curves (NP, variance,
DGP, validation and test accuracy at every quarter epoch, :mod:`dgpbench.analysis.curves`).
:func:`train_analysis_seeds` (target ``dgpbench analysis train-seeds``) trains every seed of
one architecture at once with :func:`dgpbench.models.stacked.train_mlp_seeds` and writes, per
seed, the same files: ``model.pt``, ``metrics.csv``, ``split.npz`` and ``curves.csv``.

At every evaluation, :class:`StackedCurveRecorder` computes the criteria of all seeds
together: NP and DGP through one call of the compiled kernel of
:func:`dgpbench.topology.stacked.stacked_persistence`, the variance vectorised over the
stack, the test accuracy with batched forward passes (256 images for all seeds at a time on
the CPU, activations in place). A stacked seed's curves equal its
single run's to float tolerance (the training itself does; see :mod:`dgpbench.models.stacked`).

Batch-norm and dropout models (the regulariser comparison, ``--batchnorm`` / ``--dropout``)
stack too: each seed has its own batch statistics and its own dropout masks, drawn as its
single run draws them (see :mod:`dgpbench.models.stacked`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from dgpbench.analysis.curves import (
    _test_tensors,
)
from dgpbench.analysis.weights import run_info, tidy_run_columns
from dgpbench.io import write_csv

log = logging.getLogger(__name__)

__all__ = ["StackedCurveRecorder", "stacked_criteria", "train_analysis_seeds"]

_TEST_CHUNK = 4096  # test images per argmax (the forward passes take _FORWARD_CHUNK images)


def stacked_criteria(weights: Sequence[Any], *, p: float = 2.0, dgp: bool = True) -> dict:
    """NP, variance, log-variance and DGP of ``S`` stacked networks (one kernel call).

    Parameters
    ----------
    weights : sequence of array-like
        Per linear map, ``(S, n_in, n_out)`` signed weights (graph orientation).
    p : float, default=2
    dgp : bool, default=True

    Returns
    -------
    dict of numpy.ndarray of shape (S,)
        ``np, variance, log_variance`` and, with ``dgp``, ``dgp``: per network what
        :func:`dgpbench.analysis.weights.model_metrics` (``layers=False``) returns.
    """
    from dgpbench.topology.stacked import stacked_persistence

    mats = [np.asarray(w) for w in weights]
    out = stacked_persistence(mats, p=p, dgp=dgp)
    n_nets = mats[0].shape[0]
    # variance of the network-normalised weights pooled over layers (weight_variance)
    absw = [np.abs(w).reshape(n_nets, -1) for w in mats]
    top = np.max([a.max(axis=1) for a in absw], axis=0).astype(absw[0].dtype)[:, None]
    norm = [a / top for a in absw]
    total = sum(a.shape[1] for a in norm)
    mean = sum(a.sum(axis=1, dtype=np.float64) for a in norm) / total
    variance = sum(np.square(a.astype(np.float64) - mean[:, None]).sum(axis=1) for a in norm)
    variance = variance / total
    with np.errstate(divide="ignore"):
        log_variance = np.where(variance > 0, np.log(np.maximum(variance, 1e-300)), -math.inf)
    result = {"np": out["np"], "variance": variance, "log_variance": log_variance}
    if dgp:
        result["dgp"] = out["dgp"]
    return result


def _stacked_accuracy(model: Any, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Test accuracy of every stacked model (the same images for all)."""
    from dgpbench.models.stacked import stacked_logits

    correct = torch.zeros(model.n_models, dtype=torch.int64, device=x.device)
    buffer = None  # the logits of one chunk, reused
    with torch.inference_mode():
        for start in range(0, len(x), _TEST_CHUNK):
            xc = x[start : start + _TEST_CHUNK]
            if buffer is not None and buffer.shape[1] != len(xc):  # the last, shorter chunk
                buffer = None
            logits = buffer = stacked_logits(model, xc, out=buffer)
            correct += (logits.argmax(-1) == y[start : start + _TEST_CHUNK]).sum(1)
    return correct.cpu().numpy() / len(x)


class StackedCurveRecorder:
    """``train_mlp_seeds`` callback: :class:`~dgpbench.analysis.curves.CurveRecorder`'s rows
    for every seed, computed together.

    Parameters
    ----------
    infos : sequence of dict
        Per seed, the constant columns of its rows (``run`` and ``run_info`` of the run).
    x_test, y_test : array-like, optional
        Test images and labels for ``test_accuracy`` (NaN without them).
    p : float, default=2
    dgp : bool, default=True
    skip_initial : bool, default=True
        Record nothing at epoch 0 (the curves leave the initialisation out).
    """

    def __init__(
        self,
        infos: Sequence[dict[str, Any]],
        x_test: Any = None,
        y_test: Any = None,
        *,
        p: float = 2.0,
        dgp: bool = True,
        skip_initial: bool = True,
    ):
        self.infos = [dict(i) for i in infos]
        self.x_test, self.y_test = (None, None) if x_test is None else _test_tensors(x_test, y_test)
        self.p = p
        self.dgp = dgp
        self.skip_initial = skip_initial
        self.rows: list[list[dict[str, Any]]] = [[] for _ in self.infos]

    def __call__(self, epoch: float, model: Any, rows: Sequence[dict[str, Any]]) -> None:
        """Record every seed's values at ``epoch`` beside its training row in ``rows``."""
        if self.skip_initial and epoch == 0:
            return
        if model.n_models != len(self.infos) or len(rows) != len(self.infos):
            raise ValueError(f"{model.n_models} stacked models for {len(self.infos)} infos")
        weights = [w.detach().cpu().numpy() for w in model.weights]
        values = stacked_criteria(weights, p=self.p, dgp=self.dgp)
        if self.x_test is not None:
            dev = model.weights[0].device
            if self.x_test.device != dev:  # moved once, not at every evaluation
                self.x_test, self.y_test = self.x_test.to(dev), self.y_test.to(dev)
            acc = _stacked_accuracy(model, self.x_test, self.y_test)
        else:
            acc = np.full(len(self.infos), np.nan)
        for k, info in enumerate(self.infos):
            self.rows[k].append(
                {
                    **info,
                    "epoch": float(epoch),
                    **{name: float(v[k]) for name, v in values.items()},
                    "test_accuracy": float(acc[k]),
                    "val_accuracy": float(rows[k].get("val_acc", np.nan)),
                    "val_loss": float(rows[k].get("val_loss", np.nan)),
                }
            )

    def frame(self, k: int) -> pd.DataFrame:
        """The rows of seed ``k`` (one per evaluation)."""
        return pd.DataFrame(self.rows[k])


def train_analysis_seeds(
    x_train: Any,
    y_train: Any,
    arch: Any,
    config: Any,
    seeds: Sequence[int],
    out_dirs: Sequence[str | os.PathLike[str]],
    *,
    dataset: str,
    x_test: Any = None,
    y_test: Any = None,
    runs: Sequence[str] | None = None,
    curves: bool = True,
    device: Any = "cpu",
) -> list[Path]:
    """Train the seeds of one analysis architecture together; write each seed's files.

    Parameters
    ----------
    x_train, y_train : array-like
        The training split (``config.val_fraction`` of it is held out for validation).
    arch : dgpbench.models.architectures.ArchConfig
        The architecture (batch norm and dropout included).
    config : dgpbench.models.train.TrainConfig
        E.g. :func:`dgpbench.models.train.analysis_config`; its ``seed`` is each of ``seeds``.
    seeds : sequence of int
        Distinct model seeds.
    out_dirs : sequence of path-like
        One folder per seed: ``model.pt``, ``metrics.csv``, ``split.npz`` and, with
        ``curves``, ``curves.csv`` (what ``dgpbench analysis train --curves`` writes).
    dataset : str
        Data set name, stored in the checkpoints and the curves.
    x_test, y_test : array-like, optional
        Test split for ``test_accuracy`` (NaN without it).
    runs : sequence of str, optional
        The ``run`` column of each seed's curves (default ``<dataset>/<folder name>``).
    curves : bool, default=True
        Record and write the curves.
    device : {"cpu", "cuda", "auto"}, default="cpu"

    Returns
    -------
    list of pathlib.Path
        Each seed's ``model.pt``.

    Raises
    ------
    ValueError
        On a number of run ids other than the number of folders, repeated run ids, or anything
        :func:`dgpbench.models.stacked.train_mlp_seeds` refuses.
    """
    from dgpbench.models.stacked import train_mlp_seeds

    outs = [Path(d) for d in out_dirs]
    runs_given = runs is not None
    runs = list(runs) if runs is not None else [f"{dataset}/{d.name}" for d in outs]
    if len(runs) != len(outs) or len(seeds) != len(outs):
        raise ValueError(
            f"got {len(seeds)} seeds, {len(outs)} output folders and {len(runs)} run ids; "
            "give one of each per seed"
        )
    repeated = sorted({r for r in runs if runs.count(r) > 1})
    if repeated:
        # the run id keys every per-run table downstream: two seeds under one id would merge
        raise ValueError(
            f"run ids must be distinct, got {repeated} more than once; give one id per seed"
            + ("" if runs_given else " (the default is <dataset>/<folder name>: rename a folder)")
        )
    recorder = None
    if curves:
        infos = []
        for seed, run in zip(seeds, runs, strict=True):
            meta = {
                "arch": dataclasses.asdict(arch),
                "train_config": dataclasses.asdict(dataclasses.replace(config, seed=seed)),
            }
            info = run_info({**meta, "dataset": dataset})
            info.pop("epoch")
            infos.append({"run": run, **info})
        recorder = StackedCurveRecorder(infos, x_test, y_test)
    finals = train_mlp_seeds(
        x_train,
        y_train,
        arch,
        config,
        seeds,
        outs,
        dataset=dataset,
        progress=True,  # a bar on a terminal, one log line per epoch otherwise
        device=device,
        callback=recorder,
    )
    models = []
    for k, (final, out) in enumerate(zip(finals, outs, strict=True)):
        if recorder is not None:
            write_csv(out / "curves.csv", tidy_run_columns(recorder.frame(k)), float_format="%.8g")
        os.replace(final, out / "model.pt")  # a stable name for the workflow
        models.append(out / "model.pt")
    log.info("trained %d seeds of %s", len(outs), arch)
    return models
