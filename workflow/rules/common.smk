# Config validation, defaults and the helpers every rule uses. Nothing here runs a job.
import itertools
from pathlib import Path

from snakemake.utils import validate

from dgpbench.naming import MODEL_ID_PATTERN, model_id, parse_model_id

validate(config, schema="../schemas/config.schema.yaml", set_default=True)

RESULTS = "results"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"


def dataset_id(name):
    """A file-system-safe id for a data set (``npz:/a/b.npz`` -> ``npz-b``)."""
    return f"npz-{Path(name[4:]).stem}" if name.startswith("npz:") else name


DATASETS = {dataset_id(d): d for d in config["datasets"]}
# Ablation data sets outside `datasets` are skipped, so `--config datasets=[...]` alone
# selects a subset of the paper's grid.
ABLATION = [dataset_id(d) for d in config["ablation"]["datasets"] if dataset_id(d) in DATASETS]
MODELS = [
    model_id(h, l, s)
    for h, l, s in itertools.product(
        config["models"]["hidden"], config["models"]["layers"], config["models"]["seeds"]
    )
]
CORRUPTIONS = config["corruptions"]


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
        for m, meth in itertools.product(MODELS, methods_for(d))
    ]


def data_args():
    root = config.get("data_root")
    args = f"--data-root {root}" if root else ""
    return args + (" --download" if config.get("download") else "")


def join(values):
    return " ".join(str(v) for v in values)


wildcard_constraints:
    dataset="[A-Za-z0-9_.-]+",
    model=MODEL_ID_PATTERN,
    method="[a-z_]+",
    corruption="GB|GN|PD|UN",
