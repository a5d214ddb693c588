"""Neural-persistence analyses of the paper's Sections 3-4 and Appendices B-E, G.1-G.4.

Each analysis is a function returning a tidy :class:`pandas.DataFrame`; its figure is a
``plot_*`` function that takes that table, both in one module per study; its
``dgpbench analysis`` target (the workflow step: arguments, files in and out) is in
``dgpbench/cli/analysis_<module>.py``, as every command line is in :mod:`dgpbench.cli`. Modules:

``synthetic``       distributions on [0, 1] and the noisy sorting process (App. E.1)
``sortedness``      the sortedness measure (App. E.2)
``bounds``          tightness of the NP bounds on synthetic matrices (App. B.1)
``factors``         NP vs. variance and sortedness on synthetic matrices (App. B.2)
``size``            expected normalised NP over matrix sizes (App. C)
``distributions``   maximum-likelihood fits of weight distributions, win rates (App. D)
``weights``         weights of checkpoints, NP / variance / DGP of a network
``permutation``     permutation test for spatial structure, KS tests (Sec. 4.2-4.3)
``variance``        NP vs. log-variance: per-model table, R² (Sec. 4, App. G.1)
``curves``          criteria at every quarter-epoch evaluation of a training run; training
``stacked``         the seeds of one architecture trained together, with their curves
``early_stopping``  Algorithm 2 of Rieck et al. on NP, variance, DGP, validation (App. G.2)
``regularisers``    NP and variance under batch norm / dropout (App. G.3)
``dgp_variance``    Kendall's tau of DGP / NP with the variance over training (App. G.4)
``persistence``     normalised neural persistence of a batch of matrices
``common``          what the analyses share: reading inputs, writing tables, figure canvas
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# `sortedness` is both a submodule and a function: import it now, so that the function keeps
# the name (importing the submodule later would rebind the package attribute to the module).
from dgpbench.analysis.sortedness import kendall_sortedness, sortedness

# Everything else loads on first access (PEP 562): `dgpbench` registers its `analysis`
# subcommand by importing dgpbench.cli.analysis, and every CLI call would otherwise pay
# ~2.5 s for torch, scipy.stats and numba before doing anything.
_EXPORTS = {
    "bounds_error_table": "bounds",
    "bounds_tightness_study": "bounds",
    "CurveRecorder": "curves",
    "concat_curves": "curves",
    "criterion_curves": "curves",
    "training_correlations": "dgp_variance",
    "fit_all": "distributions",
    "fit_distribution": "distributions",
    "weight_distribution_study": "distributions",
    "win_rates": "distributions",
    "DGP_TABLE_PAIRS": "early_stopping",
    "NP_TABLE_PAIRS": "early_stopping",
    "early_stopping_differences": "early_stopping",
    "early_stopping_grid": "early_stopping",
    "stop_evaluation": "early_stopping",
    "np_factors_r2": "factors",
    "np_factors_study": "factors",
    "ks_rejection_summary": "permutation",
    "permutation_ks_tests": "permutation",
    "permutation_np": "permutation",
    "permutation_study": "permutation",
    "regulariser_summary": "regularisers",
    "expected_np_grid": "size",
    "noisy_sort": "synthetic",
    "parse_distribution": "synthetic",
    "sample_matrix": "synthetic",
    "linear_fit": "variance",
    "model_study": "variance",
    "np_variance_r2": "variance",
    "r2_table": "variance",
    "load_weights": "weights",
    "model_metrics": "weights",
    "normalised_weights": "weights",
    "plot_bounds_tightness": "bounds",
    "plot_dgp_vs_log_variance": "dgp_variance",
    "plot_training_correlations": "dgp_variance",
    "plot_fitted_parameters": "distributions",
    "plot_win_rates": "distributions",
    "plot_early_stopping_heatmaps": "early_stopping",
    "plot_np_factors": "factors",
    "plot_permutation_dnn": "permutation",
    "plot_permutation_linear": "permutation",
    "plot_regularisers": "regularisers",
    "plot_size_heatmaps": "size",
    "plot_np_vs_log_variance": "variance",
}

if TYPE_CHECKING:  # the eager imports, for type checkers and IDEs
    from dgpbench.analysis.bounds import (
        bounds_error_table,
        bounds_tightness_study,
        plot_bounds_tightness,
    )
    from dgpbench.analysis.curves import CurveRecorder, concat_curves, criterion_curves
    from dgpbench.analysis.dgp_variance import (
        plot_dgp_vs_log_variance,
        plot_training_correlations,
        training_correlations,
    )
    from dgpbench.analysis.distributions import (
        fit_all,
        fit_distribution,
        plot_fitted_parameters,
        plot_win_rates,
        weight_distribution_study,
        win_rates,
    )
    from dgpbench.analysis.early_stopping import (
        DGP_TABLE_PAIRS,
        NP_TABLE_PAIRS,
        early_stopping_differences,
        early_stopping_grid,
        plot_early_stopping_heatmaps,
        stop_evaluation,
    )
    from dgpbench.analysis.factors import np_factors_r2, np_factors_study, plot_np_factors
    from dgpbench.analysis.permutation import (
        ks_rejection_summary,
        permutation_ks_tests,
        permutation_np,
        permutation_study,
        plot_permutation_dnn,
        plot_permutation_linear,
    )
    from dgpbench.analysis.regularisers import plot_regularisers, regulariser_summary
    from dgpbench.analysis.size import expected_np_grid, plot_size_heatmaps
    from dgpbench.analysis.synthetic import noisy_sort, parse_distribution, sample_matrix
    from dgpbench.analysis.variance import (
        linear_fit,
        model_study,
        np_variance_r2,
        plot_np_vs_log_variance,
        r2_table,
    )
    from dgpbench.analysis.weights import load_weights, model_metrics, normalised_weights

__all__ = [
    "DGP_TABLE_PAIRS",
    "NP_TABLE_PAIRS",
    "CurveRecorder",
    "bounds_error_table",
    "bounds_tightness_study",
    "concat_curves",
    "criterion_curves",
    "early_stopping_differences",
    "early_stopping_grid",
    "expected_np_grid",
    "fit_all",
    "fit_distribution",
    "kendall_sortedness",
    "ks_rejection_summary",
    "linear_fit",
    "load_weights",
    "model_metrics",
    "model_study",
    "noisy_sort",
    "normalised_weights",
    "np_factors_r2",
    "np_factors_study",
    "np_variance_r2",
    "parse_distribution",
    "permutation_ks_tests",
    "permutation_np",
    "permutation_study",
    "plot_bounds_tightness",
    "plot_dgp_vs_log_variance",
    "plot_early_stopping_heatmaps",
    "plot_fitted_parameters",
    "plot_np_factors",
    "plot_np_vs_log_variance",
    "plot_permutation_dnn",
    "plot_permutation_linear",
    "plot_regularisers",
    "plot_size_heatmaps",
    "plot_training_correlations",
    "plot_win_rates",
    "r2_table",
    "regulariser_summary",
    "sample_matrix",
    "sortedness",
    "stop_evaluation",
    "training_correlations",
    "weight_distribution_study",
    "win_rates",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
