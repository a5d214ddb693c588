"""The DGP authors' cheap variant ``dgp_approximate``: row and column maxima of S(x).

The raw representation is :func:`dgpbench.topology.dgp_approx_representation`: the
concatenation of the row maxima (one per input node) and the column maxima (one per output
node) of the summary matrix ``S(x)``, the candidate weights of its maximum spanning tree
without the spanning-tree step. As in the authors' registered ``dgp_approximate``, the
activation graphs are neither standardised nor normalised by default; both options are
available.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from dgpbench.features.base import _SummaryFeatures
from dgpbench.parameters import DGP_APPROX_RULES, sklearn_constraints
from dgpbench.topology import dgp_approx_representation

__all__ = ["DGPApproxFeatures"]


class DGPApproxFeatures(_SummaryFeatures):
    """The DGP authors' ``dgp_approximate``: row/column maxima of S(x) instead of its MST.

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP, a network ending in one, a ``(body, head)`` pair, or a checkpoint.
    standardize : bool, default=False
        Standardise each signed layer graph first (the authors' approximate variant does
        not; their ``dgp_var_approximate`` does).
    normalize : bool, default=False
        Divide by the sample's largest graph weight.
    representation : {"distances", "raw"}, default="distances"
        Distances to the class means (the protocol's features) or the raw maxima.
    head : sequence of str, optional
        The head's ``nn.Linear`` modules by name (e.g. ``("fc1", "fc2")``), for a network
        with its own ``forward``; by default the trailing chain of linear maps, found with
        forward hooks and verified on the reference images (see
        :func:`dgpbench.models.body_head.find_head`).
    batch_size, n_jobs, progress, device
        As for :class:`dgpbench.features.dgp.DGPFeatures`.

    Attributes
    ----------
    graph_, input_shape_, body_, classes_, n_features_in_
        As for :class:`dgpbench.features.dgp.DGPFeatures`.
    class_means_ : list of one ndarray of shape (n_classes, n_inputs + n_outputs)
        Mean raw representation per class.

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X, y = torch.rand(30, 4).numpy(), [0, 1, 2] * 10
    >>> DGPApproxFeatures(model, representation="raw").fit(X, y).transform(X).shape
    (30, 7)
    """

    _prefix = "dgp_approx"
    _summary = staticmethod(dgp_approx_representation)
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(DGP_APPROX_RULES)

    def __init__(
        self,
        model: Any = None,
        *,
        standardize: bool = False,
        normalize: bool = False,
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
        self.normalize = normalize
