"""Maximum-likelihood fits of weight distributions on [0, 1] (Appendix D, ~line 1044).

Four families are fitted to the normalised absolute weights of each layer: Beta(α, β),
truncated exponential (rate λ), truncated normal with location 0 (scale σ) and truncated
Pareto (shape b), all on [0, 1] and parametrised as in :mod:`dgpbench.analysis.synthetic`.
As in the paper, parameters are found with Nelder-Mead (``scipy.optimize.minimize``) on the
log-parameters, and the family with the lowest negative log-likelihood "wins" the matrix
(parameter counts are not penalised).

Speed: every family is an exponential family, so the log-likelihood of n values depends on
them only through one or two averages (sufficient statistics). The objective is evaluated
from those averages in O(1) instead of O(n) per Nelder-Mead step, exactly, not as an
approximation:

* one-parameter families (h(x) = 0): the summed log-density equals ``n * logpdf(x*)`` where
  ``x*`` is the point whose statistic equals the average statistic (``x* = mean x`` for the
  exponential, ``sqrt(mean x²)`` for the normal, ``expm1(mean log1p x)`` for the Pareto), so
  the objective is scipy.stats' own ``logpdf`` at one point;
* Beta: ``(α-1) Σ log x + (β-1) Σ log(1-x) - n log B(α, β)`` with ``scipy.special.betaln``.

The tests check both against ``-scipy.stats.<family>.logpdf(x).sum()`` on the full sample.

Also here: its figures :func:`plot_win_rates`, :func:`plot_fitted_parameters`; its
command-line target ``dgpbench analysis weights`` is in
:mod:`dgpbench.cli.analysis_distributions`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from dgpbench._validation import as_float_array
from dgpbench.analysis.common import (
    FAMILY_LABELS,
    new_figure,
    ordered_values,
    quiet_seaborn,
    require_columns,
)
from dgpbench.io import save_figure
from dgpbench.labels import dataset_label

__all__ = [
    "FAMILIES",
    "FitResult",
    "best_family",
    "fit_all",
    "fit_distribution",
    "fits_to_record",
    "negative_log_likelihood",
    "plot_fitted_parameters",
    "plot_win_rates",
    "weight_distribution_study",
    "win_rates",
]

FAMILIES = ("beta", "exponential", "normal", "pareto")
PARAMETER_NAMES = {
    "beta": ("a", "b"),
    "exponential": ("lam",),
    "normal": ("sigma",),
    "pareto": ("b",),
}
# Beta's log-density is -inf at 0 or 1 for some parameters; the authors clip to this margin.
BETA_CLIP = 1e-6
# Coarse grid of log-parameters used to pick the Nelder-Mead starting point (cheap: O(1)).
_LOG_GRID = np.linspace(-7.0, 8.0, 61)


@dataclass(frozen=True)
class FitResult:
    """One maximum-likelihood fit.

    Attributes
    ----------
    family : str
        One of :data:`FAMILIES`.
    params : dict of str to float
        Fitted parameters (names in ``PARAMETER_NAMES``).
    nll : float
        Negative log-likelihood of all values at ``params``.
    n : int
        Number of values.
    success : bool
        Nelder-Mead's convergence flag.
    """

    family: str
    params: dict[str, float] = field(default_factory=dict)
    nll: float = float("nan")
    n: int = 0
    success: bool = False

    def frozen(self):
        """The fitted scipy.stats frozen distribution."""
        return _frozen(self.family, tuple(self.params[k] for k in PARAMETER_NAMES[self.family]))


def _frozen(family: str, theta: tuple[float, ...]):
    if family == "beta":
        return stats.beta(*theta)
    if family == "exponential":
        (lam,) = theta
        return stats.truncexpon(lam, scale=1.0 / lam)
    if family == "normal":
        (sigma,) = theta
        return stats.truncnorm(0.0, 1.0 / sigma, scale=sigma)
    if family == "pareto":
        (b,) = theta
        return stats.truncpareto(b, 2.0, loc=-1.0)
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


class _Objective:
    """Negative log-likelihood of a fixed sample as a function of log-parameters."""

    def __init__(self, x: np.ndarray, family: str):
        self.family = family
        self.n = x.size
        if family == "beta":
            xc = np.clip(x, BETA_CLIP, 1.0 - BETA_CLIP)
            self.s1 = float(np.mean(np.log(xc)))
            self.s2 = float(np.mean(np.log1p(-xc)))
        elif family == "exponential":
            self.x_star = float(np.mean(x))
        elif family == "normal":
            self.x_star = float(np.sqrt(np.mean(np.square(x))))
        elif family == "pareto":
            self.x_star = float(np.expm1(np.mean(np.log1p(x))))
        else:
            raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")

    def nll(self, theta: Sequence[float]) -> float:
        if self.family == "beta":
            a, b = theta
            mean_ll = (a - 1.0) * self.s1 + (b - 1.0) * self.s2 - special.betaln(a, b)
        elif self.family == "exponential":
            (lam,) = theta
            mean_ll = stats.truncexpon.logpdf(self.x_star, lam, scale=1.0 / lam)
        elif self.family == "normal":
            (sigma,) = theta
            mean_ll = stats.truncnorm.logpdf(self.x_star, 0.0, 1.0 / sigma, scale=sigma)
        else:
            (b,) = theta
            mean_ll = stats.truncpareto.logpdf(self.x_star, b, 2.0, loc=-1.0)
        value = -self.n * float(mean_ll)
        return value if np.isfinite(value) else np.inf

    def __call__(self, log_theta: np.ndarray) -> float:
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            return self.nll(np.exp(log_theta))


def _start(objective: _Objective, x: np.ndarray) -> np.ndarray:
    if objective.family == "beta":
        # Method of moments, falling back to (1, 1) when the moments are degenerate.
        mean, var = float(np.mean(x)), float(np.var(x))
        common = mean * (1 - mean) / var - 1 if var > 0 else -1.0
        if 0 < mean < 1 and common > 0:
            return np.log([mean * common, (1 - mean) * common])
        return np.zeros(2)
    values = [objective(np.array([g])) for g in _LOG_GRID]
    return np.array([_LOG_GRID[int(np.argmin(values))]])


def negative_log_likelihood(x, family: str, params: Sequence[float]) -> float:
    """Negative log-likelihood of values ``x`` under ``family`` with ``params``.

    Parameters
    ----------
    x : array-like
        Values in [0, 1] (any shape; flattened).
    family : {"beta", "exponential", "normal", "pareto"}
    params : sequence of float
        Parameters in the order of ``PARAMETER_NAMES[family]``.

    Returns
    -------
    float
        ``-sum(log p(x_i))``, evaluated from sufficient statistics (exact). Beta uses values
        clipped to ``[1e-6, 1 - 1e-6]``.
    """
    x = as_float_array(x, "x", min_value=0.0, max_value=1.0).ravel()
    return _Objective(x.astype(np.float64), family).nll(tuple(float(p) for p in params))


def fit_distribution(x, family: str, *, xatol: float = 1e-7, maxiter: int = 5000) -> FitResult:
    """Fit one family by Nelder-Mead on log-parameters (Appendix D, "Method").

    Parameters
    ----------
    x : array-like
        Normalised absolute weights, in [0, 1] (any shape; flattened).
    family : {"beta", "exponential", "normal", "pareto"}
    xatol : float, default=1e-7
        Nelder-Mead tolerance on the log-parameters.
    maxiter : int, default=5000
        Maximum Nelder-Mead iterations.

    Returns
    -------
    FitResult

    Raises
    ------
    ValueError
        If ``x`` has values outside [0, 1], NaN, fewer than two values, or ``family`` is
        unknown.

    Notes
    -----
    The starting point is the best of a grid of 61 log-parameters in [-7, 8] (one-parameter
    families) or the method-of-moments estimate (Beta); the initial simplex has edge 0.5 in
    log space. The paper's authors used ``minimize_scalar`` for the one-parameter families;
    the paper's text says Nelder-Mead, which is used here for all four.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = _frozen("pareto", (20.0,)).rvs(size=10_000, random_state=rng)
    >>> round(fit_distribution(x, "pareto").params["b"])
    20
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    x = as_float_array(x, "x", min_value=0.0, max_value=1.0).ravel().astype(np.float64)
    if x.size < 2:
        raise ValueError(f"x must have at least two values, got {x.size}")
    objective = _Objective(x, family)
    x0 = _start(objective, x)
    simplex = np.vstack([x0, x0 + 0.5 * np.eye(x0.size)])
    res = optimize.minimize(
        objective,
        x0,
        method="Nelder-Mead",
        options={
            "initial_simplex": simplex,
            "xatol": xatol,
            "fatol": 1e-9 * max(1.0, x.size),
            "maxiter": maxiter,
        },
    )
    theta = np.exp(res.x)
    params = {k: float(v) for k, v in zip(PARAMETER_NAMES[family], theta, strict=True)}
    return FitResult(family, params, float(objective.nll(theta)), int(x.size), bool(res.success))


def fit_all(x, families: Sequence[str] = FAMILIES) -> dict[str, FitResult]:
    """Fit every family in ``families`` to the same values.

    Parameters
    ----------
    x : array-like
        Values in [0, 1].
    families : sequence of str, default=FAMILIES

    Returns
    -------
    dict of str to FitResult
    """
    x = as_float_array(x, "x", min_value=0.0, max_value=1.0).ravel()
    return {family: fit_distribution(x, family) for family in families}


def best_family(fits: dict[str, FitResult]) -> str:
    """Name of the family with the lowest negative log-likelihood (the "winner")."""
    if not fits:
        raise ValueError("fits must not be empty")
    return min(fits, key=lambda f: (fits[f].nll, f))


def fits_to_record(fits: dict[str, FitResult]) -> dict[str, float | str]:
    """Flatten fits into one table row: ``nll_<family>``, ``<family>_<param>``, ``best``."""
    row: dict[str, float | str] = {}
    for family, fit in fits.items():
        row[f"nll_{family}"] = fit.nll
        for name, value in fit.params.items():
            row[f"{family}_{name}"] = value
        row[f"converged_{family}"] = fit.success
    row["best"] = best_family(fits)
    return row


def win_rates(
    fits: pd.DataFrame, by: Sequence[str] = ("dataset", "n_layers", "layer")
) -> pd.DataFrame:
    """Share of matrices each family wins, per group (Figure "win rates", Appendix D).

    Parameters
    ----------
    fits : pandas.DataFrame
        One row per matrix with a ``best`` column (see :func:`fits_to_record`) and the
        ``by`` columns.
    by : sequence of str
        Grouping columns.

    Returns
    -------
    pandas.DataFrame
        Columns ``*by, family, wins, n_matrices, win_rate``; win rates sum to 1 per group,
        and families that never win appear with rate 0.
    """
    by = list(by)
    missing = [c for c in [*by, "best"] if c not in fits.columns]
    if missing:
        raise ValueError(f"fits lacks columns {missing}")
    families = sorted(set(FAMILIES) | set(fits["best"].unique()))
    counts = (
        fits.groupby(by, observed=True)["best"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=families, fill_value=0)
    )
    totals = counts.sum(axis=1)
    out = counts.stack().rename("wins").reset_index().rename(columns={"best": "family"})
    out = out.merge(totals.rename("n_matrices").reset_index(), on=by)
    out["win_rate"] = out["wins"] / out["n_matrices"]
    return out


def weight_distribution_study(
    checkpoints: Sequence,
    *,
    families: Sequence[str] = FAMILIES,
    progress: bool = True,
) -> pd.DataFrame:
    """Fit every family to every layer of trained models (target 6).

    Weights are normalised over the whole network (``|W| / max |W|``, the normalisation of
    NP) before fitting, as in Appendix D.

    Parameters
    ----------
    checkpoints : sequence of path-like
        Final checkpoints of the models.
    families : sequence of str, default=FAMILIES
    progress : bool, default=True

    Returns
    -------
    pandas.DataFrame
        One row per (model, layer): run columns, ``layer`` (0-based), ``n_rows, n_cols``,
        ``nll_<family>``, fitted parameters ``<family>_<param>``, ``converged_<family>`` and
        ``best``. Feed it to :func:`win_rates`.
    """
    from tqdm.auto import tqdm

    from dgpbench.analysis.weights import load_weights, normalised_weights, tidy_run_columns

    if len(checkpoints) == 0:
        raise ValueError("checkpoints must not be empty")
    rows = []
    for path in tqdm(checkpoints, desc="fits", disable=None if progress else True):
        weights, info = load_weights(path)
        for layer, W in enumerate(normalised_weights(weights)):
            record = fits_to_record(fit_all(W, families))
            rows.append(
                {**info, "layer": layer, "n_rows": W.shape[0], "n_cols": W.shape[1], **record}
            )
    return tidy_run_columns(pd.DataFrame(rows))


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------

PARAMETER_LABELS = {
    "pareto_b": "fitted truncated-Pareto b",
    "normal_sigma": "fitted truncated-normal \u03c3",
    "exponential_lam": "fitted truncated-exponential \u03bb",
    "beta_a": "fitted Beta \u03b1",
    "beta_b": "fitted Beta \u03b2",
}


@quiet_seaborn
def plot_win_rates(rates: pd.DataFrame, stem: str | os.PathLike[str]) -> list[Path]:
    """Stacked win rates per data set, depth and layer (fig:weightdistributions:winrates).

    Parameters
    ----------
    rates : pandas.DataFrame
        :func:`dgpbench.analysis.distributions.win_rates` grouped by ``dataset, n_layers,
        layer``.
    """
    import seaborn as sns

    require_columns(rates, ["dataset", "n_layers", "layer", "family", "win_rate"], "rates")
    datasets = ordered_values(rates["dataset"])
    families = ordered_values(rates["family"], ["pareto", "normal", "exponential", "beta"])
    colors = dict(zip(families, sns.color_palette("Set2", len(families)), strict=True))
    fig, axes = new_figure(
        1,
        len(datasets),
        width=max(3.6, 0.35 * rates.groupby(["n_layers", "layer"]).ngroups + 1.5),
        height=3.4,
        sharey=True,
    )
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = rates[rates["dataset"] == dataset]
        wide = sub.pivot_table(
            index=["n_layers", "layer"], columns="family", values="win_rate", fill_value=0.0
        ).reindex(columns=families, fill_value=0.0)
        xs = np.arange(len(wide))
        bottom = np.zeros(len(wide))
        for family in families:
            ax.bar(
                xs,
                wide[family],
                bottom=bottom,
                color=colors[family],
                label=FAMILY_LABELS.get(family, family),
                width=0.8,
            )
            bottom += wide[family].to_numpy()
        ax.set_xticks(
            xs,
            [f"{int(n)}L:{int(layer) + 1}" for n, layer in wide.index],
            rotation=90,
            fontsize="x-small",
        )
        ax.set_title(dataset_label(dataset))
        ax.set_xlabel("layers in model : layer index")
        ax.set_ylabel("win rate (lowest NLL)")
        ax.set_ylim(0, 1)
    axes[0, -1].legend(
        fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="family"
    )
    return save_figure(fig, stem)


@quiet_seaborn
def plot_fitted_parameters(
    fits: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    parameter: str = "pareto_b",
    label: str | None = None,
    log_scale: bool = True,
) -> list[Path]:
    """Distribution of a fitted parameter by data set, depth and layer.

    ``parameter="pareto_b"`` gives fig:weightdistribution:parameters:pareto and
    ``"normal_sigma"`` fig:weightdistribution:parameters:normal.
    """
    import seaborn as sns

    require_columns(fits, ["dataset", "n_layers", "layer", parameter], "fits")
    data = fits.assign(**{"layer index": fits["layer"] + 1, "layers": fits["n_layers"].astype(int)})
    datasets = ordered_values(data["dataset"])
    fig, axes = new_figure(1, len(datasets), width=3.8, height=3.2, sharey=True)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = data[data["dataset"] == dataset]
        sns.boxplot(
            data=sub,
            x="layers",
            y=parameter,
            hue="layer index",
            ax=ax,
            palette="flare",
            showfliers=False,
            log_scale=log_scale,
        )
        ax.set_title(dataset_label(dataset))
        ax.set_xlabel("number of layers")
        ax.set_ylabel(label or PARAMETER_LABELS.get(parameter, parameter))
        if ax.get_legend() is not None:
            ax.get_legend().set_title("layer index")
    return save_figure(fig, stem)
