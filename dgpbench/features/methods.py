"""Every built-in feature method by name: its class (by name) and the parameters it fixes.

Plain data, importable without scikit-learn or torch: :mod:`dgpbench.features.registry`
resolves the classes, and :mod:`dgpbench.saved` checks the method a detector file records
against its transformer with the same table.
"""

from __future__ import annotations

from typing import Any

__all__ = ["METHOD_CLASSES"]

#: name -> (class name in :mod:`dgpbench.features`, parameters the method fixes): the DGP
#: paper's maps, then "Failing loudly"'s representations and ``dgp_approx``.
METHOD_CLASSES: dict[str, tuple[str, dict[str, Any]]] = {
    "softmax": ("SoftmaxFeatures", {}),
    "tu": ("TUFeatures", {"standardize": False}),
    "tu_norm": ("TUFeatures", {"standardize": True}),
    "magdiff": ("MAGDiffFeatures", {"signed": False}),
    "magdiff_signed": ("MAGDiffFeatures", {"signed": True}),
    "dgp_nonorm": ("DGPFeatures", {"standardize": False}),
    "dgp_unsorted": ("DGPFeatures", {"sort": False}),
    "dgp": ("DGPFeatures", {"standardize": True}),
    "noredu": ("NoRedFeatures", {}),
    "pca": ("PCAFeatures", {}),
    "srp": ("SRPFeatures", {}),
    "uae": ("UAEFeatures", {}),
    "tae": ("TAEFeatures", {}),
    "bbsds": ("SoftmaxFeatures", {}),
    "bbsdh": ("BBSDhFeatures", {}),
    "dgp_approx": ("DGPApproxFeatures", {}),
}
