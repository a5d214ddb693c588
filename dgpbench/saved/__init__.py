"""Saved detectors: one ``.npz`` file per fitted transformer and detector, without pickle.

* :mod:`~dgpbench.saved.files`: :func:`save_detector` and :func:`load_detector` (what
  loading trusts, and what it does not), and which estimators can be saved;
* :mod:`~dgpbench.saved.format`: the file (a JSON header and named arrays in one ``.npz``);
* :mod:`~dgpbench.saved.fingerprint`: :func:`network_fingerprint`, the network's SHA-256;
* :mod:`~dgpbench.saved.calibration`: :func:`calibrate`, the measured false alarms of a
  detector on clean batches, which ``dgpbench calibrate`` records in the file;
* :mod:`~dgpbench.saved.scoring`: :func:`load_scorer`, which ``dgpbench score --detector``
  uses: a softmax + KS file restored without importing scikit-learn.

The names are imported on first use (:mod:`dgpbench._lazy`).
"""

from dgpbench._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(
        ("SAVEABLE", "FittedDetector", "ModelRequiredError", "detector_classes", "is_saveable",
         "load_detector", "save_detector"),
        "dgpbench.saved.files",
    ),
    "FORMAT": "dgpbench.saved.format",
    **dict.fromkeys(
        ("CALIBRATION", "calibrate", "check_calibration", "classifier_warnings",
         "detector_digest", "reference_warnings", "write_calibration"),
        "dgpbench.saved.calibration",
    ),
    "network_fingerprint": "dgpbench.saved.fingerprint",
    **dict.fromkeys(("RestoredKS", "RestoredSoftmax", "load_scorer"), "dgpbench.saved.scoring"),
}  # fmt: skip

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("dgpbench.saved", _EXPORTS)
