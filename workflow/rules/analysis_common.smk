# Configuration and helpers of the neural-persistence analyses (analysis.smk's rules).
# Nothing here runs a job.
import itertools
import re

AN = config["analysis"]
AN_RESULTS = f"{RESULTS}/analysis"
AN_LOGS = f"{LOGS}/analysis"
AN_BENCH = f"{BENCH}/analysis"
AN_DATASETS = {dataset_id(d): d for d in AN["datasets"]}
REG = AN["regularisers"]
REG_DATASETS = {dataset_id(d): d for d in REG["datasets"]}
AN_LINEAR = 1 in AN["layers"]
AN_DEEP = sorted(l for l in AN["layers"] if l > 1)
if AN["early_stopping"]["max_burn_in"] >= AN["training"]["epochs"]:
    raise ValueError(
        f"analysis.early_stopping.max_burn_in ({AN['early_stopping']['max_burn_in']}) must be"
        f" smaller than analysis.training.epochs ({AN['training']['epochs']})"
    )
for key, grid in (("figure_layers", AN_DEEP), ("figure_hidden", AN["hidden"])):
    chosen = AN["np_variance"][key]
    if AN_DEEP and chosen and not set(chosen) & set(grid):
        raise ValueError(f"analysis.np_variance.{key} {chosen} selects no model of {grid}")
# Run ids: "linear-s<seed>" (linear classifiers) or "<activation>-l<layers>-h<hidden>-s<seed>".
AN_RUNS = [f"linear-s{s}" for s in AN["seeds"] if AN_LINEAR] + [
    f"{a}-l{l}-h{h}-s{s}"
    for a, l, h, s in itertools.product(AN["activations"], AN_DEEP, AN["hidden"], AN["seeds"])
]
REG_RUNS = [f"{k}-s{s}" for k, s in itertools.product(REG["kinds"], REG["seeds"])]
RUN_RE = re.compile(r"(?:linear|(?P<act>relu|tanh)-l(?P<layers>\d+)-h(?P<hidden>\d+))-s(?P<seed>\d+)")


def analysis_arch(run):
    """`dgpbench analysis train` architecture options of a run id."""
    m = RUN_RE.fullmatch(run)
    if m["act"] is None:
        return f"--layers 1 --seed {m['seed']}"
    return f"--layers {m['layers']} --hidden {m['hidden']} --activation {m['act']} --seed {m['seed']}"


def regulariser_arch(run):
    kind, seed = run.rsplit("-s", 1)
    opts = f"--layers {REG['layers']} --hidden {REG['hidden']} --activation {REG['activation']}"
    opts += {"none": "", "batchnorm": " --batchnorm", "dropout": f" --dropout {REG['dropout']}"}[kind]
    return f"{opts} --seed {seed}"


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
