"""Write config/README.md, the reference of every configuration key, from the config schema.

Usage: python scripts/config_readme.py   (tests/cli/test_config_readme.py checks it is up to date)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
OUT = REPO / "config" / "README.md"

HEADER = """\
# Configuration keys

Generated from `workflow/schemas/config.schema.yaml` by `python scripts/config_readme.py`;
do not edit by hand. The workflow validates `config.yaml` (or `--configfile`, plus
`--config key=value` overrides) against the schema before any job runs: an unknown key, a
wrong type or an out-of-range value stops the run with a message naming the key. Missing
optional keys take the defaults below. `config/paper.yaml` holds the paper's grid.

| key | type | default | description |
|---|---|---|---|
"""


def _type(node: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in node:  # a named value type, listed under "Value types"
        return f"`{node['$ref'].rsplit('/', 1)[1]}`"
    if "anyOf" in node:
        return " or ".join(_type(n, defs) for n in node["anyOf"])
    kind = node.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(str(k) for k in kinds if k)
    if "enum" in node:
        text += " (" + ", ".join(f"`{v}`" for v in node["enum"]) + ")"
    if "pattern" in node:
        text += f" matching `{node['pattern']}`"
    bounds = [
        f"{sym} {node[key]}"
        for key, sym in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
        )
        if key in node
    ]
    if bounds:
        text += " " + ", ".join(bounds)
    if kind == "array" and "items" in node:
        text += " of " + _type(node["items"], defs)
        if node.get("uniqueItems"):
            text += ", no duplicates"
        if node.get("minItems"):
            text += f", at least {node['minItems']}"
    return text


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows(node: dict[str, Any], defs: dict[str, Any], prefix: str, required: set[str]) -> list[str]:
    rows = []
    for key, child in node.get("properties", {}).items():
        name = f"{prefix}{key}"
        default = (
            "required"
            if key in required
            else f"`{json.dumps(child['default'])}`"
            if "default" in child
            else ""
        )
        kind = "object" if child.get("type") == "object" else _type(child, defs)
        rows.append(
            f"| `{name}` | {_cell(kind)} | {_cell(default)} | {_cell(child.get('description', ''))} |"
        )
        if child.get("type") == "object":
            rows += _rows(child, defs, f"{name}.", set(child.get("required", [])))
    return rows


def render(schema: dict[str, Any]) -> str:
    """The Markdown reference of every key of ``schema``."""
    defs = schema.get("$defs", {})
    rows = _rows(schema, defs, "", set(schema.get("required", [])))
    types = ["", "## Value types", "", "| type | values | description |", "|---|---|---|"]
    types += [
        f"| `{name}` | {_cell(_type(node, defs))} | {_cell(node.get('description', ''))} |"
        for name, node in defs.items()
    ]
    return HEADER + "\n".join(rows + types) + "\n"


def main() -> int:
    OUT.write_text(render(yaml.safe_load(SCHEMA.read_text())))
    print(f"wrote {OUT.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
