"""`pip install dgpbench` (no extras) gives a working library and `dgpbench score`.

The workflow's dependencies (Snakemake and its SLURM plugin, matplotlib, seaborn, PyYAML,
jsonschema, psutil) are the `[workflow]` extra: importing dgpbench, its CLI and scoring a
batch must work without them. A subprocess blocks them (``sys.modules[name] = None``: an
import fails as if they were not installed) and runs `dgpbench score` end to end. The
packaging files agree with each other.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib

import yaml
from _workflow import REPO

WORKFLOW_ONLY = ("snakemake", "matplotlib", "seaborn", "yaml", "jsonschema", "psutil")

SCRIPT = textwrap.dedent(
    """
    import sys

    BLOCKED = set(sys.argv[1].split(","))
    for name in BLOCKED:  # None in sys.modules: `import name` fails as if not installed
        sys.modules[name] = None

    import numpy as np
    from dgpbench import DGPFeatures, KSShiftDetector  # noqa: F401
    from dgpbench.cli.main import main
    from dgpbench.shifts.corruptions import corrupt
    from dgpbench.data.datasets import load_dataset
    from dgpbench.models.architectures import ArchConfig
    from dgpbench.models.train import TrainConfig, train_mlp

    out = sys.argv[2]
    x, y = load_dataset("digits", split="train")
    x_test, _ = load_dataset("digits", split="test")
    arch = ArchConfig(n_inputs=64, hidden=16, n_layers=2, n_classes=10)
    model = train_mlp(x, y, arch, TrainConfig(epochs=3, seed=0, lr=3e-3, threads=1),
                      f"{out}/model", progress=False)
    np.savez(f"{out}/refs.npz", x=x[:300], y=y[:300])
    np.savez(f"{out}/clean.npz", x=x_test[:200])
    np.savez(f"{out}/noisy.npz", x=corrupt(x_test[200:300], "GN", 6, dataset="digits", seed=0))
    code = main(["score", "--model", str(model), "--refs", f"{out}/refs.npz",
                 "--clean", f"{out}/clean.npz", "--batch", f"{out}/noisy.npz", "--json"])
    assert code in (0, 1), code
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED and sys.modules[m])
    assert not loaded, loaded
    print("EXIT", code)
    print("RUN", main(["run", "--cores", "1"]))
    """
)


def test_score_works_without_the_workflow_extra(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(WORKFLOW_ONLY), str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "EXIT 1" in lines  # strong Gaussian noise: a shift, exit status 1
    assert '"shift": true' in proc.stdout
    # `dgpbench run` without the extra: one line naming it, exit 2.
    assert "RUN 2" in lines
    assert "pip install 'dgpbench[workflow]'" in proc.stderr


def _requirements(specs: list[str]) -> dict[str, str]:
    """name -> version range of PEP 508 requirement strings."""
    out = {}
    for spec in specs:
        match = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)", spec)
        out[match[1].lower()] = match[3].replace(" ", "")
    return out


def test_packaging_files_agree():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "setuptools>=77" in project["build-system"]["requires"]  # license = "MIT" needs it
    base = _requirements(project["project"]["dependencies"])
    extras = project["project"]["optional-dependencies"]
    workflow = _requirements(extras["workflow"])
    assert {"numpy", "numba", "scipy", "scikit-learn", "torch", "pandas", "tqdm"} <= set(base)
    assert not {"snakemake", "matplotlib", "seaborn", "pyyaml", "jsonschema", "psutil"} & set(base)
    assert {"snakemake", "snakemake-executor-plugin-slurm", "matplotlib", "seaborn"} <= set(
        workflow
    )
    assert any(d.startswith("dgpbench[") and "workflow" in d for d in extras["dev"])
    # conda: conda-forge only, the same ranges (pytorch is conda-forge's name for torch)
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    conda = _requirements([d for d in env["dependencies"] if isinstance(d, str)])
    conda["torch"] = conda.pop("pytorch")
    for name, spec in {**base, **workflow}.items():
        assert conda.get(name) == spec, (name, spec, conda.get(name))
    rules_env = yaml.safe_load((REPO / "workflow" / "envs" / "dgpbench.yaml").read_text())
    assert rules_env["channels"] == ["conda-forge"]
    # CI's floor pins are the floors of pyproject.toml
    for line in (REPO / "ci" / "floors.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, version = line.lower().split("==")
        floor = base[name].split(",")[0].removeprefix(">=")
        assert version.startswith(floor), (name, version, base[name])
