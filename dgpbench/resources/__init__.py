"""Data files shipped with dgpbench (read with :mod:`importlib.resources`).

* ``paper_table1.csv`` - Table 1 of Girrbach et al. (TMLR 2023), the published covariate
  shift detection ratios in percent: ``dataset, corruption, n, method,
  detection_ratio_pct`` (240 cells: CIFAR-10, Fashion-MNIST, MNIST x GB, GN, PD, UN x
  n in {10, 20, 50, 100, 200} x Softmax, TU, MAGDiff, DGP).
* the other numeric tables of the paper, for ``dgpbench compare-paper`` (see
  :mod:`dgpbench.comparisons`), transcribed from the paper with its labels:

  - ``paper_table2_ablation.csv`` - Table 2 and the appendix's full ablation (MNIST; TU,
    TU (+ norm), DGP (- norm), DGP; n = 10 ... 200): ``dataset, corruption, n, method,
    detection_ratio_pct``;
  - ``paper_calibration.csv`` - false detection rates (%) of TU and DGP on clean batches:
    ``dataset, n, method, false_detection_rate_pct``;
  - ``paper_bounds.csv`` - Appendix B.1, errors of the NP bounds of Theorem 3.4 on 10,000
    synthetic matrices: ``bound, statistic, value`` (statistics ``abs_mean, abs_max,
    rel_mean_pct, rel_max_pct``);
  - ``paper_r2.csv`` - Appendix G.1, R² (x100) of NP ~ log-variance per data set,
    activation, number of hidden layers (``layers``, 1-3: the workflow's ``n_layers - 1``)
    and hidden size: ``table, dataset, activation, layers, hidden, r2_pct``;
  - ``paper_early_stopping.csv`` - Appendix G.2's two tables, mean differences in trained
    epochs and in test accuracy (%) between two stopping criteria: ``table, quantity, first,
    second, dataset, difference``.
"""
