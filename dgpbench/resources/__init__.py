"""Data files shipped with dgpbench (read with :mod:`importlib.resources`).

* ``paper_table1.csv`` - Table 1 of Girrbach et al. (TMLR 2023), the published covariate
  shift detection ratios in percent: ``dataset, corruption, n, method,
  detection_ratio_pct`` (240 cells: CIFAR-10, Fashion-MNIST, MNIST x GB, GN, PD, UN x
  n in {10, 20, 50, 100, 200} x Softmax, TU, MAGDiff, DGP).
"""
