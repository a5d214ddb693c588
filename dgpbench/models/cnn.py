"""Networks whose trailing part is an MLP: a torch *body* (e.g. convolutions) and an MLP *head*.

TU, DGP and MAGDiff are defined on the activation graphs of linear maps. For a network with a
convolutional body (MAGDiff's original setting: the dense layers of a CNN) they are computed
on the head exactly as for an MLP, with the body's output as the head's input layer; the body
runs in torch. Softmax uses the whole network (the head's output is the network's output).

:func:`split_network` finds the head: the longest trailing run of ``nn.Linear`` maps,
element-wise activations and evaluation-time identities (``Flatten``, ``Dropout``,
``Identity``) of an ``nn.Sequential`` (nested containers are flattened), starting at its first
``nn.Linear``; everything before it is the body. The head must hold every ``nn.Linear`` of the
network unless the body holds a layer no MLP graph can (a convolution, pooling, a recurrent
or attention layer, a block of its own...): an MLP with an unsupported layer between its
linear maps (``SiLU``, ``ELU``, ``Softplus``, ``BatchNorm1d``, ...) is an error naming that
layer, never a graph of its last linear maps alone. A ``(body, head)`` pair names the split
explicitly (any ``nn.Module`` body, an MLP head). A body of identities only is no body: the
model is a plain MLP. The log says which layers form the graph (a warning when linear maps
stay in the body).

The body runs in float32 (torch's fast kernels; deterministic cuDNN on a GPU) on chunks of a
fixed :attr:`NetworkBody.chunk` images, the last one padded with zeros: every sample goes
through the same kernel call shape whatever batch it comes in, so its body output, and hence
its features, do not depend on the batch (measured bit-identical; tests/test_cnn.py checks it).
The head keeps the batch-independent MLP forward pass of :class:`dgpbench.topology.graphs.MLPGraph`.

:class:`CNNConfig` is the workflow's small CNN family (``models.kind: cnn``), defined in
:mod:`dgpbench.models.architectures` and re-exported here with :func:`build_cnn`. It trains with the
MLPs' protocol (:func:`dgpbench.models.train.train_mlp`) and its checkpoints store ``kind: cnn``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from dgpbench._device import resolve_device
from dgpbench.models.architectures import CNNConfig, ImageReshape, build_cnn
from dgpbench.topology.graphs import MLPGraph, _activation_name, _flatten_sequential

log = logging.getLogger(__name__)

__all__ = ["CNNConfig", "ImageReshape", "NetworkBody", "build_cnn", "split_network"]


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


# Layers that cannot be part of an MLP's activation graph: a network holding one of them
# before its trailing MLP has a genuine body (a CNN, an RNN, ...). Anything else between
# linear maps (SiLU, ELU, Softplus, BatchNorm1d, LayerNorm, a custom leaf module) could be
# one of an MLP's layers, so it is an error rather than a silently shorter graph.
_BODY_LAYERS: tuple[type[nn.Module], ...] = (
    nn.modules.conv._ConvNd,
    nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AvgPoolNd,
    nn.modules.pooling._AdaptiveMaxPoolNd,
    nn.modules.pooling._AdaptiveAvgPoolNd,
    nn.modules.pooling._LPPoolNd,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.modules.instancenorm._InstanceNorm,
    nn.GroupNorm,
    nn.Unflatten,
    nn.Upsample,
    nn.PixelShuffle,
    nn.PixelUnshuffle,
    nn.Unfold,
    nn.Fold,
    nn.Embedding,
    nn.EmbeddingBag,
    nn.RNNBase,
    nn.MultiheadAttention,
    nn.TransformerEncoderLayer,
    nn.TransformerDecoderLayer,
    nn.Transformer,
    ImageReshape,
)


def _is_body_layer(module: nn.Module) -> bool:
    """True for a layer no MLP graph can hold: the types above, or a block of its own."""
    return isinstance(module, _BODY_LAYERS) or any(True for _ in module.children())


def _span(items: list[tuple[str, nn.Module]]) -> str:
    return f"{items[0][0]}..{items[-1][0]}" if len(items) > 1 else items[0][0]


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
        ``forward`` (its modules need not run in order), or if a layer between linear maps
        is not supported and nothing before it makes it a body (see the module docstring).
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
    body_items = items[:first]
    dropped = [path for path, m in body_items if isinstance(m, nn.Linear)]
    graph = f"{_span(items[first:])} ({', '.join(type(m).__name__ for _, m in items[first:])})"
    if dropped and not any(_is_body_layer(m) for _, m in body_items):
        # Only layers an MLP could hold lie before the head: the rule would cut the MLP at
        # the first unsupported one and silently drop the linear maps before it.
        path, layer = items[start - 1]
        raise TypeError(
            f"model layer {path} ({type(layer).__name__}) between linear maps is not supported "
            f"in an MLP's activation graph: TU/DGP/MAGDiff would use only {graph} and drop the "
            f"linear map(s) {', '.join(dropped)}. Use nn.Linear and element-wise activations "
            "(ReLU, Tanh, Sigmoid, LeakyReLU, GELU; Dropout, Flatten, Identity) in the MLP, or "
            "pass a (body, head) pair to choose the graph's layers yourself"
        )
    head = MLPGraph.from_module(nn.Sequential(*(m for _, m in items[first:])), device=device)
    if all(_activation_name(m) == "" for _, m in body_items):
        return None, head
    report = log.warning if dropped else log.info
    report(
        "model split: TU/DGP/MAGDiff use the layers %s, an MLP %s; the body %s (%s) runs "
        "in torch%s",
        graph,
        "-".join(str(s) for s in head.layer_sizes),
        _span(body_items),
        ", ".join(type(m).__name__ for _, m in body_items),
        f" and holds the linear map(s) {', '.join(dropped)}, which are not in the graph"
        if dropped
        else "",
    )
    return NetworkBody(nn.Sequential(*(m for _, m in body_items)), device), head
