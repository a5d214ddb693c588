"""Topological Uncertainty (TU) features: per layer, the MST weights of the activation graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from dgpbench.features.base import _KernelFeatures
from dgpbench.parameters import TU_RULES, sklearn_constraints
from dgpbench.topology import tu_representation

__all__ = ["TUFeatures"]


class TUFeatures(_KernelFeatures):
    """Topological Uncertainty (TU) features (Lacombe et al., 2021).

    Per layer, the sorted maximum-spanning-tree weights of the absolute activation graph
    ``|a_i W_ij|``; with ``representation="distances"`` the distance vectors to the class
    means are computed per layer and averaged over layers (as in the paper).

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP, a network ending in one, a ``(body, head)`` pair, the path of a
        dgpbench checkpoint or of a ``torch.export`` program (``.pt2``), or
        ``package.module:factory`` (see :mod:`dgpbench.models.specs`).
    standardize : bool, default=False
        Standardise each signed layer first: the ablation "TU (+ norm)". As in the authors'
        code it divides by numpy's ``std()`` (``ddof=0``) + 1e-8, unlike DGP's unbiased one.
    representation : {"distances", "raw"}, default="distances"
        Distances to class means, or the raw per-layer MST weights concatenated.
    head : sequence of str, optional
        The head's ``nn.Linear`` modules by name (e.g. ``("fc1", "fc2")``), for a network
        with its own ``forward``; by default the trailing chain of linear maps, found with
        forward hooks and verified on the reference images (see
        :func:`dgpbench.models.body_head.find_head`).
    batch_size : int, default=256
        Samples per chunk.
    n_jobs : int or None, default=None
        Threads for the compiled kernels (``-1`` = all cores; see :class:`DGPFeatures`).
    progress : bool, default=False
        Show a tqdm progress bar.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the network's forward pass runs (``"auto"``: CUDA if available); the
        spanning-tree kernels run on the CPU.

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
    class_means_ : list of ndarray, one of shape (n_classes, n_l + m_l - 1) per layer
        Mean raw representation per class and layer.
    n_features_in_ : int
        Number of input features.

    See Also
    --------
    DGPFeatures : the whole-network alternative proposed in the paper.

    Examples
    --------
    >>> import torch
    >>> from dgpbench import TUFeatures
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X, y = torch.rand(30, 4).numpy(), [0, 1, 2] * 10
    >>> TUFeatures(model, representation="raw").fit(X, y).transform(X).shape
    (30, 15)
    """

    _prefix = "tu"
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(TU_RULES)

    def __init__(
        self,
        model: Any = None,
        *,
        standardize: bool = False,
        representation: str = "distances",
        head: Sequence[str] | None = None,
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        super().__init__(
            model,
            representation=representation,
            head=head,
            batch_size=batch_size,
            n_jobs=n_jobs,
            progress=progress,
            device=device,
        )
        self.standardize = standardize

    def _raw_blocks(self, X: np.ndarray) -> list[np.ndarray]:
        return tu_representation(
            self.graph_,
            X,
            standardize=self.standardize,
            batch_size=self.batch_size,
            n_jobs=self.n_jobs,
            progress=self.progress,
        )
