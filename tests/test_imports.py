"""The imports run one way: cli -> step modules -> library; the registry imports nothing;
no module of the package reaches itself through its imports (no import cycle)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dgpbench"
CLI = {"dgpbench.cli.main", "dgpbench.__main__"}
REGISTRY = "dgpbench.cli.registry"
STEPS = {
    "dgpbench.cli.monitor",
    "dgpbench.cli.calibrate",
    "dgpbench.cli.paper",
    "dgpbench.cli.run",
    "dgpbench.cli.analysis",
    "dgpbench.cli.compare",
    "dgpbench.cli.failing_loudly",
    "dgpbench.cli.stream",
    "dgpbench.cli.stream_eval",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """Package modules that ``name`` imports anywhere (module level or inside functions)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            # `from dgpbench.analysis import plots` imports the submodule `plots`
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES)
    return {m for m in found if m == "dgpbench" or m.startswith("dgpbench.")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (or a module importing itself),
    each as one cycle through it (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph[node]:
                    groups.append(sorted(group))
    return groups


def test_the_cycle_finder_finds_cycles():
    # the oracle: hand-made graphs with known cycles
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    found = _cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}})
    assert sorted(found) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_cycle_in_the_package():
    # Imports inside functions count too: a deferred import hides a circle, it does not
    # remove it (the two modules still cannot be understood or tested one without the other).
    graph = {name: _imports(name) - {name} for name in MODULES}
    assert _cycles(graph) == [], "modules that import each other (directly or via others)"


def test_architectures_and_checkpoints_sit_below_training_and_the_split():
    assert not _imports("dgpbench.models.architectures") & {
        "dgpbench.models.train",
        "dgpbench.models.body_head",
        "dgpbench.models.checkpoints",
    }
    assert not _imports("dgpbench.models.checkpoints") & {
        "dgpbench.models.train",
        "dgpbench.models.body_head",
    }


def test_the_packages_re_export_their_members():
    from dgpbench import models
    from dgpbench.models import architectures, checkpoints, train

    assert models.build_mlp is architectures.build_mlp
    assert models.ArchConfig is architectures.ArchConfig
    assert models.ACTIVATIONS is architectures.ACTIVATIONS
    assert models.load_checkpoint is checkpoints.load_checkpoint
    assert models.save_checkpoint is checkpoints.save_checkpoint
    assert models.train_mlp is train.train_mlp
    assert models.TrainConfig is train.TrainConfig


def test_each_name_lives_in_one_module():
    # a module exports only what it defines, not its neighbours' names
    from dgpbench.models import body_head, train

    assert not {"ArchConfig", "build_mlp", "load_checkpoint", "torch_threads"} & set(train.__all__)
    assert not {"CNNConfig", "build_cnn"} & set(body_head.__all__)


def test_the_layers_are_known_modules():
    assert CLI | STEPS | {REGISTRY} <= set(MODULES)


def test_registry_imports_nothing_of_the_package():
    assert _imports(REGISTRY) == set()


@pytest.mark.parametrize("name", sorted(set(MODULES) - CLI))
def test_only_the_entry_point_imports_the_cli(name):
    assert not _imports(name) & CLI


@pytest.mark.parametrize("name", sorted(set(MODULES) - CLI - STEPS - {REGISTRY}))
def test_library_modules_import_no_step_module(name):
    assert not _imports(name) & (STEPS | {REGISTRY})


def test_step_modules_import_the_registry_not_the_cli():
    for name in STEPS:
        imports = _imports(name)
        assert REGISTRY in imports, name
        assert not imports & CLI, name


def test_the_cli_loads_only_the_analysis_target_it_runs():
    # `dgpbench` builds every parser at start-up; a target's module (torch, numba, seaborn)
    # is imported only when that target is chosen
    code = (
        "import sys; from dgpbench.cli.main import build_parser; "
        "parser = build_parser(); loaded = set(sys.modules); "
        "args = parser.parse_args(['analysis', 'bounds', '--out-dir', 'x']); "
        "print(args.n_matrices, args.threads); print(' '.join(sorted(loaded))); "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "10000 None"
    at_start, after = set(out[1].split()), set(out[2].split())
    heavy = {"torch", "seaborn", "matplotlib", "numba"}
    assert not at_start & (heavy | {"dgpbench.analysis.bounds"})
    assert "dgpbench.analysis.bounds" in after
    assert not after & {"torch", "seaborn", "dgpbench.analysis.curves"}


# The families, top to bottom. A module may import its own family or one ranked below it;
# the cycle test above rules out circles within a rank.
RANKS = {
    "cli": 9,
    "__main__": 9,
    "paper": 8,
    "failing_loudly": 8,
    "analysis": 7,
    "saved": 6,
    "_sklearn_checks": 6,
    "features": 5,
    "online": 5,
    "detectors": 4,
    "models": 4,
    "shifts": 3,
    "topology": 3,
    "data": 2,
}
HELPERS = {"io", "progress", "labels", "naming", "tables", "npz", "resources", "threads"}
HELPERS |= {"_validation", "_compat", "_device", "_lazy"}
HELPERS |= {"state", "parameters"}  # fitted state and parameter rules as plain data
HELPERS |= {"resampling"}  # the bootstrap over independent units every report shares


def _family(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _rank(module: str) -> int:
    family = _family(module)
    if family in RANKS:
        return RANKS[family]
    assert family in HELPERS or family == "", f"{module}: a family the layering does not know"
    return 1  # the shared helpers, and the package root's lazy public API


def test_every_family_has_a_rank():
    for name in MODULES:
        _rank(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down_the_families(name):
    upward = {m for m in _imports(name) if _rank(m) > _rank(name)}
    assert not upward, f"{name} (rank {_rank(name)}) imports families above it: {upward}"


def test_helpers_import_only_helpers():
    for name in MODULES:
        if _rank(name) == 1 and name != "dgpbench":
            assert all(_rank(m) == 1 for m in _imports(name)), name


def test_the_top_level_is_short():
    # one package per family: only helpers and the entry point stay flat
    flat = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert flat <= HELPERS | {"_sklearn_checks"}, flat - HELPERS


def test_every_package_file_is_tracked_by_git():
    """A source file that ``.gitignore`` hides works here and is missing from every clone.

    ``data/`` once hid ``dgpbench/data/__init__.py``: imports still worked (a namespace
    package), but the clean clone's documentation build could not find the package.
    """
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    sources = [str(p.relative_to(root)) for p in (root / "dgpbench").rglob("*.py")]
    listed = subprocess.run(
        ["git", "ls-files", "--", "dgpbench"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *sources], cwd=root, capture_output=True, text=True
    ).stdout.split()
    assert ignored == [], f"ignored by .gitignore: {ignored}"
    assert set(sources) <= set(listed), f"not tracked: {sorted(set(sources) - set(listed))}"


@pytest.mark.parametrize("name", sorted(m for m in MODULES if not m.startswith("dgpbench.cli")))
def test_every_argument_parser_lives_in_the_cli(name):
    # one rule for command lines: the library exposes plain functions, dgpbench/cli/ parses
    tree = ast.parse(MODULES[name].read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "argparse" not in imported, f"{name} builds a command line outside dgpbench/cli"


def test_every_analysis_target_has_its_command_module():
    from dgpbench.cli.analysis import TARGETS, target_command

    for name in TARGETS:
        add_arguments, run = target_command(name)
        assert add_arguments.__module__ == run.__module__
        assert add_arguments.__module__.startswith("dgpbench.cli.analysis_"), name


@pytest.mark.parametrize(
    "package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py")
)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", []):
        assert getattr(module, name) is not None, f"{package}.{name}"


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, cwd=REPO,
    )  # fmt: skip
    return set(out.stdout.split())


def test_the_workflow_parse_loads_no_torch_scipy_or_scikit_learn():
    # Every Snakemake start (a dry run, each end-to-end test, each `dgpbench run`) parses the
    # Snakefile: its package imports and the configuration check must stay light. A job that
    # needs torch or SciPy imports them itself.
    rules = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    imports = sorted(
        {
            line.strip()
            for path in rules
            for line in path.read_text().splitlines()
            if line.startswith(("from dgpbench", "import dgpbench"))
        }
    )
    assert len(imports) >= 4, imports
    code = "\n".join(
        [
            "import yaml",
            *imports,
            "from dgpbench.cli.config import workflow_config_error",
            "from pathlib import Path",
            f"root = Path({str(REPO)!r})",
            "for extra in ([], ['--configfile', str(root / 'config/failing_loudly.yaml')]):",
            "    assert workflow_config_error(extra, root) is None",
        ]
    )
    loaded = _loaded_after(code)
    assert not loaded & {"torch", "sklearn", "scipy.stats", "numba"}


def test_the_analysis_jobs_are_sized_without_torch():
    # The workflow sizes every analysis training job (time, weights) while it plans.
    loaded = _loaded_after("from dgpbench.models.sizes import mlp_n_weights")
    assert "torch" not in loaded and "numpy" not in loaded, sorted(loaded)
    import torch

    from dgpbench.models import ArchConfig
    from dgpbench.models.sizes import mlp_n_weights

    for args in ((784, 0, 1, 47), (20, 8, 2, 5), (30, 7, 4, 3)):
        built = ArchConfig(*args).build()  # the count of the network itself
        linear = [m for m in built.modules() if isinstance(m, torch.nn.Linear)]
        assert mlp_n_weights(*args) == sum(m.weight.numel() for m in linear)


def test_a_lazy_registry_imports_a_module_only_when_its_entry_is_looked_up():
    code = (
        "import sys\n"
        "from dgpbench.detectors.registry import DETECTORS\n"
        "names = list(DETECTORS); assert 'cvm' in DETECTORS and len(DETECTORS) == len(names)\n"
        "before = {m for m in sys.modules if m.startswith('dgpbench.detectors.')}\n"
        "cls = DETECTORS['cvm']\n"
        "after = {m for m in sys.modules if m.startswith('dgpbench.detectors.')}\n"
        "DETECTORS['twin'] = cls; assert DETECTORS['twin'] is cls; del DETECTORS['twin']\n"
        "print(cls.__name__, sorted(before), 'dgpbench.detectors.cvm' in after, list(DETECTORS) == names)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split(maxsplit=1)
    assert out[0] == "CvMShiftDetector"
    assert out[1].strip() == "['dgpbench.detectors.registry'] True True"


def test_table_and_model_free_steps_load_no_torch_scikit_learn_or_scipy_stats():
    # The workflow runs hundreds of such jobs, each a fresh process: comparisons, the KS
    # decisions of a Failing-loudly cell, the digits data and the Wilson intervals import
    # what they compute with, and no more (KS loads scipy.stats when it computes a p-value).
    loaded = _loaded_after(
        "import importlib, pkgutil\n"
        "from dgpbench.cli import compare, failing_loudly, paper\n"
        "import dgpbench.paper.comparisons as comparisons\n"
        "for m in pkgutil.iter_modules(comparisons.__path__):\n"
        "    importlib.import_module(f'dgpbench.paper.comparisons.{m.name}')\n"
        "from dgpbench.paper.protocol import wilson_interval; wilson_interval(5, 100)\n"
        "from dgpbench.detectors.batch import is_per_feature; assert is_per_feature('ks')\n"
        "from dgpbench.failing_loudly.grid import method_records\n"
        "from dgpbench.data.datasets import VALIDATION_SPLIT_SEED, load_dataset\n"
        "load_dataset('digits', split='test')"
    )
    heavy = {"torch", "sklearn", "scipy.stats", "scipy.ndimage", "numba", "matplotlib", "seaborn"}
    assert not loaded & heavy, sorted(loaded & heavy)


def test_fl_images_and_a_noise_shift_load_no_torch(tmp_path):
    out = tmp_path / "pools.npz"
    loaded = _loaded_after(
        "from dgpbench.cli.main import main\n"
        "status = main(['fl-images', '--dataset', 'digits', '--n-fit', '20', '--n-ref-pool',"
        f" '20', '--n-test-pool', '20', '--runs', '5', '--out', {str(out)!r}])\n"
        "assert status in (0, None), status"
    )
    assert out.stat().st_size > 0
    assert not loaded & {"torch", "sklearn", "scipy.stats"}, sorted(loaded)
    shifted = tmp_path / "gn.npz"
    loaded = _loaded_after(
        "from dgpbench.cli.main import main\n"
        f"status = main(['fl-shift', '--images', {str(out)!r}, '--shift', 'large_gn_shift',"
        f" '--out', {str(shifted)!r}])\n"
        "assert status in (0, None), status"
    )
    assert shifted.stat().st_size > 0
    assert not loaded & {"pandas", "torch", "sklearn", "scipy.stats", "scipy.ndimage"}


def test_the_image_steps_on_digits_load_no_pandas_torch_or_scikit_learn(tmp_path):
    # `images` and `corrupt` run once per data set and corruption: their start-up is most of
    # their time
    clean, noisy = tmp_path / "clean.npz", tmp_path / "GN.npz"
    loaded = _loaded_after(
        "from dgpbench.cli.main import main\n"
        "assert main(['images', '--dataset', 'digits', '--n-refs', '20', '--n-test', '20',"
        f" '--out', {str(clean)!r}]) in (0, None)\n"
        "assert main(['corrupt', '--dataset', 'digits', '--images', "
        f"{str(clean)!r}, '--corruption', 'GN', '--intensities', '6', '--out', {str(noisy)!r}])"
        " in (0, None)"
    )
    assert noisy.stat().st_size > 0
    assert not loaded & {"pandas", "torch", "sklearn", "scipy.stats"}, sorted(loaded)
