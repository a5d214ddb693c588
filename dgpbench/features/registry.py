"""The feature methods by name: the paper's maps, Failing loudly's representations, custom ones.

Each class is built with the parameters its signature names (:func:`make_features`), so a
model-free representation takes no ``model`` and a custom class only what it accepts. This
registry sits above the member modules of :mod:`dgpbench.features` (``dgp``, ``tu``,
``reductions``, ...), which sit above :mod:`dgpbench.features.base`, so imports run one way:
``registry -> members -> base``; it names each member by its module path and imports it on
first use.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator, Mapping
from typing import Any

from dgpbench._lazy import LazyRegistry
from dgpbench.features.methods import METHOD_CLASSES
from dgpbench.labels import METHOD_LABELS

__all__ = ["METHODS", "load_method_class", "make_features"]

# Each class's module is imported when a method of it is first used: a job computing one
# method (a model-free PCA: no torch; the softmax: no numba) loads only what that one needs.
_CLASSES = LazyRegistry(
    {
        "SoftmaxFeatures": "dgpbench.features.softmax:SoftmaxFeatures",
        "TUFeatures": "dgpbench.features.tu:TUFeatures",
        "MAGDiffFeatures": "dgpbench.features.magdiff:MAGDiffFeatures",
        "DGPFeatures": "dgpbench.features.dgp:DGPFeatures",
        "NoRedFeatures": "dgpbench.features.reductions:NoRedFeatures",
        "PCAFeatures": "dgpbench.features.reductions:PCAFeatures",
        "SRPFeatures": "dgpbench.features.reductions:SRPFeatures",
        "UAEFeatures": "dgpbench.features.autoencoders:UAEFeatures",
        "TAEFeatures": "dgpbench.features.autoencoders:TAEFeatures",
        "BBSDhFeatures": "dgpbench.features.bbsd:BBSDhFeatures",
        "DGPApproxFeatures": "dgpbench.features.dgp_approx:DGPApproxFeatures",
    }
)


class _Methods(Mapping[str, tuple[type, dict[str, Any], str]]):
    """:data:`METHOD_CLASSES` with each class resolved (on first use) and its display name."""

    def __getitem__(self, name: str) -> tuple[type, dict[str, Any], str]:
        cls_name, fixed = METHOD_CLASSES[name]
        return _CLASSES[cls_name], fixed, METHOD_LABELS[name]

    def __contains__(self, name: object) -> bool:  # without importing the method's module
        return name in METHOD_CLASSES

    def __iter__(self) -> Iterator[str]:
        return iter(METHOD_CLASSES)

    def __len__(self) -> int:
        return len(METHOD_CLASSES)


#: name -> (class, fixed parameters, display name), from :data:`METHOD_CLASSES`.
METHODS: Mapping[str, tuple[type, dict[str, Any], str]] = _Methods()


# A custom method: ``package.module:ClassName`` (Python identifiers, dotted module path).
_CUSTOM_RE = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<name>[A-Za-z_]\w*)")


def load_method_class(spec: str) -> type:
    """Import a custom feature method ``package.module:ClassName`` and check its contract.

    The class must be a scikit-learn style transformer constructed as
    ``ClassName(model=..., **params)`` with ``fit(X, y)`` and ``transform(X)``, like the
    built-in methods. Importing runs the module's code: name only modules you trust.

    Parameters
    ----------
    spec : str
        ``package.module:ClassName``; the module must be importable (installed, or on
        ``PYTHONPATH``).

    Returns
    -------
    type
        The class.

    Raises
    ------
    ValueError
        If ``spec`` is malformed, the module cannot be imported (missing, or its code raises:
        a ``SyntaxError`` or any exception at import time), it has no such class, or the
        class is not a transformer taking a ``model`` argument.

    Examples
    --------
    >>> load_method_class("dgpbench.features.dgp:DGPFeatures").__name__
    'DGPFeatures'
    >>> load_method_class("dgpbench.features.registry:make_features")
    Traceback (most recent call last):
    ...
    ValueError: method 'dgpbench.features.registry:make_features': make_features is not a class
    """
    match = _CUSTOM_RE.fullmatch(spec)
    if match is None:
        raise ValueError(
            f"method {spec!r} is neither a built-in method ({', '.join(METHODS)}) nor "
            "'package.module:ClassName'"
        )
    try:
        module = importlib.import_module(match["module"])
    except ImportError as exc:
        raise ValueError(
            f"method {spec!r}: cannot import module {match['module']!r} ({exc}); install it "
            "or add its folder to PYTHONPATH"
        ) from exc
    except (Exception, SystemExit) as exc:  # the module's own code failed (SyntaxError, ...)
        lines = str(exc).strip().splitlines()
        raise ValueError(
            f"method {spec!r}: importing module {match['module']!r} failed: "
            f"{type(exc).__name__}: {lines[0] if lines else ''}"
        ) from exc
    cls = getattr(module, match["name"], None)
    if cls is None:
        raise ValueError(f"method {spec!r}: module {match['module']!r} has no {match['name']!r}")
    if not isinstance(cls, type):
        raise ValueError(f"method {spec!r}: {match['name']} is not a class")
    missing = [m for m in ("fit", "transform") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(
            f"method {spec!r}: {cls.__name__} is not a transformer (no {' or '.join(missing)})"
        )
    params = inspect.signature(cls).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if "model" not in params and not takes_kwargs:
        raise ValueError(
            f"method {spec!r}: {cls.__name__} must be constructed as "
            f"{cls.__name__}(model=..., **params), but it takes no 'model' argument"
        )
    return cls


def _accepted(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``params`` that ``cls``'s constructor names (all, if it takes
    ``**kwargs``).
    """
    accepted = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return dict(params)
    return {k: v for k, v in params.items() if k in accepted}


def make_features(method: str, model: Any, **params: Any) -> Any:
    """Build the transformer of a named method (``softmax``, ``tu``, ``tu_norm``, ...).

    Every class, built-in or custom, receives the model and those of ``params`` that its
    constructor names: a model-free representation (``noredu``, ``pca``, ...) gets neither
    the model nor the forward-pass options, so one call builds any method.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS`, or a custom method ``package.module:ClassName`` (see
        :func:`load_method_class`).
    model : torch.nn.Sequential or path-like
        The trained MLP (ignored by the model-free representations).
    **params
        Further constructor parameters (``batch_size``, ``n_jobs``, ``progress``,
        ``device``, ``random_state``, ...); each class receives those its constructor names.

    Returns
    -------
    transformer
        An unfitted transformer.

    Raises
    ------
    ValueError
        If ``method`` is unknown, or a custom method fails :func:`load_method_class`.
    """
    if method in METHODS:
        cls, fixed, _ = METHODS[method]
        clash = sorted(set(fixed) & set(params))
        if clash:
            raise TypeError(f"method {method!r} sets {', '.join(clash)} itself: {fixed}")
        return cls(**_accepted(cls, {"model": model, **params}), **fixed)
    if ":" not in method:
        raise ValueError(
            f"unknown method {method!r}; choose from {sorted(METHODS)} or give a custom "
            "method as 'package.module:ClassName'"
        )
    cls = load_method_class(method)
    try:
        return cls(**_accepted(cls, {**params, "model": model}))
    except Exception as exc:  # the user's constructor: name the method, not just the error
        lines = str(exc).strip().splitlines()
        raise ValueError(
            f"method {method!r}: {cls.__name__}(model=...) failed: {type(exc).__name__}: "
            f"{lines[0] if lines else ''}"
        ) from exc
