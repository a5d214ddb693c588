"""Networks: build, train (one model or stacked seeds), save, read and resolve.

:mod:`~dgpbench.models.architectures` (MLPs, CNNs, ResNets), :mod:`~dgpbench.models.train` (one
model), :mod:`~dgpbench.models.stacked` (seeds trained together),
:mod:`~dgpbench.models.checkpoints`, :mod:`~dgpbench.models.exported` (``.pt2`` files),
:mod:`~dgpbench.models.specs` (a model reference: checkpoint, ``.pt2`` or factory) and
:mod:`~dgpbench.models.body_head` (a network split into body and MLP head). Thread counts are
scoped by :mod:`dgpbench.threads`.
"""

from dgpbench._lazy import lazy_exports

_EXPORTS = {
    "ACTIVATIONS": "dgpbench.models.architectures",
    "ANALYSIS_LR": "dgpbench.models.train",
    "ANALYSIS_LR_TEXT": "dgpbench.models.train",
    "ArchConfig": "dgpbench.models.architectures",
    "CHECKPOINT_FORMAT": "dgpbench.models.checkpoints",
    "CHECKPOINT_VERSION": "dgpbench.models.checkpoints",
    "CNNConfig": "dgpbench.models.architectures",
    "ExportedModelError": "dgpbench.models.exported",
    "ImageReshape": "dgpbench.models.architectures",
    "KEEP_OPTIONS": "dgpbench.models.train",
    "METRIC_COLUMNS": "dgpbench.models.train",
    "NetworkBody": "dgpbench.models.body_head",
    "ResNetConfig": "dgpbench.models.architectures",
    "StackedMLP": "dgpbench.models.stacked",
    "TrainConfig": "dgpbench.models.train",
    "analysis_config": "dgpbench.models.train",
    "build_cnn": "dgpbench.models.architectures",
    "build_mlp": "dgpbench.models.architectures",
    "build_resnet": "dgpbench.models.architectures",
    "checkpoint_name": "dgpbench.models.checkpoints",
    "clear_run_outputs": "dgpbench.models.train",
    "describe_model": "dgpbench.models.specs",
    "is_factory_spec": "dgpbench.models.specs",
    "list_checkpoints": "dgpbench.models.checkpoints",
    "load_checkpoint": "dgpbench.models.checkpoints",
    "load_exported": "dgpbench.models.exported",
    "load_model": "dgpbench.models.specs",
    "model_arch": "dgpbench.models.architectures",
    "model_checksum": "dgpbench.models.specs",
    "save_checkpoint": "dgpbench.models.checkpoints",
    "shift_detection_config": "dgpbench.models.train",
    "split_network": "dgpbench.models.body_head",
    "train_mlp": "dgpbench.models.train",
    "train_mlp_seeds": "dgpbench.models.stacked",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.models", _EXPORTS)
