"""Every public class, function and method documents exactly the parameters it takes.

ruff's pydocstyle rules check each docstring's form (numpy convention); numpydoc's validator
checks what ruff cannot: that the ``Parameters`` section names every parameter of the
signature and no other. The public API is what ``dgpbench``, ``dgpbench.detectors`` and
``dgpbench.saved`` export, with every public method defined in dgpbench on those classes
(inherited ones under the class that defines them).
"""

from __future__ import annotations

import importlib
import inspect

import pytest
from numpydoc.validate import validate

PACKAGES = ("dgpbench", "dgpbench.detectors", "dgpbench.online", "dgpbench.saved")
# PR01: a parameter not documented; PR02: a documented parameter the signature lacks;
# GL08: no docstring.
CHECKED = {"PR01", "PR02", "GL08"}


def _qualified(obj: object) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _public_api() -> list[str]:
    """Qualified names of the exported classes and functions and their public methods."""
    names = set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            names.add(_qualified(obj))
            if inspect.isclass(obj):
                for attr in dir(obj):
                    method = getattr(obj, attr)
                    if (
                        not attr.startswith("_")
                        and inspect.isfunction(method)
                        and method.__module__.startswith("dgpbench")
                    ):
                        names.add(_qualified(method))
    return sorted(names)


def test_public_api_is_found():
    names = _public_api()
    assert "dgpbench.detectors.base.BatchDecisionMixin.predict" in names
    assert "dgpbench.saved.files.load_detector" in names


@pytest.mark.parametrize("name", _public_api())
def test_docstring_documents_the_signature(name):
    errors = [f"{code}: {message}" for code, message in validate(name)["errors"] if code in CHECKED]
    assert not errors, f"{name}: " + "; ".join(errors)
