"""Synthetic matrices: samplers on [0, 1] and the noisy sorting process (Appendix E.1)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from dgpbench.analysis.sortedness import kendall_sortedness
from dgpbench.analysis.synthetic import (
    noisy_sort,
    parse_distribution,
    sample_matrix,
    truncated_pareto,
)


def test_noisy_sort_without_noise_sorts_row_major():
    rng = np.random.default_rng(0)
    W = rng.random((7, 5))
    out = noisy_sort(W, 0.0, rng)
    assert np.array_equal(out.ravel(), np.sort(W.ravel()))
    assert kendall_sortedness(out) == pytest.approx(1.0)
    # large entries end on the bottom rows
    assert out[-1].min() > out[0].max()


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 8),
    m=st.integers(1, 8),
    log_s=st.floats(-10, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_noisy_sort_keeps_the_multiset(n, m, log_s, seed):
    rng = np.random.default_rng(seed)
    W = rng.random((n, m))
    out = noisy_sort(W, np.exp(log_s), rng)
    assert out.shape == W.shape
    assert np.array_equal(np.sort(out.ravel()), np.sort(W.ravel()))


def test_noise_level_controls_sortedness():
    rng = np.random.default_rng(1)
    W = sample_matrix("pareto(10)", (60, 60), rng)
    taus = [
        np.mean([kendall_sortedness(noisy_sort(W, s, rng)) for _ in range(3)])
        for s in (1e-4, 1e-2, 1e-1, 10.0)
    ]
    assert taus[0] > 0.95
    assert all(a > b for a, b in itertools.pairwise(taus))
    assert abs(taus[-1]) < 0.05  # essentially a random permutation


def test_noisy_sort_is_deterministic_given_rng():
    W = np.random.default_rng(2).random((5, 6))
    a = noisy_sort(W, 0.1, np.random.default_rng(3))
    b = noisy_sort(W, 0.1, np.random.default_rng(3))
    assert np.array_equal(a, b)


def test_noisy_sort_rejects_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="s must"):
        noisy_sort(np.ones((2, 2)), -1.0, rng)
    with pytest.raises(ValueError, match="W"):
        noisy_sort(np.ones(4), 0.1, rng)


@pytest.mark.parametrize(
    "spec", ["uniform", "pareto(0.5)", "pareto(60)", "normal(0.5)", "exponential(3)", "beta(1,2)"]
)
def test_samplers_live_on_unit_interval_and_integrate_to_one(spec):
    dist = parse_distribution(spec)
    x = sample_matrix(dist, (50, 40), np.random.default_rng(0))
    assert x.shape == (50, 40)
    assert x.min() >= 0 and x.max() <= 1
    frozen = dist.frozen()
    total, _ = integrate.quad(frozen.pdf, 0, 1, points=[1e-3, 1e-2, 0.1])
    assert total == pytest.approx(1.0, abs=1e-6)
    # sample mean agrees with the distribution's mean
    assert x.mean() == pytest.approx(frozen.mean(), abs=5 * x.std() / np.sqrt(x.size))


def test_truncated_pareto_density_shape():
    # density proportional to (1 + x)^-(b + 1) on [0, 1]
    b = 3.0
    d = truncated_pareto(b)
    xs = np.array([0.0, 0.3, 1.0])
    ratio = d.pdf(xs) / d.pdf(0.0)
    assert np.allclose(ratio, (1 + xs) ** -(b + 1))


@pytest.mark.parametrize("spec", ["pareto", "pareto(1,2)", "gamma(1)", "normal(-1)", "beta(a,b)"])
def test_parse_distribution_rejects_bad_specs(spec):
    with pytest.raises(ValueError):
        parse_distribution(spec)


def test_distribution_label():
    assert parse_distribution("pareto(60)").label == "Truncated Pareto (b=60)"
    assert parse_distribution("uniform").label == "Uniform"
