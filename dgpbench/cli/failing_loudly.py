"""The Failing-loudly grid's workflow steps as ``dgpbench`` subcommands.

``fl-images`` (the unseen images and each independent run's pools) -> ``fl-shift`` (one shift
class, all fractions, re-applied per run) -> ``fl-features`` (one representation of one
model) -> ``fl-detect`` (one method: every cell's draws in every run) -> ``fl-report`` /
``fl-figure`` (tables, ranks, summary, figures). Each reads files, calls the library
(:mod:`dgpbench.shifts`, :mod:`dgpbench.failing_loudly.grid`,
:mod:`dgpbench.failing_loudly.reporting`) and writes its output atomically, so an interrupted
run resumes cleanly; ``fl-detect`` also resumes within a job, at its last finished unit
(:mod:`dgpbench.failing_loudly.checkpoint`). Every output records the protocol
(``--protocol``) and the pools it came from (data set, seed, checksum); a step refuses inputs
of other pools or another protocol.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from dgpbench.cli.arguments import forward_pass_args as _forward_pass_args
from dgpbench.cli.arguments import parse_tags as _parse_tags
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.arguments import require_arrays as _require
from dgpbench.cli.arguments import significance as _significance
from dgpbench.cli.registry import SUBCOMMANDS
from dgpbench.io import load_npz, save_npz, write_csv

if TYPE_CHECKING:  # pandas only in the steps that read records (fl-report, fl-figure)
    import pandas as pd

log = logging.getLogger(__name__)

_SEP = "__"  # shift__fraction__field keys of the shift and feature files


def _fraction_key(fraction: float) -> str:
    return repr(float(fraction))  # exact: 0.1 and 0.1000001 stay two keys


MIN_RUNS = 5
"""Independent runs below which fl-images warns (the intervals count runs: rough on fewer than 5)."""

PROTOCOLS: tuple[str, ...] = ("dgpbench", "rabanser")
"""``dgpbench``: this benchmark's choices; ``rabanser``: Rabanser et al.'s code as they ran it
(docs/failing-loudly.md, "Protocols")."""


def _protocol_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="dgpbench",
        help="dgpbench's choices or Rabanser et al.'s (docs/failing-loudly.md, 'Protocols')",
    )


def _text(arrays: Mapping, key: str) -> str:
    return str(np.asarray(arrays[key]).item())


def _check_same_pools(arrays: Mapping, path: str, pools_id: str, pools_path: str) -> None:
    """Refuse a file made from other pools (another data set, seed or run split)."""
    if "pools_id" not in arrays:
        raise ValueError(
            f"{path} records no pools (no 'pools_id'): remake it with this version of dgpbench"
        )
    if _text(arrays, "pools_id") != pools_id:
        raise ValueError(
            f"{path} was made from other pools (data set {_text(arrays, 'dataset')!r}, pools "
            f"{_text(arrays, 'pools_id')[:12]}) than {pools_path} (pools {pools_id[:12]}): "
            "remake it from these pools"
        )


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
    p.add_argument(
        "--runs",
        type=_positive_int,
        default=5,
        help="independent runs: each reshuffles the unseen images into its own pools",
    )
    p.add_argument("--val-fraction", type=float, default=0.2, help="the training's held-out share")
    p.add_argument("--split-seed", type=int, default=None, help="the training's split seed")
    p.add_argument("--seed", type=int, default=112, help="seed of the fit images and the runs")
    p.add_argument(
        "--out",
        required=True,
        help="output .npz: x_fit, the unseen images (x_unseen; *_split 0 train, 1 test and "
        "*_index, the position in that split, for provenance) and each run's pools "
        "(run_ref, run_test: rows of x_unseen)",
    )


def _pools_id(dataset: str, seed: int, x: np.ndarray, *index: np.ndarray) -> str:
    import hashlib

    h = hashlib.sha256(f"{dataset}\0{seed}\0{x.shape}\0".encode())
    for arr in (x, *index):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def _images(args: argparse.Namespace) -> None:
    from dgpbench.data.datasets import VALIDATION_SPLIT_SEED, load_dataset, stratified_choice
    from dgpbench.failing_loudly.grid import run_split

    split_seed = VALIDATION_SPLIT_SEED if args.split_seed is None else args.split_seed
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
    fit_seq = np.random.SeedSequence(args.seed).spawn(1)[0]
    n_fit = min(args.n_fit, len(train_idx))
    fit_idx = train_idx[stratified_choice(y_tr[train_idx], n_fit, np.random.default_rng(fit_seq))]
    # Both pools of every run come from one set of the images no model trained on (the
    # held-out validation images and the test split), as Rabanser et al. shuffle train and
    # test together before splitting: a data set's train and test splits can differ (on
    # MNIST, KS on the pixels tells them apart at n = 10000), which would be a shift under
    # the null. Each run reshuffles that set into fresh pools (their random runs).
    x_unseen = np.concatenate([x_tr[val_idx], x_te])
    y_unseen = np.concatenate([y_tr[val_idx], y_te]).astype(np.int64)
    source = np.concatenate([np.zeros(len(val_idx), np.int64), np.ones(len(y_te), np.int64)])
    index = np.concatenate([val_idx, np.arange(len(y_te))]).astype(np.int64)
    n_ref, n_test = args.n_ref_pool, args.n_test_pool
    if n_ref + n_test > len(y_unseen):
        scale = len(y_unseen) / (n_ref + n_test)
        n_ref, n_test = int(n_ref * scale), len(y_unseen) - int(n_ref * scale)
        log.warning(
            "%d unseen images for pools of %d + %d: using %d + %d",
            len(y_unseen), args.n_ref_pool, args.n_test_pool, n_ref, n_test,
        )  # fmt: skip
    if args.runs < MIN_RUNS:
        log.warning(
            "--runs %d: every interval will rest on fewer than %d independent units",
            args.runs, MIN_RUNS,
        )  # fmt: skip
    splits = [
        run_split(len(y_unseen), n_ref, n_test, seed=args.seed, run=r) for r in range(args.runs)
    ]
    run_ref = np.stack([s[0] for s in splits])
    run_test = np.stack([s[1] for s in splits])
    n_classes = int(max(y_tr.max(), y_te.max())) + 1
    pools_id = _pools_id(args.dataset, args.seed, x_unseen, fit_idx, run_ref, run_test)
    save_npz(
        args.out,
        x_fit=x_tr[fit_idx], y_fit=y_tr[fit_idx], fit_index=fit_idx,
        x_unseen=x_unseen, y_unseen=y_unseen, unseen_split=source, unseen_index=index,
        run_ref=run_ref, run_test=run_test, n_classes=np.array(n_classes),
        dataset=np.array(str(args.dataset)), seed=np.array(int(args.seed)),
        pools_id=np.array(pools_id),
    )  # fmt: skip
    log.info("pools: %d fit, %d runs of %d reference + %d test (of %d unseen) -> %s",
             n_fit, args.runs, n_ref, n_test, len(y_unseen), args.out)  # fmt: skip


def _read_pools(path: str, keys: list[str]) -> dict[str, np.ndarray]:
    pools = load_npz(path)
    _require(pools, path, [*keys, "run_ref", "run_test", "pools_id", "dataset"], "fl-images")
    return pools


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
    _protocol_arg(p)
    p.add_argument("--model", default=None, help="attacked classifier (adversarial_shift)")
    p.add_argument("--max-epsilon", type=float, default=1.0, help="FGSM's largest step")
    p.add_argument("--n-epsilons", type=_positive_int, default=100, help="FGSM's grid size")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch threads")
    p.add_argument(
        "--out", required=True, help="output .npz, one set of arrays per run and fraction"
    )


def _check_fractions(fractions: list[float]) -> None:
    """Refuse fractions the grid cannot tell apart (its streams key them to 1e-6)."""
    seen: dict[int, float] = {}
    for f in fractions:
        if not 0 < f <= 1:
            raise ValueError(f"--fractions must be in (0, 1], got {f:g}")
        key = round(f * 1e6)
        if key in seen:
            raise ValueError(
                f"--fractions {seen[key]!r} and {f!r} are the same fraction to the grid's "
                "resolution (1e-6): give each once"
            )
        seen[key] = f


def _shift(args: argparse.Namespace) -> None:
    from dgpbench.shifts import NEEDS_MODEL, apply_shift
    from dgpbench.threads import torch_threads

    _check_fractions(args.fractions)
    pools = _read_pools(args.images, ["x_unseen", "y_unseen"])
    model = None
    if args.shift in NEEDS_MODEL:
        if args.model is None:
            raise ValueError(f"--shift {args.shift} needs --model (the attacked classifier)")
        if str(args.model).endswith(".pt2"):
            raise ValueError(
                f"--model {args.model}: FGSM needs the gradients of a training checkpoint "
                "(the .pt that `dgpbench train` or the workflow writes), not an exported .pt2"
            )
        from dgpbench.models.checkpoints import load_checkpoint  # torch: only for FGSM

        model, _ = load_checkpoint(args.model)
    arrays = {}
    x, y = pools["x_unseen"], pools["y_unseen"]
    with torch_threads(args.threads):
        for run, rows in enumerate(pools["run_test"]):
            for fraction in args.fractions:
                pool = apply_shift(
                    args.shift, fraction, x[rows], y[rows], seed=args.seed, run=run,
                    model=model, max_epsilon=args.max_epsilon, n_epsilons=args.n_epsilons,
                    shear_unit="degrees" if args.protocol == "rabanser" else "radians",
                )  # fmt: skip
                key = _cell_key(run, fraction)
                arrays.update({f"{key}{_SEP}{field}": getattr(pool, field)
                               for field in ("index", "shifted", "x_new", "y")})  # fmt: skip
                log.info("%s at %s, run %d: %d images, %d altered", args.shift,
                         _fraction_key(fraction), run, len(pool.index),
                         int(pool.shifted.sum()))  # fmt: skip
    save_npz(
        args.out, shift=np.array(args.shift), protocol=np.array(args.protocol),
        shift_seed=np.array(int(args.seed)),
        pools_id=pools["pools_id"], dataset=pools["dataset"], **arrays,
    )  # fmt: skip


def _cell_key(run: int, fraction: float) -> str:
    return f"r{run}{_SEP}{_fraction_key(fraction)}"


def _read_shift_file(path: str) -> tuple[str, dict, dict[tuple[int, float], dict]]:
    """``(shift, metadata, {(run, fraction): {field: array}})`` of an `fl-shift` output."""
    arrays = load_npz(path)
    _require(arrays, path, ["shift", "protocol", "pools_id", "dataset"], "fl-shift")
    meta = {k: arrays.pop(k) for k in ("shift", "protocol", "pools_id", "dataset")}
    arrays.pop("shift_seed", None)
    cells: dict[tuple[int, float], dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        run, _, rest = key.partition(_SEP)
        frac, _, field = rest.partition(_SEP)
        try:
            cell = (int(run.removeprefix("r")), float(frac))
        except ValueError:
            raise ValueError(
                f"{path}: unexpected array {key!r} (not an `fl-shift` output)"
            ) from None
        cells.setdefault(cell, {})[field] = value
    return str(meta["shift"]), meta, cells


# --------------------------------------------------------------------------------------------
# fl-features
# --------------------------------------------------------------------------------------------
def _features_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--representation", required=True, help="noredu, pca, ..., dgp, classif")
    p.add_argument("--model", default="none", help="checkpoint, or none (model-free)")
    p.add_argument("--images", required=True, help="pools (`dgpbench fl-images`)")
    p.add_argument("--shifts", nargs="*", default=[], help="shift files (`dgpbench fl-shift`)")
    _protocol_arg(p)
    _forward_pass_args(p)
    p.add_argument("--seed", type=int, default=0, help="random_state of seeded reductions")
    p.add_argument("--out", required=True, help="output .npz of features per image set")


RABANSER_DIMENSIONS = 32
"""Rabanser et al.'s ``dr_amount``: PCA's and SRP's output dimension under their protocol."""


def _make_rep(name: str, model, args: argparse.Namespace):
    from dgpbench.failing_loudly.toolbox import MODEL_FREE, make_representation

    params: dict = {"progress": True}  # long work reports itself (TAE trains 200 epochs)
    if name not in MODEL_FREE:
        params.update(batch_size=args.batch_size, n_jobs=args.threads, device=args.device)
    if args.protocol == "rabanser" and name in ("pca", "srp"):
        params["n_components"] = RABANSER_DIMENSIONS
    # a representation without randomness is built without random_state
    return make_representation(name, model, random_state=args.seed, **params)


def _check_representation(name: str) -> None:
    from dgpbench.features.registry import METHODS

    known = sorted({*METHODS, "classif"})
    if name not in known:
        raise ValueError(f"--representation {name!r} is unknown; choose from {known}")


def _features(args: argparse.Namespace) -> None:
    from dgpbench.failing_loudly.toolbox import MODEL_FREE
    from dgpbench.threads import torch_threads

    _check_representation(args.representation)
    model = None if args.model == "none" else args.model
    if model is None and args.representation not in MODEL_FREE:
        raise ValueError(
            f"representation {args.representation!r} reads a classifier: it needs --model "
            f"(a checkpoint); only {sorted(MODEL_FREE)} run with --model none"
        )
    pools = _read_pools(args.images, ["x_fit", "y_fit", "x_unseen"])
    pools_id = _text(pools, "pools_id")
    _refuse_repeats(args.shifts, "shift file")
    shifts = []
    seen: dict[str, str] = {}
    for path in args.shifts:  # read and check all before computing
        shift, meta, cells = _read_shift_file(path)
        if shift in seen:  # its features would overwrite the first file's
            raise ValueError(f"--shifts: {seen[shift]} and {path} both hold shift {shift!r}")
        seen[shift] = path
        _check_same_pools(meta, path, pools_id, args.images)
        protocol = _text(meta, "protocol")
        if protocol != args.protocol:
            raise ValueError(
                f"{path} was made under protocol {protocol!r}, not --protocol {args.protocol}"
            )
        shifts.append((shift, cells))
    out: dict[str, np.ndarray] = {
        "image_shape": np.array(pools["x_unseen"].shape[1:]),
        "run_ref": pools["run_ref"], "run_test": pools["run_test"],
        "representation": np.array(args.representation), "protocol": np.array(args.protocol),
        "pools_id": pools["pools_id"], "dataset": pools["dataset"],
        "n_classes": pools.get("n_classes", np.array(-1)),
    }  # fmt: skip
    with torch_threads(args.threads):
        est = _make_rep(args.representation, model, args)
        est.fit(pools["x_fit"], pools["y_fit"])
        out["unseen"] = unseen = est.transform(pools["x_unseen"])
        for shift, cells in shifts:
            for (run, fraction), arrays in cells.items():
                key = f"r{run}{_SEP}{shift}{_SEP}{_fraction_key(fraction)}"
                new = arrays["x_new"]
                feats = est.transform(new) if len(new) else np.empty((0, unseen.shape[1]),
                                                                     unseen.dtype)  # fmt: skip
                out[f"{key}{_SEP}new"] = feats
                out[f"{key}{_SEP}index"] = arrays["index"]
                out[f"{key}{_SEP}shifted"] = arrays["shifted"]
    save_npz(args.out, **out)
    log.info("%s features -> %s", args.representation, args.out)


# --------------------------------------------------------------------------------------------
# fl-detect
# --------------------------------------------------------------------------------------------
def _ref_size(text: str) -> int | str:
    return "n" if text == "n" else _positive_int(text)


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
    p.add_argument("--draws", type=_positive_int, default=6, help="draws per cell and run (paired)")
    p.add_argument("--seed", type=int, default=112, help="seed of the draws")
    _protocol_arg(p)
    p.add_argument("--alpha", type=_significance, default=0.05, help="significance level")
    p.add_argument(
        "--correction",
        default="bonferroni",
        choices=["bonferroni", "fdr", "none"],
        help="multiple-testing correction over the features (KS and the per-feature tests)",
    )
    p.add_argument(
        "--n-permutations", type=_positive_int, default=1000, help="permutations (MMD, energy, ...)"
    )
    p.add_argument(
        "--multivariate-ref",
        type=_ref_size,
        default=None,
        help="MMD's reference size m, or n for m = n (default: 1000 under dgpbench; "
        "Rabanser et al.'s code, and --protocol rabanser: m = n)",
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
    p.add_argument(
        "--out",
        required=True,
        help="records CSV; until it is written, the finished units (cells of one run) are "
        "kept in OUT.partial.npz, and a rerun with the same inputs and options resumes at "
        "the last finished unit (the same records as an uninterrupted run)",
    )


class _Pools(Mapping):
    """(shift, fraction) -> features of one run's test pool, built when asked for (a pool of
    10000 pixel rows is 31 MB: never hold all 31 at once).
    """

    def __init__(self, feats: dict[str, np.ndarray], run: int, calibration: bool) -> None:
        from dgpbench.failing_loudly.grid import CALIBRATION

        self._feats = feats
        self._test = feats["run_test"][run]
        self._keys: dict[tuple[str, float], str | None] = {}
        if calibration:
            self._keys[(CALIBRATION, 0.0)] = None
        prefix = f"r{run}{_SEP}"
        for key in sorted({k.rsplit(_SEP, 1)[0] for k in feats
                           if k.startswith(prefix) and k.endswith(f"{_SEP}new")}):  # fmt: skip
            shift, _, frac = key.removeprefix(prefix).partition(_SEP)
            self._keys[(shift, float(frac))] = key

    def __getitem__(self, cell: tuple[str, float]) -> np.ndarray:
        key, test = self._keys[cell], self._feats["unseen"][self._test]
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
    from dgpbench import __version__
    from dgpbench.failing_loudly.checkpoint import UnitCheckpoint, checkpoint_path, fingerprint
    from dgpbench.failing_loudly.grid import RunPools, method_records, parse_method
    from dgpbench.threads import torch_threads

    method = parse_method(args.method)
    tags = _parse_tags(args.tag)
    feats = load_npz(args.features)
    _require(feats, args.features, ["unseen", "run_ref", "run_test", "image_shape",
                                    "representation", "protocol", "pools_id"],
             "fl-features")  # fmt: skip
    representation = _text(feats, "representation")
    if representation != method.representation:
        raise ValueError(
            f"--method {args.method} tests representation {method.representation!r}, but "
            f"{args.features} holds {representation!r} features"
        )
    if _text(feats, "protocol") != args.protocol:
        raise ValueError(
            f"{args.features} was made under protocol {_text(feats, 'protocol')!r}, not "
            f"--protocol {args.protocol}"
        )
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    params: dict = {"alpha": args.alpha}
    m = {None: 1000, "n": None}.get(args.multivariate_ref, args.multivariate_ref)
    if args.protocol == "rabanser":
        if args.multivariate_ref not in (None, "n"):
            raise ValueError(
                "--protocol rabanser compares MMD against m = n reference rows (their "
                "shift_detector.py): leave --multivariate-ref out"
            )
        m = None
        if method.test == "mmd":
            params["kernel"] = "rabanser"
        elif method.test == "chi2":
            n_classes = int(feats["n_classes"]) if "n_classes" in feats else -1
            if n_classes < 2:
                raise ValueError(f"{args.features} records no number of classes")
            params.update(zero_counts="uniform", n_classes=n_classes)
        elif method.test == "classif":
            params["alternative"] = "two-sided"
    # Every test gets the grid-wide settings its detector takes (the toolbox drops the rest).
    params["correction"] = None if args.correction == "none" else args.correction
    if method.test != "ks":
        params["n_permutations"] = args.n_permutations
    if method.test == "fisher" and feats["unseen"].shape[1] == 1:
        # Hard labels (bbsdh): Fisher's exact test per class indicator.
        n_classes = int(feats["n_classes"]) if "n_classes" in feats else -1
        if n_classes < 2:
            raise ValueError(f"{args.features} records no number of classes")
        params["n_classes"] = n_classes
    image_shape = tuple(int(s) for s in feats["image_shape"]) if method.test == "classif" else None
    runs = [
        RunPools(feats["unseen"][rows], _Pools(feats, r, not args.no_calibration))
        for r, rows in enumerate(feats["run_ref"])
    ]
    # Every option but the output's path, the features' contents (not their path) and what
    # the options became: a checkpoint of anything else is ignored.
    options = {k: v for k, v in vars(args).items()
               if not k.startswith("_") and k not in ("features", "out", "verbose")}  # fmt: skip
    derived = {"params": params, "m": m, "image_shape": image_shape, "version": __version__}
    checkpoint = UnitCheckpoint(
        checkpoint_path(args.out), fingerprint(args.features, {**options, **derived})
    )
    finished = checkpoint.load()
    with torch_threads(args.threads):
        try:
            records = method_records(
                runs, method, ns=args.ns, n_draws=args.draws, seed=args.seed, params=params,
                multivariate_ref=m, top_n=dict(args.top_n), image_shape=image_shape,
                progress=True, finished=finished, on_unit=checkpoint.add,
                resumed_from=str(checkpoint.path),
            )  # fmt: skip
        except BaseException:
            try:  # keep the units finished since the last write for the rerun
                checkpoint.save()
            except OSError as exc:
                log.warning("could not write the checkpoint %s: %s", checkpoint.path, exc)
            raise
    front = {"method": method.name, "representation": method.representation,
             "test": method.test, "dimension": method.dimension, "protocol": args.protocol,
             "pools_id": _text(feats, "pools_id")[:16]}  # fmt: skip
    for i, (key, value) in enumerate({**tags, **front}.items()):
        records.insert(i, key, value)
    write_csv(args.out, records, float_format="%.6g")
    checkpoint.remove()
    log.info("%d records -> %s", len(records), args.out)


# --------------------------------------------------------------------------------------------
# fl-report / fl-figure
# --------------------------------------------------------------------------------------------
def _refuse_repeats(paths: list[str], what: str) -> None:
    """Refuse a file given twice (under one name or two): its draws would count twice."""
    import os

    seen: dict[str, str] = {}
    for path in paths:
        real = os.path.realpath(path)
        if real in seen:
            same = path if seen[real] == path else f"{seen[real]} and {path}"
            raise ValueError(f"{what} given more than once: {same}")
        seen[real] = path


#: The record columns ``fl-detect`` takes from ``--tag`` (what the records are of).
_TAG_COLUMNS: tuple[str, ...] = ("dataset", "model", "kind")


def _read_record_file(path: str) -> pd.DataFrame:
    """One ``fl-detect`` record CSV, its problems named with the file."""
    import pandas as pd

    need = [*_TAG_COLUMNS, "method", "dimension", "shift", "n", "rejected"]
    try:
        frame = pd.read_csv(path, dtype={"model": str, "kind": str, "dataset": str})
    except (ValueError, pd.errors.ParserError) as exc:  # binary, empty, not a CSV
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"{path} is not a CSV of `dgpbench fl-detect` records: {first}") from None
    missing = [c for c in need if c not in frame]
    tags = [c for c in missing if c in _TAG_COLUMNS]
    if tags and len(tags) == len(missing):
        raise ValueError(
            f"{path} lacks the tag column(s) {tags} that say what its records are of: run "
            "`dgpbench fl-detect` with " + " ".join(f"--tag {c}=..." for c in tags)
        )
    if missing:
        raise ValueError(f"{path} lacks the record column(s) {missing} of `dgpbench fl-detect`")
    return frame


def _read_records(paths: list[str]) -> pd.DataFrame:
    return _read_inputs(paths)[0]


def _read_inputs(paths: list[str]) -> tuple[pd.DataFrame, bool]:
    """The draws of record files, or of cells files expanded into draws; and whether the
    inputs were cells files (:mod:`dgpbench.failing_loudly.cells`). A mix is refused.
    """
    import pandas as pd

    from dgpbench.failing_loudly.cells import from_cells, is_cells

    _refuse_repeats(paths, "record file")
    frames = [_read_record_file(p) for p in paths]
    kinds = [is_cells(frame.columns) for frame in frames]
    if len(set(kinds)) > 1:
        cells = [p for p, kind in zip(paths, kinds, strict=True) if kind]
        draws = [p for p, kind in zip(paths, kinds, strict=True) if not kind]
        raise ValueError(
            f"the inputs mix cells files ({', '.join(cells)}) with record files of draws "
            f"({', '.join(draws)}): report from one kind"
        )
    if kinds[0]:
        expanded = []
        for path, frame in zip(paths, frames, strict=True):
            try:
                expanded.append(from_cells(frame))
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        frames = expanded
    records = pd.concat(frames, ignore_index=True)
    if "pools_id" in records:
        mixed = records.groupby("dataset")["pools_id"].nunique()
        if (mixed > 1).any():
            raise ValueError(
                f"records of data set(s) {sorted(mixed.index[mixed > 1])} come from different "
                "pools (pools_id): report one grid's records together"
            )
    key = [c for c in records if c not in ("rejected", "p_value")]
    if records.duplicated(key).any():
        if kinds[0]:
            raise ValueError("the cells files count a cell twice (one grid's part given twice)")
        raise ValueError("records count a draw twice (duplicated record files or grid values)")
    return records, kinds[0]


#: The file of detections and draws per cell that ``fl-report`` writes beside the tables.
CELLS_FILE = "fl_cells.csv.gz"


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "records",
        nargs="+",
        help="record CSVs of `dgpbench fl-detect` (one row per draw), or instead cells files "
        "(fl_cells.csv.gz as fl-report writes it: detections and draws per cell), from which "
        "the same tables are recomputed; a mix of the two kinds is refused",
    )
    p.add_argument("--alpha", type=_significance, default=0.05, help="significance level")
    p.add_argument(
        "--out-dir",
        required=True,
        help="folder for the tables and fl_cells.csv.gz (detections and draws per cell)",
    )
    p.add_argument(
        "--aggregate", default=None, help="also write all records here (.csv.gz; not from cells)"
    )


def _report(args: argparse.Namespace) -> None:
    from pathlib import Path

    from dgpbench.failing_loudly.breakdowns import write_breakdowns
    from dgpbench.failing_loudly.cells import to_cells
    from dgpbench.failing_loudly.published import write_fl_table1a_comparison
    from dgpbench.failing_loudly.reporting import POOLED_INTERVALS, protocol_of, write_report

    records, counted = _read_inputs(args.records)
    if counted and args.aggregate:
        raise ValueError(
            "--aggregate writes the draws of record files; cells files hold counts per cell "
            "(no p-values): leave --aggregate out"
        )
    if args.aggregate:
        write_csv(args.aggregate, records, float_format="%.6g")
    cells = to_cells(records)
    written = write_report(records, args.out_dir, alpha=args.alpha)
    caption = f"protocol {protocol_of(records)}; {POOLED_INTERVALS}"
    written.update(write_breakdowns(records, args.out_dir, caption=caption))
    written["comparison_fl_table1a"] = write_fl_table1a_comparison(records, args.out_dir)[2][0]
    written["cells"] = Path(args.out_dir) / CELLS_FILE
    write_csv(written["cells"], cells, float_format="%.6g")
    log.info("Failing-loudly tables -> %s", [str(p) for p in written.values()])


def _figure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="+", help="record CSVs of `dgpbench fl-detect`, or cells files")
    p.add_argument("--dataset", required=True, help="the data set whose panels to draw")
    p.add_argument("--out", required=True, help="figure stem (writes .png and .pdf)")
    p.set_defaults(_out_suffixes=(".png", ".pdf"))  # the files refuse_unwritable_output checks
    p.add_argument(
        "--cd-out", default=None, help="also the critical-difference diagram (figure stem)"
    )


def _figure(args: argparse.Namespace) -> None:
    from dgpbench.failing_loudly.ranks import critical_difference_figure
    from dgpbench.failing_loudly.reporting import accuracy_figure, with_rows

    records = _read_records(args.records)
    paths = accuracy_figure(records, args.dataset, args.out)
    if args.cd_out:
        paths += critical_difference_figure(with_rows(records), args.dataset, args.cd_out)
    log.info("figures -> %s", [str(p) for p in paths])


SUBCOMMANDS.update(
    {
        "fl-images": ("Failing loudly's grid: the fit images and each run's pools.",
                      _images_args, _images),
        "fl-shift": ("Failing loudly's grid: one shift class at its fractions, per run.",
                     _shift_args, _shift),
        "fl-features": ("Failing loudly's grid: one representation of every pool.",
                        _features_args, _features),
        "fl-detect": ("Failing loudly's grid: every draw of one method (with calibration).",
                      _detect_args, _detect),
        "fl-report": ("Failing loudly's grid: Tables 1a/1b, ranks, false positives, summary.",
                      _report_args, _report),
        "fl-figure": ("Failing loudly's grid: accuracy heatmaps, critical differences.",
                      _figure_args, _figure),
    }
)  # fmt: skip
