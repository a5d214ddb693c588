"""A custom feature method (package.module:ClassName) through the workflow, and the report."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _workflow import CORES, REPO, config_problem, copy_tiny_grid, snakemake, tiny_config
from test_readme import custom_method_module

from dgpbench.labels import METHOD_LABELS

SPEC = "my_methods:LogitFeatures"


def _snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    """Run the workflow in ``workdir`` with the README's example method importable there."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "my_methods.py").write_text(custom_method_module())
    return snakemake(
        workdir, config, *args, cores=CORES, profile="local", importable=True, timeout=600
    )


def test_a_custom_method_that_does_not_import_stops_before_any_job(tmp_path):
    # The other ways a custom name fails (no such class, not a class) are load_method_class's:
    # tests/features/test_features.py.
    proc = _snakemake(tmp_path, tiny_config(methods=["softmax", "no_such_module_q:Cls"]), "-n")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "config key methods:" in out and "cannot import module 'no_such_module_q'" in out
    assert not (tmp_path / "results").exists()


def test_a_custom_name_outside_the_pattern_is_refused_by_the_schema(tmp_path):
    problem = config_problem(tmp_path, tiny_config(methods=["softmax", "my methods:Cls"]))
    assert problem is not None and "my methods:Cls" in problem


# One tiny grid (one test, so that no two pytest-xdist workers run it): a custom method beside
# the built-in softmax, and Failing loudly's dgp_approx and a model-free reduction (fitted on
# the reference images).
METHODS = ["softmax", SPEC, "dgp_approx", "pca"]


@pytest.mark.slow
def test_custom_and_model_free_methods_run_through_tables_figures_and_report(tmp_path, tiny_grid):
    workdir = copy_tiny_grid(tiny_grid, tmp_path)  # its model, images and softmax features
    config = tiny_config(methods=METHODS)  # the grid's corruptions: its softmax jobs are reused
    run = _snakemake(workdir, config)
    assert run.returncode == 0, run.stderr[-3000:]
    results = workdir / "results"
    assert (results / "features" / "digits" / "h16-l2-s0" / f"{SPEC}.npz").is_file()
    records = pd.read_csv(results / "aggregate" / "records.csv.gz")
    assert set(records["method"]) == set(METHODS)
    table1 = pd.read_csv(results / "tables" / "table1_shift_detection.csv")
    labels = {"Softmax", "LogitFeatures", METHOD_LABELS["dgp_approx"], METHOD_LABELS["pca"]}
    assert set(table1["Method"]) == labels  # display labels
    md = (results / "tables" / "table1_shift_detection.md").read_text()
    assert re.search(r"^\| 50 +\| LogitFeatures +\|", md, re.M)
    auroc = pd.read_csv(results / "tables" / "table_auroc.csv")
    assert set(auroc["method"]) == set(METHODS) and auroc["auroc"].between(0, 1).all()
    for stem in ("fig_gn_by_n", "fig_overview", "fig_calibration"):
        assert (results / "figures" / f"{stem}.png").stat().st_size > 1000
    # dgp_approx and the model-free reduction through features, detection and Table 1.
    for method in ("dgp_approx", "pca"):
        assert (results / "features" / "digits" / "h16-l2-s0" / f"{method}.npz").is_file()
    assert records.groupby("method").size().nunique() == 1  # as many records as softmax

    report = _snakemake(workdir, config, "--report", "report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    html = (workdir / "report.html").read_text()

    def item(path: str) -> bool:  # an entry of the report (not only a mention of the file)
        return f'"results/{path}": {{"name"' in html

    # Tables in the paper's layout (HTML, bold best and stars) with their CSV downloads.
    for name in (
        "tables/table1_shift_detection.html", "tables/table1_shift_detection.csv",
        "tables/table_appendix_calibration.html", "tables/table_auroc.html",
        "figures/fig_gn_by_n.png", "figures/fig_gn_by_delta.png", "figures/fig_overview.png",
        "figures/fig_calibration.png",
    ):  # fmt: skip
        assert item(name), name
    assert "<b>" in (results / "tables" / "table1_shift_detection.html").read_text()
    # No placeholder sections: what this configuration does not compute is left out
    # (no ablation data set, no CNN, no shift beyond the paper, digits is not in the paper).
    for name in (
        "tables/table2_ablation.html", "tables/table2_ablation.csv", "tables/table_cnn.html",
        "tables/table_beyond_shifts.html", "figures/fig_beyond.png",
        "tables/comparison_table1.csv",
    ):  # fmt: skip
        assert not item(name), name
    for section in ("Section 5.2 - covariate shift detection", "Appendix - calibration"):
        assert f'"{section}": {{"CSV downloads"' in html
    assert "Beyond the paper - new shifts" not in html


def test_schema_admits_every_built_in_method():
    """The config schema's list of built-in methods is the library's registry."""
    from dgpbench.features.registry import METHODS

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    (builtin,) = [alt for alt in schema["$defs"]["method"]["anyOf"] if "enum" in alt]
    assert set(builtin["enum"]) == set(METHODS)
