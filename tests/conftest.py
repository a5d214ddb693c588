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


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(WORKFLOW_TESTS):
            item.add_marker(pytest.mark.workflow)
    # The end-to-end runs first: they are the longest tests, and started first they overlap
    # the short ones on the other pytest-xdist worker instead of finishing the run alone.
    items.sort(key=lambda item: not item.path.is_relative_to(WORKFLOW_TESTS))
