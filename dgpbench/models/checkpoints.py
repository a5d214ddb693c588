"""Checkpoint files: a network's weights, their SHA-256 and its architecture, in one file.

A checkpoint is a ``torch.save`` archive of plain values only (read back with
``torch.load(weights_only=True)``, which never runs code): ``format`` (``"dgpbench-mlp"``),
``version``, ``meta`` (the architecture as a dict with its ``kind``, ``"mlp"`` or ``"cnn"``,
plus training metadata) and ``state_dict``, with ``weights_sha256`` over the weights.
:func:`load_checkpoint` rebuilds the network from :mod:`dgpbench.models.architectures`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dgpbench.io import atomic_path
from dgpbench.models.architectures import model_arch
from dgpbench.npz import check_zip_archive

log = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "checkpoint_name",
    "list_checkpoints",
    "load_checkpoint",
    "save_checkpoint",
    "weights_digest",
]

CHECKPOINT_FORMAT = "dgpbench-mlp"
CHECKPOINT_VERSION = 1


def _plain(value: Any) -> Any:
    """Dataclasses/tuples/paths to dicts/lists/str so ``torch.load(weights_only=True)`` works."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 of the weights (names, dtypes, shapes and bytes), as stored in checkpoints.

    torch's zip reader does not check CRCs, so a flipped byte in a stored tensor would
    otherwise load silently.

    Parameters
    ----------
    state : dict of str to torch.Tensor
        A ``state_dict``.

    Returns
    -------
    str
        The hexadecimal digest.
    """
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(
            tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        )
    return digest.hexdigest()


def save_checkpoint(path: str | os.PathLike[str], model: nn.Module, meta: dict[str, Any]) -> Path:
    """Write ``model``'s weights, their SHA-256 and ``meta`` to ``path`` atomically.

    Parameters
    ----------
    path : str or path-like
        Target file (parents are created).
    model : torch.nn.Module
        The network; its ``state_dict`` is stored.
    meta : dict
        Must contain ``"arch"`` (an :class:`ArchConfig`, a :class:`dgpbench.models.architectures.CNNConfig`,
        or the dict of one with ``"kind"``) so the file can be loaded without the training
        code; the model kind is stored as ``"kind"``. May contain ``train_config``, ``dataset``, ``epoch``,
        ``metrics``... (plain values, dataclasses, tuples and paths are converted).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        If ``meta`` lacks ``"arch"``.
    OSError
        If the file cannot be written (a full disk, a read-only folder), naming ``path``.

    Notes
    -----
    The file's bytes depend only on the weights and ``meta``: the same model and metadata
    give an identical file (keep wall-clock times out of ``meta``).
    """
    if "arch" not in meta:
        raise ValueError("meta must contain 'arch' (an ArchConfig or its dict)")
    arch = model_arch(meta["arch"], meta.get("kind"))
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "torch_version": str(torch.__version__),
        "meta": _plain({**meta, "arch": arch, "kind": arch.kind}),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
    }
    payload["weights_sha256"] = weights_digest(payload["state_dict"])
    # Serialised in memory first: the zip records are then named "archive/..." whatever the
    # temporary file is called (same configuration, same bytes), and a full disk is a plain
    # OSError naming the file (torch's own writer raises two RuntimeErrors instead).
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    path = Path(path)
    with atomic_path(path, suffix=".pt") as tmp, open(tmp, "wb") as fh:
        fh.write(buffer.getbuffer())
    return path


_ACCEPTED = (
    "Accepted: a checkpoint written by dgpbench.models.save_checkpoint or `dgpbench train`, "
    "a torch.export program saved with torch.export.save (.pt2), "
    "'package.module:factory' (a function returning the module; runs that code), "
    "or, in Python, the trained torch.nn.Sequential itself"
)


def _first_line(exc: BaseException) -> str:
    """The first line of an error message (torch's unpickling errors run to a page)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[nn.Sequential, dict[str, Any]]:
    """Load a checkpoint written by :func:`save_checkpoint` into a new network (eval mode).

    Parameters
    ----------
    path : str or path-like
        The ``.pt`` file.

    Returns
    -------
    model : torch.nn.Sequential
        Rebuilt from the stored architecture (an MLP, or a CNN for ``kind: cnn``), weights
        loaded, in ``eval()`` mode.
    meta : dict
        The stored metadata (``arch``, and usually ``train_config``, ``dataset``, ``epoch``,
        ``metrics``) plus ``format`` and ``version``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is truncated or corrupt (its weights must match the SHA-256 checksum
        :func:`save_checkpoint` stores with them), is not a dgpbench checkpoint, has an
        unsupported version, or its weights do not match its architecture.
    """
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.glob("*.pt"))[:3]
        hint = f" (it holds {', '.join(found)})" if found else ""
        raise ValueError(f"checkpoint {path} is a directory{hint}: pass the .pt file itself")
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    # declared sizes first (no inflating a bomb); a fifo or device is refused unopened
    check_zip_archive(path, "checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch's weights-only reader refuses pickled classes (a whole module saved with
        # torch.save(model)) instead of running their code; say what is accepted instead.
        refused = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        if refused is None:
            raise ValueError(f"cannot read checkpoint {path}: truncated or corrupt") from exc
        raise ValueError(
            f"{path} is not a dgpbench checkpoint: it stores pickled Python objects "
            f"({refused[1]}; e.g. a whole model saved with torch.save(model)), which dgpbench "
            f"never unpickles. {_ACCEPTED}"
        ) from exc
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"cannot read checkpoint {path}: truncated or corrupt ({exc})") from exc
    except Exception as exc:  # weights_only unpickling errors have no stable type
        raise ValueError(f"cannot read checkpoint {path}: {_first_line(exc)}") from exc
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path} is not a dgpbench MLP checkpoint (missing format tag). {_ACCEPTED}"
        )
    if payload.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path} has checkpoint version {payload.get('version')!r}; "
            f"this dgpbench reads version {CHECKPOINT_VERSION}"
        )
    meta = payload.get("meta")
    state = payload.get("state_dict")
    if not isinstance(meta, dict) or not isinstance(state, dict) or "arch" not in meta:
        raise ValueError(f"{path} lacks 'meta', 'meta.arch' or 'state_dict'")
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{path}: state_dict entries {bad[:5]} are not tensors")
    stored = payload.get("weights_sha256")
    if stored is None:
        log.warning("%s has no weights checksum (written by an older dgpbench)", path)
    elif stored != weights_digest(state):
        raise ValueError(
            f"checkpoint {path} is corrupt: its weights do not match the checksum stored "
            "with them (damaged copy or disk?); retrain or restore the file"
        )
    try:
        arch = model_arch(meta["arch"], meta.get("kind", "mlp"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path} stores an invalid architecture {meta['arch']!r}: {exc}") from exc
    model = arch.build(generator=torch.Generator().manual_seed(0))
    expected = model.state_dict()
    problems = sorted(set(expected) ^ set(state))
    problems += [
        f"{k}: stored {tuple(state[k].shape)}, architecture needs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if problems:
        raise ValueError(
            f"{path}: weights do not match the stored architecture {arch}: "
            + "; ".join(str(p) for p in problems[:5])
        )
    model.load_state_dict(state)
    model.eval()
    return model, {**meta, "format": payload["format"], "version": payload["version"]}


def checkpoint_name(epoch: float) -> str:
    """File name of the checkpoint at ``epoch`` (e.g. ``epoch_00.25.pt``, ``epoch_40.00.pt``).

    Examples
    --------
    >>> checkpoint_name(0.25), checkpoint_name(40)
    ('epoch_00.25.pt', 'epoch_40.00.pt')
    """
    return f"epoch_{epoch:05.2f}.pt"


def list_checkpoints(out_dir: str | os.PathLike[str]) -> list[tuple[float, Path]]:
    """Return ``(epoch, path)`` of every checkpoint in ``out_dir``, sorted by epoch."""
    found = []
    for p in Path(out_dir).glob("epoch_*.pt"):
        try:
            found.append((float(p.stem.removeprefix("epoch_")), p))
        except ValueError:
            continue
    return sorted(found)


# --------------------------------------------------------------------------------------------
