"""Architectures of the networks dgpbench trains: MLPs, the workflow's small CNN, small ResNets.

This module sits below the training code (:mod:`dgpbench.models.train`), the checkpoint files
(:mod:`dgpbench.models.checkpoints`) and the body/head split (:mod:`dgpbench.models.body_head`), which all
build networks from it; it imports none of them, so the package's imports run one way.

MLP: ``in - h - ... - h - out`` where ``n_layers`` counts linear maps (the paper's
"layers"): 1 is a linear classifier, 2 is ``in-h-out``, 4 is ``in-h-h-h-out``. The
activation (ReLU or tanh) follows every linear map but the last. Weights are
Xavier-normal; biases keep PyTorch's default distribution ``U(-1/sqrt(fan_in),
1/sqrt(fan_in))`` (the authors only re-initialise weights), both drawn from the explicit
``generator`` so a seed fixes the whole network.

:class:`CNNConfig` is the workflow's small CNN family (``models.kind: cnn``): two blocks of
3x3 convolution (padding 1), activation and 2x2 max pooling, then an MLP head with the
configured hidden width and number of linear maps (:func:`build_mlp`, the same
initialisation as the MLPs).

:class:`ResNetConfig` is a residual network in ResNet-18's layout for small images
(``models.kind: resnet``; Rabanser et al.'s BBSD classifier is a ResNet-18): a 3x3 stem
convolution, stages of basic blocks (two 3x3 convolutions with batch norm and an identity or
1x1-projection shortcut; every stage after the first halves the resolution), global average
pooling, then the same MLP head as the CNN. ``blocks=(2, 2, 2, 2)`` with
``channels=(64, 128, 256, 512)`` is ResNet-18; smaller ``blocks`` and ``channels`` give the
ResNet-10/-14 that a CPU trains in an hour.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from dgpbench._validation import check_int
from dgpbench.models.sizes import mlp_n_weights

__all__ = [
    "ACTIVATIONS",
    "ArchConfig",
    "CNNConfig",
    "ImageReshape",
    "ResNetConfig",
    "build_cnn",
    "build_mlp",
    "build_resnet",
    "model_arch",
]

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


# --------------------------------------------------------------------------------------------
# MLP
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchConfig:
    """Architecture of an MLP (see :func:`build_mlp` for the meaning of each field)."""

    n_inputs: int
    hidden: int
    n_layers: int
    n_classes: int
    activation: str = "relu"
    batchnorm: bool = False
    dropout: float = 0.0

    kind: ClassVar[str] = "mlp"

    def __post_init__(self) -> None:
        _check_arch(
            self.n_inputs,
            self.hidden,
            self.n_layers,
            self.n_classes,
            self.activation,
            self.batchnorm,
            self.dropout,
        )

    @property
    def n_weights(self) -> int:
        """Entries of the linear maps' weight matrices (biases and batch norm left out): what
        neural persistence reads, and what a training job's cost grows with.

        Examples
        --------
        >>> ArchConfig(784, 650, 4, 10).n_weights == 784 * 650 + 2 * 650 * 650 + 650 * 10
        True
        >>> ArchConfig(784, 0, 1, 10).n_weights
        7840
        """
        return mlp_n_weights(self.n_inputs, self.hidden, self.n_layers, self.n_classes)

    def build(self, generator: torch.Generator | None = None) -> nn.Sequential:
        """Return a freshly initialised network of this architecture."""
        return build_mlp(
            self.n_inputs,
            self.hidden,
            self.n_layers,
            self.n_classes,
            self.activation,
            batchnorm=self.batchnorm,
            dropout=self.dropout,
            generator=generator,
        )


def _check_positive_ints(name: str, values: tuple, length: int | None) -> None:
    """Raise ``ValueError`` unless ``values`` are ``length`` (None: one or more) positive
    integers (``bool`` refused).
    """
    if (
        not values
        or (length is not None and len(values) != length)
        or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in values)
    ):
        size = "one or more" if length is None else str(length)
        raise ValueError(f"{name} must be {size} positive integers, got {values!r}")


def _check_arch(
    n_inputs: Any,
    hidden: Any,
    n_layers: Any,
    n_classes: Any,
    activation: Any,
    batchnorm: Any,
    dropout: Any,
) -> None:
    for name, value in (("n_inputs", n_inputs), ("n_layers", n_layers), ("n_classes", n_classes)):
        check_int(value, name)
    if n_layers > 1:
        check_int(hidden, "hidden")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if not isinstance(batchnorm, bool):
        raise TypeError(f"batchnorm must be a bool, got {type(batchnorm).__name__}")
    if not (isinstance(dropout, (int, float)) and 0 <= dropout < 1):
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


def build_mlp(
    n_inputs: int,
    hidden: int,
    n_layers: int,
    n_classes: int,
    activation: str = "relu",
    *,
    batchnorm: bool = False,
    dropout: float = 0.0,
    generator: torch.Generator | None = None,
) -> nn.Sequential:
    """Build an MLP with ``n_layers`` linear maps (callers flatten the images first).

    Parameters
    ----------
    n_inputs : int
        Input size (784 for MNIST, 3072 for CIFAR-10).
    hidden : int
        Width of every hidden layer (ignored when ``n_layers == 1``).
    n_layers : int
        Number of linear maps; 1 gives a linear classifier.
    n_classes : int
        Output size.
    activation : {"relu", "tanh"}
        Nonlinearity after every linear map but the last.
    batchnorm : bool, default=False
        Insert ``BatchNorm1d`` after each hidden linear map (before the activation).
    dropout : float, default=0.0
        If positive, ``Dropout`` after each hidden activation.
    generator : torch.Generator, optional
        Source of the initial weights; None uses torch's global generator.

    Returns
    -------
    torch.nn.Sequential
        With both options off, exactly ``Linear, act, Linear, act, ..., Linear``.

    Raises
    ------
    ValueError
        On non-positive sizes, an unknown activation or a dropout outside [0, 1).

    Examples
    --------
    >>> net = build_mlp(784, 650, 4, 10, generator=torch.Generator().manual_seed(0))
    >>> [m.out_features for m in net if isinstance(m, torch.nn.Linear)]
    [650, 650, 650, 10]
    """
    _check_arch(n_inputs, hidden, n_layers, n_classes, activation, batchnorm, dropout)
    sizes = [int(n_inputs)] + [int(hidden)] * (int(n_layers) - 1) + [int(n_classes)]
    modules: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        linear = nn.Linear(fan_in, fan_out, bias=True)
        with torch.no_grad():
            nn.init.xavier_normal_(linear.weight, generator=generator)
            bound = 1.0 / math.sqrt(fan_in)  # torch's default bias distribution, but seeded
            nn.init.uniform_(linear.bias, -bound, bound, generator=generator)
        modules.append(linear)
        if i < len(sizes) - 2:
            if batchnorm:
                modules.append(nn.BatchNorm1d(fan_out))
            modules.append(ACTIVATIONS[activation]())
            if dropout > 0:
                modules.append(nn.Dropout(dropout))
    return nn.Sequential(*modules)


# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# CNN
# --------------------------------------------------------------------------------------------
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
        """Each row of ``x`` reshaped to :attr:`shape`."""
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        """The target shape, shown in the module's ``repr``."""
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
        shape = tuple(self.input_shape)
        channels = tuple(self.channels)
        _check_positive_ints("input_shape", shape, 3)
        _check_positive_ints("channels", channels, 2)
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
        but seeded; the head is :func:`build_mlp`'s.

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


# --------------------------------------------------------------------------------------------
# ResNet
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResNetConfig:
    """Architecture of a small residual network in ResNet-18's layout (see :func:`build_resnet`).

    Attributes
    ----------
    input_shape : tuple of int
        ``(C, H, W)`` of one image.
    hidden : int
        Width of the head's hidden layers.
    n_layers : int
        Linear maps of the head (as an MLP's "layers"; 1: ResNet's single linear layer).
    n_classes : int
        Output size.
    activation : {"relu", "tanh"}
        After the stem, inside and after every block, and after every hidden linear map.
    channels : tuple of int
        Output channels of each stage (the stem has the first stage's).
    blocks : tuple of int
        Basic blocks per stage (as many as ``channels``).
    """

    input_shape: tuple[int, ...]
    hidden: int
    n_layers: int
    n_classes: int
    activation: str = "relu"
    channels: tuple[int, ...] = field(default=(16, 32, 64, 128))
    blocks: tuple[int, ...] = field(default=(1, 1, 1, 1))

    kind: ClassVar[str] = "resnet"

    def __post_init__(self) -> None:
        shape, channels, blocks = (tuple(v) for v in (self.input_shape, self.channels, self.blocks))
        _check_positive_ints("input_shape", shape, 3)
        _check_positive_ints("channels", channels, None)
        _check_positive_ints("blocks", blocks, None)
        if len(blocks) != len(channels):
            raise ValueError(
                f"blocks {blocks} and channels {channels} must name the same number of stages"
            )
        object.__setattr__(self, "input_shape", tuple(int(v) for v in shape))
        object.__setattr__(self, "channels", tuple(int(v) for v in channels))
        object.__setattr__(self, "blocks", tuple(int(v) for v in blocks))
        _check_arch(
            self.n_inputs, self.hidden, self.n_layers, self.n_classes, self.activation, False, 0.0
        )

    @property
    def n_inputs(self) -> int:
        """Pixels per image (the flattened input size)."""
        return math.prod(self.input_shape)

    @property
    def head_inputs(self) -> int:
        """Size of the body's output (the last stage's channels after global pooling)."""
        return self.channels[-1]

    @property
    def depth(self) -> int:
        """Weighted layers as ResNet names count them: stem, two per block, the head's maps.

        Examples
        --------
        >>> ResNetConfig((3, 32, 32), 0, 1, 10, channels=(64, 128, 256, 512),
        ...              blocks=(2, 2, 2, 2)).depth
        18
        """
        return 1 + 2 * sum(self.blocks) + self.n_layers

    @property
    def batchnorm(self) -> bool:
        """True: a batch of one image cannot train (the training loop drops it)."""
        return True

    def build(self, generator: torch.Generator | None = None) -> nn.Sequential:
        """Return a freshly initialised network of this architecture."""
        return build_resnet(self, generator=generator)


def _conv(c_in: int, c_out: int, size: int, stride: int, generator: Any) -> nn.Conv2d:
    """A bias-free convolution (batch norm follows), He-normal (fan-out) as torchvision's
    ResNets initialise them, drawn from ``generator``.
    """
    conv = nn.Conv2d(c_in, c_out, size, stride=stride, padding=size // 2, bias=False)
    with torch.no_grad():
        nn.init.kaiming_normal_(
            conv.weight, mode="fan_out", nonlinearity="relu", generator=generator
        )
    return conv


class BasicBlock(nn.Module):
    """ResNet's basic block: ``act(bn(conv(act(bn(conv(x))))) + shortcut(x))``.

    Parameters
    ----------
    c_in, c_out : int
        Input and output channels.
    stride : int
        Of the first convolution (2 halves the resolution).
    activation : {"relu", "tanh"}
        The nonlinearity.
    generator : torch.Generator, optional
        Source of the initial weights.
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        stride: int,
        activation: str,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.conv1 = _conv(c_in, c_out, 3, stride, generator)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = _conv(c_out, c_out, 3, 1, generator)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.act = ACTIVATIONS[activation]()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:  # torchvision's option B: a 1x1 projection
            self.shortcut = nn.Sequential(
                _conv(c_in, c_out, 1, stride, generator), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output for a batch of feature maps."""
        out = self.act(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.act(out + self.shortcut(x))


def build_resnet(config: ResNetConfig, generator: torch.Generator | None = None) -> nn.Sequential:
    """Build a small ResNet: ``body`` (stem, stages, global pooling) then ``head`` (an MLP).

    Parameters
    ----------
    config : ResNetConfig
        The architecture.
    generator : torch.Generator, optional
        Source of all initial weights: convolutions He-normal (fan-out), batch norm weight 1
        and bias 0 (torchvision's ResNet), the head :func:`build_mlp`'s.

    Returns
    -------
    torch.nn.Sequential
        With children ``body`` and ``head``; accepts flattened ``(N, C*H*W)`` or image
        ``(N, C, H, W)`` batches.

    Examples
    --------
    >>> cfg = ResNetConfig((3, 8, 8), hidden=16, n_layers=2, n_classes=10, channels=(4, 8),
    ...                    blocks=(1, 1))
    >>> net = build_resnet(cfg, generator=torch.Generator().manual_seed(0))
    >>> net(torch.zeros(3, 192)).shape, cfg.head_inputs, cfg.depth
    (torch.Size([3, 10]), 8, 7)
    """
    c_in = config.input_shape[0]
    c_stem = config.channels[0]
    body: list[nn.Module] = [
        ImageReshape(config.input_shape),
        _conv(c_in, c_stem, 3, 1, generator),  # a small image's stem: no 7x7 stride-2, no pool
        nn.BatchNorm2d(c_stem),
        ACTIVATIONS[config.activation](),
    ]
    c_in = c_stem
    for stage, (c_out, n_blocks) in enumerate(zip(config.channels, config.blocks, strict=True)):
        for b in range(n_blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            body.append(BasicBlock(c_in, c_out, stride, config.activation, generator))
            c_in = c_out
    body += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    head = build_mlp(
        config.head_inputs,
        config.hidden,
        config.n_layers,
        config.n_classes,
        config.activation,
        generator=generator,
    )
    return nn.Sequential(OrderedDict(body=nn.Sequential(*body), head=head))


_ARCHS: dict[str, Any] = {"mlp": ArchConfig, "cnn": CNNConfig, "resnet": ResNetConfig}


def model_arch(arch: Any, kind: str | None = None) -> Any:
    """Return the architecture object of a model kind (``"mlp"``: :class:`ArchConfig`,
    ``"cnn"``: :class:`CNNConfig`, ``"resnet"``: :class:`ResNetConfig`) from itself or its
    dict.

    Raises
    ------
    ValueError
        On an unknown kind.
    """
    if not isinstance(arch, dict):
        return arch
    kind = "mlp" if kind is None else kind
    if kind not in _ARCHS:
        raise ValueError(f"unknown model kind {kind!r}; expected one of {sorted(_ARCHS)}")
    return _ARCHS[kind](**arch)
