"""The one place where dgpbench touches private scikit-learn API.

``sklearn.base._fit_context`` (exported here as :func:`fit_context`) and
``sklearn.utils._param_validation`` are underscore names: scikit-learn may move or change them
in any release. Every dgpbench estimator imports them from here, so a
breaking scikit-learn release is fixed in this file only. The range pinned in ``pyproject.toml``
(``scikit-learn>=1.6,<1.11``) is the range these imports are known to work with.
"""

from __future__ import annotations

from sklearn.base import _fit_context as fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    Options,
    StrOptions,
    validate_params,
)

__all__ = ["HasMethods", "Interval", "Options", "StrOptions", "fit_context", "validate_params"]
