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
layers), or a ``(body, head)`` pair, is accepted too (:func:`dgpbench.models.cnn.split_network`):
the body runs in torch and TU, DGP and MAGDiff use the head's activation graphs with the
body's output as the input layer; Softmax uses the whole network.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import Interval, StrOptions, _fit_context
from dgpbench._device import DEVICE_OPTIONS

__all__: list[str] = []  # the shared base of the members; see dgpbench.features


#: The workflow's parameters (``dgpbench features``), taken by every representation, here
#: and in :mod:`dgpbench.features`: the model and how its forward pass runs.
WORKFLOW_CONSTRAINTS: dict = {
    "model": "no_validation",
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    # joblib's convention: -1 = all cores, -2 = all but one; 0 is meaningless
    "n_jobs": [
        Interval(Integral, 1, None, closed="left"),
        Interval(Integral, None, -1, closed="right"),
        None,
    ],
    "progress": ["boolean"],
    "device": [StrOptions(set(DEVICE_OPTIONS))],
}

#: The ``head`` parameter of the transformers that read a trailing MLP (TU, DGP, MAGDiff).
HEAD_CONSTRAINT: list = [list, tuple, None]


def _flatten_images(X: Any, input_shape: tuple[int, ...] | None = None) -> Any:
    """Flatten an image batch (numpy or torch) to (N, D) in channels-first order.

    2-D input passes through. ``(N, H, W)`` is one channel. ``(N, C, H, W)`` is flattened as
    ``C, H, W``; when the model's image shape is known (``input_shape``, from a dgpbench
    checkpoint of a built-in data set) every image batch must have exactly that shape
    (``(N, H, W)`` for a one-channel model), otherwise a batch that looks channels-last
    (last axis 2-4 entries, second axis more) is refused: flattening it as channels-first
    would silently scramble the pixels.
    """
    if hasattr(X, "detach") and hasattr(X, "cpu"):
        X = X.detach().cpu().numpy()
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) <= 2:
        return X
    shape = tuple(int(s) for s in shape)
    fix = "transpose it to (N, C, H, W) first, e.g. X.transpose(0, 3, 1, 2)"
    if len(shape) > 4:
        raise ValueError(
            f"X has shape {shape}; images must be (N, C, H, W), (N, H, W) or flattened (N, D)"
        )
    if input_shape is not None and len(input_shape) == 3:
        c, h, w = input_shape
        if shape[1:] != tuple(input_shape) and not (c == 1 and shape[1:] == (h, w)):
            hint = f"; {fix}" if shape[1:] == (h, w, c) else ""
            raise ValueError(
                f"X has images of shape {shape[1:]} but the model was trained on "
                f"(C, H, W) = {tuple(input_shape)}{hint}"
            )
    elif len(shape) == 4 and shape[1] > 1 and shape[3] > 1 and shape[3] <= 4 < shape[1]:
        raise ValueError(
            f"X of shape {shape} looks channels-last (N, H, W, C); images must be "
            f"(N, C, H, W) or flattened (N, D): {fix}"
        )
    if shape[0] == 0:
        raise ValueError(f"X is an empty batch (shape {shape}): pass at least one image")
    return np.asarray(X).reshape(shape[0], -1)


def _image_shape(shape: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """One image's shape of a batch of images, ``(H, W)`` for one channel; None if flat."""
    if shape is None or len(shape) <= 2:
        return None
    sample = tuple(int(s) for s in shape[1:])
    return sample[1:] if len(sample) == 3 and sample[0] == 1 else sample


def _expects_channels(module: Any) -> bool:
    """Whether a body holds a layer that needs ``(N, C, H, W)`` (a 2-D convolution, pooling
    or norm) anywhere, so that ``(N, H, W)`` images get their channel axis. Anywhere, not
    only first: a ``Sequential(Normalize(), Conv2d(...))`` or a network with its own
    ``forward`` starts with something else."""
    from torch import nn

    spatial = (
        nn.Conv2d,
        nn.ConvTranspose2d,
        nn.MaxPool2d,
        nn.AvgPool2d,
        nn.AdaptiveAvgPool2d,
        nn.AdaptiveMaxPool2d,
        nn.LPPool2d,
        nn.BatchNorm2d,
        nn.InstanceNorm2d,
    )
    return any(isinstance(m, spatial) for m in module.modules())


def _load_model(model: Any) -> tuple[Any, tuple[int, ...] | None]:
    """Return the torch module held by ``model`` (a module, a checkpoint or ``.pt2`` path, or
    ``package.module:factory``; see :mod:`dgpbench.models.specs`) and its input shape when
    the file tells it."""
    from dgpbench.models.specs import load_model

    return load_model(model)


def _logits_kind(network: Any, X: np.ndarray) -> tuple[str, int]:
    """What ``network`` returns on ``X`` (logits, ``log_softmax`` or ``softmax``) and how
    many classes."""
    import torch

    from dgpbench.models.cnn import output_kind

    device = next((p.device for p in network.parameters()), torch.device("cpu"))
    try:
        with torch.no_grad():
            out = network(torch.as_tensor(np.asarray(X, dtype=np.float32)).to(device))
    except RuntimeError as exc:
        raise ValueError(
            f"the model cannot take input of shape {tuple(X.shape)} (pass images as the "
            f"model expects them, e.g. (N, C, H, W)): {exc}"
        ) from exc
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"the model returns a {type(out).__name__}, not a tensor of logits")
    return output_kind(out), int(out.shape[1])


class _MLPFeatures(TransformerMixin, BaseEstimator):
    """Shared machinery: model loading, input checks, class means, distances."""

    _prefix: ClassVar[str] = "feat"
    _representations: ClassVar[tuple[str, ...]] = ("distances", "raw")

    _parameter_constraints: ClassVar[dict] = {
        **WORKFLOW_CONSTRAINTS,
        "representation": [StrOptions({"distances", "raw"})],
    }

    def __init__(
        self,
        model: Any = None,
        *,
        representation: str = "distances",
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.representation = representation
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.progress = progress
        self.device = device

    # -- hooks for subclasses -------------------------------------------------------------
    def _raw_blocks(self, X: np.ndarray) -> list[np.ndarray]:
        """Raw representation of ``X`` as a list of blocks (one per layer for TU)."""
        raise NotImplementedError

    def _predict_classes(self, X: np.ndarray) -> np.ndarray:
        """The model's predicted class (argmax of its outputs) of every row of ``X``."""
        bs = self.batch_size
        return np.concatenate(
            [self.graph_.forward(X[i : i + bs]).argmax(axis=1) for i in range(0, len(X), bs)]
        )

    # -- scikit-learn API ------------------------------------------------------------------
    def _raw_names(self) -> list[str]:
        """Names of the raw representation's columns."""
        return [f"{self._prefix}_raw{k}" for k in range(self._n_features_out)]

    def _validate_input(self, X: Any, y: Any = "no_validation", *, reset: bool) -> Any:
        """Flatten images, validate ``X`` (and ``y`` unless ``"no_validation"``, scikit-learn's
        convention), run the model's body if it has one, and check the MLP's input size."""
        if not reset:
            self._check_split()
        shape = getattr(X, "shape", None)
        X = _flatten_images(X, getattr(self, "input_shape_", None))
        sample = _image_shape(shape)
        if reset:
            self.image_shape_ = sample
        elif (
            sample is not None
            and self.image_shape_ is not None
            and sample != self.image_shape_
            and np.prod(sample) == np.prod(self.image_shape_)  # else: the size check says it
        ):
            # the same number of pixels in another layout would give other features
            raise ValueError(
                f"X has images of shape {tuple(shape[1:])} but the transformer was fitted on "
                f"images of shape {self.image_shape_}: pass images in the layout used in fit"
            )
        if (
            getattr(X, "dtype", None) == np.uint8
        ):  # the .npz rule (dgpbench.data.datasets): 0-255 pixels
            X = np.asarray(X).astype(np.float32) / np.float32(255.0)
        out = validate_data(self, X, y, reset=reset, dtype=np.float32)
        with_y = not (isinstance(y, str) and y == "no_validation")
        X = out[0] if with_y else out
        if self.body_ is not None:
            if reset:  # the body sees images in the model's shape, or as they were fitted
                if sample is not None and len(sample) == 2 and _expects_channels(self.body_.module):
                    sample = (1, *sample)  # (N, H, W) for a body that wants (N, C, H, W)
                self.body_input_shape_ = self.input_shape_ or sample or (X.shape[1],)
                if self.graph_ is None:  # any nn.Module: run it once to find its head
                    self._find_split(X.reshape(len(X), *self.body_input_shape_))
            X = self.body_(X.reshape(len(X), *self.body_input_shape_), batch_size=self.batch_size)
        n_in = self.graph_.n_inputs
        if X.shape[1] != n_in:
            where = "the model's body returns" if self.body_ is not None else "X has"
            raise ValueError(
                f"{where} {X.shape[1]} features per sample but the model's MLP part expects "
                f"{n_in} inputs"
            )
        return (X, out[1]) if with_y else X

    #: Whether the method reads the network's trailing MLP (TU, DGP, MAGDiff) or only its
    #: logits (Softmax, BBSD: any network, its output used whole).
    _needs_head: ClassVar[bool] = True

    #: Reference images used to find and verify the head of a network with its own forward.
    _probe_size: ClassVar[int] = 256

    def _attach_network(self, network: Any, *, fitted: bool = True) -> None:
        """Set ``body_`` and ``graph_`` from the network.

        In ``fit`` (``fitted=False``) a plain ``nn.Sequential``, a ``(body, head)`` pair or an
        MLPGraph is split by its layers; any other network (or a named ``head``) leaves
        ``graph_`` None until :meth:`_find_split` runs it on the reference images. A fitted
        transformer (a restored detector: ``fitted=True``) rebuilds the split it recorded
        (``head_``, ``head_activations_``, ``output_``) without a forward pass.
        """
        from dgpbench.models.cnn import NetworkBody, split_network

        if fitted and getattr(self, "output_", None) is not None:
            if isinstance(network, NetworkBody):
                network = network.module
            split = {
                "head": self.head_,
                "activations": self.head_activations_,
                "output": self.output_,
                "n_outputs": self.n_outputs_,
            }
            self.body_, self.graph_ = split_network(network, device=self.device, split=split)
            return
        self.head_ = self.head_activations_ = self.output_ = None
        head = getattr(self, "head", None)
        from torch import nn

        if head is not None or (not self._needs_head and isinstance(network, nn.Module)):
            # a named head, or only the logits wanted: the network is run whole, so a
            # trailing softmax or a forward of its own needs no layer-by-layer reading
            from dgpbench.models.cnn import _is_plain_sequential

            if head is not None or not _is_plain_sequential(network):
                self.body_, self.graph_ = NetworkBody(network, self.device), None
                return
        try:
            self.body_, self.graph_ = split_network(network, device=self.device)
        except ValueError:
            if self._needs_head:
                raise
            self.body_, self.graph_ = NetworkBody(network, self.device), None

    def to_device(self, device: str) -> _MLPFeatures:
        """Move a fitted transformer's network to ``device`` (e.g. a loaded detector's).

        Parameters
        ----------
        device : {"cpu", "cuda", "auto"}
            Where the network's forward pass runs from now on.

        Returns
        -------
        self : object
        """
        from dgpbench.models.cnn import NetworkBody
        from dgpbench.topology.graphs import MLPGraph

        check_is_fitted(self, "graph_")
        self._check_split()
        self.device = device
        if self.body_ is not None:
            self.body_ = NetworkBody(self.body_.module, device)
        self.graph_ = MLPGraph.from_module(self.graph_, device=device)
        return self

    def _check_split(self) -> None:
        """Rebuild a recorded split that a detector file's loader left out (``graph_`` None:
        the network whole in ``body_``), and refuse one it replaced by another."""
        if getattr(self, "output_", None) is None:
            return  # split by its layers: the loader splits it the same way
        from dgpbench.models.cnn import HeadInput, NetworkLogits

        module = getattr(self.body_, "module", None)
        if isinstance(module, (HeadInput, NetworkLogits)) and self.graph_ is not None:
            return
        if self.graph_ is None and module is not None:
            self._attach_network(module, fitted=True)
            return
        # A loader split the network by its layers, not by the recorded head (a named head
        # of a plain nn.Sequential): read the network again and apply the recorded split.
        network, _ = _load_model(self.model)
        self._attach_network(network, fitted=True)

    def _find_split(self, X: np.ndarray) -> None:
        """Split a network that cannot be read layer by layer, on the reference images."""
        from dgpbench.models.cnn import find_head, split_network

        probe = X[: self._probe_size]
        network = self.body_.module
        if self._needs_head:
            self.body_, self.graph_, split = find_head(
                network, probe, head=getattr(self, "head", None), device=self.device
            )
        else:
            kind, n_outputs = _logits_kind(network, probe)
            split = {"head": None, "activations": None, "output": kind, "n_outputs": n_outputs}
        self.head_ = None if split["head"] is None else tuple(split["head"])
        self.head_activations_ = (
            None if split["activations"] is None else tuple(split["activations"])
        )
        self.output_ = str(split["output"])
        if split["head"] is None:
            self.body_, self.graph_ = split_network(network, device=self.device, split=split)
        self.n_outputs_ = int(self.graph_.n_outputs)

    @_fit_context(prefer_skip_nested_validation=True)
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
        module, self.input_shape_ = _load_model(self.model)
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
        Refuse integer labels the model cannot output."""
        if self.classes_.dtype.kind not in "iu":
            return
        n_out = self.graph_.n_outputs
        if self.classes_.min() < 0 or self.classes_.max() >= n_out:
            # a label the model cannot output: the wrong labels, or the wrong model (28.21)
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
        check_is_fitted(self, "class_means_")
        X = self._validate_input(X, reset=False)
        blocks = self._raw_blocks(X)
        if self.representation != "distances":  # "raw" (and Softmax's "softmax")
            return np.concatenate(blocks, axis=1).astype(np.float64, copy=False)
        # cdist, not broadcasting: (n, c, d) temporaries reach hundreds of MB for MAGDiff.
        from scipy.spatial.distance import cdist  # here: scipy.spatial costs every start-up

        dists = [
            cdist(b.astype(np.float64, copy=False), mu)
            for b, mu in zip(blocks, self.class_means_, strict=True)
        ]
        return np.mean(dists, axis=0)  # TU averages its per-layer distance vectors

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output features: ``<method>_dist_class<label>`` or ``<method>_raw<k>``.

        Parameters
        ----------
        input_features : ignored
            Present for API consistency.

        Returns
        -------
        ndarray of str
            One name per output column.
        """
        check_is_fitted(self, "class_means_")
        if self.representation == "distances":
            names = [f"{self._prefix}_dist_class{c}" for c in self.classes_]
        else:
            names = self._raw_names()
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False  # fit(X) uses the model's predicted classes
        tags.input_tags.allow_nan = False
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


class _SummaryFeatures(_MLPFeatures):
    """Shared by DGP and its approximation: a raw representation read off the summary
    matrix S(x) by ``_summary`` (``dgp_representation``'s signature), with its options."""

    _summary: ClassVar[Callable[..., np.ndarray]]
    _parameter_constraints: ClassVar[dict] = {
        **_MLPFeatures._parameter_constraints,
        "head": HEAD_CONSTRAINT,
        "standardize": ["boolean"],
        "normalize": ["boolean"],
    }

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
