"""Failing loudly's adversarial shift (``adversarial_shift``): FGSM against the classifier.

Rabanser et al. turn every test image into an adversarial one with foolbox's FGSM against
the data set's classifier (``generate_adv_samples.py``): the perturbation is
``x + ε · sign(∇ₓ loss(x, y))`` clipped to [0, 1], with the smallest ``ε`` of a grid in
``(0, max_epsilon]`` that changes the predicted class (``max_epsilon`` 1.0 on MNIST, 0.1 on
CIFAR-10); an image no ``ε`` fools stays clean. The shift then replaces
``ceil(fraction * N)`` random images of the test pool by adversarial ones (their
``data_subset`` draws the replaced rows and the adversarial rows independently; here a row is
replaced by its own adversarial twin, which keeps labels and pairing).

Here the classifier is the dgpbench model the grid evaluates (a checkpoint), differentiated
with torch autograd. foolbox's FGSM searched 1000 epsilons; ``n_epsilons`` sets the grid
(default 100: the step is 1% of ``max_epsilon``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dgpbench.shifts._base import ShiftedPool, n_affected

__all__ = ["MAX_EPSILON", "adversarial_shift", "fgsm_min_epsilon"]

MAX_EPSILON: dict[str, float] = {"cifar10": 0.1}
"""Per data set; every other data set uses 1.0 (Rabanser et al.'s MNIST value)."""


def max_epsilon_for(dataset: str) -> float:
    """Rabanser et al.'s largest FGSM step for ``dataset`` (1.0 except CIFAR-10's 0.1)."""
    return MAX_EPSILON.get(dataset, 1.0)


def fgsm_min_epsilon(
    model: Any,
    x: np.ndarray,
    y: np.ndarray,
    *,
    max_epsilon: float = 1.0,
    n_epsilons: int = 100,
    batch_size: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """FGSM with the smallest grid ``ε`` that changes each image's predicted class.

    Parameters
    ----------
    model : torch.nn.Module
        The classifier (logits out), fed flattened images ``(N, C*H*W)`` (dgpbench's MLPs
        take them so, its CNNs reshape them).
    x : ndarray of shape (N, C, H, W)
        Images in [0, 1].
    y : ndarray of shape (N,)
        True labels (the loss's target, as foolbox's ``label=``).
    max_epsilon : float, default=1.0
        Largest step.
    n_epsilons : int, default=100
        Grid ``max_epsilon * k / n_epsilons``, ``k = 1..n_epsilons``.
    batch_size : int, default=256
        Images per forward pass.

    Returns
    -------
    x_adv : ndarray of float32, shape (N, C, H, W)
        Adversarial images; the clean image where no ``ε`` changes the prediction.
    epsilon : ndarray of float64, shape (N,)
        The ``ε`` used, ``nan`` where none worked.
    """
    import torch
    import torch.nn.functional as F

    model.eval()
    grid = max_epsilon * np.arange(1, n_epsilons + 1) / n_epsilons
    shape = x.shape
    x = np.asarray(x, dtype=np.float32).reshape(len(x), -1)
    x_adv = x.copy()
    eps_used = np.full(len(x), np.nan)
    for start in range(0, len(x), batch_size):
        xb = torch.from_numpy(np.ascontiguousarray(x[start : start + batch_size]))
        yb = torch.from_numpy(np.asarray(y[start : start + batch_size], dtype=np.int64))
        xb = xb.clone().requires_grad_(True)
        logits = model(xb)
        F.cross_entropy(logits, yb, reduction="sum").backward()
        direction = xb.grad.sign()
        with torch.no_grad():
            pred0 = logits.argmax(1)
            todo = torch.ones(len(xb), dtype=torch.bool)
            for eps in grid:
                if not todo.any():
                    break
                idx = torch.nonzero(todo).flatten()
                cand = (xb[idx] + float(eps) * direction[idx]).clamp(0.0, 1.0)
                fooled = model(cand).argmax(1) != pred0[idx]
                hit = idx[fooled]
                x_adv[start + hit.numpy()] = cand[fooled].numpy()
                eps_used[start + hit.numpy()] = eps
                todo[hit] = False
    return x_adv.reshape(shape), eps_used


def adversarial_shift(
    x: np.ndarray,
    y: np.ndarray,
    fraction: float,
    rng: np.random.Generator,
    *,
    model: Any,
    max_epsilon: float = 1.0,
    n_epsilons: int = 100,
) -> ShiftedPool:
    """Replace a fraction of ``x`` by its FGSM twins against ``model``.

    Parameters
    ----------
    x, y
        Clean images in [0, 1] and their labels.
    fraction : float
        Share of images replaced, in (0, 1].
    rng : numpy.random.Generator
        Picks the rows.
    model : torch.nn.Module
        The attacked classifier.
    max_epsilon, n_epsilons
        As in :func:`fgsm_min_epsilon`.

    Returns
    -------
    ShiftedPool
    """
    n = len(y)
    rows = np.sort(rng.choice(n, size=n_affected(n, fraction), replace=False))
    shifted = np.zeros(n, dtype=bool)
    shifted[rows] = True
    x_adv, _ = fgsm_min_epsilon(
        model, x[rows], y[rows], max_epsilon=max_epsilon, n_epsilons=n_epsilons
    )
    return ShiftedPool(
        index=np.arange(n, dtype=np.int64), shifted=shifted, x_new=x_adv, y=y.astype(np.int64)
    )
