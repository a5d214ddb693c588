"""Failing loudly's grid as a workflow: the full config plans, a tiny one runs end to end."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from _workflow import CORES, REPO, config_problem, copy_tiny_grid, snakemake, tiny_config

from dgpbench.failing_loudly.grid import parse_method

FL_CONFIG = REPO / "config" / "failing_loudly.yaml"


def _snakemake(workdir, *args, timeout=300):
    return snakemake(workdir, None, *args, cores=None, timeout=timeout)


def _job_counts(stdout: str) -> dict[str, int]:
    block = stdout.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    return {line.split()[0]: int(line.split()[1]) for line in block if line.strip()}


@pytest.fixture(scope="module")
def fl_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Job counts of a dry run of config/failing_loudly.yaml (its default target) with the
    SLURM profile."""
    workdir = tmp_path_factory.mktemp("fl-plan")
    (workdir / "config.yaml").write_text((REPO / "config.yaml").read_text())
    proc = _snakemake(
        workdir, "-n", "--profile", str(REPO / "workflow/profiles/slurm"),
        "--configfile", str(FL_CONFIG),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _job_counts(proc.stdout)


def test_the_slurm_profile_plans_the_full_grid(fl_plan):
    counts = fl_plan
    fl = yaml.safe_load(FL_CONFIG.read_text())["failing_loudly"]
    n_models = 2  # the CNN and the MLP of config/failing_loudly.yaml
    free = [m for m in fl["methods"] if m.partition("+")[0] in
            ("noredu", "pca", "srp", "uae", "tae", "classif")]  # fmt: skip
    per_dataset = len(free) + (len(fl["methods"]) - len(free)) * n_models
    assert counts["fl_detect"] == 2 * per_dataset  # mnist and fashion-mnist
    assert counts["fl_shift"] == 2 * len(fl["shifts"]) and counts["fl_report"] == 1


def test_failing_loudly_config_makes_it_the_default_target(fl_plan, default_dry_run):
    assert fl_plan.get("failing_loudly") == 1 and "all" not in fl_plan
    # the default config keeps `all`
    assert "failing_loudly" not in _job_counts(default_dry_run)


@pytest.mark.slow
def test_a_tiny_grid_runs_and_writes_tables_figure_and_summary(tmp_path, tiny_grid):
    copy_tiny_grid(tiny_grid, tmp_path)  # its MLP: the grid trains nothing
    # One model-based representation (BBSDh) beside the model-free ones; DGP's features and
    # detection run through the same rules in the ResNet grid (test_resnet_workflow.py).
    methods = ["noredu+ks", "classif", "pca+mmd", "noredu+cvm", "bbsdh+fisher", "pca+energy"]
    config = tiny_config()
    config["failing_loudly"] = {
        # FGSM (adversarial_shift) attacks a model in the ResNet grid (test_resnet_workflow.py)
        "shifts": ["large_gn_shift", "medium_img_shift+ko_shift"],
        "fractions": [0.5, 1.0],
        "methods": methods,
        "images": {"n_fit": 200, "n_ref_pool": 200, "n_test_pool": 300, "seed": 1},
        "ns_univariate": [10, 50], "ns_multivariate": [10], "ns_classif": [20],
        "runs": 2, "draws": 2, "mmd": {"n_permutations": 50, "multivariate_ref": 50},
    }  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    proc = _snakemake(tmp_path, "failing_loudly", "--cores", str(CORES), "--profile",
                      str(REPO / "workflow/profiles/local"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "localrule train:" not in proc.stdout + proc.stderr  # the tiny grid's model served
    out = tmp_path / "results" / "fl"
    records = pd.read_csv(out / "records.csv.gz")
    assert set(records["method"]) == {parse_method(m).name for m in methods}
    assert set(records["shift"]) == {"none", *config["failing_loudly"]["shifts"]}
    assert (records.groupby(["method", "model", "shift", "fraction", "n"]).size() == 4).all()
    assert set(records["run"]) == {0, 1} and set(records["protocol"]) == {"dgpbench"}
    # large noise on every image is detected by KS on the pixels at n = 50
    big = records[(records["method"] == "noredu+ks") & (records["shift"] == "large_gn_shift")
                  & (records["n"] == 50) & (records["fraction"] == 1.0)]  # fmt: skip
    assert big["rejected"].mean() == 1.0
    for name in ("fl_table1a_accuracy.md", "fl_table1b.md", "fl_best_per_shift.md",
                 "fl_false_positives.md", "fl_summary.md", "comparison_fl_table1a.md",
                 "fl_table1b_pooled.md", "fl_table2a_intensity.md",
                 "fl_table2b_fraction.md"):  # fmt: skip
        assert (out / "tables" / name).stat().st_size > 0
    ranks = (out / "tables" / "fl_ranks.md").read_text()
    assert "noredu+cvm" in ranks and "bbsdh+fisher" in ranks  # ranked with the others
    energy = records[records["method"] == "pca+energy"]
    assert set(energy["dimension"]) == {"multivariate"} and set(energy["n_ref"]) == {50}
    assert "pca+energy" in (out / "tables" / "fl_table1a_accuracy.md").read_text()
    assert (out / "figures" / "fl_accuracy_vs_n_digits.png").stat().st_size > 0
    again = _snakemake(tmp_path, "failing_loudly", "--cores", str(CORES), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr  # resumable: all done


@pytest.mark.parametrize("bad", [{"shifts": ["tiny_shift"]}, {"methods": ["pca+ttest"]},
                                 {"top_n": {"nope": 5}}, {"draws": 0}, {"runs": 0},
                                 {"protocol": "theirs"},
                                 {"protocol": "rabanser",
                                  "mmd": {"multivariate_ref": 1000}}])  # fmt: skip
def test_bad_failing_loudly_config_is_refused_naming_the_section(tmp_path, bad):
    problem = config_problem(tmp_path, {**tiny_config(), "failing_loudly": bad}, "failing_loudly")
    assert problem is not None and "failing_loudly" in problem


def test_bad_failing_loudly_config_stops_snakemake_before_any_job(tmp_path):
    config = {**tiny_config(), "failing_loudly": {"top_n": {"nope": 5}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    proc = _snakemake(tmp_path, "failing_loudly", "-n")
    assert proc.returncode != 0
    assert "failing_loudly.top_n" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()
