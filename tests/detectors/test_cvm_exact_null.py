"""Cramér-von Mises exact p-values read off one null distribution per pair of sizes."""

import numpy as np
import pytest
from scipy.stats import cramervonmises_2samp

from dgpbench.detectors.cvm import cvm_pvalues


def test_exact_p_values_equal_scipys_for_every_size_pair_with_and_without_ties():
    rng = np.random.default_rng(7)
    pairs = [(m, n) for m in (2, 7, 19, 20) for n in (3, 13, 20)]
    for trial, (m, n) in enumerate(pairs):
        ref, test = rng.normal(size=(m, 3)), rng.normal(0.5, 1, size=(n, 3))
        if trial % 2:  # ties within and across the samples
            ref, test = np.round(ref), np.round(test)
        _, p = cvm_pvalues(ref, test)
        expected = cramervonmises_2samp(ref, test, axis=0, method="exact").pvalue
        constant = (ref == ref[:1]).all(axis=0) & (test == ref[:1]).all(axis=0)
        np.testing.assert_allclose(p[~constant], expected[~constant], rtol=1e-12, atol=1e-15)
        assert (p[constant] == 1.0).all()


def test_extreme_statistics_get_the_smallest_and_largest_exact_p_values():
    ref, test = np.arange(10.0)[:, None], np.arange(10.0)[:, None] + 100
    _, p = cvm_pvalues(ref, test)
    assert p[0] == pytest.approx(2 / 184756)  # the two fully separated splits of C(20, 10)
    _, p = cvm_pvalues(np.array([[0.0], [3.0]]), np.array([[1.0], [2.0]]))
    assert p[0] == pytest.approx(cramervonmises_2samp([0, 3], [1, 2], method="exact").pvalue)
