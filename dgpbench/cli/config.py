"""Checks of the workflow configuration that the JSON schema cannot make, and short messages
for the ones it does.

The workflow validates ``config.yaml`` against ``workflow/schemas/config.schema.yaml`` and
then calls :func:`check_config`, so that an inconsistent combination of keys stops the run
before any job starts (a failing job would first have removed the previous outputs). Every
check that spans several keys is here, so the ``.smk`` files hold none of their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "base_configfile",
    "check_config",
    "check_failing_loudly",
    "schema_error",
    "workflow_config_error",
]


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
    alternatives (a pattern for custom names as its form, e.g. ``package.module:ClassName``).
    """
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


def _lookup(config: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted ``key``, or None where a section or key is absent."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _dataset_key(name: str) -> str:
    """A data set name that compares equal for the same file (``npz:`` paths resolved)."""
    if name.startswith("npz:"):
        return f"npz:{Path(name[4:]).expanduser().resolve()}"
    return name


def _workflow_problems(config: Mapping[str, Any]) -> list[str]:
    """Keys of the report, the users' models, the streams and the analyses that contradict others."""
    problems = []
    deltas, pooled = _lookup(config, "protocol.deltas"), _lookup(config, "report.pool_deltas")
    if deltas is not None and pooled is not None:
        run = {round(float(d), 9) for d in deltas}
        missing = [d for d in pooled if round(float(d), 9) not in run]
        if missing:
            problems.append(
                f"config key report.pool_deltas {pooled} must be a subset of protocol.deltas "
                f"{deltas}; not run: {missing}"
            )
    datasets = {_dataset_key(d) for d in config.get("datasets", [])}
    for name, entry in (_lookup(config, "models.user") or {}).items():
        if _dataset_key(entry["dataset"]) not in datasets:
            problems.append(
                f"config key models.user.{name}.dataset {entry['dataset']!r} is not one of "
                f"datasets {config['datasets']}"
            )
    stream = config.get("stream") or {}
    for d in stream.get("datasets") or []:
        if _dataset_key(d) not in datasets:
            problems.append(f"config key stream.datasets: {d} is not one of datasets")
    for c in stream.get("corruptions") or []:
        if c not in config.get("corruptions", []):
            problems.append(f"config key stream.corruptions: {c} is not one of corruptions")
    intensity = stream.get("intensity")
    if intensity is not None and intensity not in config.get("intensities", []):
        problems.append(f"config key stream.intensity: {intensity} is not one of intensities")
    if stream.get("n_bootstraps") is not None and stream.get("bootstraps_per_ert") is not None:
        problems.append(
            "config keys stream.n_bootstraps and stream.bootstraps_per_ert: set one of the two"
        )
    burn_in = _lookup(config, "analysis.early_stopping.max_burn_in")
    epochs = _lookup(config, "analysis.training.epochs")
    if burn_in is not None and epochs is not None and burn_in >= epochs:
        problems.append(
            f"analysis.early_stopping.max_burn_in ({burn_in}) must be"
            f" smaller than analysis.training.epochs ({epochs})"
        )
    deep = sorted(layers for layers in _lookup(config, "analysis.layers") or [] if layers > 1)
    hidden = _lookup(config, "analysis.hidden") or []
    for key, grid in (("figure_layers", deep), ("figure_hidden", hidden)):
        chosen = _lookup(config, f"analysis.np_variance.{key}")
        if deep and chosen and not set(chosen) & set(grid):
            problems.append(f"analysis.np_variance.{key} {chosen} selects no model of {grid}")
    return problems


def check_config(config: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the keys if the configuration's keys contradict each other.

    Checks: ``ablation.ns`` is a subset of ``protocol.ns``; ``max(protocol.ns)`` is at most
    ``images.n_test`` and the test images every data set has; ``protocol.deltas`` lie in
    (0, 1] (the schema checks it too); no two methods, nor two data sets, share a display
    label (:func:`dgpbench.labels.check_unique_labels`); ``report.pool_deltas`` is a subset
    of ``protocol.deltas``; every ``models.user.<name>.dataset`` is one of ``datasets``;
    ``analysis.early_stopping.max_burn_in`` is below ``analysis.training.epochs``;
    ``analysis.np_variance.figure_layers`` and ``figure_hidden`` select a model of the
    analysis grid; ``models.resnet_blocks`` names as many stages as ``models.resnet_channels``;
    ``protocol.tests`` names registered tests that take features. A check whose keys the configuration lacks is skipped.

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
    models = config.get("models", {})
    stages = [len(models.get(k, ())) for k in ("resnet_channels", "resnet_blocks")]
    if stages[0] != stages[1]:
        problems.append(
            f"models.resnet_blocks has {stages[1]} stages but models.resnet_channels has "
            f"{stages[0]}: give the blocks of each stage"
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
    if protocol.get("tests") is not None:
        from dgpbench.detectors.registry import DETECTORS

        usable = sorted(set(DETECTORS) - {"chi2", "classif"})  # these two do not test features
        unknown = sorted(set(protocol["tests"]) - {"ks", *usable})
        if unknown:
            problems.append(
                f"config key protocol.tests: {unknown} cannot test features; choose from {usable}"
            )
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
    problems += _workflow_problems(config)
    if problems:
        raise ValueError("invalid configuration: " + "; ".join(problems))


def check_failing_loudly(section: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the key if the ``failing_loudly`` section contradicts itself.

    Checks: every method names a registered test; every shift of ``top_n`` is a known shift;
    protocol ``rabanser`` uses m = n reference rows for MMD (``mmd.multivariate_ref`` null or
    ``n``).

    Parameters
    ----------
    section : mapping
        The ``failing_loudly`` section after its schema's validation (defaults filled in).

    Raises
    ------
    ValueError
        Naming the key and the reason.
    """
    from dgpbench.failing_loudly.grid import parse_method
    from dgpbench.shifts import SHIFTS

    for method in section["methods"]:
        try:
            parse_method(method)
        except ValueError as exc:
            raise ValueError(f"config key failing_loudly.methods: {exc}") from None
    unknown = sorted(set(section["top_n"]) - set(SHIFTS))
    if unknown:
        raise ValueError(f"config key failing_loudly.top_n: unknown shifts {unknown}")
    if section["protocol"] == "rabanser" and section["mmd"]["multivariate_ref"] not in (None, "n"):
        raise ValueError(
            "config key failing_loudly.mmd.multivariate_ref: protocol rabanser compares MMD "
            "against m = n reference rows (Rabanser et al.'s shift_detector.py); set it to null"
        )


def base_configfile(workdir: str | os.PathLike[str], workflow_dir: str | os.PathLike[str]) -> Path:
    """The configuration a run starts from: ``workdir/config.yaml``, else the clone's.

    A run with ``--directory DIR --snakefile CLONE/Snakefile`` and only overlay
    ``--configfile`` files takes ``CLONE/config.yaml`` as its base when DIR has none.

    Parameters
    ----------
    workdir : path-like
        The run's working directory (``--directory``).
    workflow_dir : path-like
        The folder of the workflow's Snakefile (the clone).

    Returns
    -------
    pathlib.Path
    """
    own = Path(workdir) / "config.yaml"
    return own if own.is_file() else Path(workflow_dir) / "config.yaml"


def workflow_config_error(snakemake_args: list[str], workdir: Path) -> str | None:
    """The first problem of the configuration a ``snakemake`` command line would run, or None.

    The configuration is assembled as Snakemake assembles it for the workflow's Snakefile:
    ``config.yaml`` of ``workdir`` (else the Snakefile's own), then every ``--configfile``,
    then ``--config``; it is then checked as the workflow checks it (the schema, with its
    defaults, then :func:`check_config`, then the ``failing_loudly`` section's schema and
    :func:`check_failing_loudly`). A command line this cannot read as Snakemake does, or
    another workflow's Snakefile, gives None: Snakemake then checks it itself.

    Parameters
    ----------
    snakemake_args : list of str
        The arguments of ``snakemake``.
    workdir : Path
        The working directory of the run (``--directory``).

    Returns
    -------
    str or None
        One line naming the key and the reason.
    """
    import contextlib
    import copy
    import io

    try:
        from snakemake.cli import get_argument_parser, parse_config
        from snakemake.common.configfile import load_configfile
        from snakemake.exceptions import WorkflowError
        from snakemake.utils import update_config, validate

        quiet = io.StringIO()  # a usage error or --help is Snakemake's to print, once
        with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            args = get_argument_parser().parse_args(snakemake_args)
        snakefile = Path(args.snakefile) if args.snakefile else workdir / "Snakefile"
        config: dict[str, Any] = {}
        default = base_configfile(workdir, snakefile.parent)
        if default.is_file():
            update_config(config, load_configfile(str(default)))
        for file in args.configfile or []:
            update_config(config, load_configfile(str(file)))
        update_config(config, parse_config(args.config))
    except (Exception, SystemExit):  # Snakemake reports what it cannot read
        return None
    schema = snakefile.parent / "workflow" / "schemas" / "config.schema.yaml"
    if not schema.is_file():  # not this workflow: its own checks
        return None
    checked = copy.deepcopy(config)
    try:
        validate(checked, schema=str(schema.resolve()), set_default=True)
    except WorkflowError:
        return schema_error(config, schema) or "the configuration does not follow its schema"
    try:
        check_config(checked)
    except ValueError as exc:
        return str(exc)
    fl_schema = schema.with_name("failing_loudly.schema.yaml")
    fl = checked.get("failing_loudly") or {}
    if fl_schema.is_file() and isinstance(fl, dict):
        fl = copy.deepcopy(fl)
        try:
            validate(fl, schema=str(fl_schema.resolve()), set_default=True)
        except WorkflowError:
            problem = schema_error(fl, fl_schema) or "it does not follow its schema"
            return f"failing_loudly: {problem}"
        try:
            check_failing_loudly(fl)
        except ValueError as exc:
            return str(exc)
    return None
