"""Cross-key checks and short schema messages of the workflow configuration."""

from __future__ import annotations

import copy

import pytest
import yaml
from _workflow import REPO, tiny_config

from dgpbench.cli.config import check_config, schema_error

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _valid() -> dict:
    config = tiny_config()
    assert schema_error(config, SCHEMA) is None
    return config


def test_the_default_configs_pass():
    for path in (REPO / "config.yaml", REPO / "config" / "paper.yaml"):
        config = yaml.safe_load(path.read_text())
        assert schema_error(config, SCHEMA) is None, path
    check_config(_valid())


@pytest.mark.parametrize(
    ("section", "key", "value", "names"),
    [
        ("ablation", "ns", [10, 7], ["ablation.ns [7]", "protocol.ns"]),
        ("images", "n_test", 20, ["images.n_test is 20", "n = 50"]),
        ("protocol", "ns", [10, 540], ["digits", "539 test images"]),
        ("protocol", "deltas", [0.5, 1.5], ["protocol.deltas [1.5]"]),
        ("protocol", "deltas", [0.0], ["protocol.deltas [0.0]"]),
    ],
)
def test_check_config_names_the_keys(section, key, value, names):
    config = copy.deepcopy(_valid())
    config[section][key] = value
    with pytest.raises(ValueError, match="invalid configuration") as exc:
        check_config(config)
    for name in names:
        assert name in str(exc.value)


@pytest.mark.parametrize(
    ("keys", "value", "names"),
    [
        (("report", "pool_deltas"), [0.5, 0.75], ["report.pool_deltas", "not run: [0.75]"]),
        (
            ("analysis", "early_stopping", "max_burn_in"),
            10,
            ["max_burn_in (10)", "analysis.training.epochs (10)"],
        ),
        (("analysis", "np_variance", "figure_layers"), [7], ["figure_layers [7]", "[2, 3, 4]"]),
        (("analysis", "np_variance", "figure_hidden"), [99], ["figure_hidden [99]", "[16, 32]"]),
        (
            ("models", "user"),
            {"mine": {"dataset": "mnist", "model": "m.pt2"}},
            ["models.user.mine.dataset 'mnist'", "datasets ['digits']"],
        ),
    ],
)
def test_check_config_names_the_keys_of_the_workflow_checks(keys, value, names):
    config = copy.deepcopy(_valid())
    section = config
    for key in keys[:-1]:
        section = section.setdefault(key, {})
    section[keys[-1]] = value
    with pytest.raises(ValueError, match="invalid configuration") as exc:
        check_config(config)
    for name in names:
        assert name in str(exc.value)


def test_check_config_accepts_consistent_workflow_keys(tmp_path):
    config = copy.deepcopy(_valid())
    config["report"]["pool_deltas"] = [0.5]
    config["analysis"]["early_stopping"]["max_burn_in"] = 9
    config["analysis"]["np_variance"]["figure_layers"] = [4, 7]
    path = tmp_path / "d.npz"
    config["datasets"] = [f"npz:{path}"]
    config["models"]["user"] = {"mine": {"dataset": f"npz:{tmp_path}/./d.npz", "model": "x"}}
    config["protocol"]["ns"] = [10]
    config["images"]["n_test"] = 10
    import numpy as np

    np.savez(path, x_train=np.zeros((4, 2, 2)), y_train=np.zeros(4, int),
             x_test=np.zeros((30, 2, 2)), y_test=np.zeros(30, int))  # fmt: skip
    check_config(config)


def test_check_config_counts_npz_test_images(tmp_path):
    import numpy as np

    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.zeros((4, 2, 2)), y_train=np.zeros(4, int),
             x_test=np.zeros((30, 2, 2)), y_test=np.zeros(30, int))  # fmt: skip
    config = _valid()
    config["datasets"] = [f"npz:{path}"]
    with pytest.raises(ValueError, match=r"npz:.*d\.npz.*only 30 test images"):
        check_config(config)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"metods": ["dgp"]}, "unknown config key metods; allowed: "),
        ({"protocol": {"draws": "5"}}, "config key protocol.draws: '5' is not of type 'integer'"),
        ({"protocol": {"draws:5": None}}, "unknown config key draws:5 in protocol"),
        ({"models": {"hidden": [8], "layers": [2], "seeds": [0, 0]}}, "config key models.seeds"),
        ({"models": {"hidden": [8, 8], "layers": [2], "seeds": [0]}}, "config key models.hidden"),
        ({"models": {"hidden": [8], "layers": [2, 2], "seeds": [0]}}, "config key models.layers"),
        ({"protocol": {"ns": [10, 10]}}, "config key protocol.ns: [10, 10] has non-unique"),
        ({"protocol": {"deltas": [0.5, 0.5]}}, "config key protocol.deltas"),
        ({"ablation": {"ns": [10, 10]}}, "config key ablation.ns"),
        ({"datasets": ["digits", "digits"]}, "config key datasets"),
        ({"intensities": [6, 6]}, "config key intensities"),
    ],
)
def test_schema_errors_are_one_short_line(change, expected):
    config = {**_valid(), **change}
    message = schema_error(config, SCHEMA)
    assert message.startswith(expected)
    assert "\n" not in message and len(message) < 400
    nested = "'5'" in expected or ":5" in expected
    assert ("--configfile" in message) == nested
