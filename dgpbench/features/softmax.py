"""Softmax (BBSD) features: the network's softmax output."""

from __future__ import annotations

from typing import Any, ClassVar

from dgpbench.features.base import _MLPFeatures
from dgpbench.features.network import SoftmaxOutput
from dgpbench.parameters import SOFTMAX_RULES, sklearn_constraints

__all__ = ["SoftmaxFeatures"]


class SoftmaxFeatures(SoftmaxOutput, _MLPFeatures):
    """Softmax outputs of the model (BBSD, Rabanser et al., 2019).

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP, a network ending in one, a ``(body, head)`` pair, the path of a
        dgpbench checkpoint or of a ``torch.export`` program (``.pt2``), or
        ``package.module:factory`` (see :mod:`dgpbench.models.specs`).
    representation : {"softmax", "distances"}, default="softmax"
        The softmax vector itself (the paper's baseline), or its distances to the class
        means of the reference images.
    batch_size : int, default=256
        Samples per chunk.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the network's forward pass runs (``"auto"``: CUDA if available).

    Attributes
    ----------
    graph_ : MLPGraph
        The weights of the model's MLP part (the whole model, or a CNN's head) in graph
        orientation.
    input_shape_ : tuple of int or None
        The model's image shape ``(C, H, W)`` when its checkpoint tells it (built-in data
        sets); image batches must then have exactly this shape.
    image_shape_ : tuple of int or None
        One image's shape in ``fit`` (``(H, W)`` for one channel; None for flat input);
        image batches given to ``transform`` must have it.
    body_ : dgpbench.models.body_head.NetworkBody or None
        The torch part before the MLP head (None for an MLP).
    classes_ : ndarray of shape (n_classes,)
        Class labels seen in ``fit``.
    class_means_ : list of one ndarray of shape (n_classes, n_outputs)
        Mean softmax vector per class.
    n_features_in_ : int
        Number of input features.

    See Also
    --------
    DGPFeatures

    Examples
    --------
    >>> import numpy as np, torch
    >>> from dgpbench import SoftmaxFeatures
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X, y = torch.rand(30, 4).numpy(), [0, 1, 2] * 10
    >>> P = SoftmaxFeatures(model).fit(X, y).transform(X)
    >>> P.shape, bool(np.allclose(P.sum(axis=1), 1.0))
    ((30, 3), True)
    """

    _parameter_constraints: ClassVar[dict] = sklearn_constraints(SOFTMAX_RULES)

    def __init__(
        self,
        model: Any = None,
        *,
        representation: str = "softmax",
        batch_size: int = 256,
        device: str = "cpu",
    ) -> None:
        super().__init__(model, representation=representation, batch_size=batch_size, device=device)


# The paper's methods and ablation variants, by the names the config and tables use.
