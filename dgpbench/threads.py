"""Scoped thread counts for torch and numba: set for one block, always restored.

:func:`torch_threads` scopes torch's intra-op threads and :func:`numba_threads` numba's
parallel threads; neither changes a setting process-wide. torch and numba are imported on
first use, so importing this module stays cheap.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from numbers import Integral

from dgpbench._validation import check_int

__all__ = ["numba_threads", "resolve_n_jobs", "set_torch_threads", "torch_threads"]


def set_torch_threads(n: int | None) -> int:
    """Set torch's intra-op thread count (None: leave it) and return the previous value.

    Prefer :func:`torch_threads`, which restores the old value afterwards.
    """
    import torch

    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(check_int(n, "threads"))
    return previous


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Context manager: run the body with ``n`` torch threads, then restore the old count.

    If torch is not loaded yet, it is not imported for this (about 2 s of a command that may
    never need it): ``OMP_NUM_THREADS`` is set to ``n`` for the body instead, which torch reads
    when the body first imports it; torch then keeps ``n`` threads after the body. With ``n``
    None and torch not loaded there is nothing to set or restore: the body just runs.
    """
    if n is None and "torch" not in sys.modules:
        yield
        return
    if n is not None and "torch" not in sys.modules:
        n = check_int(n, "threads")
        previous_env = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(n)
        try:
            yield
        finally:
            if previous_env is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous_env
        return
    import torch

    previous = set_torch_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def resolve_n_jobs(n_jobs: int | None) -> int:
    """Number of numba threads for ``n_jobs`` (joblib convention).

    ``None`` keeps the current setting (so an enclosing :func:`numba_threads` scope, e.g. the
    CLI's ``--threads``, holds for nested calls; outside any scope that is all threads);
    ``-1`` means all of numba's threads; ``k >= 1`` means ``min(k, all)``; ``-k`` means
    ``all + 1 - k`` (at least 1).

    Raises
    ------
    ValueError
        If ``n_jobs`` is 0 or not an integer.
    """
    import numba

    available = int(numba.config.NUMBA_NUM_THREADS)
    if n_jobs is None:
        return int(numba.get_num_threads())
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    if n_jobs > 0:
        return min(int(n_jobs), available)
    return max(1, available + 1 + int(n_jobs))


@contextmanager
def numba_threads(n_jobs: int | None) -> Iterator[int]:
    """Run the block with ``resolve_n_jobs(n_jobs)`` numba threads, then restore the setting."""
    import numba

    n = resolve_n_jobs(n_jobs)
    previous = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield n
    finally:
        numba.set_num_threads(previous)
