"""Learned deep-kernel MMD (MMD-D, Liu et al. 2020), as alibi-detect's ``LearnedKernelDrift``.

Each test splits the reference and the batch alike (``train_size`` of each, drawn at
random) into a training part and a held-out part, trains a kernel on the training parts to
maximise the test-power proxy ``J = MMD^2_u / sqrt(var + var_reg)`` (Liu et al.'s Eq. 4,
alibi-detect's ``JHat``: ``h = Kxx + Kyy - Kxy - Kyx`` on paired minibatches,
``MMD^2_u = sum_{i != j} h_ij / (n (n - 1))``,
``var = 4 sum_i (sum_j h_ij)^2 / n^3 - 4 (sum h)^2 / n^4``), and runs a permutation test of
the unbiased MMD^2 on the held-out parts. As in alibi-detect (``retrain_from_scratch=True``)
every test starts from the same initial kernel, which ``fit`` draws and the detector file
stores.

The kernel is alibi-detect's ``DeepKernel``::

    k(a, b) = (1 - eps) exp(-|phi(a) - phi(b)|^2 / (2 s_a^2)) + eps exp(-|a - b|^2 / (2 s_b^2))

with ``phi`` a small network (``Linear(d, hidden) - ReLU - Linear(hidden, out)``), ``eps``
the sigmoid of a trained logit (0 at the start) and both bandwidths trained, initialised by
the median heuristic on the first minibatch (:func:`~dgpbench.detectors.lsdd.median_sigma_alibi`).
Training: Adam, ``epochs`` passes over the shuffled training parts in minibatches of
``batch_size`` (the last, incomplete one dropped), as alibi-detect's trainer. The held-out
permutation test reuses the kernel matrix for every permutation (indicator products, as
:class:`~dgpbench.detectors.mmd.MMDShiftDetector`); its p-value counts the observed split.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench._device import resolve_device
from dgpbench.detectors.base import BatchDecisionMixin, ShiftTestResult
from dgpbench.detectors.lsdd import median_sigma_alibi
from dgpbench.detectors.mmd import (
    _statistics,
    _tie_tolerance,
    permutation_result,
    permutation_splits,
)
from dgpbench.parameters import MMD_DEEP_RULES, sklearn_constraints

__all__ = ["DeepKernelMMDShiftDetector", "j_hat"]

#: The network's parameters in the detector file, in ``phi``'s order.
_WEIGHTS = ("phi_0_weight", "phi_0_bias", "phi_2_weight", "phi_2_bias")


def j_hat(K_xx: Any, K_yy: Any, K_xy: Any, var_reg: float = 1e-5) -> Any:
    """Liu et al.'s test-power proxy ``MMD^2_u / sqrt(var + var_reg)`` of paired samples.

    Parameters
    ----------
    K_xx, K_yy, K_xy : torch.Tensor of shape (n, n)
        Kernel matrices within and between two samples of equal size ``n``.
    var_reg : float, default=1e-5
        Added to the variance estimate for stability.

    Returns
    -------
    torch.Tensor
        A scalar (differentiable).
    """
    h = K_xx + K_yy - K_xy - K_xy.t()
    n = len(h)
    mmd2 = (h.sum() - h.trace()) / (n * (n - 1))
    var = 4 * h.sum(-1).square().sum() / n**3 - 4 * h.sum().square() / n**4
    return mmd2 / (var + var_reg).sqrt()


def _sq_dist(a: Any, b: Any) -> Any:
    """Squared distances (alibi-detect's ``squared_pairwise_distance``, clamped at 1e-30)."""
    d2 = (a * a).sum(-1)[:, None] + (b * b).sum(-1)[None, :] - 2.0 * a @ b.T
    return d2.clamp_min(1e-30)


class _DeepKernel:
    """The kernel's trainable state and its evaluation (a plain holder of torch tensors)."""

    def __init__(self, phi: Any, device: Any) -> None:
        import torch

        self.phi = phi.to(device)
        self.log_sigma_a = torch.zeros(1, dtype=torch.float64, device=device, requires_grad=True)
        self.log_sigma_b = torch.zeros(1, dtype=torch.float64, device=device, requires_grad=True)
        self.logit_eps = torch.zeros((), dtype=torch.float64, device=device, requires_grad=True)
        self.initialised = False

    def parameters(self) -> list:
        return [*self.phi.parameters(), self.log_sigma_a, self.log_sigma_b, self.logit_eps]

    def __call__(self, a: Any, b: Any) -> Any:
        import torch

        pa, pb = self.phi(a), self.phi(b)
        if not self.initialised:  # the median heuristic on the first call (a with itself)
            with torch.no_grad():
                for log_sigma, x in ((self.log_sigma_a, pa), (self.log_sigma_b, a)):
                    sigma = median_sigma_alibi(x.detach().cpu().numpy())
                    log_sigma.fill_(math.log(max(sigma, 1e-15)))
            self.initialised = True
        eps = torch.sigmoid(self.logit_eps)
        k_a = torch.exp(-_sq_dist(pa, pb) / (2.0 * torch.exp(self.log_sigma_a) ** 2))
        k_b = torch.exp(-_sq_dist(a, b) / (2.0 * torch.exp(self.log_sigma_b) ** 2))
        return (1 - eps) * k_a + eps * k_b


class DeepKernelMMDShiftDetector(BatchDecisionMixin, BaseEstimator):
    """MMD test with a learned deep kernel (MMD-D), as alibi-detect's ``LearnedKernelDrift``.

    ``fit`` stores the reference batch and draws the initial network; ``test`` trains the
    kernel on ``train_size`` of the reference and of the batch and runs the permutation MMD
    test on the rest (module docstring). Its p-value is
    ``(1 + #{b : MMD^2_b >= MMD^2}) / (1 + B)`` (alibi-detect's leaves the observed
    statistic out); with at most ``B`` splits of the held-out rows, all are enumerated.

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    n_permutations : int, default=1000
        Number ``B`` of random splits of the held-out rows (alibi-detect's default: 100).
    train_size : float, default=0.75
        Share of each sample the kernel is trained on (``int(n * train_size)`` rows).
    hidden : int, default=32
        Width of the network's hidden layer.
    out_features : int, default=8
        Width of the network's output (the features the kernel compares).
    epochs : int, default=3
        Passes over the training parts (alibi-detect's default).
    batch_size : int, default=32
        Minibatch size (capped at the smaller training part).
    learning_rate : float, default=1e-3
        Adam's learning rate.
    var_reg : float, default=1e-5
        Added to the variance in the training objective.
    random_state : int, RandomState instance or None, default=None
        Seed of the initial network (in ``fit``), and of the splits, minibatches and
        permutations (in ``test``). An int gives the same p-value on every call.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where torch trains the kernel.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, n_features_in_)
        A copy of the reference batch.
    n_features_in_ : int
        Number of features seen during ``fit``.
    initial_weights_ : dict of str to ndarray
        The network's initial parameters (each test trains a copy).

    See Also
    --------
    MMDShiftDetector : The Gaussian-kernel MMD with the median bandwidth.

    References
    ----------
    F. Liu, W. Xu, J. Lu, G. Zhang, A. Gretton, D. J. Sutherland. Learning Deep Kernels for
    Non-Parametric Two-Sample Tests. ICML 2020.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> det = DeepKernelMMDShiftDetector(n_permutations=99, random_state=0)
    >>> det = det.fit(rng.normal(size=(120, 3)))
    >>> det.predict(rng.normal(loc=1.0, size=(120, 3)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(MMD_DEEP_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "mmd_deep"

    def __init__(
        self,
        alpha: float = 0.05,
        n_permutations: int = 1000,
        train_size: float = 0.75,
        hidden: int = 32,
        out_features: int = 8,
        epochs: int = 3,
        batch_size: int = 32,
        learning_rate: float = 1e-3,
        var_reg: float = 1e-5,
        random_state: Any = None,
        device: str = "cpu",
    ) -> None:
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.train_size = train_size
        self.hidden = hidden
        self.out_features = out_features
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.var_reg = var_reg
        self.random_state = random_state
        self.device = device

    def _seed(self, stream: int) -> list[int]:
        return [int(check_random_state(self.random_state).randint(2**31 - 1)), stream]

    def _network(self, d: int) -> Any:
        import torch

        return torch.nn.Sequential(
            torch.nn.Linear(d, self.hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(self.hidden, self.out_features),
        ).double()

    def _split_sizes(self, n: int, name: str) -> int:
        n_train = int(n * self.train_size)
        if n_train < 2 or n - n_train < 2:
            raise ValueError(
                f"{name} has {n} samples: train_size={self.train_size} leaves {n_train} to "
                f"train the kernel and {n - n_train} to test; this test needs at least 2 of each"
            )
        return n_train

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> DeepKernelMMDShiftDetector:
        """Store the reference batch and draw the initial network.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, n_features)
            Finite samples, at least 2 for training and 2 held out.
        y : None
            Ignored.

        Returns
        -------
        self : DeepKernelMMDShiftDetector
        """
        import torch

        X = validate_data(self, X_ref, reset=True, dtype=np.float64, copy=True)
        self._split_sizes(len(X), "X_ref")
        generator = np.random.default_rng(self._seed(0))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(generator.integers(2**31 - 1)))
            phi = self._network(X.shape[1])
        self.X_ref_ = X
        self.initial_weights_ = {
            name: p.detach().numpy().copy()
            for name, p in zip(_WEIGHTS, phi.parameters(), strict=True)
        }
        return self

    def _train(self, kernel: _DeepKernel, X_tr: Any, Y_tr: Any, rng: np.random.Generator):
        """alibi-detect's trainer: Adam on ``-J`` over paired shuffled minibatches."""
        import torch

        optimizer = torch.optim.Adam(kernel.parameters(), lr=self.learning_rate)
        batch = min(int(self.batch_size), len(X_tr), len(Y_tr))
        steps = min(len(X_tr) // batch, len(Y_tr) // batch)
        for _ in range(int(self.epochs)):
            ix, iy = rng.permutation(len(X_tr)), rng.permutation(len(Y_tr))
            for s in range(steps):
                x = X_tr[ix[s * batch : (s + 1) * batch]]
                y = Y_tr[iy[s * batch : (s + 1) * batch]]
                optimizer.zero_grad()
                k_xx = kernel(x, x)  # first: the bandwidths' median heuristic sees x with x
                loss = -j_hat(k_xx, kernel(y, y), kernel(x, y), self.var_reg)
                loss.backward()
                optimizer.step()

    def test(self, X: Any) -> ShiftTestResult:
        """Train the kernel on part of both samples and test the held-out rows.

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            Test batch; at least 2 samples for training and 2 held out.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = the held-out unbiased MMD^2 under the trained kernel,
            ``p_val`` = its permutation p-value; ``details`` hold ``eps``,
            ``bandwidth_projection``, ``bandwidth_raw``, ``n_ref_test`` and ``n_test``
            (the held-out rows), ``n_permutations``, ``exact`` and ``distance_threshold``.

        Raises
        ------
        ValueError
            If the kernel matrix is not finite (features too large for float64, or a
            diverging training run: lower the learning rate).
        """
        import torch

        check_is_fitted(self)
        Y = validate_data(self, X, reset=False, dtype=np.float64)
        Xr = self.X_ref_
        n_tr_ref = self._split_sizes(len(Xr), "X_ref")
        n_tr = self._split_sizes(len(Y), "X")
        rng = np.random.default_rng(self._seed(1))
        perm_ref, perm_cur = rng.permutation(len(Xr)), rng.permutation(len(Y))
        device = resolve_device(self.device)

        def tensor(a: np.ndarray) -> Any:
            return torch.as_tensor(a, dtype=torch.float64, device=device)

        X_tr, X_te = tensor(Xr[perm_ref[:n_tr_ref]]), tensor(Xr[perm_ref[n_tr_ref:]])
        Y_tr, Y_te = tensor(Y[perm_cur[:n_tr]]), tensor(Y[perm_cur[n_tr:]])
        phi = self._network(Xr.shape[1])
        with torch.no_grad():
            for p, name in zip(phi.parameters(), _WEIGHTS, strict=True):
                p.copy_(torch.as_tensor(self.initial_weights_[name]))
        kernel = _DeepKernel(phi, device)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng.integers(2**31 - 1)))
            self._train(kernel, X_tr, Y_tr, rng)
            with torch.no_grad():
                Z = torch.cat([X_te, Y_te])
                K = kernel(Z, Z)
                K.fill_diagonal_(1.0)  # k(z, z) = 1 exactly, whatever the rounding
        if not torch.isfinite(K).all():
            raise ValueError(
                "the learned kernel is not finite: rescale the features or lower learning_rate"
            )
        n, N, B = len(X_te), len(Z), int(self.n_permutations)
        m = N - n
        subsets, exact, n_splits = permutation_splits(rng, N, n, B)
        ksum = K.sum(dim=1)
        T = ksum.sum()
        stats = []
        for sub in subsets:
            idx = torch.as_tensor(sub, device=device)
            u = torch.zeros((len(sub), N), dtype=torch.float64, device=device)
            u.scatter_(1, idx, 1.0)
            q = ((u @ K) * u).sum(dim=1)
            stats.append(_statistics(q, u @ ksum, T, n, m))
        stats = torch.cat(stats).cpu().numpy()
        obs = float(stats[0])
        at_least = stats >= obs - _tie_tolerance(N, obs)
        settings = {
            "eps": float(torch.sigmoid(kernel.logit_eps.detach())),
            "bandwidth_projection": float(torch.exp(kernel.log_sigma_a.detach())),
            "bandwidth_raw": float(torch.exp(kernel.log_sigma_b.detach())),
            "n_ref_test": n,
            "n_test": m,
        }
        return permutation_result(self, stats, at_least, exact, n_splits, len(Xr), len(Y), settings)

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state: the reference sample and the initial network's parameters.

        Returns
        -------
        state : dict
            Empty.
        arrays : dict of str to ndarray
            ``X_ref_`` and the network's parameters (``phi_0_weight``, ...).
        """
        from dgpbench.state import check_attributes

        check_attributes(self, {"X_ref_", "n_features_in_", "initial_weights_"})
        return {}, {"X_ref_": np.asarray(self.X_ref_), **self.initial_weights_}

    def set_state(self, state: dict[str, Any], arrays: Any) -> DeepKernelMMDShiftDetector:
        """Restore the state :meth:`get_state` gave (checked as untrusted input).

        Parameters
        ----------
        state : dict
            Empty.
        arrays : mapping of str to ndarray
            ``X_ref_`` and the network's parameters.

        Returns
        -------
        self : DeepKernelMMDShiftDetector

        Raises
        ------
        dgpbench.state.StateError
            If an array is missing, not finite numbers, or of a shape other than the
            network's (``hidden``, ``out_features`` and the reference's width give them).
        """
        from dgpbench.state import StateError, check_keys, state_array

        check_keys(state, ())
        X = state_array(arrays["X_ref_"], "X_ref_", kinds="biuf", ndim=2)
        d = X.shape[1]
        shapes = dict(
            zip(
                _WEIGHTS,
                [(self.hidden, d), (self.hidden,), (self.out_features, self.hidden),
                 (self.out_features,)],
                strict=True,
            )
        )  # fmt: skip
        weights = {}
        for name, shape in shapes.items():
            w = state_array(arrays[name], name, kinds="f")
            if w.shape != shape:
                raise StateError(f"{name} has shape {w.shape}, expected {shape}")
            weights[name] = w.astype(np.float64)
        try:
            X = validate_data(self, X, reset=True, dtype=np.float64, copy=True)
            self._split_sizes(len(X), "X_ref")
        except (ValueError, TypeError) as exc:
            raise StateError(f"its reference sample X_ref_ is invalid: {exc}") from exc
        self.X_ref_ = X
        self.initial_weights_ = weights
        return self
