"""Networks whose trailing part is an MLP: a torch *body* (e.g. convolutions) and an MLP *head*.

TU, DGP and MAGDiff are defined on the activation graphs of linear maps. For a network with a
convolutional body (MAGDiff's original setting: the dense layers of a CNN) they are computed
on the head exactly as for an MLP, with the body's output as the head's input layer; the body
runs in torch. Softmax uses the whole network (the head's output is the network's output).

:func:`split_network` finds the head of a plain ``nn.Sequential``: the longest trailing run of
``nn.Linear`` maps, element-wise activations and evaluation-time identities (``Flatten``,
``Dropout``, ``Identity``; nested containers are flattened), starting at its first
``nn.Linear``; everything before it is the body. The head must hold every ``nn.Linear`` of the
network unless the body holds a layer no MLP graph can (a convolution, pooling, a
normalisation layer such as ``BatchNorm1d`` or ``LayerNorm``, a recurrent or attention layer,
a block of its own...): an MLP with an unsupported element-wise layer between its linear maps
(``SiLU``, ``ELU``, ``Softplus``, ...) is an error naming that layer, never a graph of its last
linear maps alone. A ``(body, head)`` pair names the split explicitly (any ``nn.Module`` body,
an MLP head). A body of identities only is no body: the model is a plain MLP. The log says
which layers form the graph (a warning when linear maps stay in the body).

Any other ``nn.Module`` (its own ``forward``, e.g. pytorch/examples' MNIST ``Net`` or
torchvision's ResNet, or a trailing ``Softmax``/``LogSoftmax``) is split by :func:`find_head`:
forward hooks record every ``nn.Linear`` call during one pass over the reference images, the
head is the trailing chain of linear maps (or the ones the user names), and each link is
verified on those images (a map's output, after an element-wise activation read off the
values, equals the next map's input); the body runs the network up to the head's input.

The body runs in float32 (torch's fast kernels; deterministic cuDNN on a GPU) on chunks of a
fixed :attr:`NetworkBody.chunk` images, the last one padded with zeros: every sample goes
through the same kernel call shape whatever batch it comes in, so its body output, and hence
its features, do not depend on the batch (measured bit-identical; tests/features/test_cnn.py checks it).
The head keeps the batch-independent MLP forward pass of :class:`dgpbench.topology.graphs.MLPGraph`.

:class:`~dgpbench.models.architectures.CNNConfig` is the workflow's small CNN family
(``models.kind: cnn``), built by :func:`~dgpbench.models.architectures.build_cnn`. It trains with the
MLPs' protocol (:func:`dgpbench.models.train.train_mlp`) and its checkpoints store ``kind: cnn``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from dgpbench._device import resolve_device
from dgpbench.models.architectures import ImageReshape
from dgpbench.topology.graphs import MLPGraph, activation_name, flatten_sequential

log = logging.getLogger(__name__)

__all__ = [
    "OUTPUT_KINDS",
    "HeadInput",
    "NetworkBody",
    "NetworkLogits",
    "find_head",
    "is_plain_sequential",
    "output_kind",
    "split_network",
]


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
    return isinstance(module, nn.Linear) or activation_name(module) is not None


# Layers that cannot be part of an MLP's activation graph: a network holding one of them
# before its trailing MLP has a genuine body (a CNN, an RNN, a normalisation layer, which
# mixes a sample's units or depends on batch statistics, ...). Anything else between linear
# maps (SiLU, ELU, Softplus, a custom leaf module) could be one of an MLP's element-wise
# layers, so it is an error rather than a silently shorter graph.
_BODY_LAYERS: tuple[type[nn.Module], ...] = (
    nn.modules.conv._ConvNd,
    nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AvgPoolNd,
    nn.modules.pooling._AdaptiveMaxPoolNd,
    nn.modules.pooling._AdaptiveAvgPoolNd,
    nn.modules.pooling._LPPoolNd,
    nn.modules.batchnorm._BatchNorm,  # normalisation (BatchNorm1d too): not element-wise
    nn.LayerNorm,
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


def is_plain_sequential(module: nn.Module) -> bool:
    """Whether ``module`` is an ``nn.Sequential`` whose modules, nested ones included, run
    in order (no container overrides ``forward``), so that it can be read layer by layer.

    Parameters
    ----------
    module : torch.nn.Module
        The network.

    Returns
    -------
    bool
    """
    if not isinstance(module, nn.Sequential) or type(module).forward is not nn.Sequential.forward:
        return False
    return all(
        type(m).forward is nn.Sequential.forward
        for m in module.modules()
        if isinstance(m, nn.Sequential)
    )


def split_network(
    model: Any, *, device: str = "cpu", split: dict[str, Any] | None = None
) -> tuple[NetworkBody | None, MLPGraph | None]:
    """Split a network into a torch body and the MLP head whose graphs TU/DGP/MAGDiff use.

    Parameters
    ----------
    model : torch.nn.Module, (body, head) tuple or MLPGraph
        A plain ``nn.Sequential`` ending in an MLP (split by the rule of the module
        docstring), an explicit ``(body, head)`` pair (``body`` any ``nn.Module`` returning
        ``(N, features)``, ``head`` an MLP), an :class:`MLPGraph`, or any other network
        (its own ``forward``, or a trailing ``Softmax``/``LogSoftmax``): that one is split
        by :func:`find_head` with a forward pass, or by ``split``.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the body and the head's forward pass run (the MST kernels stay on the CPU).
    split : dict, optional
        The split :func:`find_head` returned (``head``, ``activations``, ``output``), to
        rebuild it without a forward pass; ``head=None`` means the whole network's logits
        (body) and no head.

    Returns
    -------
    body : NetworkBody or None
        None when the model is a plain MLP (nothing but identities before the head).
    head : MLPGraph or None
        The head's weights in graph orientation; None when the network must be run to
        find it (then ``body`` is the whole network): call :func:`find_head`.

    Raises
    ------
    TypeError
        If ``model`` is none of the above, or if a layer of a plain ``nn.Sequential``
        between linear maps is not supported and nothing before it makes it a body (see the
        module docstring).
    ValueError
        If a plain ``nn.Sequential`` does not end in an ``nn.Linear`` (after element-wise
        activations).

    Examples
    --------
    >>> from dgpbench.models.architectures import CNNConfig, build_cnn
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
    if split is not None:
        if split.get("head") is None:  # the whole network's logits (Softmax, BBSD)
            n = int(split["n_outputs"])
            identity = MLPGraph(
                (np.eye(n, dtype=np.float32),), (np.zeros(n, np.float32),), ("identity",), device
            )
            return NetworkBody(NetworkLogits(model, split["output"]), device), identity
        return _build_split(model, split, device)
    if not isinstance(model, nn.Module):
        raise TypeError(
            "model must be a torch.nn.Module, a (body, head) pair or an MLPGraph, got "
            f"{type(model).__name__}"
        )
    if not is_plain_sequential(model):
        return NetworkBody(model, device), None  # its own forward: find_head runs it
    items = flatten_sequential(model)
    if items and isinstance(items[-1][1], (nn.Softmax, nn.LogSoftmax)):
        return NetworkBody(model, device), None  # a trailing softmax: find_head handles it
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
    if all(activation_name(m) == "" for _, m in body_items):
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


# --------------------------------------------------------------------------------------------
# Any nn.Module: the head found with forward hooks
# --------------------------------------------------------------------------------------------
#: What a network's output is made of its last linear map's output ``z``.
OUTPUT_KINDS: tuple[str, ...] = ("logits", "log_softmax", "softmax")


class _Stop(Exception):
    """Raised by a pre-hook to end a forward pass once the head's input is known."""


class HeadInput(nn.Module):
    """Runs a network up to the input of one of its submodules (the head's first linear map).

    Parameters
    ----------
    network : torch.nn.Module
        Any network; its ``forward`` runs unchanged until it calls ``layer``.
    layer : str
        The submodule's name (``network.get_submodule(layer)``).
    """

    def __init__(self, network: nn.Module, layer: str) -> None:
        super().__init__()
        self.network = network
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The input ``layer`` receives when the network runs on ``x``."""
        captured: list[torch.Tensor] = []

        def stop(module: nn.Module, args: tuple) -> None:
            captured.append(args[0])
            raise _Stop

        handle = self.network.get_submodule(self.layer).register_forward_pre_hook(stop)
        try:
            self.network(x)
        except _Stop:
            pass
        finally:
            handle.remove()
        if not captured:
            raise ValueError(f"the model's forward did not call its layer {self.layer!r}")
        return captured[0]


class NetworkLogits(nn.Module):
    """A classifier's logits whatever its output: logits, ``log_softmax`` or ``softmax``.

    ``softmax(log_softmax(z)) == softmax(z)``, so log-probabilities are kept as they are;
    probabilities become their logarithm (the logits up to a per-row constant).
    """

    def __init__(self, network: nn.Module, output: str) -> None:
        super().__init__()
        if output not in OUTPUT_KINDS:
            raise ValueError(f"output must be one of {OUTPUT_KINDS}, got {output!r}")
        self.network = network
        self.output = output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's logits (up to a per-row constant) for ``x``."""
        out = self.network(x)
        if self.output == "softmax":
            out = torch.log(out.clamp_min(torch.finfo(out.dtype).tiny))
        return out


def output_kind(output: Any) -> str:
    """Whether a batch of network outputs is logits, log-probabilities or probabilities.

    Parameters
    ----------
    output : array-like of shape (n_samples, n_classes)
        The network's outputs on reference images.

    Returns
    -------
    {"logits", "log_softmax", "softmax"}
        ``"softmax"`` if every row is non-negative and sums to 1, ``"log_softmax"`` if every
        row's exponentials do, else ``"logits"``.

    Examples
    --------
    >>> z = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    >>> output_kind(z), output_kind(z.log_softmax(1)), output_kind(z.softmax(1))
    ('logits', 'log_softmax', 'softmax')
    """
    out = torch.as_tensor(output, dtype=torch.float64)
    if out.ndim != 2 or out.shape[1] < 2:
        raise ValueError(
            f"the model returns shape {tuple(out.shape)}; a classifier returns (N, classes)"
        )
    if (out >= 0).all() and torch.allclose(
        out.sum(1), torch.ones(len(out), dtype=out.dtype), atol=1e-4
    ):
        return "softmax"
    if (out <= 0).all() and torch.allclose(
        out.logsumexp(1), torch.zeros(len(out), dtype=out.dtype), atol=1e-4
    ):
        return "log_softmax"
    return "logits"


def _matches(f_z: torch.Tensor, a: torch.Tensor) -> bool:
    scale = max(1.0, float(a.abs().max())) if a.numel() else 1.0
    return bool(torch.allclose(f_z, a, rtol=1e-4, atol=1e-5 * scale))


def _find_activation(z: torch.Tensor, a: torch.Tensor) -> str | None:
    """The element-wise activation (an :class:`MLPGraph` name) that maps ``z`` to ``a``."""
    from dgpbench.topology.graphs import parse_activation

    if z.shape != a.shape:
        return None
    z, a = z.to(torch.float64), a.to(torch.float64)
    names = ["relu", "gelu", "gelu(tanh)", "tanh", "sigmoid"]
    negative = z < -1e-3
    if negative.any():  # LeakyReLU: its slope read off the negative inputs
        slope = float((a[negative] / z[negative]).median())
        if 0 < slope < 1:
            names.append("leaky_relu" if abs(slope - 0.01) < 1e-6 else f"leaky_relu({slope!r})")
    names.append("identity")
    for name in names:
        if _matches(parse_activation(name)(z), a):
            return name
    return None


def find_head(
    network: nn.Module,
    X: Any,
    *,
    head: Sequence[str] | None = None,
    device: str = "cpu",
) -> tuple[NetworkBody, MLPGraph, dict[str, Any]]:
    """Find the MLP head of any network with forward hooks, and verify it on a batch.

    One forward pass over ``X`` records the input and output of every ``nn.Linear`` the
    network calls. The head is ``head`` (the names of its linear maps, in order) or, by
    default, the longest trailing run of linear maps that forms a chain: the network's
    output is the last map's output ``z`` (or its ``log_softmax``/``softmax``), and each
    map's output, after an element-wise activation (ReLU, GELU, Tanh, Sigmoid, LeakyReLU or
    none; read off the values), equals the next map's input on every sample of ``X``.

    Parameters
    ----------
    network : torch.nn.Module
        Any network (its own ``forward`` is run, never read).
    X : array-like of shape (n_samples, ...)
        Reference inputs, as the network takes them (e.g. ``(N, C, H, W)``).
    head : sequence of str, optional
        The head's linear maps by module name (``dict(network.named_modules())`` keys).
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the network runs.

    Returns
    -------
    body : NetworkBody
        The network up to the head's input.
    graph : MLPGraph
        The head.
    split : dict
        ``head`` (module names), ``activations`` and ``output`` (see :func:`output_kind`):
        :func:`split_network` rebuilds the same split from them without a forward pass.

    Raises
    ------
    ValueError
        If a named module is not an ``nn.Linear`` the network calls once, the network's
        output is not its last linear map's (up to ``softmax``/``log_softmax``), or the
        named maps do not form a chain (the message names the two modules).
    """
    net = copy.deepcopy(network).to(torch.float32).to(resolve_device(device)).eval()
    linears = {name: m for name, m in net.named_modules() if isinstance(m, nn.Linear)}
    if head is not None:
        head = [str(h) for h in head]
        unknown = [h for h in head if h not in linears]
        if unknown or not head:
            raise ValueError(
                f"head {head}: {unknown or 'no layer'} not among the model's nn.Linear modules "
                f"({', '.join(linears) or 'none'})"
            )
    if not linears:
        raise ValueError(
            f"the model ({type(network).__name__}) has no nn.Linear module: TU/DGP/MAGDiff "
            "need a trailing MLP"
        )
    calls: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    handles = [
        m.register_forward_hook(
            # Copies: an in-place op later in forward must not rewrite what was recorded.
            lambda m, args, out, name=name: calls.append(
                (name, args[0].detach().clone(), out.detach().clone())
            )
        )
        for name, m in linears.items()
    ]
    x = torch.as_tensor(np.asarray(X, dtype=np.float32)).to(
        next(iter(linears.values())).weight.device
    )
    try:
        with torch.no_grad():
            out = net(x)
    except RuntimeError as exc:
        raise ValueError(
            f"the model cannot take input of shape {tuple(x.shape)} (pass images as the "
            f"model expects them, e.g. (N, C, H, W)): {exc}"
        ) from exc
    finally:
        for h in handles:
            h.remove()
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"the model returns a {type(out).__name__}, not a tensor of logits")
    kind = output_kind(out)
    counts: dict[str, int] = {}
    for name, _, _ in calls:
        counts[name] = counts.get(name, 0) + 1
    if not calls:
        raise ValueError("the model's forward called none of its nn.Linear modules")
    last_name, _, last_z = calls[-1]
    expected = {
        "logits": last_z,
        "log_softmax": last_z.log_softmax(1),
        "softmax": last_z.softmax(1),
    }
    if last_z.shape != out.shape or not _matches(
        expected[kind].to(torch.float64), out.to(torch.float64)
    ):
        raise ValueError(
            f"the model's output is not the output of its last linear map {last_name!r} (nor "
            "its softmax or log_softmax): TU/DGP/MAGDiff need a network ending in an MLP"
        )
    # Walk back from the output through the linear maps, checking each link.
    chain, acts = [last_name], ["identity"]
    broken = None
    for i in range(len(calls) - 2, -1, -1):
        if head is not None and len(chain) == len(head):
            break
        name, _, z = calls[i]
        nxt, a_next, _ = calls[i + 1]
        act = None
        if counts[name] == 1 and counts[nxt] == 1 and z.ndim == 2:
            act = _find_activation(z, a_next)
        if act is None or (head is not None and head[-len(chain) - 1] != name):
            broken = (name, nxt)
            break
        chain.insert(0, name)
        acts.insert(0, act)
    if head is not None and chain != head:
        if head[-1] != last_name:
            why = f"the model's output comes from {last_name!r}, not {head[-1]!r}"
        elif broken is not None and broken[0] in head:
            why = (
                f"the output of {broken[0]!r}, after any element-wise activation, is not the "
                f"input of {broken[1]!r} (something else runs between them)"
            )
        else:
            order = [n for n, _, _ in calls]
            why = f"the model calls its linear maps in the order {order}"
        raise ValueError(f"head {head} is not a chain of linear maps: {why}")
    first_input = calls[len(calls) - len(chain)][1]
    if first_input.ndim != 2:
        raise ValueError(
            f"the input of {chain[0]!r} has shape {tuple(first_input.shape)}, not (N, features)"
        )
    # End to end: the head, run on what its first map received, must give the network's
    # output; a shorter trailing chain is tried when it does not (a single map always does).
    while True:
        split = {"head": tuple(chain), "activations": tuple(acts), "output": kind}
        body, graph = _build_split(network, split, device)
        first_input = calls[len(calls) - len(chain)][1]
        z = torch.as_tensor(graph.forward(first_input.cpu().numpy()), dtype=torch.float64)
        transform = {"logits": z, "log_softmax": z.log_softmax(1), "softmax": z.softmax(1)}
        if _matches(transform[kind], out.to("cpu", torch.float64)) or len(chain) == 1:
            break
        if head is not None:
            raise ValueError(
                f"head {head} does not reproduce the model's output on the reference images "
                "(something the hooks do not see changes the values between its maps)"
            )
        broken = (chain[0], chain[1])
        chain, acts = chain[1:], acts[1:]
    left = [n for n in dict.fromkeys(n for n, _, _ in calls) if n not in chain]
    (log.warning if left and broken is not None else log.info)(
        "model %s: TU/DGP/MAGDiff use the linear maps %s (activations %s, output %s)%s",
        type(network).__name__,
        ", ".join(chain),
        ", ".join(acts),
        kind,
        f"; the linear map(s) {', '.join(left)} run in the body (the link "
        f"{broken[0]} -> {broken[1]} is no element-wise activation)"
        if left and broken is not None
        else "",
    )
    return body, graph, split


def _build_split(
    network: nn.Module, split: dict[str, Any], device: str
) -> tuple[NetworkBody, MLPGraph]:
    """The body and head of a split found by :func:`find_head` (no forward pass)."""
    names = list(split["head"])
    layers = [network.get_submodule(n) for n in names]
    if not all(isinstance(m, nn.Linear) for m in layers):
        raise ValueError(f"head {names}: every layer must be an nn.Linear")
    with torch.no_grad():
        weights = [m.weight.detach().to("cpu", torch.float32).numpy().T for m in layers]
        biases = [
            np.zeros(m.out_features, np.float32)
            if m.bias is None
            else m.bias.detach().to("cpu", torch.float32).numpy()
            for m in layers
        ]
    graph = MLPGraph(tuple(weights), tuple(biases), tuple(split["activations"]), device)
    return NetworkBody(HeadInput(network, names[0]), device), graph
