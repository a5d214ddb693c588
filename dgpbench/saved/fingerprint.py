"""The fingerprint of a fitted network: a SHA-256 over its layers and weights.

A saved detector does not store its network; it records this fingerprint, taken from the
network the transformer was fitted on, and loading refuses a network whose fingerprint
differs (other weights, or the same weights in other layers: ReLU vs Tanh, max vs average
pooling, a stride).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from dgpbench.models.specs import update_state_digest

__all__ = ["network_fingerprint"]


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
