"""The online detectors by the names the command line uses."""

from __future__ import annotations

from dgpbench._lazy import LazyRegistry

__all__ = ["ONLINE_DETECTORS"]

#: Name -> detector class: ``mmd_online`` (sliding-window MMD), ``cvm_online`` (per feature).
ONLINE_DETECTORS: LazyRegistry = LazyRegistry(
    {
        "mmd_online": "dgpbench.online.mmd:OnlineMMDDetector",
        "cvm_online": "dgpbench.online.cvm:OnlineCVMDetector",
    }
)
