# Configuration and helpers of Failing loudly's grid (failing_loudly.smk's rules).
# Nothing here runs a job.
from dgpbench.failing_loudly.grid import parse_method
from dgpbench.failing_loudly.toolbox import MODEL_FREE
from dgpbench.cli.config import check_failing_loudly
from dgpbench.shifts.adversarial import max_epsilon_for

FL_SCHEMA = Path(workflow.basedir, "workflow", "schemas", "failing_loudly.schema.yaml")
FL = config.setdefault("failing_loudly", {}) or {}
config["failing_loudly"] = FL
try:
    validate(FL, schema="../schemas/failing_loudly.schema.yaml", set_default=True)
except WorkflowError as exc:
    problem = schema_error(FL, FL_SCHEMA) or str(exc)
    raise ValueError(f"failing_loudly: {problem}") from None
check_failing_loudly(FL)  # the section's cross-key checks, before any job

FLR = f"{RESULTS}/fl"
FL_SECTION = "Failing loudly's grid - with DGP, TU and MAGDiff"
FL_MODELS = FL["models"] or MODELS
FL_ATTACKED = FL["attacked_model"] or FL_MODELS[0]


def fl_representation(method):
    """classif -> classif; pca+mmd -> pca."""
    return method.partition("+")[0]


def fl_models_of(method):
    """`none` for representations that do not read a classifier, else every grid model."""
    return ["none"] if fl_representation(method) in MODEL_FREE else FL_MODELS


def fl_records(dataset=None):
    return [
        f"{FLR}/records/{d}/{m}/{meth}.csv"
        for d in ([dataset] if dataset else DATASETS)
        for meth in FL["methods"]
        for m in fl_models_of(meth)
    ]


def fl_big_files(wc, input):
    """`DGPBENCH_MAX_INPUT_BYTES=...` for an fl step whose input files (this workflow's own
    outputs) pass dgpbench.npz's limit (1 GiB by default): what the files declare, read off
    them when the job runs (during planning they do not exist yet, and Snakemake waits)."""
    from dgpbench.failing_loudly.files import input_limit_env

    return input_limit_env(input)


def fl_mem_mb(floor, times):
    """Memory of a step that holds its input files: ``times`` their size, at least ``floor``
    (read when the job runs)."""
    return lambda wc, input: max(floor, int(times * input.size_mb))


def fl_multivariate_ref():
    """fl-detect's option for MMD's reference size: none (the protocol's), or m."""
    m = FL["mmd"]["multivariate_ref"]
    return "" if m is None else f"--multivariate-ref {m}"


def fl_ns(method):
    if method == "classif":
        return FL["ns_classif"]
    multivariate = parse_method(method).dimension == "multivariate"
    return FL["ns_multivariate"] if multivariate else FL["ns_univariate"]
