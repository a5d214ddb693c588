"""The workflow with hostile or inconsistent configurations: nothing runs that the config
smuggles in, paths arrive intact, and a bad combination of keys stops the run before any job.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _workflow import snakemake, tiny_config

from dgpbench.cli.main import main

MNIST = Path("/work/shared/data/MNIST")


def shell_commands(output: str) -> list[list[str]]:
    """The shell commands a ``snakemake -n -p`` run prints, split as the shell would."""
    commands = [
        shlex.split(line.removeprefix("Shell command: "))
        for line in output.splitlines()
        if line.startswith("Shell command: ")
    ]
    # Every rule calls the dgpbench of the interpreter running Snakemake: read it as `dgpbench`.
    # (Target rules print "None".)
    prefix = [sys.executable, "-m", "dgpbench"]
    return [["dgpbench", *c[3:]] for c in commands if c[:3] == prefix]


def test_data_root_is_quoted_and_arrives_intact(tmp_path):
    # A real job: the data root has a space and a command substitution in its name, and
    # holds MNIST. Unquoted, the shell runs `touch pwned` and splits the path in two.
    if not MNIST.is_dir():
        pytest.skip("needs the shared MNIST files")
    workdir = tmp_path / "work"
    root = tmp_path / "data root $(touch pwned)"
    root.mkdir()
    (root / "MNIST").symlink_to(MNIST)
    config = tiny_config(
        datasets=["mnist"], data_root=str(root), images={"n_refs": 10, "n_test": 10, "seed": 1}
    )
    config["protocol"]["ns"] = [5, 10]
    proc = snakemake(workdir, config, "results/images/mnist/clean.npz")
    log = workdir / "results" / "logs" / "images" / "mnist.log"
    assert proc.returncode == 0, proc.stderr[-2000:] + (log.read_text() if log.exists() else "")
    assert (workdir / "results" / "images" / "mnist" / "clean.npz").is_file()
    assert not list(tmp_path.rglob("pwned"))


HOSTILE = "a'b $(touch pwned) `touch pwned`; touch pwned"


@pytest.fixture(scope="module")
def hostile_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """One dry run (``-n -p``) of a config whose strings are hostile to a shell, at alpha 0.01:
    its folder and its shell commands by step (``dgpbench <step>``, ``analysis <step>``)."""
    workdir = tmp_path_factory.mktemp("hostile")
    config = tiny_config(data_root=f"/x y/{HOSTILE}")
    config["protocol"]["alpha"] = 0.01
    config["analysis"]["size"]["distributions"] = ["uniform", HOSTILE]
    config["analysis"]["early_stopping"]["heatmap"] = {"dataset": [f"npz:/d/{HOSTILE}.npz"]}
    published = workdir / f"{HOSTILE}.csv"
    published.write_text("")
    config["report"] = {
        "pool_deltas": [0.5],
        "published_table1": str(published),
        "comparison_delta_sets": {"half": [0.5]},
    }
    targets = [
        "results/images/digits/clean.npz",
        "results/analysis/size/grid.csv",
        "results/analysis/early_stopping/grid.csv.gz",
        "results/tables/comparison_table1.md",
        "results/tables/table_appendix_calibration.md",
    ]
    proc = snakemake(workdir, config, "-n", "-p", "--forcerun", "tables", *targets)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = {
        cmd[1] if cmd[1] != "analysis" else cmd[2]: cmd for cmd in shell_commands(proc.stdout)
    }
    return workdir, commands


def test_every_config_string_reaches_the_shell_as_one_word(hostile_plan):
    workdir, commands = hostile_plan
    images = commands["images"]
    assert images[images.index("--data-root") + 1] == f"/x y/{HOSTILE}"
    size = commands["size"]
    assert size[size.index("--distributions") + 1 : size.index("--sizes")] == ["uniform", HOSTILE]
    es = commands["early-stopping"]
    assert es[es.index("--heatmap-where") + 1] == f"dataset=npz:/d/{HOSTILE}.npz"
    compare = commands["compare"]
    assert compare[compare.index("--published") + 1] == str(workdir / f"{HOSTILE}.csv")
    assert compare[compare.index("--delta-set") + 1] == "half=0.5"
    assert not list(workdir.rglob("pwned"))


def test_tables_rule_passes_the_configured_alpha(hostile_plan):
    tables = hostile_plan[1]["tables"]
    assert tables[tables.index("--alpha") + 1] == "0.01"


def _nested(key: str, value) -> dict:
    """``tiny_config`` with one nested key (``a.b``) replaced."""
    config = tiny_config()
    section, _, leaf = key.rpartition(".")
    target = config
    for part in filter(None, section.split(".")):
        target = target[part]
    target[leaf] = value
    return config


@pytest.mark.parametrize(
    ("key", "value"),
    [("models.seeds", [0, 0])],  # every other grid list: tests/cli/test_config.py
)
def test_duplicate_grid_values_stop_the_run(tmp_path, key, value):
    proc = snakemake(tmp_path, _nested(key, value), "-n")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert key.rpartition(".")[2] in out and "non-unique" in out
    assert not (tmp_path / "results").exists()


def _records_file(path: Path, rejected: list[bool], model: str = "h16-l2-s0") -> None:
    pd.DataFrame(
        {"dataset": "digits", "model": model, "method": "dgp", "corruption": "GN",
         "intensity": 6, "n": 10, "delta": 0.5, "draw": range(len(rejected)),
         "rejected": rejected, "min_p": 0.01}
    ).to_csv(path, index=False)  # fmt: skip


def test_aggregate_refuses_records_counted_twice(tmp_path, capsys):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    _records_file(a, [True, False, True])
    _records_file(b, [True, True, False])  # the same draws (same keys), other outcomes
    _records_file(c, [False], model="h16-l2-s1")
    out = tmp_path / "records.csv.gz"
    assert main(["aggregate", "--out", str(out), str(a), str(a)]) == 2
    assert "a.csv" in capsys.readouterr().err
    assert main(["aggregate", "--out", str(out), str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "already counted" in err and "a.csv" in err and "b.csv" in err and "draw=0" in err
    assert not out.exists()
    assert main(["aggregate", "--out", str(out), str(a), str(c)]) == 0
    assert len(pd.read_csv(out)) == 4


def test_two_npz_files_with_the_same_name_are_an_error(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "data.npz").write_bytes(b"")
    config = tiny_config(datasets=["npz:a/data.npz", "npz:b/data.npz"])
    proc = snakemake(tmp_path, config, "-n")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    # refused at config time, naming both entries (their labels would be the same)
    assert "npz:a/data.npz" in out and "npz:b/data.npz" in out
    assert "share the label" in out


def _write_npz_dataset(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    np.savez(
        path,
        x_train=rng.integers(0, 256, (40, 4, 4), dtype=np.uint8),
        y_train=np.arange(40) % 2,
        x_test=rng.integers(0, 256, (20, 4, 4), dtype=np.uint8),
        y_test=np.arange(20) % 2,
    )


def test_a_changed_npz_file_reruns_the_jobs_that_read_it(tmp_path):
    data = tmp_path / "my_data.npz"
    _write_npz_dataset(data, seed=0)
    config = tiny_config(datasets=[f"npz:{data}"], images={"n_refs": 10, "n_test": 10, "seed": 1})
    config["protocol"]["ns"] = [5, 10]
    config["analysis"]["datasets"] = [f"npz:{data}"]
    clean = "results/images/npz-my_data/clean.npz"
    proc = snakemake(tmp_path, config, clean)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Nothing to be done" in snakemake(tmp_path, config, "-n", clean).stdout

    _write_npz_dataset(data, seed=1)  # new content, newer than the images drawn from it
    # Every rule that reads the file lists it as an input (the same dry run: its models too).
    models = [
        "results/models/npz-my_data/h16-l2-s0/model.pt",
        "results/analysis/models/npz-my_data/linear-s0/model.pt",
    ]
    proc = snakemake(tmp_path, config, "-n", clean, *models)
    assert proc.returncode == 0 and "rule images:" in proc.stdout, proc.stdout[-2000:]
    jobs = proc.stdout.split("rule ")[1:]
    for rule in ("train", "analysis_train"):
        (job,) = [j for j in jobs if j.startswith(f"{rule}:")]
        assert str(data) in job.split("output:")[0], job


@pytest.mark.parametrize(
    ("change", "keys"),
    [
        (
            {"ablation": {"datasets": ["digits"], "methods": ["dgp"], "ns": [7]}},
            ["ablation.ns", "protocol.ns"],
        ),
        # the other cross-key checks: tests/cli/test_config.py
    ],
)
def test_inconsistent_keys_stop_the_run_before_any_job(tmp_path, change, keys):
    # Earlier results stay: the run stops while reading the config, before Snakemake
    # removes the outputs of the jobs it would rerun.
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    (tables / "table1_shift_detection.md").write_text("earlier table")
    proc = snakemake(tmp_path, tiny_config(**change))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    for key in keys:
        assert key in out
    assert "ufunc" not in out
    assert (tables / "table1_shift_detection.md").read_text() == "earlier table"
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["tables"]


def test_tables_refuses_ablation_ns_without_records(tmp_path, capsys):
    records = tmp_path / "records.csv"
    _records_file(records, [True, False])
    out = tmp_path / "tables"
    code = main(["tables", "--records", str(records), "--ablation-datasets", "digits",
                 "--ablation-ns", "7", "--out-dir", str(out)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--ablation-ns [7]" in err and "[10]" in err
    assert not out.exists()
