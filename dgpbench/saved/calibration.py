"""Measured false alarms of a saved detector: clean batches scored, their rate with an exact
interval, and a test of their p-values' uniformity.

A detector tested at ``alpha`` on every batch raises a false alarm on about a fraction
``alpha`` of clean batches, if its p-values are valid; :func:`calibrate` measures it. It
featurises a clean sample not used in fitting, sets aside every image whose features
coincide with a row of the detector's reference sample (``overlap="drop"``; ``"refuse"``
makes that an error), draws disjoint batches of ``batch_size`` images from the rest with a
seeded generator and tests each one. The batches are the independent units: the rate is
``alarms / n_batches`` with its Clopper-Pearson interval (``scipy.stats.binomtest``), and the
batch p-values are compared with U(0, 1) by ``scipy.stats.kstest``, two-sided
(``uniformity``) and one-sided for p-values smaller than uniform ones (``validity``).

The result is one JSON block (:data:`CALIBRATION` is its layout tag), stored in the detector
file's header under ``calibration`` by :func:`write_calibration` and checked on every load by
:func:`check_calibration`: every number derived from the recorded p-values and decisions is
computed again, so a block that was edited by hand is refused.

:func:`reference_warnings` says when a detector's own reference makes it useless: a
reference so small that no batch of the tested size can reach the test's cut-off, and (at
calibration) a domain classifier at chance on its own held-out references against a gross
shift.
"""

from __future__ import annotations

import datetime
import math
import os
from typing import Any

import numpy as np

from dgpbench.saved.format import _Invalid, json_value, read_meta, write

# A detector is a dgpbench.saved.files.FittedDetector; not imported here, since that module
# imports this one (the block is checked on every load).
FittedDetector = Any

__all__ = [
    "CALIBRATION",
    "MIN_BATCHES",
    "OVERLAP",
    "OVERLAP_RTOL",
    "calibrate",
    "check_calibration",
    "classifier_warnings",
    "detector_digest",
    "reference_warnings",
    "write_calibration",
]

#: Layout tag of a calibration block (a detector file without one is uncalibrated).
CALIBRATION = "dgpbench-calibration/1"
#: The fewest clean batches a calibration accepts (fewer give no useful interval).
MIN_BATCHES = 10
#: What to do with clean images whose features are rows of the detector's reference.
OVERLAP: tuple[str, ...] = ("drop", "refuse")

_KEYS = frozenset(
    ("schema", "alpha", "batch_size", "n_batches", "alarms", "rate", "confidence", "interval",
     "uniformity", "validity", "p_values", "shifts", "seed", "overlap", "n_clean", "n_overlap",
     "clean", "clean_sha256", "detector_sha256", "warnings", "dgpbench_version", "time")
)  # fmt: skip
# The detector classes by test (a saved softmax + KS file restores as RestoredKS).
_TESTS = {
    "KSShiftDetector": "ks",
    "RestoredKS": "ks",
    "MMDShiftDetector": "mmd",
    "ChiSquareShiftDetector": "chi2",
    "ClassifierShiftDetector": "classif",
}


def _test_of(fitted: FittedDetector) -> str:
    return fitted.info.get("test") or _TESTS.get(type(fitted.detector).__name__, "?")


def _summary(
    p_values: list[float], shifts: list[bool], alpha: float, confidence: float
) -> dict[str, Any]:
    """The numbers derived from the batches' p-values and decisions."""
    from scipy.stats import binomtest, kstest

    n, alarms = len(shifts), int(sum(shifts))
    ci = binomtest(alarms, n, alpha).proportion_ci(confidence_level=confidence, method="exact")
    two = kstest(p_values, "uniform")
    low = kstest(p_values, "uniform", alternative="greater")
    return {
        "alarms": alarms,
        "rate": alarms / n,
        "interval": [float(ci.low), float(ci.high)],
        "uniformity": {"statistic": float(two.statistic), "p_value": float(two.pvalue)},
        "validity": {"statistic": float(low.statistic), "p_value": float(low.pvalue)},
    }


def _smallest_p_value(fitted: FittedDetector, n: int) -> tuple[float, float, str] | None:
    """The smallest p-value the test can give a batch of ``n`` samples against the
    reference, the cut-off it must fall below, and how the cut-off is set; None when the
    test has no such floor (chi2).
    """
    from scipy.stats import binomtest, ks_2samp

    det, test = fitted.detector, _test_of(fitted)
    alpha = float(det.alpha)
    ref = getattr(det, "X_ref_", None)
    if ref is None or test == "chi2":
        return None
    n_ref = len(ref)
    if test == "ks":  # the engine's p-value at the largest distance, D = 1
        p = float(ks_2samp(np.arange(n_ref), np.arange(n) + n_ref).pvalue)
        d = int(np.asarray(ref).reshape(n_ref, -1).shape[1])
        if det.correction == "bonferroni":
            return p, alpha / d, f"alpha {alpha:g} / {d} features (bonferroni)"
        return p, alpha, f"alpha {alpha:g}"
    if test == "mmd":
        splits, b = math.comb(n_ref + n, n_ref), int(det.n_permutations)
        # every split enumerated when there are at most B: the observed one (and, with
        # equal sizes, its mirror image, which gives the same statistic) always counts
        p = (2 if n == n_ref else 1) / splits if splits <= b else 1 / (b + 1)
        return p, alpha, f"alpha {alpha:g}"
    if test == "classif":  # every held-out prediction right
        k = min(n_ref, n)
        n_test = 2 * (k - k // 2)
        p = float(binomtest(n_test, n_test, 0.5, alternative=det.alternative).pvalue)
        return p, alpha, f"alpha {alpha:g}"
    return None


def reference_warnings(fitted: FittedDetector, batch_size: int) -> list[str]:
    """Why a detector cannot flag a shift in batches of ``batch_size`` samples.

    Parameters
    ----------
    fitted : FittedDetector
        A loaded or fitted detector.
    batch_size : int
        The number of samples of the batches it tests.

    Returns
    -------
    list of str
        Empty, or one sentence: the smallest p-value the test can give at this reference
        and batch size (KS: the exact p-value at distance 1, the cut-off divided by the
        features under Bonferroni; MMD: ``1 / (B + 1)``, or one over the splits when all are
        enumerated; classifier: every held-out prediction right) is not below its cut-off.
    """
    floor = _smallest_p_value(fitted, int(batch_size))
    if floor is None or floor[0] < floor[1]:
        return []
    p, cut, how = floor
    n_ref = len(fitted.detector.X_ref_)
    return [
        f"with {n_ref} reference samples and batches of {batch_size}, the smallest p-value "
        f"the {_test_of(fitted)} test can give is {p:.3g}, not below its cut-off {cut:.3g} "
        f"({how}): it can never flag a shift; fit it on a larger reference or test larger "
        "batches"
    ]


def classifier_warnings(fitted: FittedDetector) -> list[str]:
    """Whether a domain classifier is at chance on its own held-out references against a
    gross shift: the references against themselves moved by one standard deviation in every
    input (a batch any working classifier tells apart).

    Parameters
    ----------
    fitted : FittedDetector
        A detector with the classifier test (``test == "classif"``); costs one training.

    Returns
    -------
    list of str
        Empty, or one sentence with the held-out accuracy and p-value when the test does not
        flag that shift.
    """
    det = fitted.detector
    ref = np.asarray(det.X_ref_)
    result = det.test(ref + ref.std(axis=0, keepdims=True))
    if result.is_drift:
        return []
    return [
        "the domain classifier is at chance on its own held-out references against a gross "
        "shift (every input moved by one standard deviation): held-out accuracy "
        f"{result.statistic:.3g}, p-value {result.p_value:.3g}; it will miss real shifts: "
        "fit it on more references (or train it longer)"
    ]


#: Two feature rows are the same sample when every feature agrees to this relative
#: precision (float32's resolution, with room for a forward pass over another batch).
OVERLAP_RTOL = 1e-6


def _reference_rows(features: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Which rows of ``features`` are rows of ``ref``: every value within
    :data:`OVERLAP_RTOL` of the other, relatively (zero only with zero).

    Candidates come from a sorted key column (the one with the most distinct reference
    values), so the cost is ``O((n + n_ref) log n_ref)`` plus the few candidate rows.
    """
    a = features.reshape(len(features), -1).astype(np.float64)
    b = np.asarray(ref).reshape(len(ref), -1).astype(np.float64)
    key = int(np.argmax([len(np.unique(column)) for column in b.T]))
    order = np.argsort(b[:, key], kind="stable")
    sorted_key = b[order, key]
    reach = np.abs(a[:, key]) * OVERLAP_RTOL / (1 - OVERLAP_RTOL)
    lows = np.searchsorted(sorted_key, a[:, key] - reach, side="left")
    highs = np.searchsorted(sorted_key, a[:, key] + reach, side="right")
    found = np.zeros(len(a), dtype=bool)
    for i in np.flatnonzero(highs > lows):
        rows = b[order[lows[i] : highs[i]]]
        close = np.abs(rows - a[i]) <= OVERLAP_RTOL * np.maximum(np.abs(rows), np.abs(a[i]))
        found[i] = bool(close.all(axis=1).any())
    return found


def calibrate(
    fitted: FittedDetector,
    X_clean: Any,
    batch_size: int,
    *,
    n_batches: int | None = None,
    seed: int = 0,
    overlap: str = "drop",
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Score disjoint clean batches and summarise the false alarms (the calibration block).

    Parameters
    ----------
    fitted : FittedDetector
        The detector, loaded (:func:`~dgpbench.saved.load_scorer`) or fitted.
    X_clean : array-like
        Clean inputs (images, as ``fitted.transform`` takes them) not used in fitting.
    batch_size : int
        Samples per batch: the size of the batches the detector will score.
    n_batches : int, optional
        How many batches; default: as many disjoint batches as the clean sample holds. At
        least :data:`MIN_BATCHES`.
    seed : int, default=0
        Seed of the generator that draws the batches.
    overlap : {"drop", "refuse"}, default="drop"
        Clean inputs whose features equal a row of the detector's reference sample (every
        feature within a relative :data:`OVERLAP_RTOL`): set aside (``n_overlap`` counts
        them), or an error. The chi-squared test keeps only labels, so its overlap cannot
        be seen (``n_overlap`` is None).
    confidence : float, default=0.95
        Confidence level of the rate's interval.

    Returns
    -------
    dict
        The calibration block: ``schema``, ``alpha``, ``batch_size``, ``n_batches``,
        ``alarms``, ``rate``, ``confidence``, ``interval`` (Clopper-Pearson), ``uniformity``
        and ``validity`` (``statistic``, ``p_value`` of the KS tests against U(0, 1),
        two-sided and for too small p-values), ``p_values`` and ``shifts`` (per batch),
        ``seed``, ``overlap``, ``n_clean``, ``n_overlap``, ``clean`` and ``clean_sha256``
        (None: the caller names the file), ``detector_sha256`` (None: set by
        :func:`write_calibration`), ``warnings``, ``dgpbench_version``, ``time``.

    Raises
    ------
    ValueError
        On a bad argument, overlap with ``overlap="refuse"``, or a clean sample too small
        for :data:`MIN_BATCHES` batches (or for ``n_batches``).
    """
    import dgpbench

    test = _test_of(fitted)
    minimum = 4 if test == "classif" else 2
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(f"batch_size must be an integer, got {batch_size!r}")
    if batch_size < minimum:
        raise ValueError(
            f"batch_size must be at least {minimum} for the {test} test, got {batch_size}"
        )
    if n_batches is not None and (
        isinstance(n_batches, bool) or not isinstance(n_batches, int | np.integer)
    ):
        raise TypeError(f"n_batches must be an integer or None, got {n_batches!r}")
    if n_batches is not None and n_batches < MIN_BATCHES:
        raise ValueError(f"n_batches must be at least {MIN_BATCHES}, got {n_batches}")
    if overlap not in OVERLAP:
        raise ValueError(f"overlap must be one of {', '.join(OVERLAP)}, got {overlap!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    features = np.asarray(fitted.transform(X_clean))
    n_clean = len(features)
    ref = getattr(fitted.detector, "X_ref_", None)
    n_overlap = None
    kept = np.arange(n_clean)
    if ref is not None:
        same = _reference_rows(features, ref)
        n_overlap = int(same.sum())
        if n_overlap and overlap == "refuse":
            raise ValueError(
                f"{n_overlap} of the {n_clean} clean samples are in the detector's reference "
                "sample: calibrate on data not used in fitting (or drop them: overlap='drop')"
            )
        kept = np.flatnonzero(~same)
    available = len(kept) // batch_size
    wanted = available if n_batches is None else int(n_batches)
    if available < max(wanted, MIN_BATCHES):
        dropped = f" ({n_overlap} in the reference set aside)" if n_overlap else ""
        raise ValueError(
            f"the clean sample holds {len(kept)} usable samples{dropped}: "
            f"{available} disjoint batches of {batch_size}, fewer than the "
            f"{max(wanted, MIN_BATCHES)} needed; pass more clean data or smaller batches"
        )
    rng = np.random.default_rng(int(seed))
    batches = rng.permutation(kept)[: wanted * batch_size].reshape(wanted, batch_size)
    p_values, shifts = [], []
    for index in batches:
        result = fitted.detector.test(features[index])
        p_values.append(float(result.p_value))
        shifts.append(bool(result.is_drift))
    alpha = float(fitted.detector.alpha)
    summary = _summary(p_values, shifts, alpha, confidence)
    warnings = reference_warnings(fitted, batch_size)
    if test == "classif":
        warnings += classifier_warnings(fitted)
    low, high = summary["interval"]
    if low > alpha:
        warnings.append(
            f"the measured false-alarm rate {summary['rate']:.3g} ({confidence:.0%} interval "
            f"[{low:.3g}, {high:.3g}]) is above alpha {alpha:g}: its p-values are too small "
            "on this clean data (is it the data the detector is meant for?)"
        )
    return {
        "schema": CALIBRATION,
        "alpha": alpha,
        "batch_size": int(batch_size),
        "n_batches": wanted,
        **summary,
        "confidence": float(confidence),
        "p_values": p_values,
        "shifts": shifts,
        "seed": int(seed),
        "overlap": overlap,
        "n_clean": n_clean,
        "n_overlap": n_overlap,
        "clean": None,
        "clean_sha256": None,
        "detector_sha256": None,
        "warnings": warnings,
        "dgpbench_version": str(dgpbench.__version__),
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _count(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _Invalid(f"calibration {name} must be an integer of at least {low}, got {value!r}")
    return value


def _close(a: Any, b: Any) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(_close(a[k], b[k]) for k in b)
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(map(_close, a, b))
    return (
        isinstance(a, int | float)
        and not isinstance(a, bool)
        and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)
    )


def check_calibration(
    block: Any, alpha: float, detector_sha256: str | None = None
) -> dict[str, Any]:
    """Check a calibration block read from a file (the format's integrity rules).

    Parameters
    ----------
    block : object
        The header's ``calibration`` value.
    alpha : float
        The restored detector's significance level: the block's must equal it.
    detector_sha256 : str, optional
        The :func:`detector_digest` of the file holding the block: the block's must equal
        it (a block measured on another detector is refused). None: not checked.

    Returns
    -------
    dict
        ``block``, unchanged.

    Raises
    ------
    ValueError
        Naming the first broken rule: the layout, a type or range, another detector's
        digest, or a derived number (rate, interval, uniformity, validity, alarms) that the
        recorded p-values and decisions do not give.
    """
    if not isinstance(block, dict) or block.get("schema") != CALIBRATION:
        raise _Invalid(f"calibration must be an object with schema {CALIBRATION!r}")
    if set(block) != _KEYS:
        raise _Invalid(f"calibration has keys {sorted(block)}, expected {sorted(_KEYS)}")
    if not json_value([v for v in block.values() if not isinstance(v, dict)]):
        raise _Invalid("calibration holds a value that is not a finite JSON number or string")
    if block["alpha"] != float(alpha):
        raise _Invalid(f"calibration alpha {block['alpha']!r} is not the detector's {alpha!r}")
    batch_size = _count(block["batch_size"], "batch_size", 2)
    n = _count(block["n_batches"], "n_batches", MIN_BATCHES)
    _count(block["seed"], "seed", 0)
    if _count(block["n_clean"], "n_clean", 0) < n * batch_size:
        raise _Invalid("calibration n_clean is smaller than n_batches x batch_size")
    if block["n_overlap"] is not None:
        _count(block["n_overlap"], "n_overlap", 0)
    p, shifts = block["p_values"], block["shifts"]
    if not (
        isinstance(p, list)
        and len(p) == n
        and all(isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1 for v in p)
    ):
        raise _Invalid(f"calibration p_values must be {n} numbers in [0, 1]")
    if not (
        isinstance(shifts, list) and len(shifts) == n and all(isinstance(v, bool) for v in shifts)
    ):
        raise _Invalid(f"calibration shifts must be {n} booleans")
    confidence = block["confidence"]
    if not (isinstance(confidence, float) and 0 < confidence < 1):
        raise _Invalid(f"calibration confidence must lie in (0, 1), got {confidence!r}")
    if block["overlap"] not in OVERLAP:
        raise _Invalid(f"calibration overlap must be one of {', '.join(OVERLAP)}")
    for key in ("clean", "clean_sha256", "detector_sha256"):
        if block[key] is not None and not isinstance(block[key], str):
            raise _Invalid(f"calibration {key} must be a string or null")
    for key in ("clean_sha256", "detector_sha256"):
        sha = block[key]
        if sha is not None and not (len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
            raise _Invalid(f"calibration {key} must be 64 hex digits")
    if detector_sha256 is not None and block["detector_sha256"] != detector_sha256:
        raise _Invalid(
            "calibration was measured on another detector (its detector_sha256 is not this "
            "file's): calibrate this detector again"
        )
    for key in ("dgpbench_version", "time"):
        if not isinstance(block[key], str):
            raise _Invalid(f"calibration {key} must be a string")
    warnings = block["warnings"]
    if not (
        isinstance(warnings, list)
        and len(warnings) <= 20
        and all(isinstance(w, str) and len(w) <= 2000 and w.isprintable() for w in warnings)
    ):  # score prints them on the user's terminal: no control characters
        raise _Invalid("calibration warnings must be a list of printable strings")
    expected = _summary(p, shifts, float(alpha), confidence)
    for key, value in expected.items():
        if key == "alarms":
            same = block[key] == value and not isinstance(block[key], bool)
        else:
            same = _close(block[key], value)
        if not same:
            raise _Invalid(
                f"calibration {key} {block[key]!r} is not what its p-values and decisions give "
                f"({value!r})"
            )
    return block


def detector_digest(meta: dict[str, Any], arrays: Any) -> str:
    """SHA-256 of what a detector file says its detector is: the network record, the
    transformer's and the detector's specs (canonical JSON) and every array (name, dtype,
    shape, bytes), not the version, ``info`` or calibration.

    Parameters
    ----------
    meta : dict
        The file's checked header.
    arrays : mapping of str to ndarray
        Its arrays by their names in the file (``__meta__`` left out).

    Returns
    -------
    str
        The hex digest.
    """
    import hashlib
    import json

    digest = hashlib.sha256(b"dgpbench-detector-digest/1|")
    spec = {key: meta[key] for key in ("model", "features", "detector")}
    digest.update(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"|{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def write_calibration(
    path: str | os.PathLike[str],
    block: dict[str, Any],
    *,
    out: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Record a calibration block in a detector file (replacing any earlier one).

    The file's arrays are copied unchanged and its header gets the block, bound to the
    file's detector by ``detector_sha256`` (:func:`detector_digest`); the new file is
    written next to the output and renamed onto it, so on any error the old file is left
    as it was.

    Parameters
    ----------
    path : path-like
        The detector file.
    block : dict
        From :func:`calibrate` (checked by :func:`check_calibration` first).
    out : path-like, optional
        Where to write the calibrated file; default: ``path`` itself.

    Returns
    -------
    dict
        The block as written: ``block`` with the file's ``detector_sha256``.

    Raises
    ------
    ValueError
        If ``path`` is not a detector file or the block breaks a rule.
    """
    from dgpbench.npz import open_npz

    with open_npz(path) as store:
        try:
            meta = read_meta(store)
        except _Invalid as exc:
            raise ValueError(f"{path}: not a dgpbench detector file: {exc}") from exc
        alpha = (meta.get("detector") or {}).get("params", {}).get("alpha")
        if not isinstance(alpha, float):
            raise ValueError(f"{path}: invalid detector file: its detector has no alpha")
        arrays = {name: store[name] for name in store.files if name != "__meta__"}
        block = {**block, "detector_sha256": detector_digest(meta, arrays)}
        check_calibration(block, alpha)
    write(path if out is None else out, {**meta, "calibration": block}, arrays)
    return block
