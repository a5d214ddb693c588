"""Several seeds of one MLP architecture, trained at once as one stacked model.

:func:`train_mlp_seeds` trains ``S`` MLPs that differ only in their seed, each exactly as
:func:`dgpbench.models.train_mlp` would: the same initial weights, the same batch order and
its own Adam state, all derived from its seed by the same streams. The ``S`` weight matrices
of a layer are stacked into one ``(S, n_in, n_out)`` tensor and every step runs batched
matrix products over the ``S`` minibatches (:class:`StackedMLP`), so the per-step cost of
Python, autograd and the optimiser is paid once instead of ``S`` times.

Why the result is each seed's own run:

- the loss is the sum over seeds of each seed's mean cross-entropy, so the gradient of a
  seed's weights is exactly the gradient of its own loss;
- Adam is element-wise, so one optimiser over the stacked tensors is ``S`` independent ones
  (one step counter, shared because every seed takes every step).

The optimiser runs torch's fused Adam (one pass over the weights per step instead of about
eight): the same update with the float operations in another order, and batched products
round differently from single ones, so a stacked seed equals its ``train_mlp`` run to float
tolerance, not bit for bit. A stacked run is deterministic: the same seeds, configuration
and device give bit-identical checkpoints.

Every seed gets the files ``train_mlp`` writes (``split.npz``, ``metrics.csv``,
checkpoints; see :mod:`dgpbench.models`) in its own folder, with the same metadata; the
``seconds`` column is the wall time of the joint run. Plain MLPs only: batch-norm and
dropout models (the regulariser analysis) train one at a time with ``train_mlp``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from dgpbench._device import resolve_device
from dgpbench._validation import check_int
from dgpbench.models import (
    _EPOCH_LINE,
    ACTIVATIONS,
    ArchConfig,
    TrainConfig,
    _adam,
    _check_config,
    _epoch_values,
    _metrics_row,
    _schedule,
    _seed_streams,
    _training_data,
    _write_metrics,
    _write_split,
    checkpoint_name,
    save_checkpoint,
    torch_threads,
)

log = logging.getLogger(__name__)

__all__ = ["StackedMLP", "train_mlp_seeds"]

# Validation images per evaluation chunk (as train_mlp's, so the sums round alike).
_EVAL_CHUNK = 4096


class StackedMLP(nn.Module):
    """``S`` MLPs of one architecture as stacked weight tensors.

    Parameters
    ----------
    models : sequence of torch.nn.Sequential
        Networks of :func:`dgpbench.models.build_mlp` with the same sizes, without batch
        norm or dropout (``Linear, act, ..., Linear``); their current weights are copied.
    activation : {"relu", "tanh"}
        The activation after every linear map but the last.

    Attributes
    ----------
    weights : torch.nn.ParameterList
        Per linear map, the weights of every model, ``(S, n_in, n_out)`` (graph
        orientation: the transpose of torch's ``Linear.weight``).
    biases : torch.nn.ParameterList
        Per linear map, ``(S, 1, n_out)``.

    Raises
    ------
    ValueError
        If ``models`` is empty, holds other modules than linear maps and the activation,
        or networks of different sizes.

    Examples
    --------
    >>> from dgpbench.models import build_mlp
    >>> nets = [build_mlp(4, 3, 2, 2, generator=torch.Generator().manual_seed(s)) for s in (0, 1)]
    >>> stacked = StackedMLP(nets, "relu")
    >>> x = torch.rand(5, 4)
    >>> bool(torch.allclose(stacked(x)[1], nets[1](x)))
    True
    """

    def __init__(self, models: Sequence[nn.Sequential], activation: str) -> None:
        super().__init__()
        if len(models) == 0:
            raise ValueError("models must hold at least one network")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        act_type = ACTIVATIONS[activation]
        names = []
        for name, module in models[0].named_children():
            if isinstance(module, nn.Linear):
                names.append(name)
            elif not isinstance(module, act_type):
                raise ValueError(
                    f"StackedMLP stacks plain MLPs (nn.Linear and {act_type.__name__}); layer "
                    f"{name} is {type(module).__name__}: train it with train_mlp instead"
                )
        shapes = [tuple(v.shape) for v in models[0].state_dict().values()]
        for k, model in enumerate(models):
            if [tuple(v.shape) for v in model.state_dict().values()] != shapes:
                raise ValueError(f"models[{k}] differs in its layers from models[0]")
        self._linear_names = names
        with torch.no_grad():
            self.weights = nn.ParameterList(
                nn.Parameter(torch.stack([getattr(m, n).weight.T for m in models]).contiguous())
                for n in names
            )
            self.biases = nn.ParameterList(
                nn.Parameter(torch.stack([getattr(m, n).bias[None, :] for m in models]))
                for n in names
            )
        self.activation = act_type()

    @property
    def n_models(self) -> int:
        """Number of stacked networks ``S``."""
        return int(self.weights[0].shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(S, B, n_classes)`` of inputs ``(S, B, n_inputs)`` (one batch per model)
        or ``(B, n_inputs)`` (the same batch for every model)."""
        if x.ndim == 2:
            x = x.expand(self.n_models, *x.shape)
        last = len(self.weights) - 1
        for layer, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(b, x, w)
            if layer < last:
                x = self.activation(x)
        return x

    def state_dict_of(self, k: int) -> dict[str, torch.Tensor]:
        """The ``state_dict`` of model ``k`` as its own ``nn.Sequential`` (detached views)."""
        state = {}
        for name, w, b in zip(self._linear_names, self.weights, self.biases, strict=True):
            state[f"{name}.weight"] = w[k].detach().T
            state[f"{name}.bias"] = b[k, 0].detach()
        return state


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image cross-entropy ``(S, B)`` of stacked logits ``(S, B, C)``."""
    flat = F.cross_entropy(logits.flatten(0, 1), target.reshape(-1), reduction="none")
    return flat.view(target.shape)


def _evaluate_stacked(
    model: StackedMLP, x: torch.Tensor, y: torch.Tensor
) -> list[tuple[float, float]]:
    """Mean cross-entropy and accuracy of every stacked model on ``(x, y)``."""
    n = len(x)
    if n == 0:
        return [(float("nan"), float("nan"))] * model.n_models
    loss_sum = torch.zeros(model.n_models, dtype=torch.float64, device=x.device)
    correct = torch.zeros(model.n_models, dtype=torch.int64, device=x.device)
    with torch.no_grad():
        for start in range(0, n, _EVAL_CHUNK):
            logits = model(x[start : start + _EVAL_CHUNK])
            target = y[start : start + _EVAL_CHUNK].expand(model.n_models, -1)
            loss_sum += _cross_entropy(logits, target).sum(1)
            correct += (logits.argmax(-1) == target).sum(1)
    return [(s / n, c / n) for s, c in zip(loss_sum.tolist(), correct.tolist(), strict=True)]


def train_mlp_seeds(
    x_train: Any,
    y_train: Any,
    arch: ArchConfig | dict[str, Any],
    config: TrainConfig | None,
    seeds: Sequence[int],
    out_dirs: Sequence[str | os.PathLike[str]],
    *,
    dataset: str | None = None,
    progress: bool = True,
    device: Any = "cpu",
) -> list[Path]:
    """Train one MLP per seed, all at once, and write each one's files to its folder.

    Parameters
    ----------
    x_train : array-like of shape (N, ...) in [0, 1]
        Training images (flattened here); ``val_fraction`` of them are held out (the same
        images for every seed: the split depends on ``config.split_seed`` only).
    y_train : array-like of shape (N,)
        Integer labels in ``[0, arch.n_classes)``.
    arch : ArchConfig or dict
        The architecture, without batch norm or dropout.
    config : TrainConfig or None
        Hyperparameters shared by every seed (default: :func:`shift_detection_config`);
        its ``seed`` is replaced by each of ``seeds``.
    seeds : sequence of int
        Distinct non-negative model seeds.
    out_dirs : sequence of path-like
        One distinct folder per seed, for what :func:`dgpbench.models.train_mlp` would write
        there with ``seed=seeds[k]``.
    dataset : str, optional
        Data set name stored in the checkpoints.
    progress : bool, default=True
        Show a tqdm bar (only on a TTY).
    device : {"cpu", "cuda", "auto"} or torch.device, default="cpu"
        Where to train (``"auto"``: CUDA if available); checkpoints are stored on the CPU.

    Returns
    -------
    list of pathlib.Path
        The final checkpoint of every seed, in the order of ``seeds``.

    Raises
    ------
    ValueError
        On batch norm or dropout in ``arch``, repeated or negative seeds, a number of
        folders other than the number of seeds, repeated folders, inconsistent images or
        labels (as ``train_mlp``), or a ``device`` that is unknown or absent.

    See Also
    --------
    dgpbench.models.train_mlp : one model; also batch-norm and dropout models.
    """
    from dgpbench.progress import Progress

    config = _check_config(config)
    arch = arch if isinstance(arch, ArchConfig) else ArchConfig(**arch)
    if arch.batchnorm or arch.dropout:
        raise ValueError(
            f"train_mlp_seeds trains plain MLPs; {arch} has batch norm or dropout: train it "
            "one seed at a time with dgpbench.models.train_mlp"
        )
    seeds = [check_int(s, f"seeds[{k}]", minimum=0) for k, s in enumerate(seeds)]
    outs = [Path(d) for d in out_dirs]
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    if len(outs) != len(seeds):
        raise ValueError(f"got {len(outs)} out_dirs for {len(seeds)} seeds; give one per seed")
    if len({d.resolve() for d in outs}) != len(outs):
        raise ValueError(f"out_dirs must be distinct folders, got {[str(d) for d in outs]}")
    dev = resolve_device(device)
    data = _training_data(x_train, y_train, arch, config).to(dev)
    xt, yt, xv, yv = data.xt, data.yt, data.xv, data.yv
    n_train, n_models = len(yt), len(seeds)
    schedule = _schedule(n_train, arch, config)
    streams = [_seed_streams(s) for s in seeds]  # dropout's stream is unused: no dropout
    configs = [dataclasses.replace(config, seed=s) for s in seeds]
    for out in outs:
        out.mkdir(parents=True, exist_ok=True)
        _write_split(out / "split.npz", data.train_idx, data.val_idx)
    rows: list[list[dict[str, Any]]] = [[] for _ in seeds]
    t0 = time.perf_counter()

    with torch_threads(config.threads):
        model = StackedMLP(
            [arch.build(generator=torch.Generator().manual_seed(init)) for init, _, _ in streams],
            arch.activation,
        ).to(dev)
        holder = arch.build(generator=torch.Generator().manual_seed(0))  # one seed, to save
        order_gens = [torch.Generator().manual_seed(order) for _, order, _ in streams]
        optimizer = _adam(model.parameters(), config, fused=True)

        def checkpoint(epoch: float, step: int, loss_sum: Any, correct: Any, seen: int) -> None:
            val = _evaluate_stacked(model, xv, yv)
            loss_sums, corrects = loss_sum.tolist(), correct.tolist()
            keep = config.keep == "all" or step == schedule.total_steps
            for k, out in enumerate(outs):
                row = _metrics_row(epoch, step, loss_sums[k], corrects[k], seen, val[k], t0)
                rows[k].append(row)
                _write_metrics(out / "metrics.csv", rows[k])
                if keep:
                    holder.load_state_dict(model.state_dict_of(k))
                    meta = {
                        "arch": arch,
                        "train_config": configs[k],
                        "dataset": dataset,
                        "n_train": n_train,
                        "n_val": len(yv),
                    }
                    save_checkpoint(
                        out / checkpoint_name(epoch),
                        holder,
                        {**meta, "epoch": epoch, "step": step, "metrics": row},
                    )

        def zeros(dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros(n_models, dtype=dtype, device=dev)

        checkpoint(0.0, 0, zeros(torch.float64), zeros(torch.int64), 0)
        bar = Progress(
            schedule.total_steps,
            f"train {dataset or 'mlp'} x{n_models}",
            enabled=progress,
            unit="batch",
        )
        # Running sums stay on the device: no host synchronisation between checkpoints.
        loss_sum, correct, seen = zeros(torch.float64), zeros(torch.int64), 0
        for idx, step, epoch in schedule.batches(order_gens, n_train, dev):
            xb, yb = xt[idx], yt[idx]  # (S, B, n_inputs), (S, B): each seed's own batch
            logits = model(xb)
            losses = _cross_entropy(logits, yb).mean(1)
            optimizer.zero_grad(set_to_none=True)
            losses.sum().backward()
            optimizer.step()
            with torch.no_grad():
                loss_sum += losses.detach().double() * yb.shape[1]
                correct += (logits.argmax(-1) == yb).sum(1)
                seen += yb.shape[1]
            if epoch is not None:
                checkpoint(epoch, step, loss_sum, correct, seen)
                bar.set_postfix(val_acc=f"{rows[0][-1]['val_acc']:.3f}")
                if float(epoch).is_integer():
                    for seed, seed_rows in zip(seeds, rows, strict=True):
                        line = f"seed {seed}, {_EPOCH_LINE}"
                        bar.log(line, *_epoch_values(epoch, config.epochs, seed_rows[-1]))
                loss_sum, correct, seen = zeros(torch.float64), zeros(torch.int64), 0
            bar.update(1)
        bar.close()
    log.info(
        "trained %d seeds of %s on %s (%s) for %d epochs in %.1f s: val_acc %s",
        n_models,
        arch,
        dataset,
        dev,
        config.epochs,
        time.perf_counter() - t0,
        ", ".join(f"{r[-1]['val_acc']:.4f}" for r in rows),
    )
    return [out / checkpoint_name(config.epochs) for out in outs]
