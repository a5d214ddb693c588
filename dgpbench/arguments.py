"""argparse types shared by the step modules: a bad value is a usage error (exit 2) naming
the option, raised before any work starts."""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "significance"]


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def significance(text: str) -> float:
    """A significance level in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text}")
    return value
