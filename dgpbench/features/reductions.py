"""Model-free reductions of "Failing loudly": the pixels (NoRed), PCA and sparse random projection.

None of them needs the classifier: ``model`` is accepted (and ignored) so every
representation is built as ``Cls(model, **params)``. PCA and SRP are scikit-learn's own
estimators, seeded; their dimension follows Rabanser et al.'s ``ShiftReductor``: the number
of principal components that keep 80% of the variance of the fit images.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.random_projection import SparseRandomProjection
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import Interval, fit_context
from dgpbench.features.base import WORKFLOW_CONSTRAINTS
from dgpbench.features.network import _flatten_images

__all__ = [
    "ImageFeatures",
    "NoRedFeatures",
    "PCAFeatures",
    "SRPFeatures",
    "flatten_images",
    "variance_dimension",
]


def flatten_images(X: Any) -> np.ndarray:
    """Images ``(N, C, H, W)`` / ``(N, H, W)`` (numpy or torch) or rows ``(N, D)`` -> ``(N, D)``.

    Channels-first order, as :mod:`dgpbench.data.datasets` and the MLP transformers use.
    """
    return _flatten_images(X)


def variance_dimension(X: np.ndarray, variance: float) -> int:
    """Number of principal components keeping ``variance`` of the variance of ``X``.

    ``PCA(n_components=variance, svd_solver="full")``, as "Failing loudly" sets its
    reduced dimension.
    """
    return int(PCA(n_components=variance, svd_solver="full").fit(X).n_components_)


class _Reduction(TransformerMixin, BaseEstimator):
    """Shared: the workflow parameters, flattening and validation of images."""

    _prefix: ClassVar[str] = "red"
    _parameter_constraints: ClassVar[dict] = dict(WORKFLOW_CONSTRAINTS)

    def _validate(self, X: Any, *, reset: bool) -> np.ndarray:
        return validate_data(self, flatten_images(X), reset=reset, dtype=np.float64)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names ``<method><k>`` of the output columns."""
        check_is_fitted(self)
        return np.asarray([f"{self._prefix}{k}" for k in range(self._n_features_out)], dtype=object)


class NoRedFeatures(_Reduction):
    """No reduction ("NoRed"): the flattened pixels themselves.

    Parameters
    ----------
    model : ignored, default=None
        Accepted for the uniform ``Cls(model, **params)`` interface.
    batch_size, n_jobs, progress, device
        The workflow's parameters; unused.

    Attributes
    ----------
    n_features_in_ : int
        Number of pixels.

    Examples
    --------
    >>> import numpy as np
    >>> NoRedFeatures().fit_transform(np.zeros((2, 1, 2, 2))).shape
    (2, 4)
    """

    _prefix = "pixel"

    def __init__(
        self,
        model: Any = None,
        *,
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.progress = progress
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> NoRedFeatures:
        """Record the number of pixels of the reference images ``X``."""
        X = self._validate(X, reset=True)
        self._n_features_out = X.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Return the flattened images, float64, shape ``(n, n_features_in_)``."""
        check_is_fitted(self)
        return self._validate(X, reset=False)


class ImageFeatures(NoRedFeatures):
    """The images themselves, in the shape of the reference images: the input of the domain
    classifier test (:class:`dgpbench.detectors.ClassifierShiftDetector`), which trains a
    CNN on image batches and an MLP on flat ones.

    Parameters
    ----------
    model : ignored, default=None
        Accepted for the uniform ``Cls(model, **params)`` interface.
    batch_size, n_jobs, progress, device
        The workflow's parameters; unused.

    Attributes
    ----------
    image_shape_ : tuple of int
        One reference image's shape (``(C, H, W)``, or ``(D,)`` for flat rows).
    n_features_in_ : int
        Number of pixels.

    Examples
    --------
    >>> import numpy as np
    >>> ImageFeatures().fit_transform(np.zeros((2, 1, 2, 2))).shape
    (2, 1, 2, 2)
    """

    _prefix = "image"

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> ImageFeatures:
        """Record the shape of the reference images ``X``."""
        super().fit(X)
        self.image_shape_ = tuple(int(s) for s in np.shape(X)[1:])
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Return the images as float64, in the reference images' shape."""
        flat = super().transform(X)
        return flat.reshape(len(flat), *self.image_shape_)


class PCAFeatures(_Reduction):
    """Principal components of the images ("PCA" in "Failing loudly").

    Parameters
    ----------
    model : ignored, default=None
        Accepted for the uniform interface.
    n_components : int or float, default=0.8
        As in ``sklearn.decomposition.PCA``: a float in (0, 1) keeps that share of the
        variance of the fit images (Rabanser et al.: 0.8), an int that many components.
    random_state : int, RandomState instance or None, default=0
        Passed to PCA (used only by randomised solvers).
    batch_size, n_jobs, progress, device
        The workflow's parameters; unused.

    Attributes
    ----------
    pca_ : sklearn.decomposition.PCA
        The fitted PCA (``svd_solver="full"``).
    n_features_in_ : int
        Number of pixels.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 6))
    >>> PCAFeatures(n_components=2).fit(X).transform(X).shape
    (50, 2)
    """

    _prefix = "pca"
    _parameter_constraints: ClassVar[dict] = {
        **_Reduction._parameter_constraints,
        "n_components": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="neither"),
        ],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any = None,
        *,
        n_components: float = 0.8,
        random_state: Any = 0,
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.n_components = n_components
        self.random_state = random_state
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.progress = progress
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> PCAFeatures:
        """Fit the principal components of the reference images ``X``."""
        X = self._validate(X, reset=True)
        self.pca_ = PCA(
            n_components=self.n_components, svd_solver="full", random_state=self.random_state
        ).fit(X)
        self._n_features_out = int(self.pca_.n_components_)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` on the components: shape ``(n, pca_.n_components_)``."""
        check_is_fitted(self)
        return self.pca_.transform(self._validate(X, reset=False))


class SRPFeatures(_Reduction):
    """Sparse random projection of the images ("SRP" in "Failing loudly").

    Parameters
    ----------
    model : ignored, default=None
        Accepted for the uniform interface.
    n_components : int or None, default=None
        Target dimension; ``None``: PCA's 80%-variance dimension of the fit images (the
        dimension "Failing loudly" uses for every reduction).
    variance : float, default=0.8
        The share of variance that sets the dimension when ``n_components`` is None.
    random_state : int, RandomState instance or None, default=0
        Seed of the projection matrix.
    batch_size, n_jobs, progress, device
        The workflow's parameters; unused.

    Attributes
    ----------
    srp_ : sklearn.random_projection.SparseRandomProjection
        The fitted projection (``dense_output=True``).
    n_features_in_ : int
        Number of pixels.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 6))
    >>> SRPFeatures(n_components=3).fit(X).transform(X).shape
    (50, 3)
    """

    _prefix = "srp"
    _parameter_constraints: ClassVar[dict] = {
        **_Reduction._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "variance": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any = None,
        *,
        n_components: int | None = None,
        variance: float = 0.8,
        random_state: Any = 0,
        batch_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.n_components = n_components
        self.variance = variance
        self.random_state = random_state
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.progress = progress
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> SRPFeatures:
        """Draw the projection for the reference images ``X``."""
        X = self._validate(X, reset=True)
        k = self.n_components or variance_dimension(X, self.variance)
        self.srp_ = SparseRandomProjection(
            n_components=k, dense_output=True, random_state=self.random_state
        ).fit(X)
        self._n_features_out = int(k)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X``: shape ``(n, srp_.n_components_)``."""
        check_is_fitted(self)
        return np.asarray(self.srp_.transform(self._validate(X, reset=False)), dtype=np.float64)
