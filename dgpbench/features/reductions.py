"""Model-free reductions of "Failing loudly": the pixels (NoRed), PCA and sparse random projection.

None of them reads the classifier, so none takes a ``model`` (the registry passes each
class the parameters its signature names). PCA and SRP are scikit-learn's own
estimators, seeded; their dimension follows Rabanser et al.'s ``ShiftReductor``: the number
of principal components that keep 80% of the variance of the fit images.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.random_projection import SparseRandomProjection
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench.features.network import flatten_images
from dgpbench.parameters import PCA_RULES, SRP_RULES, sklearn_constraints

__all__ = [
    "ImageFeatures",
    "NoRedFeatures",
    "PCAFeatures",
    "SRPFeatures",
    "variance_dimension",
]


def variance_dimension(X: np.ndarray, variance: float) -> int:
    """Number of principal components keeping ``variance`` of the variance of ``X``.

    ``PCA(n_components=variance, svd_solver="full")``, as "Failing loudly" sets its
    reduced dimension.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The rows whose variance is kept.
    variance : float
        The share of the variance to keep, in (0, 1).

    Returns
    -------
    int
        The number of components.
    """
    return int(PCA(n_components=variance, svd_solver="full").fit(X).n_components_)


class _Reduction(TransformerMixin, BaseEstimator):
    """Shared: flattening and validation of images."""

    _prefix: ClassVar[str] = "red"
    _parameter_constraints: ClassVar[dict] = {}

    def _validate(self, X: Any, *, reset: bool) -> np.ndarray:
        return validate_data(self, flatten_images(X), reset=reset, dtype=np.float64)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names ``<method><k>`` of the output columns.

        Parameters
        ----------
        input_features : ignored
            Present for API consistency.

        Returns
        -------
        ndarray of str
            One name per output column.
        """
        check_is_fitted(self)
        return np.asarray([f"{self._prefix}{k}" for k in range(self._n_features_out)], dtype=object)

    # -- saved state (dgpbench.saved) ------------------------------------------------------
    #: The fitted attributes :meth:`get_state` stores, and the keys of its JSON state.
    _state_attributes: ClassVar[frozenset[str]] = frozenset(("n_features_in_", "_n_features_out"))
    _state_keys: ClassVar[tuple[str, ...]] = ("n_features_in_", "n_features_out")

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state as JSON values and arrays (see :mod:`dgpbench.state`).

        Returns
        -------
        state : dict
            The input and output widths (and a subclass's JSON values).
        arrays : dict of str to ndarray
            A subclass's fitted arrays (none for NoRed).

        Raises
        ------
        TypeError
            If the transformer holds state this method does not store.
        """
        from dgpbench.state import check_attributes

        check_attributes(self, self._state_attributes)
        state = {
            "n_features_in_": int(self.n_features_in_),
            "n_features_out": int(self._n_features_out),
        }
        return state, {}

    def set_state(self, state: dict[str, Any], arrays: Any) -> _Reduction:
        """Restore the state :meth:`get_state` gave, checking every value.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The arrays, read on demand.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit another value.
        """
        from dgpbench.state import check_keys, state_int

        check_keys(state, self._state_keys)
        self.n_features_in_ = state_int(state["n_features_in_"], "n_features_in_", 1)
        self._n_features_out = state_int(state["n_features_out"], "n_features_out", 1)
        return self


class NoRedFeatures(_Reduction):
    """No reduction ("NoRed"): the flattened pixels themselves.

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

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> NoRedFeatures:
        """Record the number of pixels of the reference images ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Reference images, flattened to rows.
        y : ignored
            Present for API consistency.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        X = self._validate(X, reset=True)
        self._n_features_out = X.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Return the flattened images.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Images of the reference images' size.

        Returns
        -------
        ndarray of shape (n, n_features_in_)
            The pixels as float64.
        """
        check_is_fitted(self)
        return self._validate(X, reset=False)

    def set_state(self, state: dict[str, Any], arrays: Any) -> NoRedFeatures:
        """Restore the state :meth:`get_state` gave: as many outputs as inputs.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The arrays, read on demand.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit another value.
        """
        from dgpbench.state import StateError

        super().set_state(state, arrays)
        k, d = self._n_features_out, self.n_features_in_
        if k != d:  # the pixels themselves
            raise StateError(f"n_features_out = {k}, but NoRed returns its {d} inputs")
        return self


class ImageFeatures(NoRedFeatures):
    """The images themselves, in the shape of the reference images: the input of the domain
    classifier test (:class:`dgpbench.detectors.ClassifierShiftDetector`), which trains a
    CNN on image batches and an MLP on flat ones.

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
        """Record the shape of the reference images ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Reference images (or flat rows).
        y : ignored
            Present for API consistency.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        super().fit(X)
        self.image_shape_ = tuple(int(s) for s in np.shape(X)[1:])
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Return the images as float64, in the reference images' shape.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Images of the reference images' size.

        Returns
        -------
        ndarray of shape (n, *image_shape_)
            The images.
        """
        flat = super().transform(X)
        return flat.reshape(len(flat), *self.image_shape_)

    _state_attributes = NoRedFeatures._state_attributes | {"image_shape_"}
    _state_keys = (*NoRedFeatures._state_keys, "image_shape_")

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state: NoRed's and the reference images' shape."""
        state, arrays = super().get_state()
        state["image_shape_"] = [int(v) for v in self.image_shape_]
        return state, arrays

    def set_state(self, state: dict[str, Any], arrays: Any) -> ImageFeatures:
        """Restore the state :meth:`get_state` gave: an image shape holding every pixel.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The arrays, read on demand.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit another value.
        """
        from dgpbench.state import StateError, state_shape

        super().set_state(state, arrays)
        self.image_shape_ = state_shape(state["image_shape_"], "image_shape_", optional=False)
        if math.prod(self.image_shape_) != self.n_features_in_:
            raise StateError(
                f"image_shape_ {self.image_shape_} does not hold {self.n_features_in_} pixels"
            )
        return self


class PCAFeatures(_Reduction):
    """Principal components of the images ("PCA" in "Failing loudly").

    Parameters
    ----------
    n_components : int or float, default=0.8
        As in ``sklearn.decomposition.PCA``: a float in (0, 1) keeps that share of the
        variance of the fit images (Rabanser et al.: 0.8), an int that many components.
    random_state : int, RandomState instance or None, default=0
        Passed to PCA (used only by randomised solvers).

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
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(PCA_RULES)

    def __init__(
        self,
        *,
        n_components: float = 0.8,
        random_state: Any = 0,
    ) -> None:
        self.n_components = n_components
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> PCAFeatures:
        """Fit the principal components of the reference images ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Reference images, flattened to rows.
        y : ignored
            Present for API consistency.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        X = self._validate(X, reset=True)
        self.pca_ = PCA(
            n_components=self.n_components, svd_solver="full", random_state=self.random_state
        ).fit(X)
        self._n_features_out = int(self.pca_.n_components_)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` on the principal components.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Images of the reference images' size.

        Returns
        -------
        ndarray of shape (n, pca_.n_components_)
            The projections.
        """
        check_is_fitted(self)
        return self.pca_.transform(self._validate(X, reset=False))

    _state_attributes = _Reduction._state_attributes | {"pca_"}

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state: the widths and the PCA's components, mean and variances."""
        state, arrays = super().get_state()
        for key in ("components_", "mean_", "explained_variance_"):
            arrays[f"pca/{key}"] = np.asarray(getattr(self.pca_, key))
        return state, arrays

    def set_state(self, state: dict[str, Any], arrays: Any) -> PCAFeatures:
        """Restore the state :meth:`get_state` gave: finite arrays of consistent shapes.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The arrays, read on demand.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit another value.
        """
        from dgpbench.state import StateError, state_array

        super().set_state(state, arrays)
        d, k = self.n_features_in_, self._n_features_out
        comp = state_array(arrays["pca/components_"], "pca components_", ndim=2)
        mean = state_array(arrays["pca/mean_"], "pca mean_", ndim=1)
        var = state_array(arrays["pca/explained_variance_"], "pca explained_variance_", ndim=1)
        if comp.shape != (k, d) or mean.shape != (d,) or var.shape != (k,) or (var < 0).any():
            raise StateError(f"PCA arrays do not fit {d} inputs and {k} components")
        pca = PCA(n_components=self.n_components, svd_solver="full", random_state=self.random_state)
        pca.components_, pca.mean_, pca.explained_variance_ = comp, mean, var
        pca.n_components_, pca.n_features_in_ = k, d
        self.pca_ = pca
        return self


class SRPFeatures(_Reduction):
    """Sparse random projection of the images ("SRP" in "Failing loudly").

    Parameters
    ----------
    n_components : int or None, default=None
        Target dimension; ``None``: PCA's 80%-variance dimension of the fit images (the
        dimension "Failing loudly" uses for every reduction).
    variance : float, default=0.8
        The share of variance that sets the dimension when ``n_components`` is None.
    random_state : int, RandomState instance or None, default=0
        Seed of the projection matrix.

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
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(SRP_RULES)

    def __init__(
        self,
        *,
        n_components: int | None = None,
        variance: float = 0.8,
        random_state: Any = 0,
    ) -> None:
        self.n_components = n_components
        self.variance = variance
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> SRPFeatures:
        """Draw the projection for the reference images ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Reference images, flattened to rows.
        y : ignored
            Present for API consistency.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        X = self._validate(X, reset=True)
        k = self.n_components or variance_dimension(X, self.variance)
        self.srp_ = SparseRandomProjection(
            n_components=k, dense_output=True, random_state=self.random_state
        ).fit(X)
        self._n_features_out = int(k)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` with the random projection.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_samples, H, W) or (n_samples, C, H, W)
            Images of the reference images' size.

        Returns
        -------
        ndarray of shape (n, srp_.n_components_)
            The projections, float64.
        """
        check_is_fitted(self)
        return np.asarray(self.srp_.transform(self._validate(X, reset=False)), dtype=np.float64)

    _state_attributes = _Reduction._state_attributes | {"srp_"}
    _state_keys = (*_Reduction._state_keys, "srp_sparse", "srp_density")

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state: the widths and the projection matrix (CSR arrays if sparse)."""
        state, arrays = super().get_state()
        comp = self.srp_.components_
        sparse = hasattr(comp, "tocsr")
        if sparse:
            comp = comp.tocsr()
            arrays.update(
                {"srp/data": comp.data, "srp/indices": comp.indices, "srp/indptr": comp.indptr}
            )
        else:
            arrays["srp/dense"] = np.asarray(comp)
        state["srp_sparse"] = sparse
        state["srp_density"] = float(self.srp_.density_)
        return state, arrays

    def set_state(self, state: dict[str, Any], arrays: Any) -> SRPFeatures:
        """Restore the state :meth:`get_state` gave: a well-formed matrix of the right shape.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The arrays, read on demand.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit another value.
        """
        import scipy.sparse

        from dgpbench.state import StateError, state_array

        super().set_state(state, arrays)
        d, k = self.n_features_in_, self._n_features_out
        if state["srp_sparse"]:
            data = state_array(arrays["srp/data"], "srp data", ndim=1)
            indices = state_array(arrays["srp/indices"], "srp indices", kinds="iu", ndim=1)
            indptr = state_array(arrays["srp/indptr"], "srp indptr", kinds="iu", ndim=1)
            try:
                comp = scipy.sparse.csr_matrix((data, indices, indptr), shape=(k, d))
                comp.check_format(full_check=True)
            except ValueError as exc:
                raise StateError(f"the random projection is malformed ({exc})") from exc
        else:
            comp = state_array(arrays["srp/dense"], "srp components", ndim=2)
            if comp.shape != (k, d):
                raise StateError(f"the random projection does not fit {d} inputs and {k} outputs")
        density = state["srp_density"]
        if not isinstance(density, float) or not 0 < density <= 1:
            raise StateError(f"srp density must be in (0, 1], got {density!r}")
        srp = SparseRandomProjection(
            n_components=k, dense_output=True, random_state=self.random_state
        )
        srp.components_, srp.n_components_, srp.density_, srp.n_features_in_ = comp, k, density, d
        self.srp_ = srp
        return self
