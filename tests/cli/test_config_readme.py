"""config/README.md documents every configuration key and is generated from the schema."""

import yaml
from _workflow import REPO, load_script

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _generator():
    return load_script("scripts/config_readme.py")


def _keys(node: dict, prefix: str = ""):
    for key, child in node.get("properties", {}).items():
        yield f"{prefix}{key}", child
        yield from _keys(child, f"{prefix}{key}.")


def _config_keys(config: dict, schema: dict, prefix: str = ""):
    """Keys of ``config``; values of free-form mappings (no ``properties``) are not keys."""
    for key, value in config.items():
        yield f"{prefix}{key}"
        child = schema.get("properties", {}).get(key, {})
        if isinstance(value, dict) and "properties" in child:
            yield from _config_keys(value, child, f"{prefix}{key}.")


def test_config_readme_is_up_to_date():
    schema = yaml.safe_load(SCHEMA.read_text())
    expected = _generator().render(schema)
    got = (REPO / "config" / "README.md").read_text()
    assert got == expected, "config/README.md is stale: run python scripts/config_readme.py"


def test_every_schema_key_has_a_description_and_a_row():
    schema = yaml.safe_load(SCHEMA.read_text())
    text = (REPO / "config" / "README.md").read_text()
    undocumented = [key for key, node in _keys(schema) if not node.get("description")]
    assert undocumented == []
    missing = [key for key, _ in _keys(schema) if f"| `{key}` |" not in text]
    assert missing == []


def test_every_key_of_the_shipped_configs_is_documented():
    text = (REPO / "config" / "README.md").read_text()
    schema = yaml.safe_load(SCHEMA.read_text())
    for path in (REPO / "config.yaml", REPO / "config" / "paper.yaml"):
        config = yaml.safe_load(path.read_text())
        missing = [k for k in _config_keys(config, schema) if f"| `{k}` |" not in text]
        assert missing == [], path
