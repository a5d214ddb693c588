"""Table 2 and the appendix's full ablation: detection ratios of TU, TU (+ norm), DGP (- norm)
and DGP on MNIST, published vs reproduced from the run's bootstrap records.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from dgpbench.paper.comparisons.core import TableSpec, best_agrees, share_paper_in_ci

__all__ = ["SPEC", "reproduced"]

WITHIN = 5.0  # percentage points, as for Table 1

SPEC = TableSpec(
    name="table2_ablation",
    title="ablation (Table 2 and the appendix's full ablation), detection ratio (%)",
    keys=("dataset", "corruption", "n", "method"),
    value="detection_ratio_pct",
    int_keys=("n",),
    group=("dataset",),
    tolerance=f"|diff| <= {WITHIN:g} percentage points; best agrees = the best of the four "
    "variants of a (corruption, n) group is the same; ci_low, ci_high: the run's 95% interval "
    "over its models (n_models), share_paper_in_ci: the share of published values inside it",
    within=lambda j: j["diff"].abs().round(6) <= WITHIN,
    extra=lambda cells: {**best_agrees(cells, ["corruption", "n"]), **share_paper_in_ci(cells)},
    ours_columns=("ci_low", "ci_high", "n_draws", "n_models"),
)


def reproduced(records: pd.DataFrame, deltas: Iterable[float] | None = None) -> pd.DataFrame:
    """The run's detection ratio cells (paper labels) pooled over ``deltas``.

    Parameters
    ----------
    records : pandas.DataFrame
        Bootstrap records (``dataset, method, corruption, n, delta, rejected``).
    deltas : iterable of float, optional
        Corrupted fractions pooled in a cell (None: every delta > 0 of the records).

    Returns
    -------
    pandas.DataFrame
        ``dataset, corruption, n, method, ours, ci_low, ci_high, n_draws, n_models``
        (percent; the interval over the models, as in Table 1's comparison).
    """
    from dgpbench.paper.comparisons.table1 import reproduced_cells

    cells = reproduced_cells(records, deltas)
    return cells.rename(
        columns={"ratio_pct": "ours", "ci_low_pct": "ci_low", "ci_high_pct": "ci_high"}
    )
