"""Every representation of a batch, and the registry that names them.

The DGP paper's four (:mod:`~dgpbench.features.dgp`, :mod:`~dgpbench.features.tu`,
:mod:`~dgpbench.features.magdiff`, :mod:`~dgpbench.features.softmax`, sharing
:mod:`~dgpbench.features.base`), "Failing loudly"'s (:mod:`~dgpbench.features.reductions`:
NoRed, PCA, SRP; :mod:`~dgpbench.features.autoencoders`: UAE, TAE;
:mod:`~dgpbench.features.bbsd`: BBSDs, BBSDh) and :mod:`~dgpbench.features.dgp_approx`.
:mod:`~dgpbench.features.registry` names them all (``METHODS``, ``make_features``);
:mod:`~dgpbench.features.output` checks what any of them (or a custom method) returns.
"""

from dgpbench._lazy import lazy_exports

_EXPORTS = {
    "ARCHITECTURES": "dgpbench.features.autoencoders",
    "AUTOENCODER_FORMAT": "dgpbench.features.autoencoders",
    "BBSDhFeatures": "dgpbench.features.bbsd",
    "DGPApproxFeatures": "dgpbench.features.dgp_approx",
    "DGPFeatures": "dgpbench.features.dgp",
    "MAGDiffFeatures": "dgpbench.features.magdiff",
    "METHODS": "dgpbench.features.registry",
    "NoRedFeatures": "dgpbench.features.reductions",
    "PCAFeatures": "dgpbench.features.reductions",
    "SRPFeatures": "dgpbench.features.reductions",
    "SoftmaxFeatures": "dgpbench.features.softmax",
    "TAEFeatures": "dgpbench.features.autoencoders",
    "TUFeatures": "dgpbench.features.tu",
    "UAEFeatures": "dgpbench.features.autoencoders",
    "build_autoencoder": "dgpbench.features.autoencoders",
    "check_features": "dgpbench.features.output",
    "feature_names": "dgpbench.features.output",
    "fit_method": "dgpbench.features.output",
    "flatten_images": "dgpbench.features.network",
    "load_autoencoder": "dgpbench.features.autoencoders",
    "load_method_class": "dgpbench.features.registry",
    "make_features": "dgpbench.features.registry",
    "save_autoencoder": "dgpbench.features.autoencoders",
    "transform_method": "dgpbench.features.output",
    "variance_dimension": "dgpbench.features.reductions",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.features", _EXPORTS)
