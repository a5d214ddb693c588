"""Several seeds of one MLP architecture, trained at once as one stacked model.

:func:`train_mlp_seeds` trains ``S`` MLPs that differ only in their seed, each exactly as
:func:`dgpbench.models.train.train_mlp` would: the same initial weights, the same batch order and
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
checkpoints; see :mod:`dgpbench.models.train`) in its own folder, with the same metadata; the
``seconds`` column is the wall time of the joint run. Batch-norm and dropout models stack
too: batch norm normalises each seed's own batch with its own statistics, and each seed's
dropout masks come from its own generator, seeded and drawn as ``train_mlp`` draws them on
the CPU (so a CPU run's masks are its single run's; on CUDA, ``train_mlp`` draws them from
the CUDA generator instead, so there the masks differ from the single run's, while staying
seeded and deterministic).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from dgpbench._device import resolve_device
from dgpbench._validation import check_int
from dgpbench.models.architectures import ACTIVATIONS, ArchConfig
from dgpbench.models.checkpoints import checkpoint_name, save_checkpoint
from dgpbench.models.train import (
    _EPOCH_LINE,
    TrainConfig,
    _adam,
    _check_config,
    _epoch_values,
    _metrics_row,
    _schedule,
    _seed_streams,
    _stored_metrics,
    _training_data,
    _write_metrics,
    _write_split,
    clear_run_outputs,
)
from dgpbench.threads import torch_threads

log = logging.getLogger(__name__)

__all__ = ["StackedMLP", "stacked_logits", "train_mlp_seeds"]

# Validation images per evaluation chunk (as train_mlp's, so the sums round alike).
_EVAL_CHUNK = 4096
# Images per stacked forward pass when evaluating on the CPU (other devices: _EVAL_CHUNK);
# small chunks keep the (S, chunk, hidden) activations in cache: 784-650-650-650-10 x 20
# seeds, 4,096 images, 1 thread, 27 Nov 2026: 37 GFLOP per CPU second in one pass, 41 in
# chunks of 1,024, 47-53 in 256, 48 in 128, 38 in 64. An image's logits do not depend on the
# chunk but to float rounding (MKL may round a row of a small product differently by the
# number of rows); at these sizes, chunks of 64 to 4,096 gave the same bits.
_FORWARD_CHUNK = 256

# The activations of ACTIVATIONS, in place (evaluation only: autograd needs the inputs).
_ACTIVATE_IN_PLACE: dict[type[nn.Module], Callable[[torch.Tensor], torch.Tensor]] = {
    nn.ReLU: torch.relu_,
    nn.Tanh: torch.tanh_,
}

# glibc's mallopt parameters (malloc.h) and their defaults
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536


@contextlib.contextmanager
def _retained_heap() -> Iterator[None]:
    """Keep freed memory in the process while training (glibc only; elsewhere a no-op).

    Every step allocates the weight gradients afresh: ``S x n_in x n_out`` floats, 34 MB for
    20 seeds of a 650 x 650 layer. glibc serves blocks that large with ``mmap`` and returns
    them with ``munmap`` on free (its threshold stops at 32 MB), so each step page-faults
    every gradient in again: that, not arithmetic, was 60% of the backward pass (784-650-650-
    650-10, 20 seeds: 235 of 339 CPU ms per step; 92 of 181 with this). With ``mmap`` off and
    the heap not trimmed, a freed block is reused as it is. Only where memory comes from
    changes, never a number; the settings return to glibc's defaults afterwards.
    """
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to tune
        yield
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    changed = mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, 2**30) == 1
    try:
        yield
    finally:
        if changed:
            mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
            mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)


class StackedMLP(nn.Module):
    """``S`` MLPs of one architecture as stacked weight tensors.

    Parameters
    ----------
    models : sequence of torch.nn.Sequential
        Networks of :func:`dgpbench.models.architectures.build_mlp` with the same sizes (``Linear``,
        optionally ``BatchNorm1d``, the activation, optionally ``Dropout``, ..., ``Linear``);
        their current weights (and batch-norm statistics) are copied.
    activation : {"relu", "tanh"}
        The activation after every linear map but the last.
    dropout_generators : sequence of torch.Generator, optional
        One per model: where its dropout masks come from in training mode (each model's
        masks are drawn as ``train_mlp`` draws them from the global generator, so a seed's
        masks are those of its single run). Required when the models have dropout.

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
        If ``models`` is empty, holds other modules than linear maps, batch norm, the
        activation and dropout, networks of different layers, or dropout without
        ``dropout_generators`` (one per model).

    Notes
    -----
    Batch norm normalises each model's own batch: the ``(S, B, h)`` activations are viewed
    as ``B`` rows of ``S * h`` features, so every (model, unit) pair is one batch-norm
    channel with its own batch statistics, running statistics and affine parameters.

    Examples
    --------
    >>> from dgpbench.models.architectures import build_mlp
    >>> nets = [build_mlp(4, 3, 2, 2, generator=torch.Generator().manual_seed(s)) for s in (0, 1)]
    >>> stacked = StackedMLP(nets, "relu")
    >>> x = torch.rand(5, 4)
    >>> bool(torch.allclose(stacked(x)[1], nets[1](x)))
    True
    """

    def __init__(
        self,
        models: Sequence[nn.Sequential],
        activation: str,
        dropout_generators: Sequence[torch.Generator] | None = None,
    ) -> None:
        super().__init__()
        if len(models) == 0:
            raise ValueError("models must hold at least one network")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        act_type = ACTIVATIONS[activation]
        self._plan: list[tuple[str, str]] = []  # (kind, module name) in forward order
        for name, module in models[0].named_children():
            if isinstance(module, nn.Linear):
                self._plan.append(("linear", name))
            elif isinstance(module, nn.BatchNorm1d):
                if not (module.affine and module.track_running_stats and module.momentum):
                    raise ValueError(f"layer {name}: only build_mlp's BatchNorm1d is stacked")
                self._plan.append(("batchnorm", name))
            elif isinstance(module, nn.Dropout):
                self._plan.append(("dropout", name))
            elif isinstance(module, act_type):
                self._plan.append(("activation", name))
            else:
                raise ValueError(
                    f"StackedMLP stacks MLPs (nn.Linear, BatchNorm1d, {act_type.__name__}, "
                    f"Dropout); layer {name} is {type(module).__name__}: train it with "
                    "train_mlp instead"
                )
        shapes = [tuple(v.shape) for v in models[0].state_dict().values()]
        for k, model in enumerate(models):
            if [tuple(v.shape) for v in model.state_dict().values()] != shapes:
                raise ValueError(f"models[{k}] differs in its layers from models[0]")
        names = [n for kind, n in self._plan if kind == "linear"]
        norms = [n for kind, n in self._plan if kind == "batchnorm"]
        self._linear_names, self._norm_names = names, norms
        with torch.no_grad():
            self.weights = nn.ParameterList(
                nn.Parameter(torch.stack([getattr(m, n).weight.T for m in models]).contiguous())
                for n in names
            )
            self.biases = nn.ParameterList(
                nn.Parameter(torch.stack([getattr(m, n).bias[None, :] for m in models]))
                for n in names
            )
            self.norm_weights = nn.ParameterList(
                nn.Parameter(torch.stack([getattr(m, n).weight for m in models])) for n in norms
            )
            self.norm_biases = nn.ParameterList(
                nn.Parameter(torch.stack([getattr(m, n).bias for m in models])) for n in norms
            )
            for i, n in enumerate(norms):
                for buf in ("running_mean", "running_var", "num_batches_tracked"):
                    values = torch.stack([getattr(getattr(m, n), buf) for m in models])
                    self.register_buffer(f"norm{i}_{buf}", values.clone())
        self._dropout = {
            n: float(getattr(models[0], n).p) for kind, n in self._plan if kind == "dropout"
        }
        if self._dropout and (dropout_generators is None or len(dropout_generators) != len(models)):
            raise ValueError("models with dropout need one dropout generator per model")
        self._generators = list(dropout_generators or [])
        self.activation = act_type()

    @property
    def n_models(self) -> int:
        """Number of stacked networks ``S``."""
        return int(self.weights[0].shape[0])

    def _batchnorm(self, i: int, x: torch.Tensor) -> torch.Tensor:
        n_models, batch, width = x.shape
        flat = x.transpose(0, 1).reshape(batch, n_models * width)  # (model, unit) channels
        mean, var = getattr(self, f"norm{i}_running_mean"), getattr(self, f"norm{i}_running_var")
        if self.training:
            getattr(self, f"norm{i}_num_batches_tracked").add_(1)
        out = F.batch_norm(
            flat,
            mean.view(-1),  # views: batch_norm updates the running statistics in place
            var.view(-1),
            self.norm_weights[i].view(-1),
            self.norm_biases[i].view(-1),
            training=self.training,
            momentum=0.1,
            eps=1e-5,
        )
        return out.view(batch, n_models, width).transpose(0, 1)

    def _drop(self, p: float, x: torch.Tensor) -> torch.Tensor:
        # train_mlp's F.dropout on the CPU: noise = bernoulli(1 - p) / (1 - p); x * noise,
        # the noise drawn from each model's own generator in its single run's order
        noise = torch.stack(
            [
                torch.empty(x.shape[1:], dtype=x.dtype).bernoulli_(1 - p, generator=g)
                for g in self._generators
            ]
        ).to(x.device)
        return x * noise.div_(1 - p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(S, B, n_classes)`` of inputs ``(S, B, n_inputs)`` (one batch per model)
        or ``(B, n_inputs)`` (the same batch for every model).
        """
        if x.ndim == 2:
            x = x.expand(self.n_models, *x.shape)
        # Without autograd, the activation overwrites the tensor the layer before made (never
        # the input): the same values, one (S, B, hidden) buffer less per layer.
        in_place = not torch.is_grad_enabled()
        fresh = False  # x is a tensor made here
        layer = norm = 0
        for kind, name in self._plan:
            if kind == "linear":
                x = torch.baddbmm(self.biases[layer], x, self.weights[layer])
                layer += 1
            elif kind == "batchnorm":
                x = self._batchnorm(norm, x)
                norm += 1
            elif kind == "activation":
                if in_place and fresh:
                    x = _ACTIVATE_IN_PLACE[type(self.activation)](x)
                else:
                    x = self.activation(x)
            elif self.training and self._dropout[name] > 0:
                x = self._drop(self._dropout[name], x)
            fresh = fresh or kind in ("linear", "batchnorm")
        return x

    def state_dict_of(self, k: int) -> dict[str, torch.Tensor]:
        """The ``state_dict`` of model ``k`` as its own ``nn.Sequential`` (detached views)."""
        state = {}
        for name, w, b in zip(self._linear_names, self.weights, self.biases, strict=True):
            state[f"{name}.weight"] = w[k].detach().T
            state[f"{name}.bias"] = b[k, 0].detach()
        for i, name in enumerate(self._norm_names):
            state[f"{name}.weight"] = self.norm_weights[i][k].detach()
            state[f"{name}.bias"] = self.norm_biases[i][k].detach()
            for buf in ("running_mean", "running_var", "num_batches_tracked"):
                state[f"{name}.{buf}"] = getattr(self, f"norm{i}_{buf}")[k]
        return state


def _seed_model(arch: ArchConfig, init: int, drop: int) -> tuple[nn.Sequential, torch.Generator]:
    """A seed's initial network and the generator of its dropout masks, as ``train_mlp``
    makes them: it seeds the global generator with the dropout stream, then builds the
    network (``nn.Linear``'s default initialisation draws from the global generator before
    the seeded one overwrites it), then draws every mask from where that left it.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(drop)
        net = arch.build(generator=torch.Generator().manual_seed(init))
        gen = torch.Generator()
        gen.set_state(torch.random.get_rng_state())
    return net, gen


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image cross-entropy ``(S, B)`` of stacked logits ``(S, B, C)``."""
    flat = F.cross_entropy(logits.flatten(0, 1), target.reshape(-1), reduction="none")
    return flat.view(target.shape)


def _forward_chunk(device: torch.device) -> int:
    return _FORWARD_CHUNK if device.type == "cpu" else _EVAL_CHUNK


def stacked_logits(
    model: StackedMLP, x: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits of the same images for every stacked model, without autograd.

    The forward passes take a fixed number of images at a time (256 on the CPU, 4096 on a
    GPU).

    Parameters
    ----------
    model : StackedMLP
    x : torch.Tensor of shape (N, n_inputs)
    out : torch.Tensor of shape (S, N, C), optional
        Where to write the logits.

    Returns
    -------
    torch.Tensor of shape (S, N, C)
    """
    n = len(x)
    chunk = _forward_chunk(x.device)
    with torch.inference_mode():
        if out is None and n <= chunk:
            return model(x)
        for start in range(0, n, chunk):
            logits = model(x[start : start + chunk])
            if out is None:
                out = logits.new_empty(logits.shape[0], n, logits.shape[2])
            out[:, start : start + chunk] = logits
    return out


def _evaluate_stacked(
    model: StackedMLP, x: torch.Tensor, y: torch.Tensor
) -> list[tuple[float, float]]:
    """Mean cross-entropy and accuracy of every stacked model on ``(x, y)``."""
    n = len(x)
    if n == 0:
        return [(float("nan"), float("nan"))] * model.n_models
    loss_sum = torch.zeros(model.n_models, dtype=torch.float64, device=x.device)
    correct = torch.zeros(model.n_models, dtype=torch.int64, device=x.device)
    buffer = None  # the logits of one chunk, reused
    with torch.inference_mode():
        # the sums run over chunks of _EVAL_CHUNK images, as train_mlp's (the same rounding)
        for start in range(0, n, _EVAL_CHUNK):
            xc = x[start : start + _EVAL_CHUNK]
            if buffer is not None and buffer.shape[1] != len(xc):  # the last, shorter chunk
                buffer = None
            logits = buffer = stacked_logits(model, xc, out=buffer)
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
    callback: Callable[[float, StackedMLP, list[dict[str, Any]]], None] | None = None,
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
        The architecture (batch norm and dropout included).
    config : TrainConfig or None
        Hyperparameters shared by every seed (default: :func:`shift_detection_config`);
        its ``seed`` is replaced by each of ``seeds``.
    seeds : sequence of int
        Distinct non-negative model seeds.
    out_dirs : sequence of path-like
        One distinct folder per seed, for what :func:`dgpbench.models.train.train_mlp` would write
        there with ``seed=seeds[k]``.
    dataset : str, optional
        Data set name stored in the checkpoints.
    progress : bool, default=True
        Show a tqdm bar (only on a TTY).
    device : {"cpu", "cuda", "auto"} or torch.device, default="cpu"
        Where to train (``"auto"``: CUDA if available); checkpoints are stored on the CPU.
    callback : callable, optional
        Called as ``callback(epoch, model, rows)`` at every checkpoint point (also at epoch
        0), with the live :class:`StackedMLP` and each seed's metrics row (in the order of
        ``seeds``), as ``train_mlp``'s callback once per seed. Do not modify the model.

    Returns
    -------
    list of pathlib.Path
        The final checkpoint of every seed, in the order of ``seeds``.

    Raises
    ------
    ValueError
        On repeated or negative seeds, a number of
        folders other than the number of seeds, repeated folders, inconsistent images or
        labels (as ``train_mlp``), or a ``device`` that is unknown or absent.

    See Also
    --------
    dgpbench.models.train.train_mlp : one model.
    """
    from dgpbench.progress import Progress

    config = _check_config(config)
    arch = arch if isinstance(arch, ArchConfig) else ArchConfig(**arch)
    for name, value in (("seeds", seeds), ("out_dirs", out_dirs)):
        # a string or path is iterable too: "md" would become the folders m/ and d/
        if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, Iterable):
            raise TypeError(
                f"{name} must be a sequence with one entry per seed, got "
                f"{type(value).__name__} {value!r}"
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
    streams = [_seed_streams(s) for s in seeds]
    configs = [dataclasses.replace(config, seed=s) for s in seeds]
    for out in outs:
        clear_run_outputs(out)  # no old model beside the new run's files, even after a kill
        out.mkdir(parents=True, exist_ok=True)
        _write_split(out / "split.npz", data.train_idx, data.val_idx)
    rows: list[list[dict[str, Any]]] = [[] for _ in seeds]
    t0 = time.perf_counter()

    with torch_threads(config.threads), _retained_heap():
        seeded = [_seed_model(arch, init, drop) for init, _, drop in streams]
        model = StackedMLP([n for n, _ in seeded], arch.activation, [g for _, g in seeded])
        model = model.to(dev)
        holder = arch.build(generator=torch.Generator().manual_seed(0))  # one seed, to save
        order_gens = [torch.Generator().manual_seed(order) for _, order, _ in streams]
        optimizer = _adam(model.parameters(), config, fused=True)

        def checkpoint(epoch: float, step: int, loss_sum: Any, correct: Any, seen: int) -> None:
            model.eval()  # batch norm's running statistics, no dropout (as train_mlp)
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
                        {**meta, "epoch": epoch, "step": step, "metrics": _stored_metrics(row)},
                    )
            if callback is not None:
                callback(epoch, model, [r[-1] for r in rows])
            model.train()

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
