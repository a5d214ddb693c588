"""Display names of data sets and feature methods, shared by tables and figures.

A light module (no torch, no numba): reporting and plotting jobs import it without loading
the kernels.
"""

from __future__ import annotations

from collections.abc import Iterable
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
    "dgp_unsorted": "DGP (- sort)",
    "dgp": "DGP",
    # "Failing loudly"'s representations and the DGP authors' approximation
    "noredu": "NoRed",
    "pca": "PCA",
    "srp": "SRP",
    "uae": "UAE",
    "tae": "TAE",
    "bbsds": "BBSDs",
    "bbsdh": "BBSDh",
    "dgp_approx": "DGP (approx.)",
}


def _taken(label: str, builtin: dict[str, str]) -> bool:
    """Whether ``label`` reads like a built-in's code or label (case and spaces ignored)."""
    key = label.strip().casefold()
    return key in {k.casefold() for k in builtin} | {v.casefold() for v in builtin.values()}


def dataset_label(dataset: object) -> str:
    """Display name of a data set (``npz:`` paths and ``npz-<stem>`` ids show the stem).

    A file whose stem reads like a built-in data set (``MNIST.npz``) is labelled
    ``<stem> (npz)``: it is not that data set, and its cells must not share its label.

    Examples
    --------
    >>> dataset_label("fashion-mnist"), dataset_label("npz:/data/my_set.npz")
    ('Fashion-MNIST', 'my_set')
    >>> dataset_label("npz:/data/MNIST.npz")
    'MNIST (npz)'
    """
    name = str(dataset)
    if name.startswith(("npz:", "npz-")):
        stem = Path(name[4:]).stem if name.startswith("npz:") else name[4:]
        return f"{stem} (npz)" if _taken(stem, DATASET_LABELS) else stem
    return DATASET_LABELS.get(name, name)


def method_label(method: str) -> str:
    """Display name of a method (``"dgp_nonorm"`` -> ``"DGP (- norm)"``).

    A custom method ``package.module:ClassName`` shows as ``ClassName``, or as
    ``ClassName (package.module)`` when the class name reads like a built-in method: a
    custom method never takes a built-in's label (nor is compared with its published rows).

    Examples
    --------
    >>> method_label("dgp_nonorm"), method_label("my_methods:LogitFeatures")
    ('DGP (- norm)', 'LogitFeatures')
    >>> method_label("my_mod:DGP")
    'DGP (my_mod)'
    """
    if method in METHOD_LABELS:
        return METHOD_LABELS[method]
    module, _, name = method.rpartition(":")
    return f"{name} ({module})" if module and _taken(name, METHOD_LABELS) else name


def check_unique_labels(names: Iterable[object], kind: str) -> None:
    """Refuse methods (``kind="method"``) or data sets (``"dataset"``) sharing a label.

    Tables and figures show labels, so two entries with one label would be merged or
    collide (pandas: "Categorical categories must be unique").

    Raises
    ------
    ValueError
        Naming both entries and their label.

    Examples
    --------
    >>> check_unique_labels(["dgp", "my_mod:DGP"], "method")
    >>> check_unique_labels(["a.m:Feats", "b.m:Feats"], "method")
    Traceback (most recent call last):
    ...
    ValueError: methods 'a.m:Feats' and 'b.m:Feats' would share the label 'Feats' in tables and figures; rename one (e.g. its class)
    """
    label = {"method": method_label, "dataset": dataset_label}[kind]
    seen: dict[str, str] = {}
    for name in dict.fromkeys(str(n) for n in names):
        other = seen.setdefault(label(name).strip().casefold(), name)
        if other != name:
            what = "its class" if kind == "method" else "its file"
            raise ValueError(
                f"{kind}s {other!r} and {name!r} would share the label {label(name)!r} in "
                f"tables and figures; rename one (e.g. {what})"
            )


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
