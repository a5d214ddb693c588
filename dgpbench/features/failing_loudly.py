"""The representations of "Failing loudly" and ``dgp_approx`` by their workflow names.

:mod:`dgpbench.features.registry` adds these entries to its ``METHODS`` registry, so
``make_features(name, model, **params)`` and ``dgpbench features --method NAME`` know them.
"""

from __future__ import annotations

from typing import Any

from dgpbench.features.autoencoders import TAEFeatures, UAEFeatures
from dgpbench.features.bbsd import BBSDhFeatures, SoftmaxFeatures
from dgpbench.features.dgp_approx import DGPApproxFeatures
from dgpbench.features.reductions import NoRedFeatures, PCAFeatures, SRPFeatures
from dgpbench.labels import METHOD_LABELS

__all__ = ["REPRESENTATIONS"]

#: name -> (class, fixed parameters, display name), the layout of ``registry.METHODS``.
REPRESENTATIONS: dict[str, tuple[type, dict[str, Any], str]] = {
    name: (cls, fixed, METHOD_LABELS[name])
    for name, cls, fixed in (
        ("noredu", NoRedFeatures, {}),
        ("pca", PCAFeatures, {}),
        ("srp", SRPFeatures, {}),
        ("uae", UAEFeatures, {}),
        ("tae", TAEFeatures, {}),
        ("bbsds", SoftmaxFeatures, {}),
        ("bbsdh", BBSDhFeatures, {}),
        ("dgp_approx", DGPApproxFeatures, {}),
    )
}
