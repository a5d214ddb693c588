"""dgpbench: deep graph persistence and its baselines for covariate-shift detection."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dgpbench")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
