"""Weights of trained MLPs and the per-model quantities every analysis shares.

Conventions (paper Section 3, ~line 161):

* a network's weight matrices are taken in ``(n_in, n_out)`` orientation (rows = input
  nodes), i.e. the transpose of ``torch.nn.Linear.weight``; biases and batch-norm
  parameters are not part of the graph;
* *normalised weights* are ``|W| / max |W|`` with the maximum over the whole network;
* NP of a network is the mean over layers of the normalised NP (p = 2) of each layer's
  normalised weights; the *variance of weights* is the variance (``ddof=0``) of all
  normalised weights of the network pooled together (the authors' ``get_variance``);
* DGP is :func:`dgpbench.topology.deep_graph_persistence` with per-layer standardisation.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from dgpbench._validation import as_float_array

__all__ = [
    "RUN_COLUMNS",
    "load_weights",
    "model_metrics",
    "normalised_weights",
    "regulariser_label",
    "run_info",
    "tidy_run_columns",
    "torch_linear_weights",
    "weight_variance",
]

RUN_COLUMNS = ("dataset", "n_layers", "hidden", "activation", "regulariser", "seed")


def torch_linear_weights(model: nn.Module) -> list[np.ndarray]:
    """The weight matrices of every ``nn.Linear`` in ``model``, as ``(n_in, n_out)`` arrays.

    Parameters
    ----------
    model : torch.nn.Module
        E.g. the ``nn.Sequential`` of :func:`dgpbench.models.architectures.build_mlp`.

    Returns
    -------
    list of numpy.ndarray (float32)
        In forward order (module registration order).

    Raises
    ------
    ValueError
        If ``model`` has no linear layer.
    """
    layers = [
        m.weight.detach().cpu().numpy().T.copy()
        for m in model.modules()
        if isinstance(m, nn.Linear)
    ]
    if not layers:
        raise ValueError(f"model has no nn.Linear layer: {type(model).__name__}")
    return layers


def regulariser_label(batchnorm: bool, dropout: float) -> str:
    """``"batchnorm"``, ``"dropout"``, ``"batchnorm+dropout"`` or ``"none"``."""
    parts = [name for name, on in (("batchnorm", batchnorm), ("dropout", dropout > 0)) if on]
    return "+".join(parts) or "none"


def run_info(meta: dict[str, Any]) -> dict[str, Any]:
    """Flatten checkpoint metadata into table columns.

    Parameters
    ----------
    meta : dict
        As returned by :func:`dgpbench.models.checkpoints.load_checkpoint`.

    Returns
    -------
    dict
        ``dataset, n_layers, hidden, activation, batchnorm, dropout, regulariser, seed,
        epoch`` (missing entries become None). ``hidden`` is None for linear classifiers.
    """
    arch = dict(meta.get("arch") or {})
    train = dict(meta.get("train_config") or {})
    n_layers = arch.get("n_layers")
    batchnorm = bool(arch.get("batchnorm", False))
    dropout = float(arch.get("dropout", 0.0) or 0.0)
    return {
        "dataset": meta.get("dataset"),
        "n_layers": n_layers,
        "hidden": arch.get("hidden") if n_layers != 1 else None,
        "activation": arch.get("activation"),
        "batchnorm": batchnorm,
        "dropout": dropout,
        "regulariser": regulariser_label(batchnorm, dropout),
        "seed": train.get("seed"),
        "epoch": meta.get("epoch"),
    }


def tidy_run_columns(frame):
    """Give the integer run columns (``n_layers, hidden, seed, layer``) a nullable integer
    dtype, so that a missing hidden size (linear classifiers) does not turn them into floats.
    """
    for col in ("n_layers", "hidden", "seed", "layer"):
        if col in frame.columns:
            frame[col] = frame[col].astype("Int64")
    return frame


def load_weights(path: str | os.PathLike[str]) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Weights (``(n_in, n_out)`` each) and flattened run info of one checkpoint.

    Parameters
    ----------
    path : str or path-like
        A checkpoint written by :func:`dgpbench.models.train.train_mlp`.

    Returns
    -------
    weights : list of numpy.ndarray
    info : dict
        :func:`run_info` of the checkpoint's metadata plus ``path``.
    """
    from dgpbench.models.checkpoints import load_checkpoint

    model, meta = load_checkpoint(path)
    return torch_linear_weights(model), {**run_info(meta), "path": str(Path(path))}


def _check_weights(weights: Sequence[Any]) -> list[np.ndarray]:
    if isinstance(weights, np.ndarray) and weights.ndim == 2:
        weights = [weights]
    if len(weights) == 0:
        raise ValueError("weights must contain at least one matrix")
    return [as_float_array(w, f"weights[{i}]", ndim=2) for i, w in enumerate(weights)]


def normalised_weights(weights: Sequence[Any]) -> list[np.ndarray]:
    """``|W_l| / max_l max |W_l|`` for every layer (the normalisation of NP).

    Raises
    ------
    ValueError
        If every weight is zero (the normalisation is undefined).
    """
    mats = [np.abs(w) for w in _check_weights(weights)]
    top = max(float(w.max()) for w in mats)
    if top <= 0:
        raise ValueError("all weights are zero: normalised weights are undefined")
    return [w / top for w in mats]


def weight_variance(weights: Sequence[Any], *, normalised: bool = False) -> float:
    """Variance of all normalised weights of the network pooled together.

    Parameters
    ----------
    weights : sequence of array-like
        Raw (signed) weight matrices, or normalised ones with ``normalised=True``.
    normalised : bool, default=False
        Skip the normalisation (the input already is ``|W| / max|W|``).

    Returns
    -------
    float
    """
    mats = _check_weights(weights) if normalised else normalised_weights(weights)
    total = sum(w.size for w in mats)
    mean = sum(float(w.sum(dtype=np.float64)) for w in mats) / total
    return sum(float(np.square(w.astype(np.float64) - mean).sum()) for w in mats) / total


def layer_nps(weights: Sequence[Any], *, p: float = 2.0) -> list[float]:
    """Normalised NP of every layer of the network's normalised weights (``np_layer_<i>``).

    Parameters
    ----------
    weights : sequence of array-like
        Raw weight matrices in ``(n_in, n_out)`` orientation, forward order.
    p : float, default=2
        Exponent of the persistence norm.

    Returns
    -------
    list of float
        One value per layer; their mean is the network's NP.
    """
    from dgpbench.topology import neural_persistence

    return [float(neural_persistence(w, p=p, normalize=True)) for w in normalised_weights(weights)]


def model_metrics(
    weights: Sequence[Any],
    *,
    p: float = 2.0,
    layers: bool = True,
    dgp: bool = True,
) -> dict[str, float]:
    """NP, per-layer NP, variance of weights and DGP of one network.

    Parameters
    ----------
    weights : sequence of array-like
        Raw weight matrices in ``(n_in, n_out)`` orientation, forward order.
    p : float, default=2
        Exponent of the persistence norm.
    layers : bool, default=True
        Also return ``np_layer_<i>`` (normalised NP of layer i, 0-based).
    dgp : bool, default=True
        Also compute DGP (standardised, normalised).

    Returns
    -------
    dict
        ``np, variance, log_variance`` (natural log), optionally ``np_layer_<i>`` and ``dgp``.
    """
    from dgpbench.topology import deep_graph_persistence

    raw = _check_weights(weights)
    per_layer = layer_nps(raw, p=p)
    variance = weight_variance(raw)
    out: dict[str, float] = {
        "np": float(np.mean(per_layer)),
        "variance": variance,
        "log_variance": math.log(variance) if variance > 0 else -math.inf,
    }
    if layers:
        out.update({f"np_layer_{i}": v for i, v in enumerate(per_layer)})
    if dgp:
        out["dgp"] = float(deep_graph_persistence(raw, p=p, standardize=True, normalize=True))
    return out
