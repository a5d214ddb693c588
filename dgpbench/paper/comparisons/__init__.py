"""Published vs reproduced for the paper's numeric tables beyond Table 1.

Table 1 has its own comparison (:mod:`dgpbench.paper.comparisons.table1`, ``comparison_table1``). This
package compares the other five published tables, shipped in :mod:`dgpbench.resources`,
with what a run computed; one module per table, the shared machinery in ``core``:

==================  ==========================================================  =============
module              table (reproduced from)                                     agrees when
==================  ==========================================================  =============
``ablation``        Table 2 + full ablation (aggregated detection records)      |diff| <= 5 points
``calibration``     false detection rates on clean batches (records)            |diff| <= 2 points
``bounds``          errors of the NP bounds, App. B.1 (``bounds/study.csv``)    ratio in [1/3, 3]
``r2``              R² of NP ~ log-variance, App. G.1 (``np_variance/r2.csv``)  |diff| <= 2 points
``early_stopping``  App. G.2's two tables (``early_stopping/table_*.csv``)      |diff| <= 1 epoch
                                                                                 / 0.1 points
==================  ==========================================================  =============

Only cells present in both the published table and the run appear in a comparison: a
published cell the run did not compute is left out, never filled. ``steps`` holds the
``dgpbench compare-paper`` subcommand.
"""
