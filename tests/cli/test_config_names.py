"""An unknown method or data set in the config names the valid ones."""

from __future__ import annotations

import pytest
from _workflow import REPO, tiny_config

from dgpbench.cli.config import schema_error

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
METHODS = ["softmax", "tu", "tu_norm", "magdiff", "magdiff_signed", "dgp", "dgp_nonorm"]
DATASETS = ["digits", "mnist", "fashion-mnist", "cifar10", "emnist", "npz:<path>"]


@pytest.mark.parametrize(
    ("change", "key", "bad", "valid"),
    [
        ({"methods": ["dgp", "persistence"]}, "methods[1]", "persistence", METHODS),
        ({"datasets": ["imagenet"]}, "datasets[0]", "imagenet", DATASETS),
        (
            {"ablation": {"datasets": ["digits"], "methods": ["dpg"], "ns": [10]}},
            "ablation.methods[0]",
            "dpg",
            METHODS,
        ),
    ],
)
def test_unknown_name_lists_the_valid_names(change, key, bad, valid):
    message = schema_error(tiny_config(**change), SCHEMA)
    assert message.startswith(f"config key {key}: unknown name {bad!r}; valid: ")
    listed = message.split("valid: ", 1)[1].split(", ")
    assert listed[: len(valid)] == valid
    if "methods" in key:
        assert listed[-1] == "package.module:ClassName"


def test_valid_names_pass():
    assert schema_error(tiny_config(methods=METHODS, datasets=["npz:/x/y.npz"]), SCHEMA) is None
