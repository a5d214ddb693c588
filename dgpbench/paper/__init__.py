"""The DGP paper's protocol (:mod:`~dgpbench.paper.protocol`,
:mod:`~dgpbench.paper.label_shift`), its tables and figures (:mod:`~dgpbench.paper.reporting`)
and every published-vs-reproduced comparison (:mod:`~dgpbench.paper.comparisons`).
"""
