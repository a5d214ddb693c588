"""Fixtures for the benchmarks (topology kernels, protocol).

Run with ``.venv/bin/python -m pytest benchmarks --benchmark-only -s``.
"""

from __future__ import annotations

import os

import pytest
from bench_helpers import RESULTS, make_mlp

from dgpbench.topology.graphs import MLPGraph


@pytest.fixture(scope="session")
def mnist_net() -> MLPGraph:
    return make_mlp((784, 650, 650, 650, 10))


@pytest.fixture(scope="session")
def cifar_net() -> MLPGraph:
    return make_mlp((3072, 650, 10))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("dgpbench throughput (kernels and protocol)")
    load = os.getloadavg()
    tr.write_line(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores)")
    for r in RESULTS:
        tr.write_line(r["line"])
