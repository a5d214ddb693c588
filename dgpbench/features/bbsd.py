"""Black-box shift detection (BBSD, Lipton et al. 2018; "Failing loudly"): the classifier's output.

* ``bbsds`` (soft): the softmax vector, :class:`dgpbench.features.softmax.SoftmaxFeatures`;
* ``bbsdh`` (hard): the predicted class, :class:`BBSDhFeatures`, an ``(n, 1)`` integer column
  for :class:`dgpbench.detectors.ChiSquareShiftDetector`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.utils.validation import check_is_fitted

from dgpbench._compat import fit_context
from dgpbench.features.base import _MLPFeatures
from dgpbench.features.softmax import SoftmaxFeatures
from dgpbench.parameters import BBSDH_RULES, sklearn_constraints

__all__ = ["BBSDhFeatures", "SoftmaxFeatures"]


class BBSDhFeatures(_MLPFeatures):
    """The model's predicted class (argmax of its outputs), one integer column ("BBSDh").

    Parameters
    ----------
    model : torch.nn.Sequential or path-like
        A trained MLP, a network ending in one, a ``(body, head)`` pair, or the path of a
        dgpbench checkpoint.
    batch_size : int, default=256
        Samples per forward chunk.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the forward pass runs.

    Attributes
    ----------
    graph_ : MLPGraph
        The model's MLP part.
    body_ : dgpbench.models.body_head.NetworkBody or None
        The torch part before the MLP head.
    classes_ : ndarray of shape (n_outputs,)
        The output indices ``0 .. n_outputs - 1`` (the values ``transform`` returns).
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    >>> X = torch.rand(6, 4).numpy()
    >>> out = BBSDhFeatures(model).fit(X).transform(X)
    >>> out.shape, out.dtype.kind
    ((6, 1), 'i')
    """

    _prefix = "bbsdh"
    _needs_head = False  # the predicted class only: any network
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(BBSDH_RULES)  # no representation

    def __init__(
        self,
        model: Any = None,
        *,
        batch_size: int = 256,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> BBSDhFeatures:
        """Load the model and check ``X`` against it (labels ``y`` are not needed).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs), (n_samples, H, W) or (n, C, H, W)
            Reference images.
        y : ignored
            Accepted for the uniform interface.

        Returns
        -------
        self : BBSDhFeatures
        """
        from dgpbench.models.specs import load_model  # here: it imports torch

        module, self.input_shape_ = load_model(self.model)
        self._attach_network(module, fitted=False)
        self._validate_input(X, reset=True)
        self.classes_ = np.arange(self.graph_.n_outputs)
        self._n_features_out = 1
        return self

    def transform(self, X: Any) -> np.ndarray:
        """The predicted class of every image.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs), (n_samples, H, W) or (n, C, H, W)
            Images of the model's input shape.

        Returns
        -------
        ndarray of shape (n, 1)
            The model's ``argmax`` class, int64.
        """
        check_is_fitted(self, "classes_")
        X = self._validate_input(X, reset=False)
        return self._predict_classes(X).reshape(-1, 1).astype(np.int64)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Name of the one output column: ``["bbsdh_class"]``.

        Parameters
        ----------
        input_features : ignored
            Present for API consistency.

        Returns
        -------
        ndarray of str
            One name.
        """
        check_is_fitted(self, "classes_")
        return np.asarray(["bbsdh_class"], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []  # integer labels, whatever the input
        return tags
