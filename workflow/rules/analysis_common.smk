# Configuration and helpers of the neural-persistence analyses (analysis.smk's rules).
# Nothing here runs a job.
import itertools
import re

from dgpbench.models.sizes import mlp_n_weights


AN = config["analysis"]
AN_RESULTS = f"{RESULTS}/analysis"
AN_LOGS = f"{LOGS}/analysis"
AN_BENCH = f"{BENCH}/analysis"
AN_DATASETS = {dataset_id(d): d for d in AN["datasets"]}
REG = AN["regularisers"]
REG_DATASETS = {dataset_id(d): d for d in REG["datasets"]}
AN_LINEAR = 1 in AN["layers"]
AN_DEEP = sorted(l for l in AN["layers"] if l > 1)
# Run ids: "linear-s<seed>" (linear classifiers) or "<activation>-l<layers>-h<hidden>-s<seed>".
AN_RUNS = [f"linear-s{s}" for s in AN["seeds"] if AN_LINEAR] + [
    f"{a}-l{l}-h{h}-s{s}"
    for a, l, h, s in itertools.product(AN["activations"], AN_DEEP, AN["hidden"], AN["seeds"])
]
# Training jobs: all seeds of one architecture ("linear" or "<activation>-l<layers>-h<hidden>")
# train together as one stacked model (dgpbench analysis train-seeds).
AN_GROUPS = (["linear"] if AN_LINEAR else []) + [
    f"{a}-l{l}-h{h}" for a, l, h in itertools.product(AN["activations"], AN_DEEP, AN["hidden"])
]
AN_TRAIN_THREADS = 2  # the stacked products and the NP/DGP kernel use both
REG_RUNS = [f"{k}-s{s}" for k, s in itertools.product(REG["kinds"], REG["seeds"])]


def _group_layout(group):
    """(layers, hidden, activation) of a training job: "linear" or
    "<activation>-l<layers>-h<hidden>" (no torch: planning imports none)."""
    if group == "linear":
        return 1, 0, "relu"
    act, layers, hidden = re.fullmatch(r"(relu|tanh)-l(\d+)-h(\d+)", group).groups()
    return int(layers), int(hidden), act


def analysis_group_arch(group):
    """`dgpbench analysis train-seeds` architecture options of a training job."""
    layers, hidden, act = _group_layout(group)
    if layers == 1:
        return "--layers 1"
    return f"--layers {layers} --hidden {hidden} --activation {act}"


def analysis_seed_files(name):
    """``name`` in the run folder of every seed of a training job (wildcards dataset, group)."""
    return [f"{AN_RESULTS}/models/{{dataset}}/{{group}}-s{s}/{name}" for s in AN["seeds"]]


# Measured CPU cost of a stacked analysis job (training and curves) on one core of the
# development machine, per seed, epoch, training image and million weights: 1.8e-4 to
# 1.9e-4 s from 2 x 50 to 4 x 650 (benchmarks/analysis_job_time.py, docs/analysis-scale.md).
AN_SECONDS_PER_MWEIGHT_IMAGE = 2.0e-4
AN_TRAIN_IMAGES = {"emnist": 101520, "digits": 1647}  # others: 55,000 (MNIST, Fashion-MNIST)


def _group_n_weights(group, n_inputs=784, n_classes=47):
    """Weights of a training job's MLP (EMNIST-sized unless told)."""
    layers, hidden, _ = _group_layout(group)
    return mlp_n_weights(n_inputs, hidden, layers, n_classes)


def analysis_group_runtime(dataset, group, n_seeds=None):
    """SLURM minutes of a training job: the measured one-core rate (a second thread is not
    counted on), times 2 for a slower node."""
    images = AN_TRAIN_IMAGES.get(AN_DATASETS[dataset], 55000)
    seconds = (
        AN_SECONDS_PER_MWEIGHT_IMAGE * _group_n_weights(group) / 1e6 * images
        * AN["training"]["epochs"] * (n_seeds or len(AN["seeds"]))
    )
    return max(30, int(2 * seconds / 60) + 10)


def analysis_group_mem_mb(group, n_seeds=None):
    """Memory of a training job: the data plus the (seeds, 4096, hidden) evaluation buffers."""
    hidden = 0 if group == "linear" else int(group.rsplit("-h", 1)[1])
    return 4000 + int((n_seeds or len(AN["seeds"])) * 4096 * hidden * 4 * 3 / 1e6)


def regulariser_arch(kind):
    """`dgpbench analysis train-seeds` architecture options of a regulariser kind."""
    opts = f"--layers {REG['layers']} --hidden {REG['hidden']} --activation {REG['activation']}"
    return opts + {"none": "", "batchnorm": " --batchnorm", "dropout": f" --dropout {REG['dropout']}"}[kind]


def regulariser_seed_files(name):
    """``name`` in the run folder of every seed of a regulariser job (wildcards dataset,
    regkind)."""
    return [f"{AN_RESULTS}/regularisers/models/{{dataset}}/{{regkind}}-s{s}/{name}" for s in REG["seeds"]]


def regulariser_runtime(dataset):
    """SLURM minutes of a regulariser job (no curves: about 85% of a job with curves)."""
    group = f"{REG['activation']}-l{REG['layers']}-h{REG['hidden']}"
    return max(30, int(analysis_group_runtime(dataset, group, len(REG["seeds"])) * 0.85))


def analysis_files(name):
    """A file of every analysis run, e.g. model.pt or curves.csv."""
    return [f"{AN_RESULTS}/models/{d}/{r}/{name}" for d in AN_DATASETS for r in AN_RUNS]


# Report category (the paper's section) of each analysis folder; the caption of its tables and
# figures is workflow/report/analysis/<folder>.rst.
AN_SECTIONS = {
    "permutation": "Section 4 - neural persistence",
    "np_variance": "Section 4 - neural persistence",
    "bounds": "Appendix B - bounds of neural persistence",
    "np_factors": "Appendix B - bounds of neural persistence",
    "size": "Appendix C - matrix size",
    "weight_distributions": "Appendix D - weight distributions",
    "early_stopping": "Appendix - early stopping",
    "regularisers": "Appendix - regularisers",
    "dgp_variance": "Appendix - DGP and variance",
}


# Inputs of each published-vs-reproduced comparison of the analyses (rule analysis_compare).
AN_COMPARE_INPUTS = {
    "bounds": [f"{AN_RESULTS}/bounds/study.csv"],
    "r2": [f"{AN_RESULTS}/np_variance/r2.csv"],
    "early_stopping": [
        f"{AN_RESULTS}/early_stopping/table_np.csv",
        f"{AN_RESULTS}/early_stopping/table_dgp.csv",
    ],
}
AN_COMPARISONS = ["bounds", *(["r2"] if AN_DEEP else []), "early_stopping"]


def in_report(path):
    """``path`` flagged for snakemake --report, captioned and filed by its analysis folder."""
    folder = Path(path).parent.name
    return report(
        path, caption=f"../report/analysis/{folder}.rst", category=AN_SECTIONS[folder]
    )


def figure(stem, when=True):
    """PNG (in the report) and PDF of a figure, or nothing when ``when`` is false."""
    return [in_report(f"{stem}.png"), f"{stem}.pdf"] if when else []


def table(stem, tex=False):
    """CSV (in the report), Markdown and optionally LaTeX of a table."""
    return [in_report(f"{stem}.csv"), f"{stem}.md"] + ([f"{stem}.tex"] if tex else [])
