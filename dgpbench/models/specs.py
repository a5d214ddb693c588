"""Resolve a model argument: a dgpbench checkpoint, a ``torch.export`` file or a factory.

Wherever dgpbench takes a model by name (the ``model`` of the feature transformers,
``dgpbench features --model``, ``dgpbench score --model``, ``dgpbench fit --model``), it
accepts

* the path of a **dgpbench checkpoint** (``.pt`` from ``dgpbench train``; read with
  ``torch.load(weights_only=True)``);
* the path of a **torch.export program** (``.pt2`` from ``torch.export.save``; read by
  :func:`dgpbench.models.exported.load_exported`, which runs no code from the file);
* ``package.module:factory``: a callable returning the ``torch.nn.Module`` (called with no
  arguments; the module must be importable, i.e. installed or on ``PYTHONPATH``). Importing
  and calling it **runs that code**: name only modules you trust.

A path that exists wins over the factory reading, so a file named ``a:b`` still loads as a file.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "describe_model",
    "is_factory_spec",
    "load_model",
    "model_checksum",
    "update_state_digest",
]

_FACTORY_RE = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<name>[A-Za-z_]\w*)")


def is_factory_spec(spec: Any) -> bool:
    """Whether ``spec`` is a ``package.module:factory`` string (and not an existing file)."""
    return (
        isinstance(spec, str)
        and _FACTORY_RE.fullmatch(spec) is not None
        and not Path(spec).exists()
    )


def _load_factory(spec: str) -> nn.Module:
    match = _FACTORY_RE.fullmatch(spec)
    assert match is not None
    try:
        module = importlib.import_module(match["module"])
    except ImportError as exc:
        raise ValueError(
            f"model {spec!r}: cannot import module {match['module']!r} ({exc}); install it or "
            "add its folder to PYTHONPATH"
        ) from exc
    factory = getattr(module, match["name"], None)
    if factory is None:
        raise ValueError(f"model {spec!r}: module {match['module']!r} has no {match['name']!r}")
    if isinstance(factory, nn.Module):
        return factory
    if not callable(factory):
        raise ValueError(f"model {spec!r}: {match['name']} is neither callable nor a module")
    result = factory()
    if not isinstance(result, nn.Module):
        raise ValueError(
            f"model {spec!r}: {match['name']}() returned {type(result).__name__}, "
            "not a torch.nn.Module"
        )
    return result


def load_model(model: Any) -> tuple[Any, tuple[int, ...] | None]:
    """Return the network a model argument names, and its input shape when the file tells it.

    Parameters
    ----------
    model : torch.nn.Module, tuple, path-like or str
        A module (or ``(body, head)`` pair) passes through; a ``.pt2`` path is read as a
        torch.export program, another path as a dgpbench checkpoint, and a
        ``package.module:factory`` string is imported and called (running its code).

    Returns
    -------
    module : torch.nn.Module or tuple
        The network (eval mode for files and factories).
    input_shape : tuple of int or None
        The shape of one sample, ``(C, H, W)`` for images, when the file records it.

    Raises
    ------
    FileNotFoundError
        If a path does not exist.
    ValueError
        If the argument is None, names an unreadable file, or a factory that cannot be
        imported or does not return a module.
    """
    if model is None:
        raise ValueError(
            "model is None: pass a trained torch network, a checkpoint (.pt), a "
            "torch.export file (.pt2) or 'package.module:factory'"
        )
    if is_factory_spec(model):
        return _load_factory(model).eval(), None
    if not isinstance(model, str | os.PathLike):
        return model, None
    path = Path(model)
    if path.suffix == ".pt2":
        from dgpbench.models.exported import load_exported

        return load_exported(path)
    from dgpbench.data.datasets import DATASETS, image_shape
    from dgpbench.models.architectures import model_arch
    from dgpbench.models.checkpoints import load_checkpoint

    module, meta = load_checkpoint(path)
    dataset = meta.get("dataset")
    shape = image_shape(dataset) if dataset in DATASETS else None
    n_inputs = model_arch(meta["arch"], meta.get("kind", "mlp")).n_inputs
    if shape is not None and int(np.prod(shape)) != n_inputs:
        shape = None
    return module, shape


def model_checksum(module: Any) -> str:
    """SHA-256 of a network's weights (names, dtypes, shapes, bytes), to pair it with a
    saved detector.

    Parameters
    ----------
    module : torch.nn.Module or tuple of torch.nn.Module
        The network, or a ``(body, head)`` pair.

    Returns
    -------
    str
        The hex digest.
    """
    digest = hashlib.sha256()
    parts = module if isinstance(module, tuple) else (module,)
    for k, part in enumerate(parts):
        if not isinstance(part, nn.Module):
            raise TypeError(f"cannot checksum a {type(part).__name__}: pass a torch.nn.Module")
        update_state_digest(digest, part, str(k))
    return digest.hexdigest()


def update_state_digest(digest: Any, module: Any, tag: str) -> None:
    """Feed ``module``'s state (every tensor's name, dtype, shape and bytes, in sorted key
    order) into the hashlib ``digest``, each entry prefixed with ``tag``.
    """
    state = module.state_dict()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(f"{tag}|{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        if tensor.numel():
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())


def describe_model(model: Any) -> str | None:
    """The model argument as text to store with a saved detector (None for an in-memory one).

    Paths are made absolute, so the detector finds its model from any working directory.
    """
    if is_factory_spec(model):
        return str(model)
    if isinstance(model, str | os.PathLike):
        return str(Path(model).resolve())
    return None
