"""Save a fitted feature transformer and detector to one file, and load them back, without pickle.

``dgpbench fit`` and ``dgpbench score --detector`` use this; in Python, :func:`save_detector`
and :func:`load_detector` (alibi-detect's ``save_detector`` / ``load_detector`` are the model).
A saved detector is one ``.npz`` file:

* ``__meta__``: a JSON string with the format version, the dgpbench version, the model (its
  path or ``package.module:factory``, and the SHA-256 of its weights) and, for the
  transformer and the detector, the class (a dgpbench class), its constructor parameters
  (``get_params``, JSON values) and its fitted scalar attributes;
* every fitted array attribute as an array of its own (``features/class_means_/0``, ...).

Loading reads the file with ``np.load(allow_pickle=False)`` and imports only classes of the
dgpbench package, so a detector file runs no code. The network itself is not stored: it is
loaded from the recorded model (or the one passed to :func:`load_detector`) and must have the
recorded checksum. A detector whose model is a factory loads only when the caller names the
factory again, since importing it runs code.

An estimator is saved generically: constructor parameters from ``get_params(deep=False)``
(except ``model``), plus every other instance attribute, which must be a number, string,
bool, None, a list/tuple of these, a numeric or string array, or a list of arrays.
Attributes derived from the network (a transformer's ``graph_`` and ``body_``) are rebuilt on
load by a *restorer* registered with :func:`register_restorer`; a new estimator whose state is
plain arrays and numbers needs no registration.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dgpbench.io import atomic_path
from dgpbench.models.specs import describe_model, is_factory_spec, load_model, model_checksum

__all__ = ["FORMAT", "FittedDetector", "load_detector", "register_restorer", "save_detector"]

#: Format tag of a saved detector file.
FORMAT = "dgpbench-detector/1"
_META = "__meta__"

# class -> (attributes rebuilt from the network on load, the function that rebuilds them)
_RESTORERS: dict[type, tuple[tuple[str, ...], Callable[[Any, Any], None]]] = {}


def register_restorer(
    cls: type, attributes: tuple[str, ...], restore: Callable[[Any, Any], None]
) -> None:
    """Declare attributes of ``cls`` (and its subclasses) that are rebuilt, not stored.

    Parameters
    ----------
    cls : type
        The estimator class.
    attributes : tuple of str
        Attributes left out of the file (e.g. objects holding the network).
    restore : callable
        ``restore(estimator, network)``: sets them again on a loaded estimator whose other
        attributes are already in place.
    """
    _RESTORERS[cls] = (tuple(attributes), restore)


def _restorer(cls: type) -> tuple[tuple[str, ...], Callable[[Any, Any], None] | None]:
    for base in cls.__mro__:
        if base in _RESTORERS:
            return _RESTORERS[base]
    return (), None


def _restore_features(est: Any, network: Any) -> None:
    from dgpbench.models.cnn import split_network

    est.body_, est.graph_ = split_network(network, device=est.device)


def _register_builtins() -> None:
    from dgpbench.features.base import _MLPFeatures

    if _MLPFeatures not in _RESTORERS:
        register_restorer(_MLPFeatures, ("body_", "graph_"), _restore_features)


@dataclass
class FittedDetector:
    """A fitted feature transformer and the detector fitted on its clean features.

    Parameters
    ----------
    features : transformer
        A fitted dgpbench feature transformer (``transform(X)``).
    detector : estimator
        A detector fitted on ``features.transform`` of clean images (``test(F)``).
    info : dict
        JSON-able facts about the fit (method, numbers of images, ...).
    """

    features: Any
    detector: Any
    info: dict[str, Any] = field(default_factory=dict)

    def test(self, X: Any) -> Any:
        """Featurise a batch of images and test it (the detector's result record)."""
        return self.detector.test(self.features.transform(X))


def _class_path(obj: Any) -> str:
    cls = type(obj)
    if not cls.__module__.startswith("dgpbench."):
        raise TypeError(
            f"cannot save a {cls.__module__}.{cls.__qualname__}: only dgpbench's own "
            "transformers and detectors can be saved (loading another class would import "
            "code named in the file)"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _load_class(path: str) -> type:
    module, _, name = path.partition(":")
    if not module.startswith("dgpbench.") or not name.isidentifier():
        raise ValueError(f"detector file names class {path!r}, which is not a dgpbench class")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"detector file names class {path!r}, which does not exist") from exc
    from sklearn.base import BaseEstimator

    # Only estimators: their constructors store parameters and do nothing else.
    if not (isinstance(cls, type) and issubclass(cls, BaseEstimator)):
        raise ValueError(f"detector file names {path!r}, which is not a dgpbench estimator")
    return cls


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _dump(est: Any, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """JSON description and arrays of a fitted estimator (see the module docstring)."""
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "model"}
    for key, value in params.items():
        if not (
            _is_scalar(value) or (isinstance(value, list | tuple) and all(map(_is_scalar, value)))
        ):
            raise TypeError(
                f"cannot save {type(est).__name__}: parameter {key}={value!r} is not a "
                "number, string, bool or None"
            )
    skipped, _ = _restorer(type(est))
    attrs: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for key, value in vars(est).items():
        if key in params or key == "model" or key in skipped:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if _is_scalar(value):
            attrs[key] = {"value": value}
        elif isinstance(value, tuple | list) and all(map(_is_scalar, value)):
            attrs[key] = {"list": list(value), "tuple": isinstance(value, tuple)}
        elif isinstance(value, np.ndarray):
            attrs[key] = {"array": _put(arrays, f"{prefix}/{key}", value, est, key)}
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            attrs[key] = {
                "arrays": [
                    _put(arrays, f"{prefix}/{key}/{i}", v, est, key) for i, v in enumerate(value)
                ]
            }
        else:
            raise TypeError(
                f"cannot save {type(est).__name__}: attribute {key} is a "
                f"{type(value).__name__} (register a restorer with "
                "dgpbench.saved.register_restorer for state derived from the network)"
            )
    return {"class": _class_path(est), "params": params, "attributes": attrs}, arrays


def _put(arrays: dict[str, np.ndarray], name: str, value: np.ndarray, est: Any, key: str) -> dict:
    """Store one array; an object array of strings (scikit-learn's feature names) as text."""
    kind = value.dtype.kind
    if kind == "O":
        if not all(isinstance(v, str) for v in value.ravel()):
            raise TypeError(f"cannot save {type(est).__name__}: attribute {key} holds objects")
        arrays[name] = value.astype(str)
        return {"name": name, "object": True}
    if kind not in "biufUc":
        raise TypeError(
            f"cannot save {type(est).__name__}: attribute {key} has dtype {value.dtype}"
        )
    arrays[name] = value
    return {"name": name, "object": False}


def _get(arrays: dict[str, np.ndarray], ref: dict[str, Any]) -> np.ndarray:
    value = arrays[ref["name"]]
    return value.astype(object) if ref.get("object") else value


def _restore(spec: dict[str, Any], arrays: dict[str, np.ndarray], network: Any, model: Any) -> Any:
    cls = _load_class(spec["class"])
    params = dict(spec["params"])
    try:
        est = cls(model=model, **params) if _takes_model(cls) else cls(**params)
    except TypeError as exc:
        raise ValueError(f"detector file: cannot rebuild {cls.__name__} ({exc})") from exc
    for key, entry in spec["attributes"].items():
        if "value" in entry:
            value = entry["value"]
        elif "list" in entry:
            value = tuple(entry["list"]) if entry.get("tuple") else list(entry["list"])
        elif "array" in entry:
            value = _get(arrays, entry["array"])
        else:
            value = [_get(arrays, ref) for ref in entry["arrays"]]
        setattr(est, key, value)
    _, restore = _restorer(cls)
    if restore is not None:
        restore(est, network)
    return est


def _takes_model(cls: type) -> bool:
    import inspect

    return "model" in inspect.signature(cls).parameters


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
        The fitted pair.
    model : path-like or str, optional
        How to find the network on load, when the transformer holds the module itself:
        a checkpoint or ``.pt2`` path, or ``package.module:factory``. Defaults to the
        transformer's ``model`` when that is such a reference.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        If an estimator is not a dgpbench class or holds state that cannot be stored.
    """
    _register_builtins()
    features, detector = fitted.features, fitted.detector
    network, _ = load_model(features.model if model is None else model)
    reference = describe_model(features.model if model is None else model)
    feat_spec, arrays = _dump(features, "features")
    det_spec, det_arrays = _dump(detector, "detector")
    arrays.update(det_arrays)
    meta = {
        "format": FORMAT,
        "version": _version(),
        "model": {"reference": reference, "sha256": model_checksum(network)},
        "features": feat_spec,
        "detector": det_spec,
        "info": fitted.info,
    }
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **{_META: np.array(json.dumps(meta))}, **arrays)
    return Path(path)


def _version() -> str:
    import dgpbench

    return str(dgpbench.__version__)


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

    Returns
    -------
    FittedDetector
        The transformer and detector, ready to ``test`` a batch.

    Raises
    ------
    ValueError
        If the file is not a dgpbench detector, or the network's weights do not match the
        recorded checksum.
    """
    _register_builtins()
    try:
        with np.load(path, allow_pickle=False) as store:
            arrays = {k: store[k] for k in store.files}
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise ValueError(f"{path}: not a dgpbench detector file ({exc})") from exc
    try:
        meta = json.loads(str(arrays.pop(_META)))
        if meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format')!r}")
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{path}: not a dgpbench detector file (write one with `dgpbench fit`): {exc}"
        ) from exc
    recorded = meta["model"]
    if model is None:
        reference = recorded.get("reference")
        if reference is None:
            raise ValueError(f"{path} was saved from an in-memory network: pass model=")
        if is_factory_spec(reference):
            raise ValueError(
                f"{path}: its model is the factory {reference!r}; loading it runs that code, "
                f"so name it yourself (--model {reference} on the command line, model= in "
                "Python)"
            )
        model = reference
    network, _ = load_model(model)
    if model_checksum(network) != recorded["sha256"]:
        raise ValueError(
            f"{path}: the model's weights do not match the ones the detector was fitted with "
            f"(SHA-256 {recorded['sha256'][:12]}...): pass the model it was fitted with"
        )
    try:
        features = _restore(meta["features"], arrays, network, model)
        detector = _restore(meta["detector"], arrays, network, model)
    except KeyError as exc:
        raise ValueError(f"{path}: incomplete detector file (missing {exc})") from exc
    return FittedDetector(features, detector, dict(meta.get("info", {})))
