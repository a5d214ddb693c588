"""Sequential (online) shift detection with a chosen expected run time (ERT).

* :class:`OnlineMMDDetector`: the MMD between a reference and a sliding window, updated in
  ``O(n_ref + W)`` per sample;
* :class:`OnlineCVMDetector`: per-feature Cramér-von Mises statistics over a sliding
  window, for low-dimensional features (DGP, TU, MAGDiff, BBSDs);
* :func:`hazard_thresholds`: the thresholds that make the run time under no shift
  geometric with mean ERT (Cobb, Van Looveren and Klaise, AISTATS 2022);
* :func:`save_stream_state` / :func:`load_stream_state`: stop a stream and resume it;
* :func:`run_times`, :func:`mean_run_time_interval`, :func:`detection_delay`: measure the
  run time on clean streams and the delay on shifted ones.

Both detectors save into a detector file like the batch tests
(:func:`dgpbench.saved.save_detector`); ``dgpbench monitor`` feeds a stream to one.
"""

from dgpbench._lazy import lazy_exports

_EXPORTS = {
    "OnlineCVMDetector": "dgpbench.online.cvm",
    "OnlineMMDDetector": "dgpbench.online.mmd",
    "OnlineResult": "dgpbench.online.base",
    "ONLINE_DETECTORS": "dgpbench.online.registry",
    "cvm_from_positions": "dgpbench.online.cvm",
    "detection_delay": "dgpbench.online.evaluation",
    "mean_run_time_interval": "dgpbench.online.evaluation",
    "run_times": "dgpbench.online.evaluation",
    "gaussian_kernel": "dgpbench.online.mmd",
    "hazard_thresholds": "dgpbench.online.thresholds",
    "load_stream_state": "dgpbench.online.state",
    "per_feature_rate": "dgpbench.online.thresholds",
    "save_stream_state": "dgpbench.online.state",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.online", _EXPORTS)
