"""Display names of data sets and feature methods, shared by tables and figures.

A light module (no torch, no numba): reporting and plotting jobs import it without loading
the kernels.
"""

from __future__ import annotations

from pathlib import Path

DATASET_LABELS: dict[str, str] = {
    "mnist": "MNIST",
    "fashion-mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "emnist": "EMNIST",
    "digits": "Digits",
}

# Workflow method names -> the paper's names; the order is the tables' row order.
METHOD_LABELS: dict[str, str] = {
    "softmax": "Softmax",
    "tu": "TU",
    "tu_norm": "TU (+ norm)",
    "magdiff": "MAGDiff",
    "magdiff_signed": "MAGDiff (signed)",
    "dgp_nonorm": "DGP (- norm)",
    "dgp": "DGP",
}


def dataset_label(dataset: object) -> str:
    """Display name of a data set (``npz:`` paths and ``npz-<stem>`` ids show the stem).

    Examples
    --------
    >>> dataset_label("fashion-mnist"), dataset_label("npz:/data/my_set.npz")
    ('Fashion-MNIST', 'my_set')
    """
    name = str(dataset)
    if name.startswith("npz:"):
        return Path(name[4:]).stem
    if name.startswith("npz-"):
        return name[4:]
    return DATASET_LABELS.get(name, name)


def method_label(method: str) -> str:
    """Display name of a method (``"dgp_nonorm"`` -> ``"DGP (- norm)"``).

    A custom method ``package.module:ClassName`` shows as ``ClassName``.

    Examples
    --------
    >>> method_label("dgp_nonorm"), method_label("my_methods:LogitFeatures")
    ('DGP (- norm)', 'LogitFeatures')
    """
    if method in METHOD_LABELS:
        return METHOD_LABELS[method]
    return method.rpartition(":")[2]


def method_order(methods: object) -> list[str]:
    """The methods present in ``methods``: the paper's in table order, then custom ones sorted.

    Examples
    --------
    >>> method_order(["my:M", "dgp", "softmax", "dgp"])
    ['softmax', 'dgp', 'my:M']
    """
    present = set(methods)
    return [m for m in METHOD_LABELS if m in present] + sorted(present - set(METHOD_LABELS))


NOT_COMPUTED = "Not computed in this configuration"
"""The opening of every placeholder table, figure and note, so they read alike."""


def not_computed(detail: str) -> str:
    """The text of a table or figure that this configuration does not compute.

    Examples
    --------
    >>> not_computed("No CNN models (config key models.kind).")
    'Not computed in this configuration. No CNN models (config key models.kind).'
    """
    return f"{NOT_COMPUTED}. {detail}"
