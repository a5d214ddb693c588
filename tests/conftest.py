"""Shared test fixtures.

``shared_data_root`` finds the offline torchvision root with real MNIST/Fashion-MNIST:
``$DGPBENCH_DATA_ROOT`` first, then ``<repo>/../shared/data`` (where CI puts its copy of
``shared/`` beside the clone). Tests that need real data take this fixture and are skipped
(only they) when neither place has MNIST.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One intra-op thread per process (torch, and the workflow's jobs, which inherit it) unless the
# caller asks for more: the suite's tensors are tiny, and two threads on a busy two-core machine
# wait on each other (a 15-epoch digits MLP: 8 s on one thread, 144 s on two under load). Set
# here, before any test module imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _has_mnist(root: Path) -> bool:
    raw = root / "MNIST" / "raw"
    return all(
        (raw / name).is_file() or (raw / f"{name}.gz").is_file()
        for name in (
            "train-images-idx3-ubyte",
            "train-labels-idx1-ubyte",
            "t10k-images-idx3-ubyte",
            "t10k-labels-idx1-ubyte",
        )
    )


def find_shared_data_root() -> Path | None:
    """Return the first candidate data root holding real MNIST, or None."""
    candidates = []
    env = os.environ.get("DGPBENCH_DATA_ROOT", "")
    if env:
        candidates.append(Path(env).expanduser())
    candidates.append(REPO.parent / "shared" / "data")
    for root in candidates:
        if _has_mnist(root):
            return root
    return None


@pytest.fixture(scope="session")
def shared_data_root() -> Path:
    """Torchvision data root with real MNIST (and usually Fashion-MNIST); skips if absent."""
    root = find_shared_data_root()
    if root is None:
        pytest.skip("real MNIST not found in $DGPBENCH_DATA_ROOT or <repo>/../shared/data")
    return root


# The end-to-end tests (tests/workflow/: Snakemake runs, `dgpbench run`, SLURM) are marked
# `workflow`, so that CI's floor job (.ci/floor: the library on its oldest dependencies) can
# leave them out.
WORKFLOW_TESTS = REPO / "tests" / "workflow"


def _cost(item: pytest.Item) -> float:
    """A rough cost in seconds: an end-to-end run (marked slow) about 50, another test of
    tests/workflow (one Snakemake start) about 5, a unit test well under one."""
    if item.get_closest_marker("slow"):
        return 50.0
    return 5.0 if item.path.is_relative_to(WORKFLOW_TESTS) else 0.1


def balanced_order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The items ordered so that pytest-xdist's ``worksteal`` gives every worker an equal share
    of the long tests, first.

    ``worksteal`` hands worker i the i-th of ``workers`` contiguous slices of the collection
    and, when one runs dry, moves the tail of another's queue to it. So the long tests are
    grouped by module (a module-scoped fixture is then computed once), the groups shared out
    longest first to the least-loaded slice, and each slice starts with its long tests and
    ends with short ones: what gets moved at the end is short, and no long test runs alone.
    """
    heavy: dict[Path, list[pytest.Item]] = {}
    light = []
    # A module with an end-to-end test keeps all its tests on one worker: they share its
    # module-scoped fixtures (tests/cli/test_own_model_cli.py's run of a docs page).
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    for item in items:
        if _cost(item) >= 1 or item.path in slow_modules:
            heavy.setdefault(item.path, []).append(item)
        else:
            light.append(item)
    if workers <= 1:
        return [i for group in heavy.values() for i in group] + light
    groups = sorted(heavy.values(), key=lambda g: -sum(map(_cost, g)))
    bins: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for group in groups:
        min(bins, key=lambda b: sum(map(_cost, b))).extend(group)
    # The shared tiny grid (tests/workflow/conftest.py) is built by the first test that asks
    # and awaited by the others: the first slice starts with its users, the others end with
    # them, so that no worker waits for it idle. The SLURM test reads a run started with the
    # session: it goes after every other long test, when that run has ended.
    for i, heavy_bin in enumerate(bins):
        heavy_bin.sort(
            key=lambda item: (
                item.get_closest_marker("slurm") is not None,
                ("tiny_grid" in item.fixturenames) == (i > 0),
            )
        )
    order, remaining, start = [], len(items), 0
    for i, heavy_bin in enumerate(bins):
        size = remaining // (workers - i)  # worksteal's slice of worker i
        remaining -= size
        n_light = max(0, size - len(heavy_bin))
        order += heavy_bin + light[start : start + n_light]
        start += n_light
    return order + light[start:]


def _one_line_failure(excinfo: pytest.ExceptionInfo) -> str:
    return excinfo.exconly()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(WORKFLOW_TESTS):
            item.add_marker(pytest.mark.workflow)
        # scikit-learn's expected failures (strict xfails) run, but an expected failure never
        # shows its traceback, and building one parses every frame's source file anew
        # (estimator_checks.py, ~5,000 lines: nearly half the file's time): one line.
        if (
            item.path.name == "test_sklearn_checks.py"
            and item.get_closest_marker("xfail") is not None
            and not config.option.runxfail
        ):
            item.repr_failure = _one_line_failure
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = balanced_order(items, workers)
