"""Networks whose trailing part is an MLP: a torch *body* (e.g. convolutions) and an MLP *head*.

TU, DGP and MAGDiff are defined on the activation graphs of linear maps. For a network with a
convolutional body (MAGDiff's original setting: the dense layers of a CNN) they are computed
on the head exactly as for an MLP, with the body's output as the head's input layer; the body
runs in torch. Softmax uses the whole network (the head's output is the network's output).

:func:`split_network` finds the head: the longest trailing run of ``nn.Linear`` maps,
element-wise activations and evaluation-time identities (``Flatten``, ``Dropout``,
``Identity``) of an ``nn.Sequential`` (nested containers are flattened), starting at its first
``nn.Linear``; everything before it is the body. A ``(body, head)`` pair names the split
explicitly (any ``nn.Module`` body, an MLP head). A body of identities only is no body: the
model is a plain MLP.

The body runs in float32 (torch's fast kernels; deterministic cuDNN on a GPU) on chunks of a
fixed :attr:`NetworkBody.chunk` images, the last one padded with zeros: every sample goes
through the same kernel call shape whatever batch it comes in, so its body output, and hence
its features, do not depend on the batch (measured bit-identical; tests/test_cnn.py checks it).
The head keeps the batch-independent MLP forward pass of :class:`dgpbench.graphs.MLPGraph`.

:class:`CNNConfig` is the workflow's small CNN family (``models.kind: cnn``): two blocks of
3x3 convolution (padding 1), activation and 2x2 max pooling, then an MLP head with the
configured hidden width and number of linear maps (:func:`dgpbench.models.build_mlp`, the same
initialisation as the MLPs). It trains with the MLPs' protocol (:func:`dgpbench.models.train_mlp`)
and its checkpoints store ``kind: cnn``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from dgpbench._device import resolve_device
from dgpbench.graphs import MLPGraph, _activation_name, _flatten_sequential

log = logging.getLogger(__name__)

__all__ = ["CNNConfig", "ImageReshape", "NetworkBody", "build_cnn", "split_network"]


class ImageReshape(nn.Module):
    """Reshape a batch ``(N, ...)`` to images ``(N, C, H, W)`` (flattened or image input).

    Parameters
    ----------
    shape : tuple of int
        ``(C, H, W)``.
    """

    def __init__(self, shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.shape = tuple(int(s) for s in shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


@dataclass(frozen=True)
class CNNConfig:
    """Architecture of the workflow's small CNN (see :func:`build_cnn`).

    Attributes
    ----------
    input_shape : tuple of int
        ``(C, H, W)`` of one image.
    hidden : int
        Width of the head's hidden layers.
    n_layers : int
        Linear maps of the head (as an MLP's "layers").
    n_classes : int
        Output size.
    activation : {"relu", "tanh"}
        After every convolution and every hidden linear map.
    channels : tuple of two int
        Output channels of the two convolution blocks.
    """

    input_shape: tuple[int, ...]
    hidden: int
    n_layers: int
    n_classes: int
    activation: str = "relu"
    channels: tuple[int, ...] = field(default=(8, 16))

    kind: ClassVar[str] = "cnn"

    def __post_init__(self) -> None:
        from dgpbench.models import _check_arch

        shape = tuple(self.input_shape)
        channels = tuple(self.channels)
        for name, values, length in (("input_shape", shape, 3), ("channels", channels, 2)):
            if len(values) != length or any(
                isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in values
            ):
                raise ValueError(f"{name} must be {length} positive integers, got {values!r}")
        if shape[1] < 4 or shape[2] < 4:
            raise ValueError(f"input_shape {shape}: images must be at least 4x4 (two 2x2 pools)")
        object.__setattr__(self, "input_shape", tuple(int(v) for v in shape))
        object.__setattr__(self, "channels", tuple(int(v) for v in channels))
        _check_arch(
            self.n_inputs, self.hidden, self.n_layers, self.n_classes, self.activation, False, 0.0
        )

    @property
    def n_inputs(self) -> int:
        """Pixels per image (the flattened input size)."""
        return math.prod(self.input_shape)

    @property
    def head_inputs(self) -> int:
        """Size of the body's output, the head's input layer."""
        _, h, w = self.input_shape
        return self.channels[1] * (h // 4) * (w // 4)

    @property
    def batchnorm(self) -> bool:
        """Always False (the training loop asks)."""
        return False

    def build(self, generator: torch.Generator | None = None) -> nn.Sequential:
        """Return a freshly initialised network of this architecture."""
        return build_cnn(self, generator=generator)


def build_cnn(config: CNNConfig, generator: torch.Generator | None = None) -> nn.Sequential:
    """Build the small CNN: ``body`` (two conv blocks, flatten) then ``head`` (an MLP).

    Parameters
    ----------
    config : CNNConfig
        The architecture.
    generator : torch.Generator, optional
        Source of all initial weights: convolutions get torch's default distribution
        (Kaiming-uniform with ``a = sqrt(5)``, biases ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``)
        but seeded; the head is :func:`dgpbench.models.build_mlp`'s.

    Returns
    -------
    torch.nn.Sequential
        With children ``body`` and ``head``; accepts flattened ``(N, C*H*W)`` or image
        ``(N, C, H, W)`` batches.

    Examples
    --------
    >>> net = build_cnn(CNNConfig((1, 8, 8), hidden=16, n_layers=2, n_classes=10))
    >>> net(torch.zeros(3, 64)).shape, CNNConfig((1, 28, 28), 16, 2, 10).head_inputs
    (torch.Size([3, 10]), 784)
    """
    from dgpbench.models import ACTIVATIONS, build_mlp

    act = ACTIVATIONS[config.activation]
    c_in = config.input_shape[0]
    body: list[nn.Module] = [ImageReshape(config.input_shape)]
    for c_out in config.channels:
        conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)
        with torch.no_grad():
            nn.init.kaiming_uniform_(conv.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(c_in * 9)
            nn.init.uniform_(conv.bias, -bound, bound, generator=generator)
        body += [conv, act(), nn.MaxPool2d(2)]
        c_in = c_out
    body.append(nn.Flatten())
    head = build_mlp(
        config.head_inputs,
        config.hidden,
        config.n_layers,
        config.n_classes,
        config.activation,
        generator=generator,
    )
    return nn.Sequential(OrderedDict(body=nn.Sequential(*body), head=head))


@dataclass(frozen=True, eq=False)
class NetworkBody:
    """The torch part of a network before its MLP head, run in float32.

    Parameters
    ----------
    module : torch.nn.Module
        The body (copied, converted to float32 and put in eval mode; the original is not
        touched).
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the body runs; its output comes back to the CPU.

    Notes
    -----
    Samples go through the body in chunks of exactly :attr:`chunk` images (the last chunk
    padded with zeros), so torch picks the same kernels for every sample and a sample's
    output does not depend on the other samples of its batch, nor on ``batch_size``.
    """

    module: nn.Module
    device: str = "cpu"

    #: Images per body call (fixed: the kernels torch picks depend on the call's shape).
    chunk: ClassVar[int] = 64

    def __post_init__(self) -> None:
        device = resolve_device(self.device)
        body = copy.deepcopy(self.module).to(torch.float32).to(device).eval()
        object.__setattr__(self, "module", body)
        object.__setattr__(self, "device", str(device))

    def __call__(self, X: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
        """The body's output for a batch, float32, shape ``(N, head inputs)``.

        ``batch_size`` is accepted for a uniform interface; the body always runs on
        :attr:`chunk` images at a time.

        Raises
        ------
        ValueError
            If the body cannot take ``X`` or does not return one flat vector per sample.
        """
        X = np.asarray(X, dtype=np.float32)
        parts = []
        # cuDNN's autotuner may pick other kernels per call: fix them (no-op on the CPU)
        cuda = self.device.startswith("cuda")
        flags = torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True)
        with torch.no_grad(), flags if cuda else contextlib.nullcontext():
            for start in range(0, max(len(X), 1), self.chunk):
                rows = X[start : start + self.chunk]
                padded = torch.zeros((self.chunk, *X.shape[1:]), dtype=torch.float32)
                padded[: len(rows)] = torch.from_numpy(np.array(rows))
                try:
                    out = self.module(padded.to(self.device))
                except RuntimeError as exc:
                    raise ValueError(
                        f"the model's body cannot take input of shape {tuple(X.shape)} "
                        f"(pass images as the model expects them, e.g. (N, C, H, W)): {exc}"
                    ) from exc
                if out.ndim != 2:
                    raise ValueError(
                        f"the model's body returns shape {tuple(out.shape)}, not (N, features): "
                        "end it with nn.Flatten before the MLP head"
                    )
                parts.append(out[: len(rows)].cpu().numpy().astype(np.float32, copy=False))
        return np.ascontiguousarray(np.concatenate(parts)[: len(X)])

    def __repr__(self) -> str:
        return f"NetworkBody({self.module!r})"


def _is_head_module(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or _activation_name(module) is not None


def split_network(model: Any, *, device: str = "cpu") -> tuple[NetworkBody | None, MLPGraph]:
    """Split a network into a torch body and the MLP head whose graphs TU/DGP/MAGDiff use.

    Parameters
    ----------
    model : torch.nn.Sequential, (body, head) tuple or MLPGraph
        A sequential network ending in an MLP (see the module docstring), an explicit
        ``(body, head)`` pair (``body`` any ``nn.Module`` returning ``(N, features)``,
        ``head`` an MLP), or an :class:`MLPGraph`.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the body and the head's forward pass run (the MST kernels stay on the CPU).

    Returns
    -------
    body : NetworkBody or None
        None when the model is a plain MLP (nothing but identities before the head).
    head : MLPGraph
        The head's weights in graph orientation.

    Raises
    ------
    TypeError
        If ``model`` is none of the above, or a ``nn.Sequential`` subclass with its own
        ``forward`` (its modules need not run in order).
    ValueError
        If the model does not end in an ``nn.Linear`` (after element-wise activations).

    Examples
    --------
    >>> net = build_cnn(CNNConfig((1, 8, 8), hidden=16, n_layers=2, n_classes=10))
    >>> body, head = split_network(net)
    >>> head.layer_sizes, body(np.zeros((2, 1, 8, 8), np.float32)).shape
    ((64, 16, 10), (2, 64))
    """
    if isinstance(model, MLPGraph):
        return None, MLPGraph.from_module(model, device=device)
    if isinstance(model, tuple) and len(model) == 2:
        body, head = model
        if not isinstance(body, nn.Module):
            raise TypeError(
                f"the body of a (body, head) pair must be a torch.nn.Module, got {type(body).__name__}"
            )
        return NetworkBody(body, device), MLPGraph.from_module(head, device=device)
    if not isinstance(model, nn.Sequential):
        raise TypeError(
            "model must be a torch.nn.Sequential ending in nn.Linear layers and element-wise "
            f"activations, or a (body, head) pair, got {type(model).__name__}"
        )
    if type(model).forward is not nn.Sequential.forward:
        raise TypeError(
            f"model is a {type(model).__name__}, an nn.Sequential subclass with its own forward: "
            "pass a plain nn.Sequential or a (body, head) pair"
        )
    items = _flatten_sequential(model)
    start = len(items)
    while start > 0 and _is_head_module(items[start - 1][1]):
        start -= 1
    first = next((i for i in range(start, len(items)) if isinstance(items[i][1], nn.Linear)), None)
    if first is None:
        path, last = items[-1] if items else ("-", model)
        raise ValueError(
            f"model does not end in an MLP: its last module {path} ({type(last).__name__}) "
            "is not nn.Linear or an element-wise activation after one"
        )
    head = MLPGraph.from_module(nn.Sequential(*(m for _, m in items[first:])), device=device)
    body_items = items[:first]
    if all(_activation_name(m) == "" for _, m in body_items):
        return None, head
    log.info(
        "model split: body %s (%s) runs in torch; TU/DGP/MAGDiff use the head %s (%s)",
        f"{body_items[0][0]}..{body_items[-1][0]}",
        ", ".join(type(m).__name__ for _, m in body_items),
        "-".join(str(s) for s in head.layer_sizes),
        f"{items[first][0]}..{items[-1][0]}",
    )
    return NetworkBody(nn.Sequential(*(m for _, m in body_items)), device), head
