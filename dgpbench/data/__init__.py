"""Data sets: :mod:`~dgpbench.data.datasets` (MNIST, Fashion-MNIST, CIFAR-10, EMNIST, USPS,
the embedded ``load_digits``) and their size-checked image readers.

The size-checked ``.npz`` reader every family uses, :mod:`dgpbench.npz`, sits with the helpers
at the bottom (:mod:`dgpbench.io` builds on it), not here.
"""

from dgpbench._lazy import lazy_exports

_EXPORTS = {
    "DatasetNotFoundError": "dgpbench.data.datasets",
    "image_shape": "dgpbench.data.datasets",
    "load_dataset": "dgpbench.data.datasets",
    "load_npz_images": "dgpbench.data.datasets",
    "n_classes": "dgpbench.data.datasets",
    "n_test_images": "dgpbench.data.datasets",
    "read_idx": "dgpbench.data.datasets",
    "resolve_data_root": "dgpbench.data.datasets",
    "sample_image_sets": "dgpbench.data.datasets",
    "stratified_choice": "dgpbench.data.datasets",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.data", _EXPORTS)
