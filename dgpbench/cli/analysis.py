"""``dgpbench analysis TARGET``: the neural-persistence analyses as workflow steps.

One subcommand, ``analysis``, with one target per step of ``workflow/rules/analysis.smk``.
A target's arguments and run function live in ``dgpbench/cli/analysis_<module>.py``
(``COMMANDS`` there), beside the analysis module it runs (:mod:`dgpbench.analysis.<module>`:
the computation and the figure, plain functions); this module only lists the targets, so
``dgpbench`` imports a target's modules (torch, numba, seaborn) only when that target runs.
Each target reads files, calls the analysis and writes its outputs atomically into
``--out-dir`` (fixed file names, listed per target below; tables as ``.csv`` + ``.md``, plus
``.tex`` where the paper has the table; figures as ``.png`` + ``.pdf``):

==================  =====================================================================
``train``           one analysis MLP: ``model.pt``, ``metrics.csv`` and, with ``--curves``,
                    NP / variance / DGP / validation / test accuracy per quarter epoch
``train-seeds``     every seed of one analysis MLP at once: per seed (``--out-dirs``) what
                    ``train --curves`` writes
``models``          per-model NP, variance, DGP of final checkpoints (one CSV; with
                    ``--curves``, read from each run's last evaluation)
``curves``          concatenate the curves of many runs (one CSV)
``permutation``     1: ``permutation.csv.gz, ks_tests.csv, table_ks_rejections,
                    fig_permutation_linear, fig_permutation_dnn``
``np-variance``     2: ``r2.csv, table_r2 (.tex), table_r2_linear,
                    fig_np_vs_log_variance_{linear,dnn,<activation>}``; with ``--curves``
                    also ``r2_by_epoch.csv, table_r2_by_epoch, fig_r2_by_epoch``
``bounds``          3: ``study.csv, table_bounds (.tex), fig_bounds_tightness``
``np-factors``      4: ``study.csv, table_r2, fig_np_factors``
``size``            5: ``grid.csv, fig_size_heatmaps``
``weights``         6: ``fits.csv, table_win_rates, fig_win_rates, fig_pareto_b,
                    fig_normal_sigma``
``early-stopping``  7: ``grid.csv.gz, table_np (.tex), table_dgp (.tex), fig_heatmaps``
``regularisers``    8: ``models.csv, table_summary, fig_regularisers``
``dgp-variance``    9: ``correlations.csv, table_correlations, fig_training_correlations,
                    fig_dgp_vs_log_variance``
==================  =====================================================================

Figures and tables of linear classifiers (``n_layers == 1``) or of DNNs are written only
when such models are in the input (the workflow declares them the same way).
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Callable

from dgpbench._validation import check_int
from dgpbench.cli.registry import SUBCOMMANDS

__all__ = ["TARGETS", "target_command"]

# target -> (help, <module> of dgpbench.cli.analysis_<module> that holds it in its COMMANDS)
TARGETS: dict[str, tuple[str, str]] = {
    "train": ("Train one analysis MLP (lr 3e-4); optionally record its curves.", "curves"),
    "train-seeds": (
        "Train all seeds of one analysis MLP as one stacked model; record their curves.",
        "stacked",
    ),
    "models": ("NP, per-layer NP, variance and DGP of final checkpoints.", "variance"),
    "curves": ("Concatenate the training curves of many runs.", "curves"),
    "permutation": ("1: NP of trained vs. permuted weights, KS tests.", "permutation"),
    "np-variance": ("2: R² of NP ~ log-variance, table and figures.", "variance"),
    "bounds": ("3: tightness of the NP bounds on synthetic matrices.", "bounds"),
    "np-factors": ("4: NP vs. variance and sortedness of synthetic matrices.", "factors"),
    "size": ("5: expected normalised NP over matrix sizes.", "size"),
    "weights": ("6: distribution fits to trained weights, win rates.", "distributions"),
    "early-stopping": ("7: early stopping on NP, variance, DGP, validation.", "early_stopping"),
    "regularisers": ("8: NP and variance under batch norm / dropout.", "regularisers"),
    "dgp-variance": ("9: DGP vs. the variance of weights.", "dgp_variance"),
}


def target_command(
    name: str,
) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], None]]:
    """The add-arguments and run functions of the target ``name`` (imports its module)."""
    module = importlib.import_module(f"dgpbench.cli.analysis_{TARGETS[name][1]}")
    return module.COMMANDS[name]


class _TargetParser(argparse.ArgumentParser):
    """A target's parser that adds the target's arguments when it is first used.

    argparse calls ``parse_known_args`` on the chosen target's parser only, so ``dgpbench``
    (and ``dgpbench analysis -h``) never imports the other targets' modules.
    """

    def __init__(self, *args, target: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._target = target
        self._loaded = False

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            target_command(self._target)[0](self)
            self.add_argument("--threads", type=int, default=None, help="torch and numba threads")

    def parse_known_args(self, args=None, namespace=None):
        self._load()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._load()
        return super().format_usage()

    def format_help(self) -> str:
        self._load()
        return super().format_help()


def _analysis_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(
        dest="target", metavar="TARGET", required=True, parser_class=_TargetParser
    )
    for name, (help_, _) in TARGETS.items():
        sub.add_parser(name, help=help_, description=help_, target=name)


def _analysis(args: argparse.Namespace) -> None:
    from dgpbench.threads import numba_threads, torch_threads

    if args.threads is not None:
        check_int(args.threads, "--threads")
    # matplotlib logs every categorical axis at INFO: noise in the rules' logs
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    with torch_threads(args.threads), numba_threads(args.threads):
        target_command(args.target)[1](args)


SUBCOMMANDS.update(
    {
        "analysis": (
            "Neural-persistence analyses (paper Sections 3-4): `dgpbench analysis TARGET -h`.",
            _analysis_args,
            _analysis,
        )
    }
)
