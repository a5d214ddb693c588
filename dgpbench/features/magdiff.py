"""MAGDiff features: the last layer's activation graph, flattened."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from dgpbench.features.base import _HeadFeatures
from dgpbench.parameters import MAGDIFF_RULES, sklearn_constraints
from dgpbench.topology import magdiff_representation

__all__ = ["MAGDiffFeatures"]


class MAGDiffFeatures(_HeadFeatures):
    """MAGDiff features (Hensel et al., 2023): the last layer's activation graph.

    The raw representation is the flattened absolute activation graph ``|a_i W_ij|`` of the
    final linear map (``n_{L-1} * n_outputs`` values), the same graph TU and DGP start from;
    ``signed=True`` keeps ``a_i W_ij`` signed, as the authors' evaluation code does. For a
    ReLU network (non-negative ``a_i``) the two differ by a fixed sign per coordinate, so the
    distances to the class means, and every detection, are the same; with tanh they differ.
    Features are distances to the class means.

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP, a network ending in one, a ``(body, head)`` pair, the path of a
        dgpbench checkpoint or of a ``torch.export`` program (``.pt2``), or
        ``package.module:factory`` (see :mod:`dgpbench.models.specs`).
    signed : bool, default=False
        Use the signed last-layer graph (the authors' code; workflow method
        ``magdiff_signed``) instead of the absolute one (``magdiff``).
    representation : {"distances", "raw"}, default="distances"
        Distances to class means, or the flattened activation graph.
    head : sequence of str, optional
        The head's ``nn.Linear`` modules by name (e.g. ``("fc1", "fc2")``), for a network
        with its own ``forward``; by default the trailing chain of linear maps, found with
        forward hooks and verified on the reference images (see
        :func:`dgpbench.models.body_head.find_head`).
    batch_size : int, default=256
        Samples per chunk.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the network's forward pass runs (``"auto"``: CUDA if available); the
        activation graph is computed on the CPU.

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
    class_means_ : list of one ndarray of shape (n_classes, n_{L-1} * n_outputs)
        Mean raw representation per class.
    n_features_in_ : int
        Number of input features.

    See Also
    --------
    DGPFeatures, TUFeatures

    Examples
    --------
    >>> import torch
    >>> from dgpbench import MAGDiffFeatures
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X, y = torch.rand(30, 4).numpy(), [0, 1, 2] * 10
    >>> MAGDiffFeatures(model).fit(X, y).transform(X).shape
    (30, 3)
    """

    _prefix = "magdiff"
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(MAGDIFF_RULES)

    def __init__(
        self,
        model: Any = None,
        *,
        signed: bool = False,
        representation: str = "distances",
        head: Sequence[str] | None = None,
        batch_size: int = 256,
        device: str = "cpu",
    ) -> None:
        super().__init__(
            model, representation=representation, head=head, batch_size=batch_size, device=device
        )
        self.signed = signed

    def _raw_blocks(self, X: np.ndarray) -> list[np.ndarray]:
        return [
            magdiff_representation(self.graph_, X, signed=self.signed, batch_size=self.batch_size)
        ]
