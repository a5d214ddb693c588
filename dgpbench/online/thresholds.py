"""Thresholds of an online detector, set by simulation so that the expected run time is the ERT.

Cobb, Van Looveren and Klaise (AISTATS 2022) choose one threshold per time step from
statistics of simulated no-shift streams: at step ``t``, among the simulated streams that
have not yet raised an alarm, the threshold is the ``1 - fpr`` quantile of their
statistics, so that a fraction ``fpr = 1 / ERT`` of them stops there. Every step then has
the same hazard ``fpr``: the run time under no shift is geometric with mean ``ERT``, and
the chance of a false alarm at any step, given none so far, is ``1 / ERT`` (memoryless).
After the simulated horizon the last threshold is kept (the statistic's null distribution
no longer changes once the window holds only stream samples).

This module holds that rule alone; each detector simulates its own statistics.
"""

from __future__ import annotations

import numpy as np

from dgpbench.parameters import Choices, Range

__all__ = ["CVM_ONLINE_RULES", "MMD_ONLINE_RULES", "hazard_thresholds", "per_feature_rate"]

#: :class:`~dgpbench.online.OnlineCVMDetector`'s parameters.
_COMMON: dict[str, list] = {
    "ert": [Range("float", 2, None, "left")],
    "window_size": [Range("int", 2, None, "left")],
    "n_bootstraps": [Range("int", 2, None, "left")],
    "random_state": ["random_state"],
}
CVM_ONLINE_RULES: dict[str, list] = {
    **_COMMON,
    "calibration": [Choices(("gaussian", "reference"))],
}
#: :class:`~dgpbench.online.OnlineMMDDetector`'s parameters.
MMD_ONLINE_RULES: dict[str, list] = {
    **_COMMON,
    "bandwidth": [Choices(("median",)), Range("float", 0, None, "neither")],
}


def hazard_thresholds(stats: np.ndarray, fpr: float) -> np.ndarray:
    """Per-step thresholds with a constant hazard ``fpr`` over simulated streams.

    Parameters
    ----------
    stats : ndarray of shape (n_streams, n_steps)
        The statistic of each simulated no-shift stream at each step (larger = more shift).
    fpr : float
        The hazard, ``1 / ERT``, in (0, 1).

    Returns
    -------
    ndarray of shape (n_steps,)
        Step ``t``'s threshold: the ``1 - fpr`` quantile of the statistics at ``t`` of the
        streams whose statistic stayed at or below every earlier threshold. An alarm is
        ``statistic > threshold``.

    Raises
    ------
    ValueError
        If ``stats`` is not a finite 2-D array, ``fpr`` is not in (0, 1), or fewer than 2
        streams are left at some step (more simulated streams are needed).

    Examples
    --------
    >>> stats = np.arange(10.0)[:, None] * np.ones((1, 2))
    >>> hazard_thresholds(stats, 0.5)
    array([4.5, 2. ])
    """
    stats = np.asarray(stats, dtype=np.float64)
    if stats.ndim != 2 or not np.isfinite(stats).all():
        raise ValueError("stats must be a finite array of shape (n_streams, n_steps)")
    if not 0.0 < fpr < 1.0:
        raise ValueError(f"fpr must be in (0, 1), got {fpr!r}")
    alive = stats
    thresholds = np.empty(stats.shape[1])
    for t in range(stats.shape[1]):
        if len(alive) < 2:
            raise ValueError(
                f"only {len(alive)} of {len(stats)} simulated streams are left at step {t + 1}: "
                "too few to set a threshold; raise n_bootstraps (100 x ERT sets the ERT to about 10%)"
            )
        thresholds[t] = np.quantile(alive[:, t], 1.0 - fpr)
        alive = alive[alive[:, t] <= thresholds[t]]
    return thresholds


def per_feature_rate(fpr: float, n_features: int) -> float:
    """The per-feature hazard ``1 - (1 - fpr)^(1/d)`` that gives ``fpr`` over ``d`` features.

    Exact when the features' streams are independent; with dependent features the
    detector raises fewer alarms than ``fpr`` (a longer run time than the ERT).

    Parameters
    ----------
    fpr : float
        The hazard of the whole detector, in (0, 1).
    n_features : int
        Number of features ``d`` (at least 1).

    Returns
    -------
    float

    Examples
    --------
    >>> round(per_feature_rate(0.02, 1), 12)
    0.02
    """
    return float(-np.expm1(np.log1p(-fpr) / n_features))
