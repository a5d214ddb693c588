"""Rabanser et al.'s published Table 1(a) against the run's pooled detection accuracy.

Their Table 1(a) (``dgpbench/resources/paper_fl_table1a.csv``, in percent: ``test,
reduction, n, accuracy_pct``) gives the detection accuracy at alpha = 0.05 of each
dimensionality reduction and test, pooled over **MNIST and CIFAR-10**, their 10 shift classes,
3 fractions and 5 runs; BBSDh + chi-squared and the domain classifier's binomial test are
listed once, under univariate, and the MMD columns stop at n = 1,000.

The run's cell is :func:`dgpbench.failing_loudly.reporting.pooled_accuracy_table`'s: pooled
over the data sets the run holds, with a 95% interval over its independent units, the (data
set, run) pairs (a percentile bootstrap of the runs, hulled with the draws' Wilson interval:
never narrower than the draws alone would give). A row that reads a classifier is compared on
one model family (:data:`PREFERRED_KINDS`; the ``row`` column names it).

Tolerance, from the published cell's own sampling error. A published cell pools
:data:`PUBLISHED_OUTCOMES` = 2 data sets x 10 shifts x 3 fractions x 5 runs = 300 tests, one
sample each. Its binomial standard error ``sqrt(p (1 - p) / 300)`` is at most 2.9 points
(p = 0.5), and it bounds the between-run one: the 60 (data set, shift, fraction) conditions
differ in rate, and the variance of the mean of 5 runs per condition is ``mean_j p_j (1 -
p_j) / 300 <= p (1 - p) / 300``. A cell agrees when ``|diff| <= 1.96 sqrt(se_paper^2 +
se_ours^2)`` (``se_ours``: our interval's half-width / 1.96): two independent estimates of one
rate differ by more only 5% of the time. With a tight cell of ours that is up to 5.7 points.
The sign test (:func:`dgpbench.paper.comparisons.r2.sign_test`) asks whether the cells lie on
one side of the paper beyond chance, which a per-cell tolerance cannot.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from dgpbench.failing_loudly.reporting import pooled_accuracy_table, protocol_of, with_rows
from dgpbench.paper.comparisons.core import TableSpec, write_comparison
from dgpbench.paper.comparisons.r2 import paper_in_interval

__all__ = [
    "PREFERRED_KINDS",
    "PUBLISHED_OUTCOMES",
    "PUBLISHED_POOL",
    "SPEC",
    "reproduced",
    "write_fl_table1a_comparison",
]

PUBLISHED_POOL: tuple[str, ...] = ("cifar10", "mnist")
"""The data sets Rabanser et al.'s Table 1(a) pools."""
PUBLISHED_OUTCOMES = 2 * 10 * 3 * 5
"""Tests behind one published cell: data sets x shift classes x fractions x runs."""
PREFERRED_KINDS: tuple[str, ...] = ("resnet", "cnn")
"""Model families a classifier row is compared on, first found first (their BBSD networks
are convolutional); a run with none of them uses its first family in sorted order."""

_Z = 1.96
_NAMES = {"noredu": "NoRed", "pca": "PCA", "srp": "SRP", "uae": "UAE", "tae": "TAE",
          "bbsds": "BBSDs"}  # fmt: skip
_CELLS: dict[str, tuple[str, str]] = {
    **{f"{r}+ks": ("univariate", name) for r, name in _NAMES.items()},
    **{f"{r}+mmd": ("multivariate", name) for r, name in _NAMES.items()},
    "bbsdh+chi2": ("univariate", "BBSDh_chi2"),
    "classif": ("univariate", "Classif_binomial"),
}
"""Our method -> the published (test, reduction) it reproduces."""


def se_published(paper_pct: pd.Series | np.ndarray) -> np.ndarray:
    """Standard error (points) of a published cell: binomial over its 300 tests.

    A rate of 0 or 1 is taken as half a test from the edge, so that no cell claims no error.

    Parameters
    ----------
    paper_pct : array-like
        Published accuracies in percent.

    Returns
    -------
    ndarray
        The standard errors in points.

    Examples
    --------
    >>> round(float(se_published([50.0])[0]), 2)
    2.89
    """
    edge = 0.5 / PUBLISHED_OUTCOMES
    p = np.clip(np.asarray(paper_pct, dtype=float) / 100, edge, 1 - edge)
    return 100 * np.sqrt(p * (1 - p) / PUBLISHED_OUTCOMES)


def _within(joined: pd.DataFrame) -> pd.Series:
    se = np.sqrt(se_published(joined["paper"]) ** 2 + joined["se_ours"].to_numpy() ** 2)
    return joined["diff"].abs().round(6) <= _Z * se


def _extra(cells: pd.DataFrame) -> dict:
    return {"n_within": int(cells["within"].sum()), **paper_in_interval(cells)}


SPEC = TableSpec(
    name="fl_table1a",
    title="Failing loudly's Table 1(a): detection accuracy (%) per reduction, test and n",
    keys=("test", "reduction", "n"),
    value="accuracy_pct",
    int_keys=("n",),
    group=("n",),
    tolerance=(
        "|diff| <= 1.96 sqrt(se_paper² + se_ours²) points, se_paper = sqrt(p (1 - p) / 300) "
        "(a published cell pools 2 data sets x 10 shifts x 3 fractions x 5 runs of one test "
        "each; at most 2.9 points, and an upper bound of its between-run error), se_ours = our "
        "interval's half-width / 1.96; ci_low, ci_high: our 95% interval over the independent "
        "(data set, run) units (units = their number; runs, not draws), hulled with the draws' "
        "Wilson interval; share_paper_in_ci: the share of published values inside it; n_below, "
        "n_above, sign_test_p: the exact two-sided sign test over the group's cells "
        "(one_sided = 1 when p < 0.05)"
    ),
    within=_within,
    extra=_extra,
    ours_columns=("row", "units", "ci_low", "ci_high", "se_ours", "pool"),
)


def _pool_text(datasets) -> str:
    """The data sets pooled, as a label; it says when they are not the published pool."""
    from dgpbench.labels import dataset_label

    names = sorted(set(map(str, datasets)))
    text = " + ".join(dataset_label(d) for d in names)
    return text if names == sorted(PUBLISHED_POOL) else f"{text} (theirs: MNIST + CIFAR-10)"


def reproduced(records: pd.DataFrame, kinds: tuple[str, ...] = PREFERRED_KINDS) -> pd.DataFrame:
    """The run's cells in the published layout, pooled over the run's data sets.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid (``dgpbench fl-detect``).
    kinds : tuple of str
        Model families to compare a classifier row on, first found first.

    Returns
    -------
    pandas.DataFrame
        ``test, reduction, n, ours`` (percent), ``row`` (our row), ``units`` (independent
        runs), ``ci_low, ci_high`` (percent), ``se_ours`` (points) and ``pool`` (the data
        sets pooled; it says when they are not MNIST + CIFAR-10). Rows with no published
        counterpart (DGP, TU, MAGDiff, ...) are left out.
    """
    rec = with_rows(records)
    rec = rec[rec["method"].astype(str).isin(list(_CELLS))]
    if rec.empty:
        return pd.DataFrame(columns=["test", "reduction", "n", "ours", *SPEC.ours_columns])
    found = sorted(set(rec["kind"].astype(str)) - {"none"})
    chosen = next((k for k in kinds if k in found), found[0] if found else "none")
    rec = rec[rec["kind"].astype(str).isin(["none", chosen])]
    cells = pooled_accuracy_table(rec.drop(columns="row"), by=("method", "row", "n"),
                                  carry_forward=protocol_of(records) == "rabanser")  # fmt: skip
    published = cells["method"].map(_CELLS)
    # per row: a grid reported in parts may hold a row for one data set only
    pooled = rec.groupby("row", observed=True)["dataset"].agg(_pool_text)
    return pd.DataFrame(
        {
            "test": published.str[0],
            "reduction": published.str[1],
            "n": cells["n"].astype("int64"),
            "ours": 100 * cells["rate"],
            "row": cells["row"],
            "units": cells["units"],
            "ci_low": 100 * cells["ci_low"],
            "ci_high": 100 * cells["ci_high"],
            "se_ours": 100 * (cells["ci_high"] - cells["ci_low"]) / (2 * _Z),
            "pool": cells["row"].map(pooled).to_numpy(),
        }
    ).reset_index(drop=True)


def write_fl_table1a_comparison(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    *,
    published_path: str | os.PathLike | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, list[Path]]:
    """Write ``comparison_fl_table1a{.csv,_summary.csv,.md}`` into ``out_dir``.

    Per cell: published, ours, the difference, our interval over runs and whether it agrees
    (module docstring); per n and overall: the cells compared, the count and share within
    the tolerance, the mean difference, the share of published values in our intervals and
    the sign test. The heading says when the run's data sets are not MNIST + CIFAR-10.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records of the grid.
    out_dir : path-like
    published_path : path-like, optional
        A published table other than Rabanser et al.'s (columns ``test, reduction, n,
        accuracy_pct``).

    Returns
    -------
    comparison, summary : pandas.DataFrame
    paths : list of pathlib.Path
    """
    ours = reproduced(records)
    pools = sorted(set(ours["pool"])) or [_pool_text(records["dataset"])]
    if pools == [_pool_text(PUBLISHED_POOL)]:
        note = f"pooled over {pools[0]}"
    elif len(pools) == 1:
        note = f"THE POOL DIFFERS: this run pooled {pools[0]}; compare with care"
    else:
        note = (
            f"THE POOL DIFFERS between rows ({'; '.join(pools)}): see each cell's pool; "
            "compare with care"
        )
    spec = replace(SPEC, title=f"{SPEC.title}, protocol {protocol_of(records)}; {note}")
    return write_comparison(spec, ours, out_dir, published_path=published_path)
