"""Domain-classifier test ("Classif" in "Failing loudly"): can a classifier tell batches apart.

The reference and the test batch are balanced (the larger one is subsampled to the smaller
one's size), each is split in two halves at random, a classifier learns "reference (0) vs
test (1)" on the first halves and predicts the second halves. Under no shift its held-out
accuracy is that of a coin: the test is ``scipy.stats.binomtest`` of the number of correct
predictions against probability 1/2.

The test trains its own network on the images (or any scikit-learn classifier on the
flattened inputs); it never sees the user's model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.sparse import issparse
from scipy.stats import binomtest
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench._device import resolve_device
from dgpbench.detectors.base import (
    BatchDecisionMixin,
    ReferenceState,
    ShiftTestResult,
    check_min_samples,
    package_version,
)
from dgpbench.parameters import CLASSIFIER_RULES, sklearn_constraints

__all__ = ["ClassifierShiftDetector"]


def _network(sample_shape: tuple[int, ...], generator_seed: int):
    """The default domain classifier: a small CNN for images, a one-hidden-layer MLP else.

    "Failing loudly" trains a ResNet-18 for this; a two-block CNN keeps the test cheap
    enough to run per batch on a CPU (a choice of ours, documented in docs/toolbox.md).
    """
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(generator_seed)
        if len(sample_shape) == 3 and min(sample_shape[1:]) >= 4:
            c = sample_shape[0]
            return nn.Sequential(
                nn.Conv2d(c, 16, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(32, 2),
            )
        d = int(np.prod(sample_shape))
        return nn.Sequential(nn.Flatten(), nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 2))


def _train_predict(
    X_tr: np.ndarray,
    y_tr: np.ndarray,
    X_te: np.ndarray,
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    device: Any,
) -> np.ndarray:
    """Train the default network (Adam, cross-entropy, seeded) and predict ``X_te``."""
    import torch

    net = _network(X_tr.shape[1:], seed).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=learning_rate)
    gen = torch.Generator().manual_seed(seed)
    xt = torch.as_tensor(X_tr, dtype=torch.float32, device=device)
    yt = torch.as_tensor(y_tr, dtype=torch.long, device=device)
    net.train()
    for _ in range(epochs):
        order = torch.randperm(len(xt), generator=gen).to(device)
        for start in range(0, len(xt), batch_size):
            idx = order[start : start + batch_size]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        xe = torch.as_tensor(X_te, dtype=torch.float32, device=device)
        return net(xe).argmax(dim=1).cpu().numpy()


class ClassifierShiftDetector(BatchDecisionMixin, ReferenceState, BaseEstimator):
    """Domain-classifier two-sample test with a binomial p-value ("Failing loudly"'s Classif).

    Parameters
    ----------
    alpha : float, default=0.05
        Significance level in (0, 1).
    classifier : scikit-learn classifier or None, default=None
        ``None``: a small torch network trained here (a CNN for image batches, an MLP for
        flat ones). Any scikit-learn classifier is cloned per test and fitted on the
        flattened inputs (its ``random_state``, if it has one and it is None, is seeded).
    epochs : int, default=10
        Training epochs of the default network; at most
        :data:`~dgpbench.parameters.MAX_EPOCHS` (1000).
    batch_size : int, default=64
        Minibatch size of the default network.
    learning_rate : float, default=1e-3
        Adam's learning rate for the default network, in (0, 10]
        (:data:`~dgpbench.parameters.MAX_LEARNING_RATE`).
    alternative : {"greater", "two-sided"}, default="greater"
        ``"greater"``: only an accuracy above chance is evidence of shift. "Failing loudly"
        uses the two-sided test.
    random_state : int, RandomState instance or None, default=None
        Seed of the balancing, the halves and the training.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the default network trains.

    Attributes
    ----------
    X_ref_ : ndarray of shape (n_ref, ...)
        The reference batch, as given (images or flat rows), as float32.
    n_features_in_ : int
        Number of values per sample (pixels).

    Notes
    -----
    Under no shift the classifier is independent of the held-out half, whose labels are
    half 0 and half 1, so the number of correct predictions is (at most as dispersed as) a
    Binomial(n, 1/2): the binomial test's level holds (the calibration test checks it).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> det = ClassifierShiftDetector(classifier=LogisticRegression(), random_state=0)
    >>> det = det.fit(rng.normal(size=(200, 5)))
    >>> det.predict(rng.normal(loc=1.0, size=(200, 5)))
    True
    """

    _parameter_constraints: dict = sklearn_constraints(CLASSIFIER_RULES)
    #: The test's name in the registry (``fit --test``).
    test_name = "classif"

    def __init__(
        self,
        alpha: float = 0.05,
        classifier: Any = None,
        *,
        epochs: int = 10,
        batch_size: int = 64,
        learning_rate: float = 1e-3,
        alternative: str = "greater",
        random_state: Any = None,
        device: str = "cpu",
    ) -> None:
        self.alpha = alpha
        self.classifier = classifier
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.alternative = alternative
        self.random_state = random_state
        self.device = device

    def _validate(self, X: Any, *, reset: bool, name: str) -> np.ndarray:
        if issparse(X) or np.ndim(X) < 2:  # scikit-learn's own errors (sparse, 1-D)
            validate_data(self, X, reset=reset, dtype=np.float32)
        arr = X.detach().cpu().numpy() if hasattr(X, "detach") else np.asarray(X)
        if arr.ndim >= 2 and len(arr) == 0:  # before the reshape, which cannot infer -1 of 0
            what = "reference batch" if reset else "batch under test"
            raise ValueError(
                f"{name} (the {what}) is empty, shape {arr.shape}: the classifier test needs "
                "at least 4 samples (two per half); pass a batch with images"
            )
        if arr.ndim > 4:
            raise ValueError(
                f"{name} must be (n, d) features or (n, H, W) / (n, C, H, W) images, got "
                f"shape {arr.shape}"
            )
        flat = validate_data(self, arr.reshape(len(arr), -1), reset=reset, dtype=np.float32)
        if not reset and arr.shape[1:] != self.X_ref_.shape[1:]:
            raise ValueError(
                f"{name} has samples of shape {arr.shape[1:]} but the reference has "
                f"{self.X_ref_.shape[1:]}"
            )
        return flat.reshape(arr.shape)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X_ref: Any, y: None = None) -> ClassifierShiftDetector:
        """Store the reference batch.

        Parameters
        ----------
        X_ref : array-like of shape (n_ref, d), (n_ref, H, W) or (n_ref, C, H, W)
            At least 4 finite samples (two per half).
        y : None
            Ignored.

        Returns
        -------
        self : ClassifierShiftDetector
        """
        X = self._validate(X_ref, reset=True, name="X_ref")
        check_min_samples(len(X), 4, "X_ref", "each half needs two samples")
        self.X_ref_ = np.array(X, dtype=np.float32, copy=True)
        return self

    def test(self, X: Any) -> ShiftTestResult:
        """Train the domain classifier on half of each batch and test it on the other half.

        Parameters
        ----------
        X : array-like, same sample shape as the reference
            At least 4 finite samples.

        Returns
        -------
        ShiftTestResult
            ``statistic`` = held-out accuracy, ``p_val`` = binomial p-value; ``details``
            hold ``n_correct`` and ``n_test`` (held-out predictions).
        """
        check_is_fitted(self)
        X = self._validate(X, reset=False, name="X")
        check_min_samples(len(X), 4, "X", "each half needs two samples")
        rs = check_random_state(self.random_state)
        rng = np.random.default_rng(rs.randint(2**31 - 1))
        k = min(len(self.X_ref_), len(X))
        ref = self.X_ref_[rng.permutation(len(self.X_ref_))[:k]]
        new = X[rng.permutation(len(X))[:k]]
        h = k // 2
        x_tr = np.concatenate([ref[:h], new[:h]])
        y_tr = np.repeat([0, 1], h)
        x_te = np.concatenate([ref[h:], new[h:]])
        y_te = np.repeat([0, 1], k - h)
        order = rng.permutation(len(x_tr))
        x_tr, y_tr = x_tr[order], y_tr[order]
        seed = int(rng.integers(2**31 - 1))
        if self.classifier is None:
            pred = _train_predict(
                x_tr,
                y_tr,
                x_te,
                seed=seed,
                epochs=self.epochs,
                batch_size=self.batch_size,
                learning_rate=self.learning_rate,
                device=resolve_device(self.device),
            )
        else:
            clf = clone(self.classifier)
            if "random_state" in clf.get_params() and clf.get_params()["random_state"] is None:
                clf.set_params(random_state=seed)
            clf.fit(x_tr.reshape(len(x_tr), -1), y_tr)
            pred = np.asarray(clf.predict(x_te.reshape(len(x_te), -1)))
        correct = int(np.count_nonzero(pred == y_te))
        n_test = len(y_te)
        p_val = float(binomtest(correct, n_test, 0.5, alternative=self.alternative).pvalue)
        return ShiftTestResult(
            is_drift=bool(p_val < self.alpha),
            statistic=correct / n_test,
            p_val=p_val,
            threshold=float(self.alpha),
            alpha=float(self.alpha),
            n_ref=len(self.X_ref_),
            n=len(X),
            name=type(self).__name__,
            version=package_version(),
            details={"n_correct": correct, "n_test": n_test, "alternative": self.alternative},
        )
