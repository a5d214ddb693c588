"""What the step modules share in reading their input: argparse types (a bad value is a
usage error, exit 2, naming the option, raised before any work starts), ``--tag key=value``
columns, and the check that an input file holds the arrays a step needs.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from dgpbench._device import DEVICE_OPTIONS

__all__ = [
    "METHOD_HELP",
    "MODEL_HELP",
    "checkpoints_arg",
    "forward_pass_args",
    "out_dir_arg",
    "parse_tags",
    "positive_int",
    "require_arrays",
    "significance",
]


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


def parse_tags(tags: Iterable[str]) -> dict[str, str]:
    """``--tag key=value`` options as ``{key: value}`` (the columns added to the records)."""
    out = {}
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag must be key=value, got {tag!r}")
        out[key] = value
    return out


def require_arrays(arrays: Mapping, path: str, keys: list[str], made_by: str) -> None:
    """Name the file and what it should hold when arrays are missing (not a bare KeyError)."""
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise ValueError(
            f"{path} has no array {', '.join(map(repr, missing))} (it has {sorted(arrays)}); "
            f"expected the output of `dgpbench {made_by}`"
        )


def forward_pass_args(p: argparse.ArgumentParser, *, device: bool = True) -> None:
    """``--batch-size``, ``--threads`` (and ``--device``) of the steps that run the network."""
    p.add_argument("--batch-size", type=positive_int, default=256, help="images per forward pass")
    p.add_argument("--threads", type=positive_int, default=None, help="torch/numba threads")
    if device:
        p.add_argument(
            "--device",
            default="cpu",
            choices=DEVICE_OPTIONS,
            help="forward pass (auto: GPU if any)",
        )


METHOD_HELP = (
    "softmax, tu, tu_norm, magdiff, magdiff_signed, dgp, dgp_nonorm, dgp_unsorted, noredu, "
    "pca, srp, uae, tae, bbsds, bbsdh, dgp_approx, or a custom transformer "
    "'package.module:ClassName' (importing it runs its code)"
)


MODEL_HELP = (
    "the network: a dgpbench checkpoint (.pt), a torch.export program (.pt2, read without "
    "running code) or 'package.module:factory' (a function returning it; runs that code)"
)


def out_dir_arg(p: argparse.ArgumentParser) -> None:
    """``--out-dir``: the folder of a ``dgpbench analysis`` target's outputs."""
    p.add_argument("--out-dir", required=True, help="folder for the target's outputs")


def checkpoints_arg(p: argparse.ArgumentParser) -> None:
    """``--checkpoints``: the final model checkpoints a ``dgpbench analysis`` target reads."""
    p.add_argument("--checkpoints", nargs="+", required=True, help="final model checkpoints")
