"""The Failing-loudly grid's workflow steps as ``dgpbench`` subcommands.

``fl-images`` (the pools) -> ``fl-shift`` (one shift class, all fractions) -> ``fl-features``
(one representation of one model) -> ``fl-detect`` (one method: every cell's draws) ->
``fl-report`` / ``fl-figure`` (tables, summary, figure). Each reads files, calls the library
(:mod:`dgpbench.shifts`, :mod:`dgpbench.failing_loudly.grid`, :mod:`dgpbench.failing_loudly.reporting`) and writes
its output atomically, so an interrupted run resumes cleanly.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

from dgpbench.cli.arguments import forward_pass_args as _forward_pass_args
from dgpbench.cli.arguments import parse_tags as _parse_tags
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.arguments import require_arrays as _require
from dgpbench.cli.arguments import significance as _significance
from dgpbench.cli.registry import SUBCOMMANDS
from dgpbench.io import load_npz, save_npz, write_csv

log = logging.getLogger(__name__)

_SEP = "__"  # shift__fraction__field keys of the shift and feature files


def _fraction_key(fraction: float) -> str:
    return f"{float(fraction):g}"


# --------------------------------------------------------------------------------------------
# fl-images
# --------------------------------------------------------------------------------------------
def _images_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="mnist, fashion-mnist, cifar10, digits, ...")
    p.add_argument("--data-root", default=None, help="torchvision data root")
    p.add_argument("--download", action="store_true", help="download missing data (network)")
    p.add_argument("--n-fit", type=_positive_int, default=1000, help="labelled fit images")
    p.add_argument("--n-ref-pool", type=_positive_int, default=10000, help="reference pool size")
    p.add_argument("--n-test-pool", type=_positive_int, default=10000, help="test pool size")
    p.add_argument("--val-fraction", type=float, default=0.2, help="the training's held-out share")
    p.add_argument("--split-seed", type=int, default=None, help="the training's split seed")
    p.add_argument("--seed", type=int, default=112, help="seed of the pools' shuffle")
    p.add_argument(
        "--out",
        required=True,
        help="output .npz: x_fit, x_ref, x_test, labels; *_split (0 train, 1 test) and "
        "*_index (position in that split) for provenance",
    )


def _images(args: argparse.Namespace) -> None:
    from dgpbench.data.datasets import load_dataset, stratified_choice
    from dgpbench.models.train import TrainConfig

    split_seed = TrainConfig().split_seed if args.split_seed is None else args.split_seed
    if not 0 < args.val_fraction < 1:
        raise ValueError(f"--val-fraction must be in (0, 1), got {args.val_fraction}")
    x_tr, y_tr = load_dataset(args.dataset, args.data_root, "train", download=args.download)
    x_te, y_te = load_dataset(args.dataset, args.data_root, "test", download=args.download)
    # The validation part the models held out (same rule and seed as their training).
    n_val = round(args.val_fraction * len(y_tr))
    val_idx = np.sort(stratified_choice(y_tr, n_val, np.random.default_rng(split_seed)))
    train_mask = np.ones(len(y_tr), dtype=bool)
    train_mask[val_idx] = False
    train_idx = np.flatnonzero(train_mask)
    fit_seq, pool_seq = np.random.SeedSequence(args.seed).spawn(2)
    n_fit = min(args.n_fit, len(train_idx))
    fit_idx = train_idx[stratified_choice(y_tr[train_idx], n_fit, np.random.default_rng(fit_seq))]
    # Both pools come from one shuffled set of the images no model trained on (the held-out
    # validation images and the test split), as Rabanser et al. shuffle train and test
    # together before splitting: a data set's train and test splits can differ (on MNIST, KS
    # on the pixels tells them apart at n = 10000), which would be a shift under the null.
    x_pool = np.concatenate([x_tr[val_idx], x_te])
    y_pool = np.concatenate([y_tr[val_idx], y_te])
    source = np.concatenate([np.zeros(len(val_idx), np.int64), np.ones(len(y_te), np.int64)])
    index = np.concatenate([val_idx, np.arange(len(y_te))])
    order = np.random.default_rng(pool_seq).permutation(len(y_pool))
    n_ref, n_test = args.n_ref_pool, args.n_test_pool
    if n_ref + n_test > len(order):
        scale = len(order) / (n_ref + n_test)
        n_ref, n_test = int(n_ref * scale), len(order) - int(n_ref * scale)
        log.warning(
            "%d unseen images for pools of %d + %d: using %d + %d",
            len(order), args.n_ref_pool, args.n_test_pool, n_ref, n_test,
        )  # fmt: skip
    ref, test = order[:n_ref], order[n_ref : n_ref + n_test]
    save_npz(
        args.out,
        x_fit=x_tr[fit_idx], y_fit=y_tr[fit_idx],
        x_ref=x_pool[ref], y_ref=y_pool[ref],
        x_test=x_pool[test], y_test=y_pool[test],
        fit_index=fit_idx,
        ref_split=source[ref], ref_index=index[ref],
        test_split=source[test], test_index=index[test],
    )  # fmt: skip
    log.info("pools: %d fit, %d reference, %d test -> %s", n_fit, n_ref, n_test, args.out)


# --------------------------------------------------------------------------------------------
# fl-shift
# --------------------------------------------------------------------------------------------
def _shift_args(p: argparse.ArgumentParser) -> None:
    from dgpbench.shifts import SHIFTS

    p.add_argument("--images", required=True, help="pools (.npz from `dgpbench fl-images`)")
    p.add_argument("--shift", required=True, choices=SHIFTS, help="Failing loudly's name")
    p.add_argument(
        "--fractions", type=float, nargs="+", default=[0.1, 0.5, 1.0], help="shifted shares"
    )
    p.add_argument("--seed", type=int, default=112, help="seed of the shifts' draws")
    p.add_argument("--model", default=None, help="attacked classifier (adversarial_shift)")
    p.add_argument("--max-epsilon", type=float, default=1.0, help="FGSM's largest step")
    p.add_argument("--n-epsilons", type=_positive_int, default=100, help="FGSM's grid size")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch threads")
    p.add_argument("--out", required=True, help="output .npz, one set of arrays per fraction")


def _shift(args: argparse.Namespace) -> None:
    from dgpbench.models.train import load_checkpoint, torch_threads
    from dgpbench.shifts import NEEDS_MODEL, apply_shift

    pools = load_npz(args.images)
    _require(pools, args.images, ["x_test", "y_test"], "fl-images")
    model = None
    if args.shift in NEEDS_MODEL:
        if args.model is None:
            raise ValueError(f"--shift {args.shift} needs --model (the attacked classifier)")
        model, _ = load_checkpoint(args.model)
    arrays = {}
    with torch_threads(args.threads):
        for fraction in args.fractions:
            pool = apply_shift(
                args.shift, fraction, pools["x_test"], pools["y_test"], seed=args.seed,
                model=model, max_epsilon=args.max_epsilon, n_epsilons=args.n_epsilons,
            )  # fmt: skip
            key = _fraction_key(fraction)
            arrays.update({f"{key}{_SEP}{field}": getattr(pool, field)
                           for field in ("index", "shifted", "x_new", "y")})  # fmt: skip
            log.info("%s at %s: %d images, %d altered", args.shift, key, len(pool.index),
                     int(pool.shifted.sum()))  # fmt: skip
    save_npz(args.out, shift=np.array(args.shift), **arrays)


def _read_shift_file(path: str) -> tuple[str, dict[float, dict[str, np.ndarray]]]:
    arrays = load_npz(path)
    _require(arrays, path, ["shift"], "fl-shift")
    shift = str(arrays.pop("shift"))
    by_fraction: dict[float, dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        frac, _, field = key.partition(_SEP)
        by_fraction.setdefault(float(frac), {})[field] = value
    return shift, by_fraction


# --------------------------------------------------------------------------------------------
# fl-features
# --------------------------------------------------------------------------------------------
def _features_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--representation", required=True, help="noredu, pca, ..., dgp, classif")
    p.add_argument("--model", default="none", help="checkpoint, or none (model-free)")
    p.add_argument("--images", required=True, help="pools (`dgpbench fl-images`)")
    p.add_argument("--shifts", nargs="*", default=[], help="shift files (`dgpbench fl-shift`)")
    _forward_pass_args(p)
    p.add_argument("--seed", type=int, default=0, help="random_state of seeded reductions")
    p.add_argument("--out", required=True, help="output .npz of features per image set")


def _make_rep(name: str, model, args: argparse.Namespace):
    from dgpbench.failing_loudly.toolbox import MODEL_FREE, make_representation

    params = {} if name in MODEL_FREE else {
        "batch_size": args.batch_size, "n_jobs": args.threads, "device": args.device,
    }  # fmt: skip
    try:
        return make_representation(name, model, random_state=args.seed, **params)
    except TypeError:  # a representation without randomness takes no random_state
        return make_representation(name, model, **params)


def _features(args: argparse.Namespace) -> None:
    from dgpbench.failing_loudly.toolbox import MODEL_FREE
    from dgpbench.models.train import torch_threads

    pools = load_npz(args.images)
    _require(pools, args.images, ["x_fit", "y_fit", "x_ref", "x_test"], "fl-images")
    shifts = [_read_shift_file(path) for path in args.shifts]  # read all before computing
    model = None if args.model == "none" else args.model
    if model is None and args.representation not in MODEL_FREE:
        raise ValueError(f"representation {args.representation!r} needs --model")
    out: dict[str, np.ndarray] = {"image_shape": np.array(pools["x_test"].shape[1:])}
    with torch_threads(args.threads):
        est = _make_rep(args.representation, model, args)
        est.fit(pools["x_fit"], pools["y_fit"])
        out["ref"] = est.transform(pools["x_ref"])
        out["test"] = est.transform(pools["x_test"])
        for shift, by_fraction in shifts:
            for fraction, arrays in by_fraction.items():
                key = f"{shift}{_SEP}{_fraction_key(fraction)}"
                new = arrays["x_new"]
                feats = est.transform(new) if len(new) else np.empty((0, out["test"].shape[1]),
                                                                     out["test"].dtype)  # fmt: skip
                out[f"{key}{_SEP}new"] = feats
                out[f"{key}{_SEP}index"] = arrays["index"]
                out[f"{key}{_SEP}shifted"] = arrays["shifted"]
    save_npz(args.out, **out)
    log.info("%s features -> %s", args.representation, args.out)


# --------------------------------------------------------------------------------------------
# fl-detect
# --------------------------------------------------------------------------------------------
def _ref_size(text: str) -> int | None:
    return None if text == "n" else _positive_int(text)


def _top_n(text: str) -> tuple[str, int]:
    shift, sep, value = text.partition("=")
    try:
        return shift, int(value) if sep else int("x")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SHIFT=N, got {text!r}") from None


def _detect_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", required=True, help="`dgpbench fl-features` output")
    p.add_argument("--method", required=True, help="representation+test (e.g. pca+mmd) or classif")
    p.add_argument("--ns", type=_positive_int, nargs="+", required=True, help="sample sizes n")
    p.add_argument("--draws", type=_positive_int, default=30, help="draws per cell")
    p.add_argument("--seed", type=int, default=112, help="seed of the draws")
    p.add_argument("--alpha", type=_significance, default=0.05, help="significance level")
    p.add_argument(
        "--correction",
        default="bonferroni",
        choices=["bonferroni", "fdr", "none"],
        help="multiple-testing correction over the features (KS)",
    )
    p.add_argument("--n-permutations", type=_positive_int, default=1000, help="MMD permutations")
    p.add_argument(
        "--multivariate-ref",
        type=_ref_size,
        default=1000,
        help="MMD's reference size m (Rabanser et al.: 1000), or n for m = n",
    )
    p.add_argument(
        "--top-n",
        type=_top_n,
        action="append",
        default=[],
        metavar="SHIFT=N",
        help="largest n for a shift (Rabanser et al.: 9000 for the knock-outs)",
    )
    p.add_argument(
        "--no-calibration", action="store_true", help="skip the no-shift (fraction 0) cells"
    )
    p.add_argument("--tag", action="append", default=[], help="key=value column")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch/numba threads")
    p.add_argument("--out", required=True, help="records CSV")


class _Pools(Mapping):
    """(shift, fraction) -> features of that test pool, built when asked for (a pool of
    10000 pixel rows is 31 MB: never hold all 31 at once)."""

    def __init__(self, feats: dict[str, np.ndarray], calibration: bool) -> None:
        from dgpbench.failing_loudly.grid import CALIBRATION

        self._feats = feats
        self._keys: dict[tuple[str, float], str | None] = {}
        if calibration:
            self._keys[(CALIBRATION, 0.0)] = None
        for key in sorted({k.rsplit(_SEP, 1)[0] for k in feats if k.endswith(f"{_SEP}new")}):
            shift, _, frac = key.partition(_SEP)
            self._keys[(shift, float(frac))] = key

    def __getitem__(self, cell: tuple[str, float]) -> np.ndarray:
        key, test = self._keys[cell], self._feats["test"]
        if key is None:
            return test
        pool = np.array(test[self._feats[f"{key}{_SEP}index"]], copy=True)
        pool[self._feats[f"{key}{_SEP}shifted"]] = self._feats[f"{key}{_SEP}new"]
        return pool

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def _detect(args: argparse.Namespace) -> None:
    from dgpbench.failing_loudly.grid import method_records, parse_method
    from dgpbench.models.train import torch_threads

    method = parse_method(args.method)
    tags = _parse_tags(args.tag)
    feats = load_npz(args.features)
    _require(feats, args.features, ["ref", "test", "image_shape"], "fl-features")
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    params: dict = {"alpha": args.alpha}
    if method.test == "ks":
        params["correction"] = None if args.correction == "none" else args.correction
    elif method.test == "mmd":
        params["n_permutations"] = args.n_permutations
    image_shape = tuple(int(s) for s in feats["image_shape"]) if method.test == "classif" else None
    with torch_threads(args.threads):
        records = method_records(
            feats["ref"], _Pools(feats, not args.no_calibration), method, ns=args.ns,
            n_draws=args.draws, seed=args.seed, params=params,
            multivariate_ref=args.multivariate_ref, top_n=dict(args.top_n),
            image_shape=image_shape,
        )  # fmt: skip
    front = {"method": method.name, "representation": method.representation,
             "test": method.test, "dimension": method.dimension}  # fmt: skip
    for i, (key, value) in enumerate({**tags, **front}.items()):
        records.insert(i, key, value)
    write_csv(args.out, records, float_format="%.6g")
    log.info("%d records -> %s", len(records), args.out)


# --------------------------------------------------------------------------------------------
# fl-report / fl-figure
# --------------------------------------------------------------------------------------------
def _read_records(paths: list[str]) -> pd.DataFrame:
    if len(set(paths)) != len(paths):
        raise ValueError("record files given more than once")
    frames = [pd.read_csv(p, dtype={"model": str, "kind": str, "dataset": str}) for p in paths]
    records = pd.concat(frames, ignore_index=True)
    need = ["dataset", "model", "kind", "method", "dimension", "shift", "n", "rejected"]
    missing = [c for c in need if c not in records]
    if missing:
        raise ValueError(f"records lack columns {missing}; expected `dgpbench fl-detect` output")
    key = [c for c in records if c not in ("rejected", "p_value")]
    if records.duplicated(key).any():
        raise ValueError("records count a draw twice (duplicated record files or grid values)")
    return records


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="+", help="record CSVs of `dgpbench fl-detect`")
    p.add_argument("--alpha", type=_significance, default=0.05, help="significance level")
    p.add_argument("--out-dir", required=True, help="folder for the tables")
    p.add_argument("--aggregate", default=None, help="also write all records here (.csv.gz)")


def _report(args: argparse.Namespace) -> None:
    from dgpbench.failing_loudly.reporting import write_report

    records = _read_records(args.records)
    if args.aggregate:
        write_csv(args.aggregate, records, float_format="%.6g")
    written = write_report(records, args.out_dir, alpha=args.alpha)
    log.info("Failing-loudly tables -> %s", [str(p) for p in written.values()])


def _figure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="+", help="record CSVs of `dgpbench fl-detect`")
    p.add_argument("--dataset", required=True, help="the data set whose panels to draw")
    p.add_argument("--out", required=True, help="figure stem (writes .png and .pdf)")


def _figure(args: argparse.Namespace) -> None:
    from dgpbench.failing_loudly.reporting import accuracy_figure

    paths = accuracy_figure(_read_records(args.records), args.dataset, args.out)
    log.info("figure -> %s", [str(p) for p in paths])


SUBCOMMANDS.update(
    {
        "fl-images": ("Failing loudly's grid: the fit, reference and test pools.",
                      _images_args, _images),
        "fl-shift": ("Failing loudly's grid: one shift class at its fractions.",
                     _shift_args, _shift),
        "fl-features": ("Failing loudly's grid: one representation of every pool.",
                        _features_args, _features),
        "fl-detect": ("Failing loudly's grid: every draw of one method (with calibration).",
                      _detect_args, _detect),
        "fl-report": ("Failing loudly's grid: Tables 1a/1b, false positives, summary.",
                      _report_args, _report),
        "fl-figure": ("Failing loudly's grid: accuracy vs n per shift class.",
                      _figure_args, _figure),
    }
)  # fmt: skip
