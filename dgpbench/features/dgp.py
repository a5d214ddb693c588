"""Sample-weighted deep graph persistence (DGP) features (Definitions 5.2-5.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from dgpbench.features.base import _SummaryFeatures
from dgpbench.parameters import DGP_RULES, sklearn_constraints
from dgpbench.topology import dgp_representation

__all__ = ["DGPFeatures"]


class DGPFeatures(_SummaryFeatures):
    """Sample-weighted deep graph persistence (DGP) features.

    For each image, the activation graph of the MLP is standardised per layer (optional),
    made absolute, divided by the sample's global maximum (optional), summarised into the
    input-by-output matrix S(x) of max-min path values (Algorithm 1), and reduced to the
    sorted weights of the maximum spanning tree of S(x).

    The ablation "DGP (- sort)" (``sort=False``) keeps the same tree but reports its weights
    in a canonical node order instead of sorting them, so that the vector keeps *where* each
    weight sits: number the nodes of S(x)'s bipartite graph inputs ``0..n_inputs-1``, then
    outputs ``n_inputs..n_inputs+n_outputs-1``; Prim's algorithm started from node 0
    attaches every other node ``v`` by exactly one tree edge, and raw feature ``v - 1`` is
    that edge's weight, for ``v = 1..n_inputs+n_outputs-1`` in node order. Among equal keys
    Prim takes the lowest node number first, so the vector is deterministic; sorted, it is
    the default representation (same tree, same multiset of weights).

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP (``nn.Linear`` layers and element-wise activations), a network ending
        in one (e.g. a CNN) or a ``(body, head)`` pair, the path of a dgpbench checkpoint or
        of a ``torch.export`` program (``.pt2``), or ``package.module:factory`` (see
        :mod:`dgpbench.models.specs`).
    standardize : bool, default=True
        Standardise each signed layer of the activation graph (subtract its mean, divide by
        its standard deviation). ``False`` is the ablation "DGP (- norm)".
    normalize : bool, default=True
        Divide by the sample's global maximum (the paper's normalisation to [0, 1]).
    sort : bool, default=True
        Sort the spanning-tree weights (the paper's DGP). ``False`` gives them in node order
        (see above): the ablation "DGP (- sort)", which is not invariant to a relabelling of
        the pixels.
    representation : {"distances", "raw"}, default="distances"
        Return distances to the class means of the reference images, or the raw MST weights.
    head : sequence of str, optional
        The head's ``nn.Linear`` modules by name (e.g. ``("fc1", "fc2")``), for a network
        with its own ``forward``; by default the trailing chain of linear maps, found with
        forward hooks and verified on the reference images (see
        :func:`dgpbench.models.body_head.find_head`).
    batch_size : int, default=256
        Samples per chunk (bounds memory).
    n_jobs : int or None, default=None
        Threads for the compiled kernels, as in scikit-learn: ``-1`` = all cores, ``-2`` =
        all but one, ``k >= 1`` = ``k`` threads, ``None`` = the current numba setting (all
        cores unless an enclosing scope set fewer).
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
    class_means_ : list of one ndarray of shape (n_classes, n_inputs + n_outputs - 1)
        Mean raw representation per class.
    n_features_in_ : int
        Number of input features (pixels).

    See Also
    --------
    TUFeatures : the per-layer baseline (Topological Uncertainty).
    KSShiftDetector : the two-sample test applied to these features.

    Examples
    --------
    >>> import torch
    >>> from dgpbench import DGPFeatures
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X, y = torch.rand(30, 4).numpy(), [0, 1, 2] * 10
    >>> DGPFeatures(model).fit(X, y).transform(X).shape
    (30, 3)
    """

    _prefix = "dgp"
    _summary = staticmethod(dgp_representation)
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(DGP_RULES)

    def __init__(
        self,
        model: Any = None,
        *,
        standardize: bool = True,
        normalize: bool = True,
        sort: bool = True,
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
        self.sort = sort

    def _summary_options(self) -> dict[str, Any]:
        return {"sort": self.sort}
