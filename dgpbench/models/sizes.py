"""Sizes of the MLPs, without torch: the workflow sizes its analysis jobs by them while it
plans, before any job (and so any torch import) runs.
"""

from __future__ import annotations

__all__ = ["mlp_n_weights"]


def mlp_n_weights(n_inputs: int, hidden: int, n_layers: int, n_classes: int) -> int:
    """Entries of an MLP's weight matrices (biases and batch norm left out).

    What neural persistence reads, and what a training job's cost grows with; the MLP is
    :class:`~dgpbench.models.architectures.ArchConfig`'s ``in - h - ... - h - out`` with
    ``n_layers`` linear maps.

    Parameters
    ----------
    n_inputs : int
        Input features.
    hidden : int
        Width of the hidden layers (ignored when ``n_layers`` is 1).
    n_layers : int
        Linear maps; 1 is a linear classifier.
    n_classes : int
        Outputs.

    Returns
    -------
    int
        The number of weights.

    Examples
    --------
    >>> mlp_n_weights(784, 650, 4, 10) == 784 * 650 + 2 * 650 * 650 + 650 * 10
    True
    >>> mlp_n_weights(784, 0, 1, 10)
    7840
    """
    if n_layers == 1:
        return n_inputs * n_classes
    inner = (n_layers - 2) * hidden * hidden
    return n_inputs * hidden + inner + hidden * n_classes
