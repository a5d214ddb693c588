"""Representations beyond the paper's four: "Failing loudly"'s reductions and ``dgp_approx``.

One module per family: :mod:`~dgpbench.representations.reductions` (``noredu``, ``pca``,
``srp``), :mod:`~dgpbench.representations.autoencoders` (``uae``, ``tae``),
:mod:`~dgpbench.representations.bbsd` (``bbsds``, ``bbsdh``) and
:mod:`~dgpbench.representations.dgp_approx`. All are scikit-learn transformers built as
``Cls(model=None, **params)``; :mod:`dgpbench.methods` registers them by name.
"""

from dgpbench.representations.autoencoders import TAEFeatures, UAEFeatures
from dgpbench.representations.bbsd import BBSDhFeatures
from dgpbench.representations.dgp_approx import DGPApproxFeatures
from dgpbench.representations.reductions import NoRedFeatures, PCAFeatures, SRPFeatures
from dgpbench.representations.registry import REPRESENTATIONS

__all__ = [
    "REPRESENTATIONS",
    "BBSDhFeatures",
    "DGPApproxFeatures",
    "NoRedFeatures",
    "PCAFeatures",
    "SRPFeatures",
    "TAEFeatures",
    "UAEFeatures",
]
