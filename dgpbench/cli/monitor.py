"""The user's commands: ``dgpbench fit`` (save a detector) and ``dgpbench score`` (test
batches of images for covariate shift; exit status 1 means "shift" and nothing else).

Both share one path for every test (``ks``, ``mmd``, ``chi2``, ``classif``, ...): a feature
transformer and a detector are fitted (or loaded from ``--detector``) into a
:class:`dgpbench.saved.FittedDetector`, then every batch is featurised and tested the same
way, and reported in one record layout (:func:`score_record`).

The ``--refs`` rule is the Python API's (``fit(X, y=None)``): labelled references ``x, y``
give the class means by label; references without ``y``, or none at all (the clean images
then serve), group the images by the model's predicted class. Methods without class means
(softmax, bbsds, bbsdh, the model-free reductions) and the classifier test ignore them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgpbench.cli.arguments import METHOD_HELP, MODEL_HELP
from dgpbench.cli.arguments import forward_pass_args as _forward_pass_args
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.arguments import significance as _significance
from dgpbench.cli.registry import SUBCOMMANDS, CommandError

if TYPE_CHECKING:
    from dgpbench.saved import FittedDetector

log = logging.getLogger(__name__)

#: The two-sample tests of ``fit --test`` and ``score --test``.
TESTS: tuple[str, ...] = (
    "ks", "mmd", "chi2", "classif", "cvm", "ad", "energy", "fisher", "lsdd", "mmdagg", "mmd_deep",
    "mmd_online", "cvm_online",
)  # fmt: skip
#: The sequential tests: ``fit`` saves them for ``dgpbench monitor``, ``score`` refuses them.
ONLINE_TESTS: tuple[str, ...] = ("mmd_online", "cvm_online")
#: The per-feature tests that take ``--correction``; the tests of ``--permutations`` and ``--seed``.
_CORRECTED: tuple[str, ...] = ("ks", "cvm", "ad", "fisher")
_PERMUTED: tuple[str, ...] = ("mmd", "energy", "lsdd", "mmd_deep")
_SEEDED: tuple[str, ...] = (*_PERMUTED, "classif", "mmdagg", *ONLINE_TESTS)

#: Layout tag of a ``score --json`` record (one JSON object per line, one line per batch).
SCORE_SCHEMA = "dgpbench-score/1"

#: What ``fit`` fixes in a detector file: ``score --detector`` refuses these options.
_FIXED_BY_DETECTOR: tuple[str, ...] = (
    "refs",
    "clean",
    "method",
    "test",
    "alpha",
    "correction",
    "permutations",
    "seed",
    "head",
    "ert",
    "window",
    "bootstraps",
    "calibration",
)

#: The defaults of the options a detector file fixes (None on the parser, so that
#: ``score --detector`` can tell an option given from one left out).
_DEFAULTS: dict[str, Any] = {
    "test": "ks",
    "alpha": 0.05,
    "correction": "bonferroni",
    "permutations": 1000,
    "seed": 0,
    "ert": 1000.0,
    "window": 20,
}


def _test_args(p: argparse.ArgumentParser, *, fixed_by_detector: bool) -> None:
    """The options that choose and fit a detector (``fit``, and ``score`` without one)."""
    note = " (fixed by --detector)" if fixed_by_detector else ""
    p.add_argument(
        "--refs",
        default=None,
        help=".npz with reference images x (and labels y): the class means of tu/dgp/"
        "magdiff, by label, or by the model's predicted class without y; left out, the clean "
        "images are the references. Unused by softmax, bbsds, bbsdh and classif" + note,
    )
    p.add_argument(
        "--method",
        default=None,
        help=METHOD_HELP
        + " (default: dgp; bbsdh for --test chi2 and fisher; not used by classif)"
        + note,
    )
    p.add_argument(
        "--test",
        default=None,
        choices=TESTS,
        help="two-sample test: ks per feature (default), mmd, chi2 (on --method bbsdh), "
        "classif (a domain classifier on the images), cvm / ad (Cramér-von Mises / "
        "Anderson-Darling per feature), energy (energy distance), fisher (Fisher's exact "
        "test of 0/1 features: bbsdh of a two-class model), lsdd, mmdagg, mmd_deep (a "
        "learned kernel); for `dgpbench monitor`: mmd_online "
        "(sliding-window MMD), cvm_online (per-feature Cramér-von Mises)" + note,
    )
    p.add_argument(
        "--ert",
        type=float,
        default=None,
        help="mmd_online/cvm_online: expected run time under no shift, in samples "
        "(default: 1000)" + note,
    )
    p.add_argument(
        "--window",
        type=_positive_int,
        default=None,
        help="mmd_online/cvm_online: test window length (default: 20)" + note,
    )
    p.add_argument(
        "--bootstraps",
        type=_positive_int,
        default=None,
        help="mmd_online/cvm_online: simulated clean streams (default: 1000 for mmd_online, "
        "10000 for cvm_online; about 400 x ERT sets the ERT within 5%%)" + note,
    )
    p.add_argument(
        "--calibration",
        default=None,
        choices=["gaussian", "reference"],
        help="cvm_online: thresholds from Gaussian streams per feature (default; conservative "
        "for dependent features) or from permuted reference rows (exact, slower)" + note,
    )
    p.add_argument(
        "--alpha",
        type=_significance,
        default=None,
        help="significance level (default: 0.05)" + note,
    )
    p.add_argument(
        "--correction",
        default=None,
        choices=["bonferroni", "fdr", "none"],
        help=f"{', '.join(_CORRECTED)}: multiple-testing correction over the features "
        "(default: bonferroni)" + note,
    )
    p.add_argument(
        "--permutations",
        type=_positive_int,
        default=None,
        help=f"{', '.join(_PERMUTED)}: permutations (default: 1000)" + note,
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"seed of the {'/'.join(_SEEDED)} test (default: 0)" + note,
    )
    p.add_argument(
        "--head",
        nargs="+",
        default=None,
        metavar="MODULE",
        help="tu/dgp/magdiff: the head's nn.Linear modules by name, e.g. --head fc1 fc2 "
        "(default: the trailing chain of linear maps, verified on the references)" + note,
    )


def _setting(args: argparse.Namespace, name: str) -> Any:
    value = getattr(args, name, None)
    return _DEFAULTS.get(name) if value is None else value


# --------------------------------------------------------------------------------------------
# score: batches from the command line
# --------------------------------------------------------------------------------------------
def _score_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--detector",
        default=None,
        help="a detector saved by `dgpbench fit`: it fixes the references, method, test and "
        "their settings (pass --model only if the model moved)",
    )
    p.add_argument("--model", default=None, help=MODEL_HELP)
    p.add_argument(
        "--clean",
        default=None,
        help=".npz with images x: clean reference batch (fixed by --detector)",
    )
    p.add_argument(
        "--batch",
        required=True,
        nargs="+",
        metavar="NPZ",
        help=".npz files with images x, or folders of them (every *.npz, sorted): the "
        "batches under test, each tested on its own (one result, one JSON line each)",
    )
    _test_args(p, fixed_by_detector=True)
    p.add_argument(
        "--across",
        default="none",
        choices=["none", "bonferroni", "fdr"],
        help="correction across the batches: none (each batch at --alpha: false alarms add "
        "up, about alpha x batches), bonferroni (family-wise over the batches) or fdr "
        "(Benjamini-Hochberg over the batches' p-values)",
    )
    _forward_pass_args(p)
    p.add_argument(
        "--json", action="store_true", help="print one JSON record per batch (JSON Lines)"
    )
    p.epilog = (
        "Exit status: 0 = no shift in any batch, 1 = shift detected in at least one batch (and "
        "nothing else), 2 = any error (one line on stderr), 130 = interrupted."
    )


def _batch_files(patterns: list[str]) -> list[Path]:
    """The batch files: each file as given, each folder's ``*.npz`` in sorted order."""
    files: list[Path] = []
    for item in patterns:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.npz") if p.is_file())
            if not found:
                raise CommandError(f"--batch {item} is a directory with no .npz file in it")
            files.extend(found)
        else:
            files.append(path)
    return files


def _refuse_fixed_options(args: argparse.Namespace) -> None:
    """``score --detector`` with an option the file fixes: a usage error naming it."""
    given = [f"--{k}" for k in _FIXED_BY_DETECTOR if getattr(args, k, None) is not None]
    if given:
        raise CommandError(
            f"{', '.join(given)} cannot be used with --detector: the detector file fixes "
            "the references, method, test and their settings (fit another detector with "
            "`dgpbench fit` to change them)"
        )


def _score(args: argparse.Namespace) -> int:

    from dgpbench.data.datasets import load_npz_images
    from dgpbench.threads import torch_threads

    batches = _batch_files(args.batch)
    _check_batches(batches)
    if args.detector is not None:
        _refuse_fixed_options(args)
        from dgpbench.saved import ModelRequiredError
        from dgpbench.saved.scoring import load_scorer  # softmax + KS: no scikit-learn

        with torch_threads(args.threads):
            try:
                fitted = load_scorer(args.detector, model=args.model)
            except ModelRequiredError as exc:  # Python's wording (model=) in the shell's
                raise CommandError(
                    f"{exc.reason}: pass --model MODEL (the network it was fitted with)"
                ) from exc
        if fitted.info.get("test") in ONLINE_TESTS:
            raise CommandError(f"{args.detector} holds a sequential test: feed a stream to it "
                               "with `dgpbench monitor`")  # fmt: skip
        _set_device(fitted, args.device)
    else:
        _some_batch_reads(batches)  # before the long fit: fail early if none can be scored
        fitted = _fit_detector(args)
    provenance = _provenance(args, fitted)
    calibration = fitted.calibration
    warned = _warn_calibration(calibration)
    if calibration is None and fitted.info.get("test") == "classif":
        from dgpbench.saved.calibration import classifier_warnings

        with torch_threads(args.threads):  # one training; calibrate records its outcome
            for message in classifier_warnings(fitted):
                _warn(message, warned)
    if calibration is not None and not args.json:
        print(calibration_line(calibration), flush=True)
    records: list[tuple[dict[str, Any], Any]] = []
    failed = False
    with torch_threads(args.threads):
        for path in batches:
            try:
                x = load_npz_images(path)
                result = _test_batch(fitted, x, path)
                _warn_reference(fitted, len(x), warned)
            except (ValueError, TypeError, OSError) as exc:  # this batch only: go on
                failed = True
                record = error_record(path, exc, provenance, calibration=calibration)
                result = None
                print(f"dgpbench score: error: {record['error']}", file=sys.stderr, flush=True)
            else:
                record = score_record(result, fitted, batch=str(path), provenance=provenance)
            if args.across == "none":
                _print_record(record, result, fitted, args.json)
            records.append((record, result))
    if args.across != "none":
        scored = [r for r in records if r[1] is not None]
        if scored:
            _correct_across(scored, args.across)
        for record, result in records:
            _print_record(record, result, fitted, args.json)
    if failed:  # "shift" (1) only when every batch was scored
        return 2
    return 1 if any(record["shift"] for record, _ in records) else 0


def _check_batches(batches: list[Path]) -> None:
    """Refuse a batch that is not there, or not a regular file, before any is scored (a typo
    found at once, a fifo never opened).
    """
    from dgpbench.npz import check_regular_file

    for path in batches:
        check_regular_file(path, "--batch")
    missing = [str(path) for path in batches if not path.exists()]
    if missing:
        raise CommandError(f"--batch: no such file: {', '.join(missing)}")


def _some_batch_reads(batches: list[Path]) -> None:
    """Read batches until one reads; raise the first one's error if none does."""
    from dgpbench.data.datasets import load_npz_images

    first: Exception | None = None
    for path in batches:
        try:
            load_npz_images(path)
            return
        except (ValueError, TypeError, OSError) as exc:
            first = first or exc
    if first is not None:
        raise first


def calibration_line(block: dict[str, Any]) -> str:
    """One line on a detector's measured false alarms (its calibration block).

    Parameters
    ----------
    block : dict
        The block :func:`dgpbench.saved.calibration.calibrate` gives.

    Returns
    -------
    str
        Alarms, batches, rate, its interval, alpha and the uniformity test's p-values.
    """
    low, high = block["interval"]
    return (
        f"measured false alarms: {block['alarms']} of {block['n_batches']} clean batches of "
        f"{block['batch_size']} = {block['rate']:.3g} ({block['confidence']:.0%} interval "
        f"[{low:.3g}, {high:.3g}], alpha {block['alpha']:g}); p-values against U(0, 1): "
        f"KS p-value {block['uniformity']['p_value']:.3g}, for too small p-values "
        f"{block['validity']['p_value']:.3g}"
    )


def _warn(message: str, warned: set[str]) -> None:
    if message not in warned:
        warned.add(message)
        print(f"dgpbench score: warning: {message}", file=sys.stderr, flush=True)


def _warn_calibration(calibration: dict[str, Any] | None) -> set[str]:
    """Say the detector's recorded warnings (``dgpbench calibrate``) once, on stderr."""
    warned: set[str] = set()
    for message in (calibration or {}).get("warnings", []):
        _warn(message, warned)
    return warned


def _warn_reference(fitted: FittedDetector, n: int, warned: set[str]) -> None:
    """Say once per batch size when the detector's reference makes it unable to flag a shift."""
    from dgpbench.saved.calibration import reference_warnings

    for message in reference_warnings(fitted, n):
        _warn(message, warned)


def error_record(
    path: Path,
    exc: BaseException,
    provenance: dict[str, Any],
    *,
    calibration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``score --json`` record of a batch that could not be scored.

    Parameters
    ----------
    path : Path
        The batch file.
    exc : BaseException
        Why it could not be scored.
    provenance : dict
        As in :func:`score_record`.
    calibration : dict or None, default=None
        The detector's calibration block, as in :func:`score_record`.

    Returns
    -------
    dict
        ``schema``, ``batch``, ``shift`` (None: no decision), ``error`` (one line naming
        the file), ``calibration`` and ``provenance``.
    """
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else type(exc).__name__
    if str(path) not in message:
        message = f"the batch {path}: {message}"
    return {
        "schema": SCORE_SCHEMA,
        "batch": str(path),
        "shift": None,
        "error": message,
        "calibration": calibration,
        "provenance": provenance,
    }


def _set_device(fitted: FittedDetector, device: str) -> None:
    """Run a loaded detector's network (and MMD/classifier test) on ``--device``."""
    if device == "cpu":
        return
    for estimator in (fitted.features, fitted.detector):
        if hasattr(estimator, "to_device"):
            estimator.to_device(device)
        elif "device" in getattr(estimator, "get_params", dict)():
            estimator.set_params(device=device)


def _test_batch(fitted: FittedDetector, x: Any, path: Path) -> Any:
    """Featurise and test one batch (the features checked as a custom method's are)."""
    from dgpbench.features.output import transform_method

    method = fitted.info.get("method", "?")
    minimum = 4 if fitted.info.get("test") == "classif" else 2  # the tests' own minimum
    if len(x) < minimum:
        count = f"{len(x)} image" + ("" if len(x) == 1 else "s")
        raise ValueError(
            f"the batch {path} has {count}; the {fitted.info.get('test', 'ks')} test needs "
            f"at least {minimum}"
        )
    if fitted.info.get("test") == "classif":  # the images themselves
        return fitted.detector.test(fitted.features.transform(x))
    return fitted.detector.test(transform_method(fitted.features, x, method, f"the batch {path}"))


def score_record(
    result: Any, fitted: FittedDetector, *, batch: str, provenance: dict[str, Any]
) -> dict[str, Any]:
    """The one record layout of ``score --json``, whatever the test.

    Parameters
    ----------
    result : KSTestResult or ShiftTestResult
        The detector's result for one batch.
    fitted : FittedDetector
        The transformer and detector that gave it.
    batch : str
        The batch file.
    provenance : dict
        dgpbench version, model and detector with their SHA-256, time (see ``_provenance``).

    Returns
    -------
    dict
        ``schema``, ``batch``, ``shift``, ``test``, ``method``, ``statistic`` (the batch
        statistic; for ks the largest per-feature KS distance), ``p_value`` (for ks the
        smallest corrected p-value), ``threshold`` (cut-off on the raw p-values), ``alpha``,
        ``correction`` (ks; else None), ``across`` (None unless ``--across``), ``n_refs``,
        ``n_clean``, ``n_batch``, ``features`` (ks: one entry per feature; else None),
        ``calibration`` (the detector's measured false alarms recorded by ``dgpbench
        calibrate``; None when it was never calibrated) and ``provenance``.
    """
    import numpy as np

    from dgpbench.features.output import feature_names

    info = fitted.info
    per_feature = hasattr(result, "p_val_adjusted")
    features = None
    if per_feature:
        names = feature_names(fitted.features, result.n_features, info.get("method", "?"))
        features = [
            {
                "feature": str(name),
                "statistic": float(stat),
                "p_value": float(p),
                "p_value_adjusted": float(q),
                "rejected": bool(p < result.threshold),
            }
            for name, stat, p, q in zip(
                names, result.distance, result.p_val, result.p_val_adjusted, strict=True
            )
        ]
    statistic = float(np.max(result.statistic)) if per_feature else float(result.statistic)
    return {
        "schema": SCORE_SCHEMA,
        "batch": batch,
        "shift": bool(result.is_drift),
        "test": info.get("test", "ks"),
        "method": info.get("method"),
        "statistic": statistic,
        "p_value": float(result.p_value),
        "threshold": float(result.threshold),
        "alpha": float(result.alpha),
        "correction": (result.correction or "none") if per_feature else None,
        "across": None,
        "n_refs": info.get("n_refs"),
        "n_clean": int(result.n_ref),
        "n_batch": int(result.n),
        "features": features,
        "calibration": fitted.calibration,
        "provenance": provenance,
    }


def _correct_across(records: list[tuple[dict, Any]], correction: str) -> None:
    """Decide every batch again at a family-wise (Bonferroni) or false-discovery (BH) level
    over the batches' p-values, each compared at its own test's alpha.
    """
    import numpy as np

    from dgpbench.detectors.ks_test import apply_correction

    p = np.array([r["p_value"] for r, _ in records], dtype=np.float64)
    alpha = records[0][0]["alpha"]
    adjusted = apply_correction(p, alpha, correction)[2]
    for (record, _), q in zip(records, adjusted, strict=True):
        record["across"] = {
            "correction": correction,
            "n_batches": len(p),
            "p_value_adjusted": float(q),
            "shift_alone": record["shift"],
        }
        record["shift"] = bool(q < alpha)


def _print_record(record: dict, result: Any, fitted: FittedDetector, as_json: bool) -> None:
    import json

    if as_json:
        print(json.dumps(record), flush=True)
        return
    if "error" in record:  # said on stderr by the log: nothing to add to the report
        return
    verdict = "SHIFT" if record["shift"] else "no shift"
    across = record["across"]
    extra = (
        f"; {across['correction']} over {across['n_batches']} batches: adjusted p-value "
        f"{across['p_value_adjusted']:.4g}"
        if across
        else ""
    )
    if record["features"] is not None:
        print(
            f"{verdict}: smallest adjusted p-value {record['p_value']:.4g} (alpha "
            f"{record['alpha']:g}, correction {record['correction']}, "
            f"{len(record['features'])} features){extra}"
        )
        print(
            f"method {record['method']}; {record['n_refs']} reference, {record['n_clean']} "
            f"clean and {record['n_batch']} test images; batch {record['batch']}\n"
        )
        print(_feature_table(record["features"]))
        print()
    else:
        print(
            f"{verdict}: {record['test']} p-value {record['p_value']:.4g}, statistic "
            f"{record['statistic']:.4g} (alpha {record['alpha']:g}){extra}; representation "
            f"{record['method']}; {record['n_clean']} clean and {record['n_batch']} test "
            f"images; batch {record['batch']}"
        )
    sys.stdout.flush()


def _feature_table(rows: list[dict[str, Any]]) -> str:
    """The per-feature rows as a text table, right-aligned (pandas' layout; pandas itself
    would add a fifth of the command's start-up).
    """
    columns = list(rows[0])
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()] for row in rows]
    widths = [max(len(c), *(len(r[k]) for r in cells)) for k, c in enumerate(columns)]
    lines = [columns, *cells]
    return "\n".join(
        "  ".join(v.rjust(w) for v, w in zip(line, widths, strict=True)) for line in lines
    )


def _sha256(path: Any) -> str | None:
    """SHA-256 of a file's bytes, None if ``path`` is not a file (a factory, a module)."""
    from dgpbench.io import file_sha256

    try:
        file = Path(path)
        if not file.is_file():
            return None
    except (TypeError, ValueError, OSError):
        return None
    return file_sha256(file)


def _provenance(args: argparse.Namespace, fitted: FittedDetector) -> dict[str, Any]:
    """What produced a record: dgpbench version, model and detector files with their SHA-256
    (of the file's bytes; None for a factory), and the time (UTC, ISO 8601).
    """
    import datetime

    from dgpbench import __version__

    model = args.model
    if model is None:
        model = getattr(fitted.features, "model", None)
        model = model if isinstance(model, str) else None
    return {
        "dgpbench_version": str(__version__),
        "model": None if model is None else str(model),
        "model_sha256": _sha256(model),
        "detector": args.detector,
        "detector_sha256": _sha256(args.detector) if args.detector else None,
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _load_refs(args: argparse.Namespace, x_clean: Any) -> tuple[Any, Any]:
    """The reference images and labels by the one ``--refs`` rule (module docstring)."""
    from dgpbench.data.datasets import load_npz_images
    from dgpbench.io import load_npz

    if args.refs is None:
        return x_clean, None
    if "y" in load_npz(args.refs):
        return load_npz_images(args.refs, labels=True)
    return load_npz_images(args.refs), None


def _fit_detector(args: argparse.Namespace) -> FittedDetector:
    """Fit features + detector from --model, --refs, --clean (shared by `fit` and `score`)."""
    from dgpbench.data.datasets import load_npz_images
    from dgpbench.detectors import make_detector
    from dgpbench.features.output import fit_method, transform_method
    from dgpbench.saved import FittedDetector
    from dgpbench.threads import torch_threads

    test = _setting(args, "test")
    if test in ONLINE_TESTS and args.command != "fit":
        raise CommandError(f"--test {test} is sequential: save it with `dgpbench fit` and feed "
                           "a stream to it with `dgpbench monitor`")  # fmt: skip
    for option in ("method", "head"):
        if test == "classif" and getattr(args, option, None) is not None:
            raise CommandError(f"--{option} is not used by --test classif (it tests the images)")
    method = (
        "images"
        if test == "classif"
        else args.method or ("bbsdh" if test in ("chi2", "fisher") else "dgp")
    )
    # an option the chosen test does not use would be silently ignored: refuse it
    for option, tests in (("correction", _CORRECTED), ("permutations", _PERMUTED),
                          ("seed", _SEEDED),
                          ("alpha", tuple(t for t in TESTS if t not in ONLINE_TESTS)),
                          ("ert", ONLINE_TESTS), ("window", ONLINE_TESTS),
                          ("bootstraps", ONLINE_TESTS), ("calibration", ("cvm_online",))):  # fmt: skip
        if getattr(args, option, None) is not None and test not in tests:
            raise CommandError(f"--{option} is for --test {' or '.join(tests)}, not {test}")
    missing = [f"--{k}" for k in ("model", "clean") if getattr(args, k, None) is None]
    if missing:
        hint = "" if args.command == "fit" else "; or pass --detector from `dgpbench fit`"
        raise CommandError(f"missing {', '.join(missing)}{hint}")
    # Every file is read (and checked) before the model runs, so a bad one fails at once.
    x_clean = load_npz_images(args.clean)
    x_refs, y_refs = _load_refs(args, x_clean)
    alpha = _setting(args, "alpha")
    params: dict[str, Any] = {"alpha": alpha}
    if test in _CORRECTED:
        correction = _setting(args, "correction")
        params["correction"] = None if correction == "none" else correction
    if test in _SEEDED:
        params["random_state"] = _setting(args, "seed")
    if test in _PERMUTED:
        params["n_permutations"] = _setting(args, "permutations")
    if test in ("mmd", "classif", "mmd_deep"):
        params["device"] = args.device
    if test in ONLINE_TESTS:
        from dgpbench.online.registry import ONLINE_DETECTORS

        params = {"ert": _setting(args, "ert"), "window_size": _setting(args, "window"),
                  "random_state": _setting(args, "seed")}  # fmt: skip
        if args.bootstraps is not None:
            params["n_bootstraps"] = args.bootstraps
        if args.calibration is not None:
            params["calibration"] = args.calibration
        detector = ONLINE_DETECTORS[test](**params)
    else:
        detector = make_detector(test, **params)
    feats = _make_features(args, method)
    with torch_threads(args.threads):
        fit_method(feats, x_refs, y_refs, method)
        if test == "classif":
            clean = feats.transform(x_clean)
        else:
            clean = transform_method(feats, x_clean, method, f"the clean images {args.clean}")
        detector.fit(clean)
    info = {
        "method": method,
        "test": test,
        "n_refs": len(x_refs),
        "labelled_refs": y_refs is not None,
    }
    return FittedDetector(feats, detector, info)


def _make_features(args: argparse.Namespace, method: str) -> Any:
    """The feature transformer of ``method`` with the command's forward-pass options."""
    import inspect

    if method == "images":
        from dgpbench.features.reductions import ImageFeatures

        return ImageFeatures()
    from dgpbench.features.registry import make_features

    params: dict[str, Any] = {
        "batch_size": args.batch_size,
        "n_jobs": args.threads,
        "device": args.device,
    }
    feats = make_features(method, args.model, **params)
    if args.head is not None:
        if "head" not in inspect.signature(type(feats)).parameters:
            raise CommandError(f"--head is for tu, dgp and magdiff; method {method} takes no head")
        feats.set_params(head=list(args.head))
    return feats


# --------------------------------------------------------------------------------------------
# fit: save a detector for `dgpbench score --detector`
# --------------------------------------------------------------------------------------------
def _fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--clean", required=True, help=".npz with images x: clean reference batch")
    _test_args(p, fixed_by_detector=False)
    _forward_pass_args(p)
    p.add_argument("--out", required=True, help="the detector file to write (.npz)")


def _fit(args: argparse.Namespace) -> None:
    from dgpbench.saved import save_detector

    fitted = _fit_detector(args)
    save_detector(args.out, fitted, model=args.model)
    log.info(
        "%s + %s detector (%d reference images) -> %s",
        fitted.info["method"],
        fitted.info["test"],
        fitted.info["n_refs"],
        args.out,
    )


SUBCOMMANDS.update(
    {
        "score": (
            "Test batches of images for covariate shift (exit 0 = no shift, 1 = shift).",
            _score_args,
            _score,
        ),
        "fit": (
            "Fit a detector on reference images and save it for `score --detector`.",
            _fit_args,
            _fit,
        ),
    }
)
