"""The online detectors by the names the command line uses."""

from __future__ import annotations

from dgpbench.online.cvm import OnlineCVMDetector
from dgpbench.online.mmd import OnlineMMDDetector

__all__ = ["ONLINE_DETECTORS"]

#: Name -> detector class: ``mmd_online`` (sliding-window MMD), ``cvm_online`` (per feature).
ONLINE_DETECTORS: dict[str, type] = {
    "mmd_online": OnlineMMDDetector,
    "cvm_online": OnlineCVMDetector,
}
