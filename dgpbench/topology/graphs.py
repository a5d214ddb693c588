"""Activation graphs of a trained MLP: the network as plain arrays, in graph orientation.

An :class:`MLPGraph` holds the weights of an MLP (a torch ``nn.Sequential`` of ``nn.Linear``
maps and element-wise activations) as float32 arrays in *graph orientation*: ``weights[l]``
has shape ``(n_in, n_out)`` (rows are the input nodes of linear map ``l``, columns its
output nodes), i.e. the transpose of torch's ``Linear.weight``.

For a sample ``x`` the *activation graph* of linear map ``l`` (Definition 5.2 of the paper)
has edge weights ``|a_l[i] * W_l[i, j]|``, where ``a_l`` is the input of map ``l``
(``a_0 = x``, ``a_{l+1} = act_l(a_l W_l + b_l)``). :meth:`MLPGraph.activation_graphs` builds
these explicitly for one sample; it is the straightforward reference for the fused kernels
in :mod:`dgpbench.topology`, which never materialise a batch of graphs.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dgpbench._device import resolve_device
from dgpbench._validation import as_float_array

log = logging.getLogger(__name__)

__all__ = [
    "ACTIVATION_FUNCTIONS",
    "MLPGraph",
    "activation_name",
    "flatten_sequential",
    "parse_activation",
]


def _leaky_relu(slope: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: F.leaky_relu(x, negative_slope=slope)


ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda x: x,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "leaky_relu": _leaky_relu(0.01),
    "gelu": F.gelu,
    "gelu(tanh)": lambda x: F.gelu(x, approximate="tanh"),
}
"""Element-wise activations by name. ``leaky_relu(<slope>)`` (any float slope) and chains
``"a+b"`` (``b`` applied after ``a``) are accepted too."""

# Modules that are the identity at evaluation time.
_IDENTITY_MODULES = (nn.Identity, nn.Dropout, nn.Flatten)


_ELEMENTWISE_MODULES = (*_IDENTITY_MODULES, nn.ReLU, nn.Tanh, nn.Sigmoid, nn.LeakyReLU, nn.GELU)


def _base_class(module: nn.Module) -> type[nn.Module]:
    """The supported torch class ``module`` is an instance of."""
    return next(c for c in _ELEMENTWISE_MODULES if isinstance(module, c))


def activation_name(module: nn.Module) -> str | None:
    """Name of an element-wise activation module, as :attr:`MLPGraph.activations` records it.

    Parameters
    ----------
    module : torch.nn.Module
        A layer.

    Returns
    -------
    str or None
        The activation's name (a key of :data:`ACTIVATION_FUNCTIONS`, or
        ``leaky_relu(<slope>)`` / ``gelu(<approximate>)``), ``""`` for the modules that are
        identities at evaluation time (``Identity``, ``Dropout``, ``Flatten``), None for any
        other module.
    """
    if isinstance(module, _IDENTITY_MODULES):
        return ""
    if isinstance(module, nn.ReLU):
        return "relu"
    if isinstance(module, nn.Tanh):
        return "tanh"
    if isinstance(module, nn.Sigmoid):
        return "sigmoid"
    if isinstance(module, nn.LeakyReLU):
        slope = float(module.negative_slope)
        return "leaky_relu" if slope == 0.01 else f"leaky_relu({slope!r})"
    if isinstance(module, nn.GELU):
        return "gelu" if module.approximate == "none" else f"gelu({module.approximate})"
    return None


def parse_activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The torch function of an activation name.

    Parameters
    ----------
    name : str
        A key of :data:`ACTIVATION_FUNCTIONS`, ``leaky_relu(<slope>)``, or a chain ``a+b``
        of these (applied left to right).

    Returns
    -------
    callable
        Tensor to tensor.

    Raises
    ------
    ValueError
        If a part of ``name`` is unknown.
    """
    parts = name.split("+")
    funcs = []
    for part in parts:
        if part in ACTIVATION_FUNCTIONS:
            funcs.append(ACTIVATION_FUNCTIONS[part])
            continue
        if part.startswith("leaky_relu(") and part.endswith(")"):
            try:
                slope = float(part[len("leaky_relu(") : -1])
            except ValueError:
                slope = math.nan
            if math.isfinite(slope):
                funcs.append(_leaky_relu(slope))
                continue
        raise ValueError(
            f"activations: unknown activation {name!r}; known: {sorted(ACTIVATION_FUNCTIONS)}, "
            "'leaky_relu(<slope>)' and chains 'a+b'"
        )
    if len(funcs) == 1:
        return funcs[0]

    def chained(x: torch.Tensor) -> torch.Tensor:
        for f in funcs:
            x = f(x)
        return x

    return chained


def _check_forward(module: nn.Module, base: type[nn.Module], where: str) -> None:
    """Refuse a subclass that overrides ``forward``: the graph is read from the layers alone,
    so its own computation would be silently ignored.
    """
    if type(module).forward is not base.forward:
        raise TypeError(
            f"{where} ({type(module).__name__}) overrides {base.__name__}.forward; dgpbench "
            f"reads the network from its layers alone and would ignore that forward: use a "
            f"plain nn.{base.__name__}"
        )


def flatten_sequential(module: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]]:
    """Children of (possibly nested) ``nn.Sequential`` containers, with their index paths.

    Parameters
    ----------
    module : torch.nn.Module
        The container whose children are listed.
    prefix : str, default=""
        Prepended to every path.

    Returns
    -------
    list of (str, torch.nn.Module)
        The leaves in order, each with its dotted path (``"0"``, ``"2.1"``, ...).

    Raises
    ------
    TypeError
        If a nested ``nn.Sequential`` subclass overrides ``forward`` (its own computation
        would be ignored).
    """
    out: list[tuple[str, nn.Module]] = []
    for name, child in module.named_children():
        path = f"{prefix}{name}"
        if isinstance(child, nn.Sequential):
            _check_forward(child, nn.Sequential, f"model layer {path}")
            out.extend(flatten_sequential(child, prefix=f"{path}."))
        else:
            out.append((path, child))
    return out


@dataclass(frozen=True, eq=False)
class MLPGraph:
    """An MLP as arrays in graph orientation (rows = input nodes, columns = output nodes).

    Parameters
    ----------
    weights : sequence of array-like
        ``weights[l]`` of shape ``(n_l, n_{l+1})``, the transpose of torch's
        ``Linear.weight``. Stored as float32 C-contiguous read-only arrays.
    biases : sequence of array-like
        ``biases[l]`` of shape ``(n_{l+1},)``.
    activations : sequence of str
        Name of the element-wise function applied after each linear map (``"identity"``
        for none), see :data:`ACTIVATION_FUNCTIONS`.
    device : {"cpu", "cuda", "auto"} or "cuda:<index>", default="cpu"
        Where the forward pass (:meth:`forward`, :meth:`layer_inputs`) runs; its results
        are numpy arrays either way. Stored resolved (``"auto"`` becomes ``"cuda"`` or
        ``"cpu"``).

    Attributes
    ----------
    n_inputs, n_outputs : int
        Sizes of the first and last node layers.
    layer_sizes : tuple of int
        ``(n_0, n_1, ..., n_L)``.
    n_layers : int
        Number of linear maps ``L``.

    Raises
    ------
    ValueError
        On ragged shapes, non-finite values, mismatched lengths, or a ``device`` that is
        unknown or absent (CUDA without a GPU).

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    >>> g = MLPGraph.from_module(net)
    >>> g.layer_sizes, g.activations
    ((4, 3, 2), ('relu', 'identity'))
    """

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    activations: tuple[str, ...]
    device: str = "cpu"

    def __post_init__(self) -> None:
        if len(self.weights) == 0:
            raise ValueError("weights must hold at least one matrix, got none")
        if not (len(self.weights) == len(self.biases) == len(self.activations)):
            raise ValueError(
                f"weights, biases and activations must have equal lengths, got "
                f"{len(self.weights)}, {len(self.biases)}, {len(self.activations)}"
            )
        weights = []
        biases = []
        for layer, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            w = as_float_array(w, f"weights[{layer}]", ndim=2, dtype=np.float32).copy()
            b = as_float_array(b, f"biases[{layer}]", ndim=1, dtype=np.float32).copy()
            if b.shape[0] != w.shape[1]:
                raise ValueError(
                    f"biases[{layer}] has shape {b.shape}, expected ({w.shape[1]},) to match "
                    f"weights[{layer}] of shape {w.shape}"
                )
            if layer > 0 and weights[-1].shape[1] != w.shape[0]:
                raise ValueError(
                    f"weights[{layer}] has shape {w.shape} but weights[{layer - 1}] has "
                    f"{weights[-1].shape[1]} output nodes: ragged layer shapes"
                )
            w.setflags(write=False)
            b.setflags(write=False)
            weights.append(w)
            biases.append(b)
        activations = tuple(str(a) for a in self.activations)
        for a in activations:
            parse_activation(a)  # validates the name
        object.__setattr__(self, "weights", tuple(weights))
        object.__setattr__(self, "biases", tuple(biases))
        object.__setattr__(self, "activations", activations)
        object.__setattr__(self, "device", str(resolve_device(self.device)))

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_module(cls, model: nn.Module, *, device: str = "cpu") -> MLPGraph:
        """Read the weights of an MLP.

        Parameters
        ----------
        model : torch.nn.Sequential
            ``nn.Linear`` maps and element-wise activations (ReLU, Tanh, Sigmoid, LeakyReLU,
            GELU, Identity); ``nn.Dropout`` and ``nn.Flatten`` count as the identity (eval
            mode). Nested ``nn.Sequential`` containers are flattened. An ``MLPGraph`` is
            returned as it is, or as a copy for another ``device``.
        device : {"cpu", "cuda", "auto"}, default="cpu"
            Where the graph's forward pass runs.

        Returns
        -------
        MLPGraph

        Raises
        ------
        TypeError
            If ``model`` is not an ``nn.Sequential``, or for any other layer type (the error
            names the layer's index and type), or for an activation before the first
            ``nn.Linear``, or if the model or one of its layers is a subclass that overrides
            ``forward`` (the graph is read from the layers, so that code would be ignored).
        ValueError
            If the model has no ``nn.Linear``, consecutive linear maps do not chain, or
            weights are on the meta device (not materialised).
        """
        if isinstance(model, MLPGraph):
            if model.device == str(resolve_device(device)):
                return model
            return dataclasses.replace(model, device=device)
        if not isinstance(model, nn.Sequential):
            raise TypeError(
                f"model must be a torch.nn.Sequential of nn.Linear and element-wise "
                f"activations, got {type(model).__name__}"
            )
        _check_forward(model, nn.Sequential, "model")
        weights: list[np.ndarray] = []
        biases: list[np.ndarray] = []
        acts: list[list[str]] = []
        for path, module in flatten_sequential(model):
            if isinstance(module, nn.Linear):
                _check_forward(module, nn.Linear, f"model layer {path}")
                if module.weight.is_meta or (module.bias is not None and module.bias.is_meta):
                    raise ValueError(
                        f"model layer {path} (Linear) has no weights: its parameters are on "
                        "the meta device (an unmaterialised model); load real weights first, "
                        "e.g. model.to_empty(device='cpu') then model.load_state_dict(...)"
                    )
                with torch.no_grad():
                    w = module.weight.detach().to("cpu", torch.float32).numpy()
                    if module.bias is None:
                        b = np.zeros(w.shape[0], dtype=np.float32)
                    else:
                        b = module.bias.detach().to("cpu", torch.float32).numpy()
                if weights and weights[-1].shape[1] != w.shape[1]:
                    raise ValueError(
                        f"model layer {path} (Linear) has in_features={w.shape[1]} but the "
                        f"previous Linear has out_features={weights[-1].shape[1]}"
                    )
                weights.append(np.ascontiguousarray(w.T))
                biases.append(np.array(b, dtype=np.float32))
                acts.append([])
                continue
            name = activation_name(module)
            if name is None:
                raise TypeError(
                    f"model layer {path} ({type(module).__name__}) is not supported: only "
                    "nn.Linear and element-wise activations (ReLU, Tanh, Sigmoid, LeakyReLU, "
                    "GELU, Identity, Dropout, Flatten) are allowed"
                )
            _check_forward(module, _base_class(module), f"model layer {path}")
            if name == "":
                continue
            if not weights:
                raise TypeError(
                    f"model layer {path} ({type(module).__name__}): an activation before the "
                    "first nn.Linear is not supported"
                )
            acts[-1].append(name)
        if not weights:
            raise ValueError("model has no nn.Linear layer")
        activations = tuple("+".join(a) if a else "identity" for a in acts)
        return cls(tuple(weights), tuple(biases), activations, device)

    # -- shape ------------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        """Number of input nodes ``n_0``."""
        return int(self.weights[0].shape[0])

    @property
    def n_outputs(self) -> int:
        """Number of output nodes ``n_L``."""
        return int(self.weights[-1].shape[1])

    @property
    def n_layers(self) -> int:
        """Number of linear maps ``L``."""
        return len(self.weights)

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """Node counts ``(n_0, ..., n_L)``."""
        return (self.n_inputs, *(int(w.shape[1]) for w in self.weights))

    # -- derived arrays (cached; the dataclass is frozen, so they never go stale) -----------
    @cached_property
    def weights_t(self) -> tuple[np.ndarray, ...]:
        """The weights in torch orientation ``(n_out, n_in)``, float32 C-contiguous."""
        out = []
        for w in self.weights:
            wt = np.ascontiguousarray(w.T)
            wt.setflags(write=False)
            out.append(wt)
        return tuple(out)

    @cached_property
    def _torch_params(self) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        # float64 copies on the device (the forward pass runs in float64, see _forward).
        return tuple(
            (
                torch.from_numpy(wt.astype(np.float64)).to(self.device),
                torch.from_numpy(b.astype(np.float64)).to(self.device),
            )
            for wt, b in zip(self.weights_t, self.biases, strict=True)
        )

    @cached_property
    def _activation_fns(self) -> tuple[Callable[[torch.Tensor], torch.Tensor], ...]:
        return tuple(parse_activation(a) for a in self.activations)

    # -- forward ----------------------------------------------------------------------------
    def _check_batch(self, X: Any, name: str = "X") -> np.ndarray:
        X = as_float_array(X, name, ndim=2, dtype=np.float32)
        if X.shape[1] != self.n_inputs:
            raise ValueError(
                f"{name} has {X.shape[1]} features per sample, the network expects {self.n_inputs}"
            )
        return X

    def _forward(self, X: np.ndarray, *, keep_inputs: bool) -> tuple[list[np.ndarray], np.ndarray]:
        """Forward pass in float64, every layer's result rounded to float32.

        Accumulating in float64 makes a sample's activations independent of the batch it is
        in (float32 matrix products round differently for different batch sizes), so
        features do not depend on ``batch_size``. On a GPU the products run there and only
        the float32 results come back.
        """
        inputs: list[torch.Tensor] = []
        a = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)).to(self.device)
        with torch.no_grad():
            for (wt, b), act in zip(self._torch_params, self._activation_fns, strict=True):
                if keep_inputs:
                    inputs.append(a)
                a = act(F.linear(a.to(torch.float64), wt, b)).to(torch.float32)
        return [t.cpu().numpy() for t in inputs], a.cpu().numpy()

    def layer_inputs(self, X: Any) -> list[np.ndarray]:
        """Inputs ``a_0, ..., a_{L-1}`` of each linear map for a batch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs)
            Flattened samples.

        Returns
        -------
        list of ndarray
            ``L`` float32 arrays; entry ``l`` has shape ``(n_samples, n_l)`` (``a_0`` is ``X``).
            Computed in float64 and rounded to float32, layer by layer, so the result for a
            sample does not depend on the other samples in ``X``.

        Raises
        ------
        ValueError
            On a wrong shape or non-finite values.
        """
        X = self._check_batch(X)
        return self._forward(X, keep_inputs=True)[0]

    def forward(self, X: Any) -> np.ndarray:
        """Network outputs (after the last activation) for a batch, float32 ``(N, n_outputs)``."""
        X = self._check_batch(X)
        return self._forward(X, keep_inputs=False)[1]

    def activation_graphs(self, x: Any, *, signed: bool = False) -> list[np.ndarray]:
        """Explicit activation graphs of one sample (the straightforward reference).

        Parameters
        ----------
        x : array-like of shape (n_inputs,)
            One flattened sample.
        signed : bool, default=False
            Return ``a_l[i] * W_l[i, j]`` instead of its absolute value.

        Returns
        -------
        list of ndarray
            ``L`` float32 arrays; entry ``l`` has shape ``(n_l, n_{l+1})``.

        Examples
        --------
        >>> import numpy as np
        >>> g = MLPGraph((np.array([[1.0, -2.0]]),), (np.zeros(2),), ("identity",))
        >>> g.activation_graphs(np.array([3.0]))[0]
        array([[3., 6.]], dtype=float32)
        """
        x = as_float_array(x, "x", ndim=1, dtype=np.float32)
        if x.shape[0] != self.n_inputs:
            raise ValueError(f"x has {x.shape[0]} features, the network expects {self.n_inputs}")
        inputs = self._forward(x[None, :], keep_inputs=True)[0]
        graphs = []
        for a, w in zip(inputs, self.weights, strict=True):
            g = a[0][:, None] * w
            graphs.append(g if signed else np.abs(g))
        return graphs

    def __getstate__(self) -> dict[str, Any]:
        # Only the fields: cached derived values (torch tensors, activation closures) are
        # rebuilt on demand and the closures cannot be pickled.
        return {
            "weights": self.weights,
            "biases": self.biases,
            "activations": self.activations,
            "device": self.device,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key in ("weights", "biases", "activations"):
            object.__setattr__(self, key, state[key])
        object.__setattr__(self, "device", str(resolve_device(state.get("device", "cpu"))))
        for w in (*self.weights, *self.biases):
            w.setflags(write=False)

    def __repr__(self) -> str:
        sizes = "-".join(str(s) for s in self.layer_sizes)
        device = "" if self.device == "cpu" else f", device={self.device!r}"
        return f"MLPGraph({sizes}, activations={self.activations}{device})"
