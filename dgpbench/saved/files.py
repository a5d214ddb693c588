"""Save a fitted feature transformer and detector to one file, and load them back, without pickle.

``dgpbench fit`` and ``dgpbench score --detector`` use this (the latter through
:func:`dgpbench.saved.scoring.load_scorer`); in Python, :func:`save_detector`
and :func:`load_detector` (alibi-detect's ``save_detector`` / ``load_detector`` are the model).
The jobs are split as in alibi-detect's ``saving/``:

* the file (:mod:`dgpbench.saved.format`): a JSON header and named arrays in one ``.npz``;
* the network (:mod:`dgpbench.saved.fingerprint`): recorded by its SHA-256, not stored;
* each estimator's fitted state: its own ``get_state()`` / ``set_state(state, arrays)``
  pair (:mod:`dgpbench.state`), which checks every value it restores;
* this module: which classes may be saved (:data:`SAVEABLE`), their parameters, and the
  order of the checks on load.

What loading trusts, and what it does not:

* **No code from the file.** The file is read with the size-checked reader of
  :mod:`dgpbench.npz` (no pickle, declared sizes within ``$DGPBENCH_MAX_INPUT_BYTES``), only
  the arrays the estimators ask for (an extra member is an error), and classes are looked up
  by name in the explicit registry :data:`SAVEABLE`, never imported by path.
* **Nothing unchecked.** Every parameter goes through the estimator's own
  ``_parameter_constraints``; a detector is *refitted* on its saved reference sample, so its
  own ``fit`` checks it (finite, shape, sample count) exactly as for fresh data, and a
  sample whose rows are all one point is refused (on save too); a
  transformer's ``set_state`` checks its arrays for finiteness and for shapes consistent with
  the network and with each other; the detector's width must be the transformer's output
  width.
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

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dgpbench.features.methods import METHOD_CLASSES
from dgpbench.models.specs import describe_model, is_factory_spec, load_model
from dgpbench.parameters import WORKFLOW_RULES, light_checks
from dgpbench.saved.calibration import check_calibration, detector_digest
from dgpbench.saved.fingerprint import network_fingerprint
from dgpbench.saved.format import FORMAT, META, RoleArrays, _Invalid, json_value, read_meta, write
from dgpbench.state import StateError

__all__ = [
    "SAVEABLE",
    "FittedDetector",
    "ModelRequiredError",
    "detector_classes",
    "is_saveable",
    "load_detector",
    "save_detector",
]


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
        :func:`~dgpbench.saved.fingerprint.network_fingerprint`); set by :func:`save_detector` and
        :func:`load_detector`, None for a transformer without a network.
    calibration : dict or None, default=None
        Its measured false alarms (:func:`dgpbench.saved.calibration.calibrate`), or None
        when it was never calibrated.
    """

    features: Any
    detector: Any
    info: dict[str, Any] = field(default_factory=dict)
    model_sha256: str | None = None
    calibration: dict[str, Any] | None = None

    def transform(self, X: Any) -> Any:
        """What the detector tests: ``features.transform(X)``, or ``X`` without features.

        Parameters
        ----------
        X : array-like
            A batch of images, as the transformer takes them.

        Returns
        -------
        array-like
            The features of ``X`` (``X`` itself when there is no transformer).
        """
        return X if self.features is None else self.features.transform(X)

    def test(self, X: Any) -> Any:
        """Featurise a batch of images and test it.

        Parameters
        ----------
        X : array-like
            A batch of images, as the transformer takes them.

        Returns
        -------
        KSTestResult or ShiftTestResult
            The detector's result record.
        """
        return self.detector.test(self.transform(X))


#: The saveable estimators: registry name -> ``module:class`` (the only classes a file may name).
SAVEABLE: dict[str, str] = {
    **{
        name: f"dgpbench.features.{module}:{name}"
        for module, name in (
            ("softmax", "SoftmaxFeatures"),
            ("tu", "TUFeatures"),
            ("magdiff", "MAGDiffFeatures"),
            ("dgp", "DGPFeatures"),
            ("bbsd", "BBSDhFeatures"),
            ("dgp_approx", "DGPApproxFeatures"),
            ("reductions", "NoRedFeatures"),
            ("reductions", "PCAFeatures"),
            ("reductions", "SRPFeatures"),
            ("reductions", "ImageFeatures"),
            ("autoencoders", "UAEFeatures"),
            ("autoencoders", "TAEFeatures"),
        )
    },
    **{
        name: f"dgpbench.detectors.{module}:{name}"
        for module, name in (
            ("ks", "KSShiftDetector"),
            ("mmd", "MMDShiftDetector"),
            ("chi2", "ChiSquareShiftDetector"),
            ("classifier", "ClassifierShiftDetector"),
            ("cvm", "CvMShiftDetector"),
            ("anderson", "ADShiftDetector"),
            ("energy", "EnergyShiftDetector"),
            ("fisher", "FisherShiftDetector"),
            ("lsdd", "LSDDShiftDetector"),
            ("mmdagg", "MMDAggShiftDetector"),
            ("mmd_deep", "DeepKernelMMDShiftDetector"),
        )
    },
    "OnlineMMDDetector": "dgpbench.online.mmd:OnlineMMDDetector",
    "OnlineCVMDetector": "dgpbench.online.cvm:OnlineCVMDetector",
}
_DETECTOR_NAMES = frozenset(
    name
    for name, spec in SAVEABLE.items()
    if spec.startswith(("dgpbench.detectors.", "dgpbench.online."))
)
#: The transformers built on a network: their state is restored on the recorded network.
_NETWORK_NAMES = frozenset(
    ("SoftmaxFeatures", "TUFeatures", "MAGDiffFeatures", "DGPFeatures", "BBSDhFeatures",
     "DGPApproxFeatures")
)  # fmt: skip


def _class(name: str) -> type:
    """The class of a registry name (imported from dgpbench's own fixed path)."""
    module, _, attr = SAVEABLE[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def is_saveable(est: Any) -> bool:
    """Whether :func:`save_detector` can store ``est`` (a transformer or detector instance).

    Lets a caller refuse an unsaveable method (a custom ``package.module:ClassName``, a
    classifier test with a scikit-learn classifier) before a long fit.

    Parameters
    ----------
    est : object
        A transformer or detector, fitted or not.

    Returns
    -------
    bool
        True if it is one of :data:`SAVEABLE`'s classes and not a classifier test with
        its own classifier.
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
    for name, spec in SAVEABLE.items():
        if spec == f"{cls.__module__}:{cls.__qualname__}" and (name in _DETECTOR_NAMES) == (
            role == "detector"
        ):
            return name
    kinds = sorted(n for n in SAVEABLE if (n in _DETECTOR_NAMES) == (role == "detector"))
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
        if not json_value(value):
            raise TypeError(
                f"cannot save {type(est).__name__}: parameter {key}={value!r} is not a "
                "finite number, string, bool, None or a list of these"
            )
        if isinstance(value, tuple):
            params[key] = list(value)
    return params


def _dump(est: Any, role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An estimator's JSON spec (registry name, parameters, state) and its arrays, named
    ``<role>/<name>`` (its own ``get_state``).
    """
    from sklearn.utils.validation import check_is_fitted

    name = _registry_name(est, role)
    check_is_fitted(est)
    state, arrays = est.get_state()
    spec = {"class": name, "params": _params(est), "state": state}
    return spec, {f"{role}/{key}": value for key, value in arrays.items()}


def _spec_class(spec: Any, role: str) -> str:
    """The registry name an estimator's spec gives, checked (nothing is imported)."""
    if not isinstance(spec, dict) or set(spec) != {"class", "params", "state"}:
        raise _Invalid(f"{role}: expected an object with class, params and state")
    name = spec["class"]
    if (
        not isinstance(name, str)
        or name not in SAVEABLE
        or (name in _DETECTOR_NAMES) != (role == "detector")
    ):
        raise _Invalid(
            f"{role}: class {name!r} is not a saveable dgpbench {role} (known: "
            f"{', '.join(n for n in SAVEABLE if (n in _DETECTOR_NAMES) == (role == 'detector'))})"
        )
    return name


#: Parameters added after FORMAT's release, by registry name: their value for older files.
_ADDED_PARAMS: dict[str, dict[str, Any]] = {"DGPFeatures": {"sort": True}}

#: Forward-pass parameters that a transformer may have taken, ignored, in the files of
#: earlier versions (every representation took all four): checked as when they were saved,
#: then left out.
_DROPPED_PARAMS = light_checks(WORKFLOW_RULES)


def _without_dropped(params: dict[str, Any], expected: set[str], role: str) -> dict[str, Any]:
    """``params`` without the :data:`_DROPPED_PARAMS` the estimator does not take."""
    kept = dict(params)
    for key in sorted(set(params) - expected):
        if key in _DROPPED_PARAMS:
            check, allowed = _DROPPED_PARAMS[key]
            if not check(params[key]):
                raise _Invalid(f"{role}: {key} must be {allowed}, got {params[key]!r}")
            del kept[key]
    return kept


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
    gives for its registry name), checked parameters, state.
    """
    name = _spec_class(spec, role)
    cls = classes(name)
    params = spec["params"]
    if not isinstance(params, dict) or not all(json_value(v) for v in params.values()):
        raise _Invalid(f"{role}: params must be an object of JSON numbers, strings and lists")
    est = cls()
    # Files written before a parameter existed lack it: it takes the value that was the
    # only behaviour then (and is its default). Older files may record forward-pass
    # parameters the class no longer takes: they are checked, then dropped.
    params = {**_ADDED_PARAMS.get(name, {}), **params}
    expected = set(est.get_params(deep=False)) - {"model"}
    if role == "features":
        params = _without_dropped(params, expected, role)
    if set(params) != expected:
        raise _Invalid(
            f"{role}: {name} takes parameters {sorted(expected)}, the file gives {sorted(params)}"
        )
    est.set_params(**params, **({"model": model} if "model" in est.get_params() else {}))
    try:
        est._validate_params()  # the estimator's own _parameter_constraints
    except (ValueError, TypeError) as exc:
        raise _Invalid(f"{role}: {exc}") from exc
    arrays = RoleArrays(role, store, used)
    try:
        if name in _NETWORK_NAMES:
            module, verify = network
            est.set_state(spec["state"], arrays, network=module, verify=verify)
        else:
            est.set_state(spec["state"], arrays)
    except StateError as exc:
        raise _Invalid(f"{role}: {exc}") from exc
    return est


def _constant_reference(detector: Any) -> str | None:
    """Why a detector's reference sample is unusable: every row is one and the same point.

    Such a sample is a broken file or pipeline, not a reference: the MMD test has no
    bandwidth, and the KS and classifier tests would call every varied batch a shift.
    Single features constant over the rows stay allowed (a KS p-value of 1 when constant in
    the batch too). A chi-squared reference of labels is not a sample of points: it is
    checked against the network's classes instead.
    """
    X = getattr(detector, "X_ref_", None)
    if X is None or len(X) < 2:
        return None
    X = np.asarray(X)
    if not (X == X[:1]).all():
        return None
    return (
        f"its reference sample is constant (all {len(X)} rows are the same point): no test "
        "can compare a batch against it; refit on real reference data"
    )


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
    arrays: dict[str, Any] = {}
    feat_spec = None
    model_meta = None
    sha = None
    if features is not None:
        feat_spec, arrays = _dump(features, "features")
        if feat_spec["class"] in _NETWORK_NAMES:
            sha = network_fingerprint(features.body_, features.graph_)
            reference = describe_model(features.model if model is None else model)
            model_meta = {"reference": reference, "sha256": sha}
    constant = _constant_reference(detector)
    if constant:
        raise ValueError(f"cannot save the detector: {constant}")
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
    if fitted.calibration is not None:
        digest = detector_digest(meta, arrays)
        try:
            meta["calibration"] = check_calibration(fitted.calibration, detector.alpha, digest)
        except _Invalid as exc:
            raise ValueError(f"cannot save the detector: {exc}") from exc
    write(path, meta, arrays)
    fitted.model_sha256 = sha
    return Path(path)


def _version() -> str:
    import dgpbench

    return str(dgpbench.__version__)


class ModelRequiredError(ValueError):
    """A detector file that records no loadable model: the caller must pass the network.

    The message says ``model=`` (Python's word); the command line says ``--model`` instead,
    from :attr:`reason`.

    Parameters
    ----------
    reason : str
        Why the file's model cannot be loaded (the message without the advice).
    path : path-like
        The detector file.
    """

    def __init__(self, reason: str, path: Any) -> None:
        super().__init__(f"{reason}: pass model=")
        self.reason = reason
        self.path = path


def _network(path: Any, recorded: dict[str, Any], model: Any) -> tuple[Any, Any, Any]:
    """The network to check against the file, the model argument the transformer keeps, and
    the image shape the model records (None when it records none).
    """
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
            network, shape = load_model(reference)
        except FileNotFoundError as exc:
            raise ValueError(
                f"{path}: its model {reference} does not exist (moved or deleted?): pass the "
                "model's new path (--model on the command line, model= in Python)"
            ) from exc
        return network, reference, shape
    network, shape = load_model(model)
    return network, model, shape


def detector_classes(path: str | os.PathLike[str]) -> tuple[str | None, str] | None:
    """The registry names of a detector file's transformer and detector.

    Nothing is imported or loaded but the file's JSON header.

    Parameters
    ----------
    path : path-like
        The detector file.

    Returns
    -------
    tuple of (str or None, str) or None
        The transformer's name (None when the detector takes the images themselves) and
        the detector's; None when the file cannot be read as a detector file (then
        :func:`load_detector` says why).
    """
    from dgpbench.npz import open_npz

    try:
        with open_npz(path) as store:
            meta = read_meta(store)
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
            meta = read_meta(store)
        except _Invalid as exc:
            raise ValueError(
                f"{path}: not a dgpbench detector file (write one with `dgpbench fit`): {exc}"
            ) from exc
        used = {META}
        network = model_shape = None
        keep = model
        feats_spec = meta["features"]
        try:
            _spec_class(meta["detector"], "detector")
            feats_name = None if feats_spec is None else _spec_class(feats_spec, "features")
            needs_network = feats_name is not None and feats_name in _NETWORK_NAMES
            if needs_network != (meta["model"] is not None):
                raise _Invalid("its model record does not fit its features")
        except _Invalid as exc:
            raise ValueError(f"{path}: invalid detector file: {exc}") from exc
        if needs_network:
            network, keep, model_shape = _network(path, meta["model"], model)
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
            calibration = meta.get("calibration")
            if calibration is not None:  # bound to this file's detector
                arrays = {name: store[name] for name in store.files if name != META}
                digest = detector_digest(meta, arrays)
                calibration = check_calibration(calibration, detector.alpha, digest)
        except _Invalid as exc:
            raise ValueError(f"{path}: invalid detector file: {exc}") from exc
        except (KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            raise ValueError(
                f"{path}: invalid detector file ({type(exc).__name__}: {exc})"
            ) from exc
    constant = _constant_reference(detector)
    if constant:
        raise ValueError(f"{path}: invalid detector file: {constant}")
    # the output width the transformer's state records (checked by its set_state)
    width = None if feats_spec is None else feats_spec["state"].get("n_features_out")
    name = meta["detector"]["class"]
    if width is not None and name != "ClassifierShiftDetector" and detector.n_features_in_ != width:
        raise ValueError(
            f"{path}: invalid detector file: the detector takes {detector.n_features_in_} "
            f"features but the transformer gives {width}"
        )
    recorded = getattr(features, "input_shape_", None)
    if recorded is not None and model_shape is not None and tuple(recorded) != tuple(model_shape):
        # the body is given images of the recorded shape: another one gives other features
        raise ValueError(
            f"{path}: invalid detector file: input_shape_ {list(recorded)} is not the model's "
            f"image shape {list(model_shape)}"
        )
    if name == "ChiSquareShiftDetector" and feats_name == "BBSDhFeatures":
        # the reference labels are the network's predicted classes: any other label makes
        # every batch differ from the reference
        n_classes = len(features.classes_)
        labels = detector.y_ref_
        if labels.min() < 0 or labels.max() >= n_classes:
            raise ValueError(
                f"{path}: invalid detector file: its reference labels must be classes of the "
                f"network (0 to {n_classes - 1}), got {int(labels.min())} to {int(labels.max())}"
            )
    try:
        info = _checked_info(meta["info"], feats_name, feats_spec, type(detector).test_name)
    except _Invalid as exc:
        raise ValueError(f"{path}: invalid detector file: {exc}") from exc
    return FittedDetector(features, detector, info, sha, calibration)


#: ``dgpbench fit``'s methods (:data:`~dgpbench.features.methods.METHOD_CLASSES`, and ``images`` for
#: the classifier test): the transformer's registry name and the parameters the method fixes.
_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    **METHOD_CLASSES,
    "images": ("ImageFeatures", {}),  # the raw images the domain classifier (classif) reads
}

#: The facts ``dgpbench fit`` records in ``info``, and what each must be.
_INFO_TYPES: dict[str, tuple[type, str]] = {
    "method": (str, "a string"),
    "test": (str, "a string"),
    "n_refs": (int, "an integer"),
    "labelled_refs": (bool, "true or false"),
}


def _checked_info(
    info: dict[str, Any], feats_name: str | None, feats_spec: Any, test: str
) -> dict[str, Any]:
    """The ``info`` block of a file, its known keys checked against their types and against
    the restored estimators: ``test`` is the detector's (its class's ``test_name``, the name
    in :data:`dgpbench.detectors.DETECTORS`; set from it), and ``method`` must be
    a method of the restored transformer's class with its parameters.
    """
    for key, (kind, text) in _INFO_TYPES.items():
        value = info.get(key)
        if key in info and (
            not isinstance(value, kind) or (kind is int and isinstance(value, bool))
        ):
            raise _Invalid(f"info {key} must be {text}, got {value!r}")
    if "n_refs" in info and info["n_refs"] < 1:
        raise _Invalid(f"info n_refs must be a positive count, got {info['n_refs']!r}")
    if "test" in info and info["test"] != test:
        raise _Invalid(f"info test {info['test']!r} is not its detector's test {test!r}")
    if "method" in info:
        method = info["method"]
        cls, fixed = _METHODS.get(method, (None, {}))
        params = {} if feats_spec is None else feats_spec["params"]
        if cls != feats_name or any(params.get(k, v) != v for k, v in fixed.items()):
            raise _Invalid(
                f"info method {method!r} is not the method of its transformer {feats_name}"
            )
    return {**info, "test": test}
