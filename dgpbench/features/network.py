"""The network side of the transformers built on a model, without scikit-learn.

:class:`NetworkFeatures` holds what :class:`~dgpbench.features.base._MLPFeatures` (and so
Softmax, TU, MAGDiff, DGP, BBSDh) does with the network once its parameters are set: read
images in the model's layout, split the network into a torch body and an MLP head (or find
the head of a network with its own ``forward``), run it, and turn raw representations into
features (``transform``). The estimator adds scikit-learn's parameter and input validation
(``_check_array``, ``_require_fitted``); scoring a saved softmax detector
(:mod:`dgpbench.saved.scoring`) adds checks of its own with the same outcomes, so that it runs the
same code without importing scikit-learn (a third of a command's start-up).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

__all__ = ["NetworkFeatures", "SoftmaxOutput", "as_real_array", "flatten_images"]


def flatten_images(X: Any, input_shape: tuple[int, ...] | None = None) -> Any:
    """Flatten an image batch (numpy or torch) to ``(N, D)`` in channels-first order.

    2-D input passes through. ``(N, H, W)`` is one channel. ``(N, C, H, W)`` is flattened as
    ``C, H, W``, the order :mod:`dgpbench.data.datasets` and the transformers use; when the
    model's image shape is known (``input_shape``, from a dgpbench checkpoint of a built-in
    data set) every image batch must have exactly that shape (``(N, H, W)`` for a
    one-channel model), otherwise a batch that looks channels-last (last axis 2-4 entries,
    second axis more) is refused: flattening it as channels-first would silently scramble
    the pixels.

    Parameters
    ----------
    X : array-like or torch.Tensor
        Images ``(N, C, H, W)`` or ``(N, H, W)``, or rows ``(N, D)``.
    input_shape : tuple of int, optional
        The model's image shape ``(C, H, W)``, when known.

    Returns
    -------
    ndarray of shape (N, D), or ``X`` itself when it has at most two axes

    Raises
    ------
    ValueError
        On more than four axes, an empty batch, images of another shape than
        ``input_shape``, or a batch that looks channels-last.

    Examples
    --------
    >>> import numpy as np
    >>> flatten_images(np.zeros((2, 1, 2, 2))).shape
    (2, 4)
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
    ``forward`` starts with something else.
    """
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


def _logits_kind(network: Any, X: np.ndarray) -> tuple[str, int]:
    """What ``network`` returns on ``X`` (logits, ``log_softmax`` or ``softmax``) and how
    many classes.
    """
    import torch

    from dgpbench.models.body_head import output_kind

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


def as_real_array(X: Any, dtype: Any) -> np.ndarray:
    """``X`` as an array of ``dtype``, as scikit-learn's ``check_array`` converts it.

    Parameters
    ----------
    X : array-like
        Numbers, or strings of numbers.
    dtype : numpy dtype
        The target floating dtype.

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        If ``X`` holds complex numbers or anything not convertible to ``dtype``.
    """
    array = np.asarray(X)
    if array.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    try:
        return array.astype(dtype, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X of dtype {array.dtype} is not real numbers: {exc}") from exc


class NetworkFeatures:
    """What a network-based transformer does with its network (no parameter handling).

    Subclasses provide ``_raw_blocks`` and set ``model``, ``representation``, ``batch_size``
    and ``device``; the fitted state is ``body_``, ``graph_``, ``input_shape_``,
    ``image_shape_``, ``n_features_in_``, ``classes_``, ``class_means_`` and the recorded
    split (``head_``, ``head_activations_``, ``output_``, ``n_outputs_``).
    """

    _prefix: ClassVar[str] = "feat"
    _representations: ClassVar[tuple[str, ...]] = ("distances", "raw")

    # -- hooks -------------------------------------------------------------------------------
    def _raw_blocks(self, X: np.ndarray) -> list[np.ndarray]:
        """Raw representation of ``X`` as a list of blocks (one per layer for TU)."""
        raise NotImplementedError

    def _require_fitted(self, attribute: str) -> None:
        """Raise unless ``attribute`` is set (the estimator raises scikit-learn's
        ``NotFittedError``).
        """
        if not hasattr(self, attribute):
            raise AttributeError(f"{type(self).__name__} is not fitted: no {attribute}")

    def _check_array(self, X: Any, y: Any = "no_validation", *, reset: bool) -> Any:
        """Check a flattened batch as scikit-learn's ``validate_data(self, X, dtype=float32)``
        does for a fitted transformer (``reset=False``, no ``y``): convertible to float32
        (numeric strings are, as there; complex numbers are not), 2-D, at least one row and
        column, finite, ``n_features_in_`` columns. The estimator overrides this with
        scikit-learn's own.
        """
        if reset or not (isinstance(y, str) and y == "no_validation"):
            raise NotImplementedError("fitting needs the scikit-learn estimator")
        array = as_real_array(X, np.float32)
        if array.ndim != 2 or 0 in array.shape:
            raise ValueError(f"X of shape {array.shape} holds no batch of images")
        if not np.isfinite(array).all():
            raise ValueError("X holds NaN or infinite values (or values too large for float32)")
        if array.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {array.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        return array

    def _predict_classes(self, X: np.ndarray) -> np.ndarray:
        """The model's predicted class (argmax of its outputs) of every row of ``X``."""
        bs = self.batch_size
        return np.concatenate(
            [self.graph_.forward(X[i : i + bs]).argmax(axis=1) for i in range(0, len(X), bs)]
        )

    def _raw_names(self) -> list[str]:
        """Names of the raw representation's columns."""
        return [f"{self._prefix}_raw{k}" for k in range(self._n_features_out)]

    def _validate_input(self, X: Any, y: Any = "no_validation", *, reset: bool) -> Any:
        """Flatten images, validate ``X`` (and ``y`` unless ``"no_validation"``, scikit-learn's
        convention), run the model's body if it has one, and check the MLP's input size.
        """
        if not reset:
            self._check_split()
        shape = getattr(X, "shape", None)
        X = flatten_images(X, getattr(self, "input_shape_", None))
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
        out = self._check_array(X, y, reset=reset)
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
        from dgpbench.models.body_head import NetworkBody, split_network

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
            from dgpbench.models.body_head import is_plain_sequential

            if head is not None or not is_plain_sequential(network):
                self.body_, self.graph_ = NetworkBody(network, self.device), None
                return
        try:
            self.body_, self.graph_ = split_network(network, device=self.device)
        except ValueError:
            if self._needs_head:
                raise
            self.body_, self.graph_ = NetworkBody(network, self.device), None

    def to_device(self, device: str) -> NetworkFeatures:
        """Move a fitted transformer's network to ``device`` (e.g. a loaded detector's).

        Parameters
        ----------
        device : {"cpu", "cuda", "auto"}
            Where the network's forward pass runs from now on.

        Returns
        -------
        self : object
        """
        from dgpbench.models.body_head import NetworkBody
        from dgpbench.topology.graphs import MLPGraph

        self._require_fitted("graph_")
        self._check_split()
        self.device = device
        if self.body_ is not None:
            self.body_ = NetworkBody(self.body_.module, device)
        self.graph_ = MLPGraph.from_module(self.graph_, device=device)
        return self

    def _check_split(self) -> None:
        """Rebuild a recorded split that a detector file's loader left out (``graph_`` None:
        the network whole in ``body_``), and refuse one it replaced by another.
        """
        if getattr(self, "output_", None) is None:
            return  # split by its layers: the loader splits it the same way
        from dgpbench.models.body_head import HeadInput, NetworkLogits

        module = getattr(self.body_, "module", None)
        if isinstance(module, (HeadInput, NetworkLogits)) and self.graph_ is not None:
            return
        if self.graph_ is None and module is not None:
            self._attach_network(module, fitted=True)
            return
        # A loader split the network by its layers, not by the recorded head (a named head
        # of a plain nn.Sequential): read the network again and apply the recorded split.
        from dgpbench.models.specs import load_model

        network, _ = load_model(self.model)
        self._attach_network(network, fitted=True)

    def _find_split(self, X: np.ndarray) -> None:
        """Split a network that cannot be read layer by layer, on the reference images."""
        from dgpbench.models.body_head import find_head, split_network

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

    def transform(self, X: Any) -> np.ndarray:
        """The features of every image (the estimators document them: ``SoftmaxFeatures``,
        ``DGPFeatures``, ...).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs), (n_samples, H, W) or (n_samples, C, H, W)
            Images (numpy or torch); ``uint8`` pixels are divided by 255.

        Returns
        -------
        ndarray of shape (n_samples, n_features_out)
            Distances to each class mean (``representation="distances"``), or the raw
            representation (``"raw"``, and Softmax's ``"softmax"``).
        """
        self._require_fitted("class_means_")
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
        self._require_fitted("class_means_")
        if self.representation == "distances":
            names = [f"{self._prefix}_dist_class{c}" for c in self.classes_]
        else:
            names = self._raw_names()
        return np.asarray(names, dtype=object)

    # -- saved state (dgpbench.saved) ------------------------------------------------------
    #: The fitted attributes :meth:`get_state` stores (the network itself is not stored).
    _state_attributes: ClassVar[frozenset[str]] = frozenset(
        ("input_shape_", "body_", "graph_", "image_shape_", "body_input_shape_",
         "n_features_in_", "classes_", "class_means_", "_n_features_out",
         "head_", "head_activations_", "output_", "n_outputs_")
    )  # fmt: skip

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state as JSON values and arrays, without the network.

        The network is identified apart (:func:`dgpbench.saved.network_fingerprint`); the
        state holds the image layout, the split of a network with its own forward, the
        classes and the class means.

        Returns
        -------
        state : dict
            JSON values: shapes, sizes and the recorded split.
        arrays : dict of str to ndarray
            ``classes_`` and ``class_means_/<k>``.

        Raises
        ------
        TypeError
            If the transformer holds state this method does not store.
        """
        from dgpbench.state import check_attributes

        check_attributes(self, self._state_attributes)
        state: dict[str, Any] = {}
        for key in ("input_shape_", "image_shape_", "body_input_shape_"):
            if hasattr(self, key):
                value = getattr(self, key)
                state[key] = None if value is None else [int(v) for v in value]
        state["n_features_in_"] = int(self.n_features_in_)
        state["n_features_out"] = int(self._n_features_out)
        if getattr(self, "output_", None) is not None:  # the recorded split: no forward on load
            state["split"] = {
                "head": None if self.head_ is None else [str(n) for n in self.head_],
                "activations": (
                    None
                    if self.head_activations_ is None
                    else [str(a) for a in self.head_activations_]
                ),
                "output": str(self.output_),
                "n_outputs": int(self.n_outputs_),
            }
        if self.classes_.dtype.kind not in "iuU":
            raise TypeError(
                f"cannot save {type(self).__name__}: classes_ of dtype {self.classes_.dtype}"
            )
        arrays = {"classes_": np.asarray(self.classes_)}
        if hasattr(self, "class_means_"):
            state["n_class_means"] = len(self.class_means_)
            for k, block in enumerate(self.class_means_):
                arrays[f"class_means_/{k}"] = np.asarray(block)
        return state, arrays

    def set_state(
        self,
        state: dict[str, Any],
        arrays: Any,
        *,
        network: Any,
        verify: Any = None,
    ) -> NetworkFeatures:
        """Restore the state :meth:`get_state` gave, on ``network``, checking every value.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The arrays, read on demand (``classes_``, ``class_means_/<k>``).
        network : torch.nn.Module or MLPGraph
            The network the transformer was fitted on.
        verify : callable, optional
            ``verify(body_, graph_)``, called once the network is attached and before the
            rest of the state is checked (the fingerprint: other errors follow from it).

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit the network or another value.
        ValueError
            If the network cannot be split as it was when fitted.
        """
        from dgpbench.models.body_head import split_network
        from dgpbench.state import StateError, check_keys, state_array, state_int, state_shape

        check_keys(
            state,
            ("input_shape_", "image_shape_", "n_features_in_", "n_features_out"),
            ("body_input_shape_", "split", "n_class_means"),
        )
        self.input_shape_ = state_shape(state["input_shape_"], "input_shape_")
        self.image_shape_ = state_shape(state["image_shape_"], "image_shape_")
        split = state.get("split")
        try:
            if split is None:
                self.body_, self.graph_ = split_network(network, device=self.device)
            else:
                self._set_split_state(split)
                self._attach_network(network, fitted=True)
        except StateError:
            raise
        except (TypeError, ValueError) as exc:  # a network of another kind than the fitted one
            raise ValueError(f"the model cannot be used: {exc}") from exc
        if verify is not None:
            verify(self.body_, self.graph_)
        body_shape = state.get("body_input_shape_")
        if (self.body_ is None) != (body_shape is None):
            raise StateError(
                "body_input_shape_ does not match the network (with or without a body)"
            )
        if body_shape is not None:
            self.body_input_shape_ = state_shape(body_shape, "body_input_shape_", optional=False)
        self.n_features_in_ = state_int(state["n_features_in_"], "n_features_in_", 1)
        if self.body_ is None and self.n_features_in_ != self.graph_.n_inputs:
            raise StateError(
                f"n_features_in_ = {self.n_features_in_} but the network takes "
                f"{self.graph_.n_inputs} inputs"
            )
        for key in ("image_shape_", "body_input_shape_"):
            shape = getattr(self, key, None)
            if shape is not None and math.prod(shape) != self.n_features_in_:
                raise StateError(
                    f"{key} {shape} does not hold n_features_in_ = {self.n_features_in_}"
                )
        self._check_shapes()
        self._n_features_out = state_int(state["n_features_out"], "n_features_out", 1)
        classes = state_array(arrays["classes_"], "classes_", kinds="iuU", ndim=1)
        if len(classes) == 0 or len(np.unique(classes)) != len(classes):
            raise StateError("classes_ must be distinct labels, at least one")
        self.classes_ = classes
        n_means = state.get("n_class_means")
        if n_means is None:  # BBSDh: the predicted class, no class means
            if self._n_features_out != 1 or not np.array_equal(
                classes, np.arange(self.graph_.n_outputs)
            ):
                raise StateError("classes_ or n_features_out do not match the network's outputs")
            return self
        n_means = state_int(n_means, "n_class_means", 1)
        means = [
            state_array(arrays[f"class_means_/{k}"], f"class_means_/{k}", ndim=2)
            for k in range(n_means)
        ]
        # The shapes the transformer's own raw representation has, from a probe through the head.
        probe = self._raw_blocks(np.zeros((2, self.graph_.n_inputs), dtype=np.float32))
        widths = [b.shape[1] for b in probe]
        if [m.shape for m in means] != [(len(classes), w) for w in widths]:
            raise StateError(
                f"class_means_ of shapes {[m.shape for m in means]} do not fit {len(classes)} "
                f"classes and the network's representation (widths {widths})"
            )
        self.class_means_ = means
        expected = len(classes) if self.representation == "distances" else sum(widths)
        if self._n_features_out != expected:
            raise StateError(f"n_features_out = {self._n_features_out}, expected {expected}")
        return self

    def _check_shapes(self) -> None:
        """Check restored shapes against each other, as ``fit`` derives them: the images'
        shape is the model's (one channel may be left out), and the body sees the model's
        shape, else the images' (with a channel axis for a convolutional body), else rows.
        Equal sizes are not enough: another layout gives other features.
        """
        from dgpbench.state import StateError

        image, model = self.image_shape_, self.input_shape_
        if image is not None and model is not None and len(model) == 3:
            allowed = {tuple(model)} | ({tuple(model[1:])} if model[0] == 1 else set())
            if tuple(image) not in allowed:
                raise StateError(f"image_shape_ {image} does not fit input_shape_ {model}")
        if self.body_ is None:
            return
        sample = image
        if sample is not None and len(sample) == 2 and _expects_channels(self.body_.module):
            sample = (1, *sample)
        expected = tuple(model or sample or (self.n_features_in_,))
        if tuple(self.body_input_shape_) != expected:
            raise StateError(
                f"body_input_shape_ {self.body_input_shape_} is not the shape the body is "
                f"given ({expected}, from input_shape_ {model} and image_shape_ {image})"
            )

    def _set_split_state(self, split: Any) -> None:
        """Set a recorded head split (``head_``, ``head_activations_``, ``output_``,
        ``n_outputs_``) after checking every field's type and value.
        """
        from dgpbench.models.body_head import OUTPUT_KINDS
        from dgpbench.state import StateError, state_int

        if not isinstance(split, dict) or set(split) != {
            "head",
            "activations",
            "output",
            "n_outputs",
        }:
            raise StateError("split must hold head, activations, output and n_outputs")

        def names(key: str) -> tuple[str, ...] | None:
            value = split[key]
            if value is None:
                return None
            if (
                not isinstance(value, list)
                or not value
                or not all(isinstance(v, str) for v in value)
            ):
                raise StateError(f"split {key} must be a non-empty list of names or null")
            return tuple(value)

        self.head_, self.head_activations_ = names("head"), names("activations")
        if split["output"] not in OUTPUT_KINDS:
            raise StateError(f"split output must be one of {OUTPUT_KINDS}, got {split['output']!r}")
        self.output_ = split["output"]
        self.n_outputs_ = state_int(split["n_outputs"], "split n_outputs", 1)


class SoftmaxOutput(NetworkFeatures):
    """The softmax of the network's logits as the raw representation (BBSD): one block of
    ``n_outputs`` columns, float64. Any network: its output is used whole.
    """

    _prefix: ClassVar[str] = "softmax"
    _needs_head: ClassVar[bool] = False  # the logits only: any network, its output used whole

    def _raw_blocks(self, X: np.ndarray) -> list[np.ndarray]:
        bs = self.batch_size
        logits = np.concatenate(
            [self.graph_.forward(X[i : i + bs]) for i in range(0, len(X), bs)]
        ).astype(np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return [p / p.sum(axis=1, keepdims=True)]

    def _raw_names(self) -> list[str]:
        return [f"softmax_p{k}" for k in range(self.graph_.n_outputs)]
