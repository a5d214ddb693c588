"""Checks of the workflow configuration that the JSON schema cannot make, and short messages
for the ones it does.

The workflow validates ``config.yaml`` against ``workflow/schemas/config.schema.yaml`` and
then calls :func:`check_config`, so that an inconsistent combination of keys stops the run
before any job starts (a failing job would first have removed the previous outputs).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["check_config", "schema_error"]


_NESTED_HINT = (
    "A nested value set with --config arrives as a string (--config reads only top-level "
    "values as YAML): set nested keys in a second --configfile, e.g. a file with "
    "`protocol: {draws: 50}`"
)


def _key(path: Iterable[Any]) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "(top level)"


def schema_error(config: Mapping[str, Any], schema: str | os.PathLike[str]) -> str | None:
    """The first problem of ``config`` against ``schema`` as one short line, or None.

    The line names the key and the reason (not the schema). A string where the schema wants a
    number, list or mapping inside a section gets a hint: ``--config`` reads only top-level
    values as YAML, so ``--config 'protocol={draws: 5}'`` passes ``'5'``; nested keys belong
    in a second ``--configfile``.

    Parameters
    ----------
    config : mapping
        The configuration.
    schema : path-like
        The YAML JSON-schema file.

    Returns
    -------
    str or None
    """
    import jsonschema
    import yaml

    document = yaml.safe_load(Path(schema).read_text())
    validator = jsonschema.validators.validator_for(document)(document)
    error = jsonschema.exceptions.best_match(validator.iter_errors(dict(config)))
    if error is None:
        return None
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(str(k) for k in error.instance if k not in allowed)
        where = f" in {_key(path)}" if path else ""
        message = f"unknown config key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}{where}"
        message += f"; allowed: {', '.join(sorted(allowed))}"
        if any(":" in k for k in unknown):
            message += f". {_NESTED_HINT}"
        return message
    names = _valid_names(error.schema) if error.validator in ("anyOf", "pattern") else []
    if names and isinstance(error.instance, str):
        return f"config key {_key(path)}: unknown name {error.instance!r}; valid: " + ", ".join(
            names
        )
    message = f"config key {_key(path)}: {error.message}"
    wanted = error.schema.get("type") if isinstance(error.schema, Mapping) else None
    if isinstance(error.instance, str) and error.validator == "type" and wanted != "string":
        message += f". {_NESTED_HINT}"
    return message


def _valid_names(schema: Any) -> list[str]:
    """The names a string schema accepts: its enums, and ``^(a|b|npz:.+)$`` patterns'
    alternatives (a pattern for custom names as its form, e.g. ``package.module:ClassName``)."""
    import re

    if not isinstance(schema, Mapping):
        return []
    names = [str(v) for v in schema.get("enum", [])]
    pattern = schema.get("pattern")
    if pattern:
        match = re.fullmatch(r"\^\(([^()]*)\)\$", pattern)
        if match:
            names += [a.replace("npz:.+", "npz:<path>") for a in match.group(1).split("|")]
        elif ":" in pattern:
            names.append("package.module:ClassName")
    for sub in [*schema.get("anyOf", []), *schema.get("oneOf", [])]:
        names += _valid_names(sub)
    return names


def check_config(config: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the keys if the configuration's keys contradict each other.

    Checks: ``ablation.ns`` is a subset of ``protocol.ns``; ``max(protocol.ns)`` is at most
    ``images.n_test`` and the test images every data set has; ``protocol.deltas`` lie in
    (0, 1] (the schema checks it too); no two methods, nor two data sets, share a display
    label (:func:`dgpbench.labels.check_unique_labels`).

    Parameters
    ----------
    config : mapping
        The configuration after schema validation (defaults filled in).

    Raises
    ------
    ValueError
        With one line per problem.
    """
    from dgpbench.data.datasets import n_test_images
    from dgpbench.labels import check_unique_labels

    problems = []
    protocol = config["protocol"]
    ns = list(protocol["ns"])
    extra = sorted(set(config["ablation"]["ns"]) - set(ns))
    if extra:
        problems.append(
            f"ablation.ns {extra} are not in protocol.ns {ns}: the ablation table can only "
            "show sample sizes the protocol draws"
        )
    n_test = config["images"]["n_test"]
    if max(ns) > n_test:
        problems.append(
            f"protocol.ns has n = {max(ns)} but images.n_test is {n_test}: a batch cannot "
            "hold more clean test images than are drawn"
        )
    for name in config["datasets"]:
        available = n_test_images(name)
        if available is not None and max(ns) > available:
            problems.append(
                f"protocol.ns has n = {max(ns)} but data set {name} (in datasets) has only "
                f"{available} test images"
            )
    bad = [d for d in protocol["deltas"] if not 0 < d <= 1]
    if bad:
        problems.append(f"protocol.deltas {bad} must lie in (0, 1]")
    # ablation data sets outside `datasets` are skipped; ablation methods all run
    for kind, key, names in (
        (
            "method",
            "methods and ablation.methods",
            [*config["methods"], *config["ablation"]["methods"]],
        ),
        ("dataset", "datasets", config["datasets"]),
    ):
        try:
            check_unique_labels(names, kind)
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
    if problems:
        raise ValueError("invalid configuration: " + "; ".join(problems))
