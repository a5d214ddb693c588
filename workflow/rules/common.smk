# Config validation, defaults and the helpers every rule uses. Nothing here runs a job.
import itertools
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake_interface_executor_plugins.settings import DeploymentMethod
from snakemake.utils import validate

from dgpbench.cli.config import check_config, schema_error
from dgpbench.naming import MODEL_ID_PATTERN, USER_MODEL_ID_PATTERN, model_id, model_id_template, parse_model_id

SCHEMA = Path(workflow.basedir, "workflow", "schemas", "config.schema.yaml")
try:
    validate(config, schema="../schemas/config.schema.yaml", set_default=True)
except WorkflowError as exc:
    # Snakemake's message prints the whole schema; name the key and the reason instead.
    raise ValueError(schema_error(config, SCHEMA) or str(exc)) from None
check_config(config)  # every constraint across keys, before any job


def dgpbench_command():
    """The `dgpbench` every rule calls, as a shell-quoted command.

    The one of the interpreter that runs Snakemake (the same on every SLURM job, which
    re-runs this file under that interpreter), so a venv need not be on PATH; under
    `--software-deployment-method conda`, the rule environment's own (activated per rule;
    dgpbench installed there by workflow/envs/dgpbench.post-deploy.sh).
    """
    settings = getattr(workflow, "deployment_settings", None)
    if DeploymentMethod.CONDA in (getattr(settings, "deployment_method", None) or ()):
        return "dgpbench"
    return shlex.join([sys.executable, "-m", "dgpbench"])


DGPBENCH = dgpbench_command()

RESULTS = "results"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"


_NPZ_IDS = {}  # id -> resolved path of every npz: data set named in the config


def dataset_id(name):
    """A file-system-safe id for a data set (``npz:/a/b.npz`` -> ``npz-b``).

    Two different files with the same id (``/a/data.npz`` and ``/b/data.npz``) would share
    one results folder, so that is an error naming both.
    """
    if not name.startswith("npz:"):
        return name
    path = Path(name[4:]).expanduser().resolve()
    ident = f"npz-{re.sub(r'[^A-Za-z0-9_.-]', '_', path.stem)}"
    other = _NPZ_IDS.setdefault(ident, path)
    if other != path:
        raise ValueError(
            f"data sets npz:{other} and npz:{path} would share the id {ident!r} (and the"
            " folders results/*/{ident}): rename one of the files"
        )
    return ident


DATASETS = {dataset_id(d): d for d in config["datasets"]}
# Ablation data sets outside `datasets` are skipped, so `--config datasets=[...]` alone
# selects a subset of the paper's grid.
ABLATION = [dataset_id(d) for d in config["ablation"]["datasets"] if dataset_id(d) in DATASETS]
KINDS = config["models"]["kind"]
KINDS = [KINDS] if isinstance(KINDS, str) else list(KINDS)
# Model ids: h<hidden>-l<layers>-s<seed> for MLPs, cnn-h<hidden>-l<layers>-s<seed> for CNNs
# (resnet-h... for ResNets).
MODELS = [
    model_id(h, l, s, kind)
    for kind, h, l, s in itertools.product(
        KINDS, config["models"]["hidden"], config["models"]["layers"], config["models"]["seeds"]
    )
]
# Users' own models (models.user): id user-<name> -> (data set id, model reference).
USER_MODELS = {}
for _name, _entry in config["models"].get("user", {}).items():  # datasets: check_config
    USER_MODELS[f"user-{_name}"] = (dataset_id(_entry["dataset"]), _entry["model"])
CORRUPTIONS = config["corruptions"]
LABEL_SHIFT = config["label_shift"]["intensities"]


def methods_for(dataset):
    """Table-1 methods, plus the ablation variants where the data set is in the ablation."""
    methods = list(config["methods"])
    if dataset in ABLATION:
        methods += [m for m in config["ablation"]["methods"] if m not in methods]
    return methods


def all_records():
    """Every record file (detection and calibration draws) of the grid."""
    return [
        f"{RESULTS}/detect/{d}/{m}/{meth}.csv"
        for d in DATASETS
        for m, meth in itertools.product(
            MODELS + [u for u, (ud, _) in USER_MODELS.items() if ud == d], methods_for(d)
        )
    ]


def model_input(wildcards):
    """Input function: a grid model's checkpoint, or a user model's file (none for a factory)."""
    if wildcards.model not in USER_MODELS:
        return f"{RESULTS}/models/{wildcards.dataset}/{wildcards.model}/model.pt"
    reference = USER_MODELS[wildcards.model][1]
    return [] if is_factory_reference(reference) else [str(Path(reference).expanduser())]


def model_argument(wildcards):
    """The --model value of a job (shell-quote it: it may come from the config)."""
    if wildcards.model not in USER_MODELS:
        return f"{RESULTS}/models/{wildcards.dataset}/{wildcards.model}/model.pt"
    reference = USER_MODELS[wildcards.model][1]
    return reference if is_factory_reference(reference) else str(Path(reference).expanduser())


def is_factory_reference(reference):
    """``package.module:factory`` and not an existing file (dgpbench.models.specs' rule)."""
    pattern = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*"
    return re.fullmatch(pattern, reference) is not None and not Path(reference).exists()


def comparison_sets():
    """Labelled delta sets of report.comparison_delta_sets that this run computes."""
    run = {round(float(d), 9) for d in config["protocol"]["deltas"]}
    return {
        label: deltas
        for label, deltas in config["report"]["comparison_delta_sets"].items()
        if {round(float(d), 9) for d in deltas} <= run
    }


def published_table1():
    """The configured published Table 1 as a list (empty: the paper's, shipped in dgpbench)."""
    path = config["report"]["published_table1"]
    return [str(path)] if path else []


def check_custom_methods():
    """Import every custom method (package.module:ClassName) of the config and check that it is
    a transformer, so a mistake stops the run before any job starts. Importing runs the
    module's code: the user's explicit choice in their own config."""
    for key, names in (("methods", config["methods"]), ("ablation.methods", config["ablation"]["methods"])):
        custom = [name for name in names if ":" in name]
        if not custom:
            continue
        from dgpbench.features.registry import load_method_class  # loads torch: only when needed

        for name in custom:
            try:
                load_method_class(name)
            except ValueError as exc:
                raise ValueError(f"config key {key}: {exc}") from None


check_custom_methods()


# Shell safety: every config string reaches a shell command quoted (these helpers, or
# `{params.x:q}`); numbers are safe once the schema has checked their type, and wildcards
# are constrained below to characters without shell meaning.
def data_args():
    """`--data-root` (quoted) and `--download` options from the config."""
    root = config.get("data_root")
    args = f"--data-root {shlex.quote(str(root))}" if root else ""
    return args + (" --download" if config.get("download") else "")


def data_file(names):
    """Input function: the file of an ``npz:`` data set (none for the built-in data sets), so
    that a changed file reruns the jobs that read it. ``names`` maps ids to data set names."""

    def inputs(wildcards):
        name = names[wildcards.dataset]
        return [str(Path(name[4:]).expanduser())] if name.startswith("npz:") else []

    return inputs


def join(values):
    """Config values as separate, shell-quoted words."""
    return " ".join(shlex.quote(str(v)) for v in values)


def seed_files(name):
    """One architecture's per-seed files (wildcards dataset, hidden, layers)."""
    return [
        f"{RESULTS}/models/{{dataset}}/{model_id_template(s)}/{name}"
        for s in config["models"]["seeds"]
    ]


wildcard_constraints:
    dataset="[A-Za-z0-9_.-]+",
    model=f"{MODEL_ID_PATTERN}|{USER_MODEL_ID_PATTERN}",
    method=r"[a-z_]+|[A-Za-z_][\w.]*:[A-Za-z_]\w*",
    corruption="GB|GN|PD|UN|RO|ZO|TR|SH",


# The ResNets' training settings (cnn.smk).
def resnet_training(dataset):
    """The `training` settings of a ResNet on `dataset`: models.resnet_training's over them."""
    train = dict(config["training"])
    own = dict(config["models"].get("resnet_training") or {})
    epochs = own.pop("epochs", None)
    if isinstance(epochs, dict):
        epochs = epochs.get(dataset)
    return {**train, **own, **({} if epochs is None else {"epochs": epochs})}


def protocol_params(*extra):
    """The protocol keys a detection command reads (draws, seed, alpha, correction and
    ``extra``): a job's params are what decides its output, so that naming another test in
    protocol.tests, say, does not rerun every detection of the grid."""
    return {k: config["protocol"][k] for k in ("draws", "seed", "alpha", "correction", *extra)}


# The paper's protocol with other tests (tests_power.smk).
# protocol.tests names registered tests that take features: cli/config.py's check_config.
PROTOCOL_TESTS = [t for t in config["protocol"]["tests"] if t != "ks"]


def tests_power_records():
    """The other tests' record files: protocol.test_methods of every grid model."""
    methods = config["protocol"]["test_methods"]
    return [
        f"{RESULTS}/detect_tests/{d}/{m}/{meth}/{t}.csv"
        for d in DATASETS
        for m in MODELS
        for meth in methods
        for t in PROTOCOL_TESTS
    ]


# The online detectors' streams (stream.smk); stream.* is checked with the other keys
# (cli/config.py's check_config).
ST = config["stream"]
ST_DATASETS = [dataset_id(d) for d in ST["datasets"]] or list(DATASETS)
ST_SHIFTS = ST["corruptions"] or list(CORRUPTIONS)
ST_INTENSITY = ST["intensity"] if ST["intensity"] is not None else max(config["intensities"])


def stream_records():
    """Every per-model record file of the `stream` target."""
    return [
        f"{RESULTS}/stream/{d}/{m}/{meth}.csv"
        for d in ST_DATASETS
        for m in MODELS + [u for u, (ud, _) in USER_MODELS.items() if ud == d]
        for meth in ST["methods"]
    ]
