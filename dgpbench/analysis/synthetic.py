"""Synthetic weight matrices: distributions on [0, 1] and the noisy sorting process.

The paper (``dgp-paper.tex``) samples synthetic "normalised weight" matrices in Appendix B
(tightness of bounds, ~line 879; variance and sortedness, ~line 937) and Appendix C (matrix
size, ~line 985), with entries drawn iid from distributions on the unit interval and their
large entries spatially concentrated by the noisy sorting process of Appendix E.1 (~line 1133).

Parametrisations (the ones of the authors' analysis scripts, all supported on [0, 1]):

* truncated Pareto with shape ``b``: ``scipy.stats.truncpareto(b, c=2, loc=-1)``, i.e.
  density proportional to ``(1 + x) ** -(b + 1)`` on [0, 1]; ``b -> 0`` is almost uniform and
  large ``b`` (the paper goes up to 60) piles the mass near 0;
* truncated normal with location 0 and scale ``sigma``:
  ``scipy.stats.truncnorm(0, 1 / sigma, loc=0, scale=sigma)``;
* truncated exponential with rate ``lam``: ``scipy.stats.truncexpon(lam, scale=1 / lam)``;
* Beta(``a``, ``b``) and Uniform(0, 1).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dgpbench._validation import as_float_array

__all__ = [
    "Distribution",
    "beta_distribution",
    "noisy_sort",
    "parse_distribution",
    "sample_matrix",
    "truncated_exponential",
    "truncated_normal",
    "truncated_pareto",
    "uniform_distribution",
]


def _positive(value: float, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def truncated_pareto(b: float):
    """Truncated Pareto distribution on [0, 1] with shape ``b`` (density ∝ (1+x)^-(b+1)).

    Parameters
    ----------
    b : float
        Shape parameter, > 0. Larger values give more skewed (smaller) weights.

    Returns
    -------
    scipy.stats frozen distribution
        ``truncpareto(b, 2, loc=-1)``.

    Examples
    --------
    >>> [float(end) for end in truncated_pareto(5.0).support()]
    [0.0, 1.0]
    """
    return stats.truncpareto(_positive(b, "b"), 2.0, loc=-1.0)


def truncated_normal(sigma: float):
    """Normal(0, sigma²) truncated to [0, 1] (the paper's "truncated normal with loc 0").

    Parameters
    ----------
    sigma : float
        Scale of the untruncated normal, > 0.

    Returns
    -------
    scipy.stats frozen distribution
    """
    sigma = _positive(sigma, "sigma")
    return stats.truncnorm(0.0, 1.0 / sigma, loc=0.0, scale=sigma)


def truncated_exponential(lam: float):
    """Exponential with rate ``lam`` truncated to [0, 1].

    Parameters
    ----------
    lam : float
        Rate, > 0.

    Returns
    -------
    scipy.stats frozen distribution
    """
    lam = _positive(lam, "lam")
    return stats.truncexpon(lam, loc=0.0, scale=1.0 / lam)


def beta_distribution(a: float, b: float):
    """Beta(``a``, ``b``) on [0, 1]."""
    return stats.beta(_positive(a, "a"), _positive(b, "b"))


def uniform_distribution():
    """Uniform(0, 1)."""
    return stats.uniform(0.0, 1.0)


@dataclass(frozen=True)
class Distribution:
    """A named distribution on [0, 1], e.g. parsed from ``"pareto(60)"``.

    Attributes
    ----------
    family : str
        One of ``uniform``, ``pareto``, ``normal``, ``exponential``, ``beta``.
    params : tuple of float
        The family's parameters (see the module docstring).
    """

    family: str
    params: tuple[float, ...] = ()

    def frozen(self):
        """Return the scipy.stats frozen distribution."""
        factory = _FAMILIES[self.family][0]
        return factory(*self.params)

    @property
    def label(self) -> str:
        """Human-readable label used in tables and figure facets."""
        if not self.params:
            return _FAMILIES[self.family][2]
        args = ", ".join(f"{p:g}" for p in self.params)
        return f"{_FAMILIES[self.family][2]} ({_FAMILIES[self.family][3]}={args})"


# family -> (factory, number of parameters, display name, parameter name)
_FAMILIES = {
    "uniform": (uniform_distribution, 0, "Uniform", ""),
    "pareto": (truncated_pareto, 1, "Truncated Pareto", "b"),
    "normal": (truncated_normal, 1, "Truncated normal", "\u03c3"),
    "exponential": (truncated_exponential, 1, "Truncated exponential", "λ"),
    "beta": (beta_distribution, 2, "Beta", "\u03b1, \u03b2"),
}
_SPEC = re.compile(r"^\s*([a-z]+)\s*(?:\(([^)]*)\))?\s*$")


def parse_distribution(spec: str | Distribution) -> Distribution:
    """Parse ``"uniform"``, ``"pareto(60)"``, ``"normal(0.5)"``, ``"beta(1, 2)"``, ...

    Parameters
    ----------
    spec : str or Distribution
        Family name followed by its parameters in parentheses.

    Returns
    -------
    Distribution

    Raises
    ------
    ValueError
        On an unknown family, a wrong number of parameters or invalid values.

    Examples
    --------
    >>> parse_distribution("pareto(60)")
    Distribution(family='pareto', params=(60.0,))
    """
    if isinstance(spec, Distribution):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"distribution spec must be a string, got {type(spec).__name__}")
    match = _SPEC.match(spec.lower())
    if match is None or match.group(1) not in _FAMILIES:
        raise ValueError(
            f"unknown distribution {spec!r}; use one of {sorted(_FAMILIES)}, e.g. 'pareto(60)'"
        )
    family = match.group(1)
    raw = match.group(2)
    try:
        params = tuple(float(v) for v in raw.split(",")) if raw and raw.strip() else ()
    except ValueError as exc:
        raise ValueError(f"distribution {spec!r} has non-numeric parameters") from exc
    if len(params) != _FAMILIES[family][1]:
        raise ValueError(
            f"distribution {spec!r}: {family} takes {_FAMILIES[family][1]} parameter(s), "
            f"got {len(params)}"
        )
    dist = Distribution(family, params)
    dist.frozen()  # validates the parameter values
    return dist


def sample_matrix(distribution, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Draw a matrix (or a batch of matrices) with iid entries.

    Parameters
    ----------
    distribution : str, Distribution or scipy.stats frozen distribution
        Entry distribution.
    shape : tuple of int
        Output shape, e.g. ``(n, m)`` or ``(batch, n, m)``.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray of float64
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    frozen = distribution
    if isinstance(distribution, str | Distribution):
        frozen = parse_distribution(distribution).frozen()
    # The inverse-CDF samplers can round to a hair outside the support: clip back.
    return np.clip(np.asarray(frozen.rvs(size=shape, random_state=rng), dtype=np.float64), 0, 1)


def noisy_sort(W, s: float, rng: np.random.Generator) -> np.ndarray:
    """Reorder the entries of ``W`` by the noisy sorting process (Appendix E.1, ~line 1133).

    ``W_noise = W + s * eps`` with ``eps`` iid standard normal. The permutation pi maps the
    k-th position in row-major ("index") order to the entry with the k-th smallest value of
    ``W_noise``, so ``W_sort.flat[k] = W.flat[argsort(W_noise.flat)[k]]``. With ``s = 0`` the
    result is ``W`` sorted ascending in row-major order (large entries on the bottom rows);
    for large ``s`` it approaches a uniformly random permutation of ``W``.

    Parameters
    ----------
    W : array-like of shape (n, m)
        Matrix whose entries are reordered (the multiset of entries is kept).
    s : float
        Noise level (standard deviation of the added Gaussian noise), >= 0.
    rng : numpy.random.Generator
        Source of the noise.

    Returns
    -------
    numpy.ndarray of shape (n, m)

    Notes
    -----
    Ties in ``W_noise`` (only possible for ``s = 0`` with repeated entries) are broken by
    index order (stable sort), which the paper leaves open.

    Examples
    --------
    >>> W = np.array([[3.0, 1.0], [0.0, 2.0]])
    >>> noisy_sort(W, 0.0, np.random.default_rng(0))
    array([[0., 1.],
           [2., 3.]])
    """
    W = as_float_array(W, "W", ndim=2)
    s = float(s)
    if not (math.isfinite(s) and s >= 0):
        raise ValueError(f"s must be a finite number >= 0, got {s!r}")
    flat = W.ravel()
    noisy = flat + s * rng.standard_normal(flat.shape) if s > 0 else flat
    order = np.argsort(noisy, kind="stable")
    return flat[order].reshape(W.shape)
