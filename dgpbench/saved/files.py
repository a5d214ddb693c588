"""Save a fitted feature transformer and detector to one file, and load them back, without pickle.

``dgpbench fit`` and ``dgpbench score --detector`` use this (the latter through
:func:`dgpbench.saved.scoring.load_scorer`); in Python, :func:`save_detector`
and :func:`load_detector` (alibi-detect's ``save_detector`` / ``load_detector`` are the model).
A saved detector is one ``.npz`` file:

* ``__meta__``: a JSON string with the format tag, the dgpbench version, the network (its
  path or ``package.module:factory``, and the SHA-256 of the fitted network's layers and
  weights), and for the transformer and the detector: a name of :data:`SAVEABLE`, its
  constructor parameters (JSON values) and its fitted numbers and shapes;
* the fitted arrays, one array each (``features/class_means_/0``, ``detector/X_ref_``, ...).

What loading trusts, and what it does not:

* **No code from the file.** The file is read with the size-checked reader of
  :mod:`dgpbench.npz` (no pickle, declared sizes within ``$DGPBENCH_MAX_INPUT_BYTES``), only
  the arrays the format expects (an extra member is an error), and classes are looked up by
  name in the explicit registry :data:`SAVEABLE`, never imported by path.
* **Nothing unchecked.** Every parameter goes through the estimator's own
  ``_parameter_constraints``; a detector is *refitted* on its saved reference sample, so its
  own ``fit`` checks it (finite, shape, sample count) exactly as for fresh data; a
  transformer's arrays are checked for finiteness and for shapes consistent with the network
  and with each other; the detector's width must be the transformer's output width.
* **The network is the one fitted.** The network is not stored: it is loaded from the
  recorded reference (or the ``model`` passed to :func:`load_detector`) and must have the
  recorded fingerprint, a SHA-256 over its layers (types and hyperparameters: a ReLU network
  and a Tanh network with the same weights differ) and their weights. The fingerprint is
  computed from the network the transformer was fitted on, never by loading it again. A
  detector whose model is a factory loads only when the caller names the factory again,
  since importing it runs code.

Every method of ``dgpbench fit --help`` and every test of :mod:`dgpbench.detectors` can be
saved (PCA, random projections and the autoencoders are stored as their arrays); the
domain-classifier test only with its default network (``classifier=None``), since a
scikit-learn classifier object cannot be stored without pickle.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dgpbench.io import atomic_path
from dgpbench.models.specs import (
    describe_model,
    is_factory_spec,
    load_model,
    update_state_digest,
)

__all__ = [
    "FORMAT",
    "SAVEABLE",
    "FittedDetector",
    "ModelRequiredError",
    "detector_classes",
    "is_saveable",
    "load_detector",
    "network_fingerprint",
    "save_detector",
]

#: Format tag of a saved detector file (2: registry names, fitted-network fingerprint).
FORMAT = "dgpbench-detector/2"
_META = "__meta__"
_MAX_META_BYTES = 16 * 2**20  # the JSON of a detector is kilobytes


class _Invalid(ValueError):
    """A detector file whose content breaks the format (load_detector adds the path)."""


@dataclass
class FittedDetector:
    """A fitted feature transformer and the detector fitted on its clean features.

    Parameters
    ----------
    features : transformer or None
        A fitted dgpbench feature transformer (``transform(X)``), or None when the detector
        takes the images themselves (the domain-classifier test).
    detector : estimator
        A detector fitted on ``features.transform`` of clean images (``test(F)``).
    info : dict
        JSON-able facts about the fit (method, numbers of images, ...).
    model_sha256 : str or None, default=None
        The fingerprint of the network the transformer was fitted on (see
        :func:`network_fingerprint`); set by :func:`save_detector` and
        :func:`load_detector`, None for a transformer without a network.
    """

    features: Any
    detector: Any
    info: dict[str, Any] = field(default_factory=dict)
    model_sha256: str | None = None

    def transform(self, X: Any) -> Any:
        """What the detector tests: ``features.transform(X)``, or ``X`` without features."""
        return X if self.features is None else self.features.transform(X)

    def test(self, X: Any) -> Any:
        """Featurise a batch of images and test it (the detector's result record)."""
        return self.detector.test(self.transform(X))


# --------------------------------------------------------------------------------------------
# The fingerprint of a fitted network
# --------------------------------------------------------------------------------------------
def _hash_module(digest: Any, module: Any, tag: str) -> None:
    """Layers (name, class, hyperparameters as ``extra_repr``) then every tensor's bytes."""
    for name, sub in module.named_modules():
        cls = type(sub)
        digest.update(f"{tag}|layer|{name}|{cls.__module__}.{cls.__qualname__}|".encode())
        digest.update(f"{sub.extra_repr()}|".encode())
    update_state_digest(digest, module, tag)


def network_fingerprint(body: Any, head: Any) -> str:
    """SHA-256 of a fitted network as a transformer holds it: its body and its MLP head.

    Parameters
    ----------
    body : dgpbench.models.body_head.NetworkBody, torch.nn.Module or None
        The torch part before the head (None for a plain MLP).
    head : dgpbench.topology.graphs.MLPGraph or torch.nn.Module
        The head: weights, biases and activations in graph orientation.

    Returns
    -------
    str
        The hex digest; it changes with any weight, any layer's type or hyperparameters
        (ReLU vs Tanh, max vs average pooling, a stride) and the activations.
    """
    from torch import nn

    from dgpbench.topology.graphs import MLPGraph

    digest = hashlib.sha256(b"dgpbench-network/1|")
    for tag, part in (("body", body), ("head", head)):
        module = getattr(part, "module", part)  # NetworkBody holds its module
        if part is None:
            digest.update(f"{tag}|none|".encode())
        elif isinstance(part, MLPGraph):
            digest.update(f"{tag}|mlp|{'|'.join(part.activations)}|".encode())
            for k, (w, b) in enumerate(zip(part.weights, part.biases, strict=True)):
                for label, arr in (("w", w), ("b", b)):
                    arr = np.ascontiguousarray(arr)
                    digest.update(f"{tag}|{k}|{label}|{arr.dtype.str}|{arr.shape}|".encode())
                    digest.update(arr.tobytes())
        elif isinstance(module, nn.Module):
            _hash_module(digest, module, tag)
        else:
            raise TypeError(f"cannot fingerprint a network part of type {type(part).__name__}")
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# Checks of values read from a file
# --------------------------------------------------------------------------------------------
def _int(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _Invalid(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _shape(value: Any, name: str, *, optional: bool = True) -> tuple[int, ...] | None:
    if value is None and optional:
        return None
    if not isinstance(value, list) or not 1 <= len(value) <= 4:
        raise _Invalid(f"{name} must be a list of 1 to 4 sizes, got {value!r}")
    return tuple(_int(v, name, 1) for v in value)


def _array(
    value: Any, name: str, *, kinds: str = "f", ndim: int | None = None, finite: bool = True
) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
        dtype = getattr(value, "dtype", type(value).__name__)
        raise _Invalid(f"{name} has dtype {dtype}, expected kind {kinds!r}")
    if ndim is not None and value.ndim != ndim:
        raise _Invalid(f"{name} has shape {value.shape}, expected {ndim} dimensions")
    if finite and value.dtype.kind == "f" and not np.isfinite(value).all():
        raise _Invalid(f"{name} holds NaN or infinite values")
    return value


def _json_value(value: Any) -> bool:
    """A parameter value JSON stores exactly: scalars and (nested) lists of scalars."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, list | tuple) and all(map(_json_value, value))


# --------------------------------------------------------------------------------------------
# Codecs: one per family of saveable estimators
# --------------------------------------------------------------------------------------------
class _Writer:
    """Collects an estimator's JSON state and arrays under a prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.state: dict[str, Any] = {}
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, key: str, value: Any) -> None:
        self.arrays[f"{self.prefix}/{key}"] = np.asarray(value)


class _Reader:
    """Reads an estimator's JSON state and only the arrays its codec asks for."""

    def __init__(self, prefix: str, state: Any, store: Any, used: set[str]) -> None:
        if not isinstance(state, dict):
            raise _Invalid(f"{prefix}: state must be a JSON object")
        self.prefix = prefix
        self._state = state
        self._store = store
        self._used = used
        self._asked: set[str] = set()

    def get(self, key: str, default: Any = ...) -> Any:
        self._asked.add(key)
        if key not in self._state:
            if default is ...:
                raise _Invalid(f"{self.prefix}: missing {key!r}")
            return default
        return self._state[key]

    def array(self, key: str) -> np.ndarray:
        name = f"{self.prefix}/{key}"
        if name not in self._store:
            raise _Invalid(f"missing array {name!r}")
        self._used.add(name)
        try:
            return self._store[name]
        except ValueError as exc:
            raise _Invalid(str(exc)) from exc

    def done(self) -> None:
        extra = sorted(set(self._state) - self._asked)
        if extra:
            raise _Invalid(f"{self.prefix}: unknown state {extra}")


def _unknown_state(est: Any, known: set[str]) -> None:
    params = set(est.get_params(deep=False))
    extra = sorted(k for k in vars(est) if k not in params and k not in known)
    if extra:
        raise TypeError(
            f"cannot save {type(est).__name__}: attribute {', '.join(extra)} is not part of "
            "its saved state (dgpbench.saved knows only the state of its own estimators; "
            "extend its codec in dgpbench/saved/files.py when adding state)"
        )


# -- transformers built on the network (softmax, TU, MAGDiff, DGP, BBSD) ------------------------
_MLP_STATE = {
    "input_shape_",
    "body_",
    "graph_",
    "image_shape_",
    "body_input_shape_",
    "n_features_in_",
    "classes_",
    "class_means_",
    "_n_features_out",
    # a network with its own forward: the head found on the reference images (issue 31)
    "head_",
    "head_activations_",
    "output_",
    "n_outputs_",
}


def _dump_mlp(est: Any, out: _Writer) -> None:
    _unknown_state(est, _MLP_STATE)
    s = out.state
    for key in ("input_shape_", "image_shape_", "body_input_shape_"):
        if hasattr(est, key):
            value = getattr(est, key)
            s[key] = None if value is None else [int(v) for v in value]
    s["n_features_in_"] = int(est.n_features_in_)
    s["n_features_out"] = int(est._n_features_out)
    if getattr(est, "output_", None) is not None:  # the recorded split: no forward pass on load
        s["split"] = {
            "head": None if est.head_ is None else [str(n) for n in est.head_],
            "activations": (
                None if est.head_activations_ is None else [str(a) for a in est.head_activations_]
            ),
            "output": str(est.output_),
            "n_outputs": int(est.n_outputs_),
        }
    if est.classes_.dtype.kind not in "iuU":
        raise TypeError(f"cannot save {type(est).__name__}: classes_ of dtype {est.classes_.dtype}")
    out.array("classes_", est.classes_)
    if hasattr(est, "class_means_"):
        s["n_class_means"] = len(est.class_means_)
        for k, block in enumerate(est.class_means_):
            out.array(f"class_means_/{k}", block)


def _restore_split(est: Any, split: Any) -> None:
    """Set a recorded head split (``head_``, ``head_activations_``, ``output_``,
    ``n_outputs_``) after checking every field's type and value."""
    from dgpbench.models.body_head import OUTPUT_KINDS

    if not isinstance(split, dict) or set(split) != {"head", "activations", "output", "n_outputs"}:
        raise _Invalid("split must hold head, activations, output and n_outputs")

    def names(key: str) -> tuple[str, ...] | None:
        value = split[key]
        if value is None:
            return None
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise _Invalid(f"split {key} must be a non-empty list of names or null")
        return tuple(value)

    est.head_, est.head_activations_ = names("head"), names("activations")
    if split["output"] not in OUTPUT_KINDS:
        raise _Invalid(f"split output must be one of {OUTPUT_KINDS}, got {split['output']!r}")
    est.output_ = split["output"]
    est.n_outputs_ = _int(split["n_outputs"], "split n_outputs", 1)


def _load_mlp(est: Any, inp: _Reader, network: Any) -> None:
    from dgpbench.models.body_head import split_network

    est.input_shape_ = _shape(inp.get("input_shape_"), "input_shape_")
    est.image_shape_ = _shape(inp.get("image_shape_"), "image_shape_")
    module, check = network
    split = inp.get("split", None)
    try:
        if split is None:
            est.body_, est.graph_ = split_network(module, device=est.device)
        else:
            _restore_split(est, split)
            est._attach_network(module, fitted=True)
    except (TypeError, ValueError) as exc:  # a network of another kind than the fitted one
        raise ValueError(f"the model cannot be used: {exc}") from exc
    check(est.body_, est.graph_)  # the fitted network first: other errors follow from it
    body_shape = inp.get("body_input_shape_", None)
    if (est.body_ is None) != (body_shape is None):
        raise _Invalid("body_input_shape_ does not match the network (with or without a body)")
    if body_shape is not None:
        est.body_input_shape_ = _shape(body_shape, "body_input_shape_", optional=False)
    est.n_features_in_ = _int(inp.get("n_features_in_"), "n_features_in_", 1)
    if est.body_ is None and est.n_features_in_ != est.graph_.n_inputs:
        raise _Invalid(
            f"n_features_in_ = {est.n_features_in_} but the network takes "
            f"{est.graph_.n_inputs} inputs"
        )
    for key in ("image_shape_", "body_input_shape_"):
        shape = getattr(est, key, None)
        if shape is not None and math.prod(shape) != est.n_features_in_:
            raise _Invalid(f"{key} {shape} does not hold n_features_in_ = {est.n_features_in_}")
    est._n_features_out = _int(inp.get("n_features_out"), "n_features_out", 1)
    classes = _array(inp.array("classes_"), "classes_", kinds="iuU", ndim=1)
    if len(classes) == 0 or len(np.unique(classes)) != len(classes):
        raise _Invalid("classes_ must be distinct labels, at least one")
    est.classes_ = classes
    n_means = inp.get("n_class_means", None)
    if n_means is None:  # BBSDh: the predicted class, no class means
        if est._n_features_out != 1 or not np.array_equal(classes, np.arange(est.graph_.n_outputs)):
            raise _Invalid("classes_ or n_features_out do not match the network's outputs")
        return
    n_means = _int(n_means, "n_class_means", 1)
    means = [
        _array(inp.array(f"class_means_/{k}"), f"class_means_/{k}", ndim=2) for k in range(n_means)
    ]
    # The shapes the transformer's own raw representation has, from a probe through the head.
    probe = est._raw_blocks(np.zeros((2, est.graph_.n_inputs), dtype=np.float32))
    widths = [b.shape[1] for b in probe]
    if [m.shape for m in means] != [(len(classes), w) for w in widths]:
        raise _Invalid(
            f"class_means_ of shapes {[m.shape for m in means]} do not fit {len(classes)} "
            f"classes and the network's representation (widths {widths})"
        )
    est.class_means_ = means
    expected = len(classes) if est.representation == "distances" else sum(widths)
    if est._n_features_out != expected:
        raise _Invalid(f"n_features_out = {est._n_features_out}, expected {expected}")


# -- model-free reductions (NoRed, PCA, SRP) ------------------------------------------------
def _dump_reduction(est: Any, out: _Writer) -> None:
    _unknown_state(est, {"n_features_in_", "_n_features_out", "pca_", "srp_", "image_shape_"})
    if hasattr(est, "image_shape_"):  # ImageFeatures: the images in their own shape
        out.state["image_shape_"] = [int(v) for v in est.image_shape_]
    out.state["n_features_in_"] = int(est.n_features_in_)
    out.state["n_features_out"] = int(est._n_features_out)
    if hasattr(est, "pca_"):
        pca = est.pca_
        out.array("pca/components_", pca.components_)
        out.array("pca/mean_", pca.mean_)
        out.array("pca/explained_variance_", pca.explained_variance_)
    if hasattr(est, "srp_"):
        comp = est.srp_.components_
        if hasattr(comp, "tocsr"):
            comp = comp.tocsr()
            out.array("srp/data", comp.data)
            out.array("srp/indices", comp.indices)
            out.array("srp/indptr", comp.indptr)
        else:
            out.array("srp/dense", comp)
        out.state["srp_sparse"] = hasattr(est.srp_.components_, "tocsr")
        out.state["srp_density"] = float(est.srp_.density_)


def _load_reduction(est: Any, inp: _Reader, network: Any) -> None:
    from dgpbench.features.reductions import ImageFeatures, PCAFeatures, SRPFeatures

    d = est.n_features_in_ = _int(inp.get("n_features_in_"), "n_features_in_", 1)
    k = est._n_features_out = _int(inp.get("n_features_out"), "n_features_out", 1)
    if isinstance(est, ImageFeatures):
        est.image_shape_ = _shape(inp.get("image_shape_"), "image_shape_", optional=False)
        if math.prod(est.image_shape_) != d:
            raise _Invalid(f"image_shape_ {est.image_shape_} does not hold {d} pixels")
    if isinstance(est, PCAFeatures):
        from sklearn.decomposition import PCA

        comp = _array(inp.array("pca/components_"), "pca components_", ndim=2)
        mean = _array(inp.array("pca/mean_"), "pca mean_", ndim=1)
        var = _array(inp.array("pca/explained_variance_"), "pca explained_variance_", ndim=1)
        if comp.shape != (k, d) or mean.shape != (d,) or var.shape != (k,) or (var < 0).any():
            raise _Invalid(f"PCA arrays do not fit {d} inputs and {k} components")
        pca = PCA(n_components=est.n_components, svd_solver="full", random_state=est.random_state)
        pca.components_, pca.mean_, pca.explained_variance_ = comp, mean, var
        pca.n_components_, pca.n_features_in_ = k, d
        est.pca_ = pca
    elif isinstance(est, SRPFeatures):
        import scipy.sparse
        from sklearn.random_projection import SparseRandomProjection

        if inp.get("srp_sparse"):
            data = _array(inp.array("srp/data"), "srp data", ndim=1)
            indices = _array(inp.array("srp/indices"), "srp indices", kinds="iu", ndim=1)
            indptr = _array(inp.array("srp/indptr"), "srp indptr", kinds="iu", ndim=1)
            try:
                comp = scipy.sparse.csr_matrix((data, indices, indptr), shape=(k, d))
                comp.check_format(full_check=True)
            except ValueError as exc:
                raise _Invalid(f"the random projection is malformed ({exc})") from exc
        else:
            comp = _array(inp.array("srp/dense"), "srp components", ndim=2)
            if comp.shape != (k, d):
                raise _Invalid(f"the random projection does not fit {d} inputs and {k} outputs")
        density = inp.get("srp_density")
        if not isinstance(density, float) or not 0 < density <= 1:
            raise _Invalid(f"srp density must be in (0, 1], got {density!r}")
        srp = SparseRandomProjection(
            n_components=k, dense_output=True, random_state=est.random_state
        )
        srp.components_, srp.n_components_, srp.density_, srp.n_features_in_ = comp, k, density, d
        est.srp_ = srp
    elif k != d:  # NoRed: the pixels themselves
        raise _Invalid(f"n_features_out = {k}, but NoRed returns its {d} inputs")


# -- autoencoders (UAE, TAE) ----------------------------------------------------------------
def _dump_autoencoder(est: Any, out: _Writer) -> None:
    _unknown_state(
        est,
        {"image_shape_", "n_features_in_", "architecture_", "encoder_", "decoder_", "loss_curve_"},
    )
    s = out.state
    s["image_shape_"] = [int(v) for v in est.image_shape_]
    s["n_features_in_"] = int(est.n_features_in_)
    s["architecture_"] = str(est.architecture_)
    if hasattr(est, "loss_curve_"):
        s["loss_curve_"] = [float(v) for v in est.loss_curve_]
    for part in ("encoder", "decoder"):
        state = getattr(est, f"{part}_").state_dict()
        s[f"{part}_keys"] = sorted(state)
        for key in sorted(state):
            out.array(f"{part}/{key}", state[key].detach().cpu().numpy())


def _load_autoencoder(est: Any, inp: _Reader, network: Any) -> None:
    import torch

    from dgpbench.features.autoencoders import ARCHITECTURES, build_autoencoder

    shape = _shape(inp.get("image_shape_"), "image_shape_", optional=False)
    if len(shape) != 3:
        raise _Invalid(f"image_shape_ must be (C, H, W), got {shape}")
    est.image_shape_ = shape
    est.n_features_in_ = _int(inp.get("n_features_in_"), "n_features_in_", 1)
    if est.n_features_in_ != math.prod(shape):
        raise _Invalid(f"n_features_in_ = {est.n_features_in_} does not match image_shape_")
    arch = inp.get("architecture_")
    if arch not in ARCHITECTURES:
        raise _Invalid(f"unknown autoencoder architecture {arch!r}")
    est.architecture_ = arch
    if "loss_curve_" in inp._state or type(est).__name__ == "TAEFeatures":
        curve = inp.get("loss_curve_")
        if not isinstance(curve, list) or not all(isinstance(v, float) for v in curve):
            raise _Invalid("loss_curve_ must be a list of numbers")
        est.loss_curve_ = curve
    encoder, decoder = build_autoencoder(arch, shape, 0)
    for part, module in (("encoder", encoder), ("decoder", decoder)):
        expected = module.state_dict()
        if inp.get(f"{part}_keys") != sorted(expected):
            raise _Invalid(f"the {part}'s weights do not fit the {arch!r} architecture")
        state = {}
        for key, ref in expected.items():
            arr = _array(inp.array(f"{part}/{key}"), f"{part} {key}")
            if arr.shape != tuple(ref.shape) or arr.dtype != np.float32:
                raise _Invalid(
                    f"{part} {key} has shape {arr.shape} {arr.dtype}, not {tuple(ref.shape)}"
                )
            state[key] = torch.from_numpy(np.array(arr))
        module.load_state_dict(state)
        setattr(est, f"{part}_", module.eval())


# -- detectors: refitted on their saved reference sample ------------------------------------
def _dump_detector(est: Any, out: _Writer) -> None:
    key = "y_ref_" if hasattr(est, "y_ref_") else "X_ref_"
    _unknown_state(est, {key, "n_features_in_"})
    if getattr(est, "classifier", None) is not None:
        raise TypeError(
            "cannot save a ClassifierShiftDetector with a scikit-learn classifier (it cannot be "
            "stored without pickle): use classifier=None, the default network"
        )
    out.array(key, getattr(est, key))


def _load_detector(est: Any, inp: _Reader, network: Any) -> None:
    key = "y_ref_" if type(est).__name__ == "ChiSquareShiftDetector" else "X_ref_"
    ref = inp.array(key)
    if ref.dtype.kind not in "biuf":
        raise _Invalid(f"{key} has dtype {ref.dtype}, not numbers")
    # The detector's own fit checks the sample exactly as for fresh data (finite, shape,
    # enough rows, not constant) and rebuilds the identical state from it.
    try:
        est.fit(ref.reshape(-1, 1) if key == "y_ref_" else ref)
    except (ValueError, TypeError) as exc:
        raise _Invalid(f"its reference sample {key} is invalid: {exc}") from exc


# name -> (class path, dump, load); the classes are imported only when a file names them.
_CODECS: dict[str, tuple[str, Callable[..., None], Callable[..., None]]] = {
    **{
        name: (f"dgpbench.features.{module}:{name}", _dump_mlp, _load_mlp)
        for module, name in (
            ("softmax", "SoftmaxFeatures"),
            ("tu", "TUFeatures"),
            ("magdiff", "MAGDiffFeatures"),
            ("dgp", "DGPFeatures"),
            ("bbsd", "BBSDhFeatures"),
            ("dgp_approx", "DGPApproxFeatures"),
        )
    },
    **{
        name: (f"dgpbench.features.reductions:{name}", _dump_reduction, _load_reduction)
        for name in ("NoRedFeatures", "PCAFeatures", "SRPFeatures", "ImageFeatures")
    },
    **{
        name: (f"dgpbench.features.autoencoders:{name}", _dump_autoencoder, _load_autoencoder)
        for name in ("UAEFeatures", "TAEFeatures")
    },
    **{
        name: (f"dgpbench.detectors.{module}:{name}", _dump_detector, _load_detector)
        for module, name in (
            ("ks", "KSShiftDetector"),
            ("mmd", "MMDShiftDetector"),
            ("chi2", "ChiSquareShiftDetector"),
            ("classifier", "ClassifierShiftDetector"),
        )
    },
}
_DETECTOR_NAMES = frozenset(
    ("KSShiftDetector", "MMDShiftDetector", "ChiSquareShiftDetector", "ClassifierShiftDetector")
)
_NETWORK_CODECS = (_load_mlp,)

#: The saveable estimators: registry name -> ``module:class`` (the only classes a file may name).
SAVEABLE: dict[str, str] = {name: spec[0] for name, spec in _CODECS.items()}


def _class(name: str) -> type:
    """The class of a registry name (imported from dgpbench's own fixed path)."""
    import importlib

    module, _, attr = _CODECS[name][0].partition(":")
    return getattr(importlib.import_module(module), attr)


def is_saveable(est: Any) -> bool:
    """Whether :func:`save_detector` can store ``est`` (a transformer or detector instance).

    Lets a caller refuse an unsaveable method (a custom ``package.module:ClassName``, a
    classifier test with a scikit-learn classifier) before a long fit.
    """
    for role in ("features", "detector"):
        try:
            _registry_name(est, role)
        except TypeError:
            continue
        return getattr(est, "classifier", None) is None
    return False


def _registry_name(est: Any, role: str) -> str:
    cls = type(est)
    for name, (spec, _, _) in _CODECS.items():
        if spec == f"{cls.__module__}:{cls.__qualname__}" and (name in _DETECTOR_NAMES) == (
            role == "detector"
        ):
            return name
    kinds = sorted(n for n in _CODECS if (n in _DETECTOR_NAMES) == (role == "detector"))
    raise TypeError(
        f"cannot save a {cls.__module__}.{cls.__qualname__} as the {role}: only dgpbench's own "
        f"transformers and detectors can be saved ({', '.join(kinds)}); loading any other "
        "class would mean importing code named in the file"
    )


def _params(est: Any) -> dict[str, Any]:
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "model"}
    for key, value in params.items():
        if key == "classifier" and value is None:
            continue
        if not _json_value(value):
            raise TypeError(
                f"cannot save {type(est).__name__}: parameter {key}={value!r} is not a "
                "finite number, string, bool, None or a list of these"
            )
        if isinstance(value, tuple):
            params[key] = list(value)
    return params


def _dump(est: Any, role: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    from sklearn.utils.validation import check_is_fitted

    name = _registry_name(est, role)
    check_is_fitted(est)
    out = _Writer(role)
    _CODECS[name][1](est, out)
    return {"class": name, "params": _params(est), "state": out.state}, out.arrays


def _spec_class(spec: Any, role: str) -> str:
    """The registry name an estimator's spec gives, checked (nothing is imported)."""
    if not isinstance(spec, dict) or set(spec) != {"class", "params", "state"}:
        raise _Invalid(f"{role}: expected an object with class, params and state")
    name = spec["class"]
    if (
        not isinstance(name, str)
        or name not in _CODECS
        or (name in _DETECTOR_NAMES) != (role == "detector")
    ):
        raise _Invalid(
            f"{role}: class {name!r} is not a saveable dgpbench {role} (known: "
            f"{', '.join(n for n in _CODECS if (n in _DETECTOR_NAMES) == (role == 'detector'))})"
        )
    return name


#: Parameters added after FORMAT's release, by registry name: their value for older files.
_ADDED_PARAMS: dict[str, dict[str, Any]] = {"DGPFeatures": {"sort": True}}


def _build(
    spec: Any,
    role: str,
    store: Any,
    used: set[str],
    network: Any,
    model: Any,
    classes: Callable[[str], type] = _class,
) -> Any:
    """Rebuild one estimator from its JSON spec: registry class (or the class ``classes``
    gives for its registry name), checked parameters, state."""
    name = _spec_class(spec, role)
    cls = classes(name)
    params = spec["params"]
    if not isinstance(params, dict) or not all(_json_value(v) for v in params.values()):
        raise _Invalid(f"{role}: params must be an object of JSON numbers, strings and lists")
    est = cls()
    # Files written before a parameter existed lack it: it takes the value that was the
    # only behaviour then (and is its default).
    params = {**_ADDED_PARAMS.get(name, {}), **params}
    expected = set(est.get_params(deep=False)) - {"model"}
    if set(params) != expected:
        raise _Invalid(
            f"{role}: {name} takes parameters {sorted(expected)}, the file gives {sorted(params)}"
        )
    est.set_params(**params, **({"model": model} if "model" in est.get_params() else {}))
    try:
        est._validate_params()  # the estimator's own _parameter_constraints
    except (ValueError, TypeError) as exc:
        raise _Invalid(f"{role}: {exc}") from exc
    reader = _Reader(role, spec["state"], store, used)
    _CODECS[name][2](est, reader, network)
    reader.done()
    return est


def _read_meta(store: Any) -> dict[str, Any]:
    if _META not in store:
        raise _Invalid("no __meta__ entry")
    try:
        raw = store[_META]
    except ValueError as exc:
        raise _Invalid(str(exc)) from exc
    if raw.dtype.kind != "U" or raw.ndim != 0 or raw.nbytes > 4 * _MAX_META_BYTES:
        raise _Invalid("__meta__ is not one JSON string")
    try:
        meta = json.loads(str(raw))
    except (ValueError, RecursionError) as exc:
        raise _Invalid(f"__meta__ is not valid JSON ({type(exc).__name__})") from exc
    if not isinstance(meta, dict):
        raise _Invalid("__meta__ is not a JSON object")
    if meta.get("format") != FORMAT:
        older = str(meta.get("format", "")).startswith("dgpbench-detector/")
        raise _Invalid(
            f"format {meta.get('format')!r}, expected {FORMAT!r}"
            + ("; it was written by an older dgpbench: fit it again" if older else "")
        )
    keys = {"format", "version", "model", "features", "detector", "info"}
    if set(meta) != keys:
        raise _Invalid(f"__meta__ has keys {sorted(meta)}, expected {sorted(keys)}")
    if not isinstance(meta["version"], str):
        raise _Invalid(f"version must be a string, got {meta['version']!r}")
    if not isinstance(meta["info"], dict):
        raise _Invalid("info must be a JSON object")
    model = meta["model"]
    if model is not None:
        if not isinstance(model, dict) or set(model) != {"reference", "sha256"}:
            raise _Invalid("model must be null or an object with reference and sha256")
        ref, sha = model["reference"], model["sha256"]
        if not (ref is None or isinstance(ref, str)):
            raise _Invalid(f"model reference must be a string or null, got {ref!r}")
        if not (
            isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)
        ):
            raise _Invalid(f"model sha256 must be 64 hex digits, got {sha!r}")
    return meta


def save_detector(
    path: str | os.PathLike[str],
    fitted: FittedDetector,
    *,
    model: Any = None,
) -> Path:
    """Write a fitted transformer and detector to one ``.npz`` file (atomically, no pickle).

    Parameters
    ----------
    path : path-like
        The output file (``.npz`` is not appended).
    fitted : FittedDetector
        The fitted pair (``features`` may be None when the detector takes the images).
    model : path-like or str, optional
        How to find the network on load, when the transformer holds the module itself:
        a checkpoint or ``.pt2`` path, or ``package.module:factory``. Defaults to the
        transformer's ``model`` when that is such a reference. It is recorded, never loaded
        here: the fingerprint is taken from the network the transformer was fitted on.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        If an estimator is not in :data:`SAVEABLE`, or holds state that cannot be stored.
    """
    features, detector = fitted.features, fitted.detector
    arrays: dict[str, np.ndarray] = {}
    feat_spec = None
    model_meta = None
    sha = None
    if features is not None:
        feat_spec, arrays = _dump(features, "features")
        if _CODECS[feat_spec["class"]][2] in _NETWORK_CODECS:
            sha = network_fingerprint(features.body_, features.graph_)
            reference = describe_model(features.model if model is None else model)
            model_meta = {"reference": reference, "sha256": sha}
    det_spec, det_arrays = _dump(detector, "detector")
    arrays.update(det_arrays)
    try:
        json.dumps(fitted.info, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot save info: it must be JSON (finite numbers): {exc}") from exc
    if not isinstance(fitted.info, dict) or not all(isinstance(k, str) for k in fitted.info):
        raise TypeError("cannot save info: it must be a dict with string keys")
    meta = {
        "format": FORMAT,
        "version": _version(),
        "model": model_meta,
        "features": feat_spec,
        "detector": det_spec,
        "info": fitted.info,
    }
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **{_META: np.array(json.dumps(meta))}, **arrays)
    fitted.model_sha256 = sha
    return Path(path)


def _version() -> str:
    import dgpbench

    return str(dgpbench.__version__)


class ModelRequiredError(ValueError):
    """A detector file that records no loadable model: the caller must pass the network.

    The message says ``model=`` (Python's word); the command line says ``--model`` instead,
    from :attr:`reason`.
    """

    def __init__(self, reason: str, path: Any) -> None:
        super().__init__(f"{reason}: pass model=")
        self.reason = reason
        self.path = path


def _network(path: Any, recorded: dict[str, Any], model: Any) -> tuple[Any, Any]:
    """The network to check against the file, and the model argument the transformer keeps."""
    if model is None:
        reference = recorded["reference"]
        if reference is None:
            raise ModelRequiredError(f"{path} was saved from an in-memory network", path)
        if is_factory_spec(reference):
            raise ValueError(
                f"{path}: its model is the factory {reference!r}; loading it runs that code, "
                f"so name it yourself (--model {reference} on the command line, model= in "
                "Python)"
            )
        try:
            network, _ = load_model(reference)
        except FileNotFoundError as exc:
            raise ValueError(
                f"{path}: its model {reference} does not exist (moved or deleted?): pass the "
                "model's new path (--model on the command line, model= in Python)"
            ) from exc
        return network, reference
    network, _ = load_model(model)
    return network, model


def detector_classes(path: str | os.PathLike[str]) -> tuple[str | None, str] | None:
    """The registry names of a detector file's transformer and detector, or None when the
    file cannot be read as one (then :func:`load_detector` says why). Nothing is imported
    or loaded but the file's JSON header."""
    from dgpbench.npz import open_npz

    try:
        with open_npz(path) as store:
            meta = _read_meta(store)
            features = meta["features"]
            return (
                None if features is None else _spec_class(features, "features"),
                _spec_class(meta["detector"], "detector"),
            )
    except (OSError, ValueError):
        return None


def load_detector(path: str | os.PathLike[str], *, model: Any = None) -> FittedDetector:
    """Load a detector written by :func:`save_detector` (no pickle, no code from the file).

    Parameters
    ----------
    path : path-like
        The detector file.
    model : torch.nn.Module, path-like or str, optional
        The network, instead of the one the file records (e.g. after moving the
        checkpoint). Required when the file records an in-memory network or a factory
        (``package.module:factory`` runs code, so it is never imported on the file's word).
        Ignored for a transformer without a network (PCA, SRP, NoRed, UAE, TAE).

    Returns
    -------
    FittedDetector
        The transformer and detector, ready to ``test`` a batch.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a valid dgpbench detector (each cause named), or the network's
        layers or weights do not match the recorded fingerprint.
    """
    return _load(path, model, _class)


def _load(path: Any, model: Any, classes: Callable[[str], type]) -> FittedDetector:
    """:func:`load_detector` with each registry name's class given by ``classes``."""
    from dgpbench.npz import open_npz

    try:
        store = open_npz(path)
    except FileNotFoundError:
        raise
    except ValueError as exc:
        raise ValueError(f"{path}: not a dgpbench detector file ({exc})") from exc
    with store:
        try:
            meta = _read_meta(store)
        except _Invalid as exc:
            raise ValueError(
                f"{path}: not a dgpbench detector file (write one with `dgpbench fit`): {exc}"
            ) from exc
        used = {_META}
        network = None
        keep = model
        feats_spec = meta["features"]
        try:
            _spec_class(meta["detector"], "detector")
            feats_name = None if feats_spec is None else _spec_class(feats_spec, "features")
            needs_network = feats_name is not None and _CODECS[feats_name][2] in _NETWORK_CODECS
            if needs_network != (meta["model"] is not None):
                raise _Invalid("its model record does not fit its features")
        except _Invalid as exc:
            raise ValueError(f"{path}: invalid detector file: {exc}") from exc
        if needs_network:
            network, keep = _network(path, meta["model"], model)
        try:
            sha = None if meta["model"] is None else meta["model"]["sha256"]

            def check(body: Any, head: Any) -> None:
                if network_fingerprint(body, head) != sha:
                    raise ValueError(
                        f"{path}: the model's layers or weights do not match the ones the "
                        f"detector was fitted with (SHA-256 {sha[:12]}...): pass the model it "
                        "was fitted with"
                    )

            features = (
                None
                if feats_spec is None
                else _build(feats_spec, "features", store, used, (network, check), keep, classes)
            )
            detector = _build(meta["detector"], "detector", store, used, None, None, classes)
            extra = sorted(set(store.files) - used)
            if extra:
                raise _Invalid(f"unexpected arrays {extra[:5]}")
        except _Invalid as exc:
            raise ValueError(f"{path}: invalid detector file: {exc}") from exc
        except (KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            raise ValueError(
                f"{path}: invalid detector file ({type(exc).__name__}: {exc})"
            ) from exc
    width = getattr(features, "_n_features_out", None)
    name = type(detector).__name__
    if width is not None and name != "ClassifierShiftDetector" and detector.n_features_in_ != width:
        raise ValueError(
            f"{path}: invalid detector file: the detector takes {detector.n_features_in_} "
            f"features but the transformer gives {width}"
        )
    return FittedDetector(features, detector, dict(meta["info"]), sha)
