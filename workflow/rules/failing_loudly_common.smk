# Configuration and helpers of Failing loudly's grid (failing_loudly.smk's rules).
# Nothing here runs a job.
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


def fl_feature_bytes(dataset):
    """An upper estimate of one representation's features file (pixels: NoRed, classif):
    the unseen set plus every run's shifted images, float32. The runs multiply it."""
    from math import prod

    from dgpbench.data.datasets import image_shape

    try:
        values = prod(image_shape(dataset))
    except (ValueError, OSError):
        values = 3 * 32 * 32
    unseen = 2 * (FL["images"]["n_ref_pool"] + FL["images"]["n_test_pool"]) + 25000
    shifted = FL["runs"] * FL["images"]["n_test_pool"] * sum(FL["fractions"]) * len(FL["shifts"])
    return int(4 * values * (unseen + shifted))


def fl_big_files(wc):
    """`DGPBENCH_MAX_INPUT_BYTES=...` for the fl steps that read features files, where the
    files may pass dgpbench.npz's 1 GiB default (the full config, CIFAR-10): they are this
    workflow's own outputs."""
    need = int(1.25 * fl_feature_bytes(DATASETS[wc.dataset]))
    return f"DGPBENCH_MAX_INPUT_BYTES={need} " if need > 2**30 else ""


def fl_mem_mb(wc, floor):
    """Memory of a step that holds a features file (twice its size, at least ``floor``)."""
    return max(floor, 2 * fl_feature_bytes(DATASETS[wc.dataset]) // 10**6)


def fl_multivariate_ref():
    """fl-detect's option for MMD's reference size: none (the protocol's), or m."""
    m = FL["mmd"]["multivariate_ref"]
    return "" if m is None else f"--multivariate-ref {m}"


def fl_ns(method):
    if method == "classif":
        return FL["ns_classif"]
    test = method.partition("+")[2]
    return FL["ns_multivariate"] if test == "mmd" else FL["ns_univariate"]
