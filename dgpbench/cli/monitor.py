"""The user's commands: ``dgpbench fit`` (save a detector) and ``dgpbench score`` (test one
batch of images for covariate shift; exit status 1 means "shift" and nothing else).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

import pandas as pd

from dgpbench.cli.arguments import METHOD_HELP, MODEL_HELP
from dgpbench.cli.arguments import forward_pass_args as _forward_pass_args
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.arguments import significance as _significance
from dgpbench.cli.registry import SUBCOMMANDS, CommandError
from dgpbench.io import load_npz

if TYPE_CHECKING:
    from dgpbench.saved import FittedDetector

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# score: one real batch from the command line
# --------------------------------------------------------------------------------------------
def _score_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--detector",
        default=None,
        help="a detector saved by `dgpbench fit`: replaces --refs and --clean, and its "
        "method, alpha and correction are the fitted ones (--model only if the model moved)",
    )
    p.add_argument("--model", default=None, help=MODEL_HELP)
    p.add_argument("--refs", default=None, help=".npz with labelled images x, y: class means")
    p.add_argument("--clean", default=None, help=".npz with images x: clean reference batch")
    p.add_argument("--batch", required=True, help=".npz with images x: the batch under test")
    p.add_argument("--method", default="dgp", help=METHOD_HELP + " (default: dgp)")
    p.add_argument("--alpha", type=_significance, default=0.05, help="significance level")
    p.add_argument(
        "--correction",
        default="bonferroni",
        choices=["bonferroni", "fdr", "none"],
        help="multiple-testing correction over the features",
    )
    p.add_argument(
        "--test",
        default="ks",
        choices=["ks", "mmd", "chi2", "classif"],
        help="two-sample test: ks per feature, mmd, chi2 (on --method bbsdh), "
        "classif (a domain classifier on the images; --method is not used)",
    )
    p.add_argument("--permutations", type=_positive_int, default=1000, help="MMD permutations")
    p.add_argument("--seed", type=int, default=0, help="seed of the mmd/classif test")
    _forward_pass_args(p, device=False)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.epilog = (
        "Exit status: 0 = no shift, 1 = shift detected (and nothing else), 2 = any error "
        "(one line on stderr), 130 = interrupted."
    )


def _score(args: argparse.Namespace) -> int:
    import json

    from dgpbench.data.datasets import load_npz_images
    from dgpbench.features.output import feature_names, transform_method
    from dgpbench.models.train import torch_threads
    from dgpbench.saved import load_detector

    if args.detector is not None:
        x_batch = load_npz_images(args.batch)
        with torch_threads(args.threads):
            fitted = load_detector(args.detector, model=args.model)
            feats = fitted.features
            result = fitted.test(x_batch)
        args.method = fitted.info.get("method", "?")
        args.alpha, args.correction = result.alpha, str(result.correction or "none")
        n_refs = fitted.info.get("n_refs")
    elif args.test != "ks":
        _require_fit_args(args)
        x_refs, y_refs = load_npz_images(args.refs, labels=True)
        x_clean = load_npz_images(args.clean)
        x_batch = load_npz_images(args.batch)
        return _score_other_test(args, x_refs, y_refs, x_clean, x_batch)
    else:
        x_batch = load_npz_images(args.batch)  # read before the long fit: fail early
        fitted = _fit_detector(args)
        feats = fitted.features
        with torch_threads(args.threads):
            result = fitted.detector.test(
                transform_method(feats, x_batch, args.method, f"the batch {args.batch}")
            )
        n_refs = fitted.info["n_refs"]
    names = feature_names(feats, result.n_features, args.method)
    table = pd.DataFrame(
        {
            "feature": [str(n) for n in names],
            "statistic": result.distance,
            "p_value": result.p_val,
            "p_value_adjusted": result.p_val_adjusted,
            "rejected": result.p_val < result.threshold,
        }
    )
    summary = {
        "shift": bool(result.is_drift),
        "min_p_value_adjusted": result.min_p_val_adjusted,
        "threshold": float(result.threshold),
        "alpha": args.alpha,
        "correction": args.correction,
        "method": args.method,
        "n_refs": n_refs,
        "n_clean": result.n_ref,
        "n_batch": result.n,
    }
    if args.json:
        print(json.dumps({**summary, "features": table.to_dict(orient="records")}, indent=2))
    else:
        verdict = "SHIFT" if result.is_drift else "no shift"
        print(
            f"{verdict}: smallest adjusted p-value {result.min_p_val_adjusted:.4g} "
            f"(alpha {args.alpha:g}, correction {args.correction}, {result.n_features} features)"
        )
        print(
            f"method {args.method}; {n_refs} reference, {result.n_ref} clean and "
            f"{result.n} test images\n"
        )
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 1 if result.is_drift else 0


def _score_other_test(args, x_refs, y_refs, x_clean, x_batch) -> int:
    """``score --test mmd|chi2|classif``: one batch-level statistic and p-value."""
    import json

    from dgpbench.detectors import make_detector
    from dgpbench.features.registry import make_features
    from dgpbench.models.train import torch_threads

    params: dict = {"alpha": args.alpha}
    if args.test in ("mmd", "classif"):
        params["random_state"] = args.seed
    if args.test == "mmd":
        params["n_permutations"] = args.permutations
    detector = make_detector(args.test, **params)
    with torch_threads(args.threads):
        if args.test == "classif":  # the domain classifier learns from the images themselves
            method = "images"
            result = detector.fit(x_clean).test(x_batch)
        else:
            method = args.method
            feats = make_features(
                args.method, args.model, batch_size=args.batch_size, n_jobs=args.threads
            )
            feats.fit(x_refs, y_refs)
            result = detector.fit(feats.transform(x_clean)).test(feats.transform(x_batch))
    summary = {
        "shift": bool(result.is_drift),
        "test": args.test,
        "statistic": float(result.statistic),
        "p_value": result.p_value,
        "threshold": float(result.threshold),
        "alpha": args.alpha,
        "method": method,
        "n_refs": len(x_refs),
        "n_clean": result.n_ref,
        "n_batch": result.n,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        verdict = "SHIFT" if result.is_drift else "no shift"
        print(
            f"{verdict}: {args.test} p-value {result.p_value:.4g}, statistic "
            f"{float(result.statistic):.4g} (alpha {args.alpha:g}); representation {method}; "
            f"{result.n_ref} clean and {result.n} test images"
        )
    return 1 if result.is_drift else 0


def _require_fit_args(args: argparse.Namespace) -> None:
    """Refuse a fit without --model/--clean (and --refs, which softmax + KS may leave out)."""
    missing = [f"--{k}" for k in ("model", "clean") if getattr(args, k) is None]
    optional = args.method == "softmax" and getattr(args, "test", "ks") == "ks"
    if args.refs is None and not optional:
        missing.append("--refs")
    if missing:
        hint = "" if args.command == "fit" else "; or pass --detector from `dgpbench fit`"
        raise CommandError(
            f"missing {', '.join(missing)} (--refs may be left out for --method softmax only{hint})"
        )


def _fit_detector(args: argparse.Namespace) -> FittedDetector:
    """Fit features + KS detector from --model, --refs, --clean (shared by `fit` and `score`)."""
    from dgpbench.data.datasets import load_npz_images
    from dgpbench.detectors.ks import KSShiftDetector
    from dgpbench.features.output import fit_method, transform_method
    from dgpbench.features.registry import make_features
    from dgpbench.models.train import torch_threads
    from dgpbench.saved import FittedDetector

    _require_fit_args(args)
    # Every file is read (and checked) before the model runs, so a bad one fails at once.
    x_clean = load_npz_images(args.clean)
    if args.refs is None:  # softmax: the class means are unused, no labels needed
        x_refs, y_refs = x_clean, None
    elif args.method == "softmax" and "y" not in load_npz(args.refs):
        x_refs, y_refs = load_npz_images(args.refs), None
    else:
        x_refs, y_refs = load_npz_images(args.refs, labels=True)
    correction = None if args.correction == "none" else args.correction
    detector = KSShiftDetector(alpha=args.alpha, correction=correction)
    with torch_threads(args.threads):
        feats = make_features(
            args.method, args.model, batch_size=args.batch_size, n_jobs=args.threads
        )
        fit_method(feats, x_refs, y_refs, args.method)
        detector.fit(
            transform_method(feats, x_clean, args.method, f"the clean images {args.clean}")
        )
    info = {"method": args.method, "n_refs": len(x_refs), "labelled_refs": y_refs is not None}
    return FittedDetector(feats, detector, info)


# --------------------------------------------------------------------------------------------
# fit: save a detector for `dgpbench score --detector`
# --------------------------------------------------------------------------------------------
def _fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument(
        "--refs",
        default=None,
        help=".npz with labelled images x, y: class means (optional for --method softmax)",
    )
    p.add_argument("--clean", required=True, help=".npz with images x: clean reference batch")
    p.add_argument("--method", default="dgp", help=METHOD_HELP)
    p.add_argument("--alpha", type=_significance, default=0.05, help="significance level")
    p.add_argument(
        "--correction",
        default="bonferroni",
        choices=["bonferroni", "fdr", "none"],
        help="multiple-testing correction over the features",
    )
    _forward_pass_args(p, device=False)
    p.add_argument("--out", required=True, help="the detector file to write (.npz)")


def _fit(args: argparse.Namespace) -> None:
    from dgpbench.saved import save_detector

    fitted = _fit_detector(args)
    save_detector(args.out, fitted, model=args.model)
    log.info(
        "%s detector (%d reference images) -> %s", args.method, fitted.info["n_refs"], args.out
    )


SUBCOMMANDS.update(
    {
        "score": (
            "Test one batch of images for covariate shift (exit 0 = no shift, 1 = shift).",
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
