"""scikit-learn transformers that turn images into shift-detection features via a trained MLP.

Each transformer holds a trained torch MLP (``model``: an ``nn.Sequential`` of ``nn.Linear``
and element-wise activations, or a reference of :mod:`dgpbench.models.specs`: a dgpbench
checkpoint, a ``torch.export`` ``.pt2`` file or ``package.module:factory``) and follows the
paper's recipe (Section 5.2, "Method"): ``fit(X, y)`` computes a *raw representation* of every
labelled reference image and stores the per-class means; ``transform(X)`` returns, for every
image, the vector of L2 distances from its raw representation to each class mean
(``representation="distances"``, the default), or the raw representation itself
(``representation="raw"``).

Images are ``(N, C, H, W)`` (channels first, as torchvision and :mod:`dgpbench.data.datasets` give
them), ``(N, H, W)`` or already flattened ``(N, D)``. A multi-channel batch that looks
channels-last ``(N, H, W, C)``, or whose shape differs from the image shape a checkpoint
records, is refused rather than flattened in the wrong pixel order. One scale rule holds for
arrays and ``.npz`` files (:func:`dgpbench.data.datasets.load_npz_images`): ``uint8`` pixels are
divided by 255, any other dtype is taken as given (the scale the model was trained on).

Raw representations:

* :class:`DGPFeatures` - the MST weights of the sample-weighted DGP summary matrix S(x)
  (Definitions 5.2-5.3), ``n_inputs + n_classes - 1`` values;
* :class:`TUFeatures` - Topological Uncertainty: per layer, the MST weights of the activation
  graph; distances are computed per layer and averaged over layers;
* :class:`MAGDiffFeatures` - the last layer's activation graph, flattened (absolute by
  default; ``signed=True`` keeps the signs, as the authors' code does);
* :class:`SoftmaxFeatures` - the softmax output (BBSD); it returns the softmax vector itself
  by default (``representation="softmax"``).

A network whose trailing part is an MLP (e.g. a CNN: convolutions, ``Flatten``, linear
layers), or a ``(body, head)`` pair, is accepted too (:func:`dgpbench.models.body_head.split_network`):
the body runs in torch and TU, DGP and MAGDiff use the head's activation graphs with the
body's output as the input layer; Softmax uses the whole network.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.features.network import NetworkFeatures
from dgpbench.parameters import (
    DGP_APPROX_RULES,
    HEAD_RULES,
    KERNEL_RULES,
    NETWORK_RULES,
    REPRESENTATION_RULES,
    sklearn_constraints,
)

__all__: list[str] = []  # the shared base of the members; see dgpbench.features


class _MLPFeatures(NetworkFeatures, TransformerMixin, BaseEstimator):
    """Shared machinery: parameters, input checks, class means (the network side is
    :class:`~dgpbench.features.network.NetworkFeatures`).
    """

    _parameter_constraints: ClassVar[dict] = sklearn_constraints(
        {**NETWORK_RULES, **REPRESENTATION_RULES}
    )

    def __init__(
        self,
        model: Any = None,
        *,
        representation: str = "distances",
        batch_size: int = 256,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.representation = representation
        self.batch_size = batch_size
        self.device = device

    # -- scikit-learn's checks in NetworkFeatures' hooks ----------------------------------
    def _require_fitted(self, attribute: str) -> None:
        check_is_fitted(self, attribute)

    def _check_array(self, X: Any, y: Any = "no_validation", *, reset: bool) -> Any:
        return validate_data(self, X, y, reset=reset, dtype=np.float32)

    # -- scikit-learn API ------------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> _MLPFeatures:
        """Store the per-class mean raw representations of reference images.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs), (n_samples, H, W) or (n_samples, C, H, W)
            Reference images (the paper uses 1000 labelled training images), in the scale the
            model was trained on ([0, 1] for dgpbench models). ``uint8`` images are divided
            by 255, as ``.npz`` batches are (one scale rule for files and arrays).
        y : array-like of shape (n_samples,), default=None
            Class labels. ``None`` groups the images by the model's predicted class
            (``argmax`` of its outputs) instead: a departure from the paper, which uses true
            labels, for users without labelled references. Classes the model never predicts
            on ``X`` then get no mean (and no distance column); with ``"distances"`` a
            warning names the classes, as it does for labels that miss some of the model's
            classes.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        from dgpbench.models.specs import load_model  # here: it imports torch

        module, self.input_shape_ = load_model(self.model)
        self._attach_network(module, fitted=False)
        predicted = y is None
        if predicted:
            X = self._validate_input(X, reset=True)
            y = self._predict_classes(X)
        else:
            X, y = self._validate_input(X, y, reset=True)
        self.classes_, y_idx = np.unique(y, return_inverse=True)
        self._warn_missing_classes(labelled=not predicted)
        blocks = self._raw_blocks(X)
        self.class_means_ = [
            np.stack([b[y_idx == k].mean(axis=0) for k in range(len(self.classes_))])
            for b in blocks
        ]
        self._n_features_out = (
            len(self.classes_)
            if self.representation == "distances"
            else sum(b.shape[1] for b in blocks)
        )
        return self

    def _warn_missing_classes(self, *, labelled: bool) -> None:
        """Warn when the references leave out some of the model's classes: those get no
        class mean, so the features have fewer distance columns than the model has outputs.
        Refuse integer labels the model cannot output.
        """
        if self.classes_.dtype.kind not in "iu":
            return
        n_out = self.graph_.n_outputs
        if self.classes_.min() < 0 or self.classes_.max() >= n_out:
            # a label the model cannot output: the wrong labels, or the wrong model
            wrong = [int(c) for c in self.classes_ if c < 0 or c >= n_out]
            raise ValueError(
                f"the reference labels include {wrong[:5]}{'...' if len(wrong) > 5 else ''}, "
                f"but the model has {n_out} outputs (classes 0..{n_out - 1}): pass the "
                "labels of the model's classes, or the model these labels belong to"
            )
        if self.representation != "distances":
            return
        missing = sorted(set(range(n_out)) - {int(c) for c in self.classes_})
        if missing:
            why = "the reference labels have" if labelled else "the model predicts"
            warnings.warn(
                f"{why} no image of class{'es' if len(missing) > 1 else ''} {missing} "
                f"(the model has {n_out} outputs): the features get {len(self.classes_)} "
                f"distance columns, not {n_out}",
                UserWarning,
                stacklevel=4,  # the caller of fit (through scikit-learn's fit wrapper)
            )

    def transform(self, X: Any) -> np.ndarray:
        """Compute the features of every image.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs), (n_samples, H, W) or (n_samples, C, H, W)
            Images (numpy or torch); ``uint8`` pixels are divided by 255.

        Returns
        -------
        ndarray of shape (n_samples, n_features_out)
            Distances to each class mean (``representation="distances"``), or the raw
            representation (``representation="raw"``).
        """
        # defined here, not only in NetworkFeatures: scikit-learn's set_output wraps the
        # transform a class defines itself
        return NetworkFeatures.transform(self, X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False  # fit(X) uses the model's predicted classes
        tags.input_tags.allow_nan = False
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


class _HeadFeatures(_MLPFeatures):
    """Shared by the transformers that read the network's trailing MLP layer by layer (TU,
    MAGDiff, DGP and its approximation): the ``head`` that names it in a network with its
    own ``forward``.
    """

    _parameter_constraints: ClassVar[dict] = {
        **_MLPFeatures._parameter_constraints,
        **sklearn_constraints(HEAD_RULES),
    }

    def __init__(
        self,
        model: Any = None,
        *,
        representation: str = "distances",
        head: Sequence[str] | None = None,
        batch_size: int = 256,
        device: str = "cpu",
    ) -> None:
        super().__init__(model, representation=representation, batch_size=batch_size, device=device)
        self.head = head


class _KernelFeatures(_HeadFeatures):
    """Shared by the transformers whose representation runs the compiled spanning-tree
    kernels (TU, DGP and its approximation): their threads ``n_jobs`` and ``progress`` bar.
    """

    _parameter_constraints: ClassVar[dict] = {
        **_HeadFeatures._parameter_constraints,
        **sklearn_constraints(KERNEL_RULES),
    }

    def __init__(
        self,
        model: Any = None,
        *,
        representation: str = "distances",
        head: Sequence[str] | None = None,
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        super().__init__(
            model, representation=representation, head=head, batch_size=batch_size, device=device
        )
        self.n_jobs = n_jobs
        self.progress = progress


class _SummaryFeatures(_KernelFeatures):
    """Shared by DGP and its approximation: a raw representation read off the summary
    matrix S(x) by ``_summary`` (``dgp_representation``'s signature), with its options.
    """

    _summary: ClassVar[Callable[..., np.ndarray]]
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(DGP_APPROX_RULES)

    def _summary_options(self) -> dict[str, Any]:
        """Options of ``_summary`` beyond the shared ones (a subclass's own parameters)."""
        return {}

    def _raw_blocks(self, X: np.ndarray) -> list[np.ndarray]:
        return [
            self._summary(
                self.graph_,
                X,
                standardize=self.standardize,
                normalize=self.normalize,
                batch_size=self.batch_size,
                n_jobs=self.n_jobs,
                progress=self.progress,
                **self._summary_options(),
            )
        ]
