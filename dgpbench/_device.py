"""The ``device`` option of training and of the feature transformers: one parser, one error.

Imports torch only when called, so the command line can list the options cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: The values of ``training.device`` / ``features.device`` in the configuration.
DEVICE_OPTIONS = ("cpu", "cuda", "auto")


def resolve_device(device: Any = "cpu") -> torch.device:
    """Return the torch device that ``device`` names, checking that it is usable.

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"}, "cuda:<index>" or torch.device, default="cpu"
        ``"auto"`` is CUDA when torch sees a GPU, else the CPU.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If ``device`` is not one of the accepted names, or names CUDA (or a GPU index) that
        this machine's torch cannot use.

    Examples
    --------
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    import torch

    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = None
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError):
            dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(
            f"device must be one of {DEVICE_OPTIONS} (or 'cuda:<index>'), got {device!r}"
        )
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} asks for a GPU but torch sees no usable CUDA device "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); use "
                "device='cpu', or 'auto' to take a GPU only where there is one"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r}: there are only {torch.cuda.device_count()} CUDA devices"
            )
    return dev
