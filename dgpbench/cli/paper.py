"""The workflow's steps as ``dgpbench`` subcommands (each Snakemake rule calls one).

Every step reads files, calls the Python API and writes its outputs atomically, so a killed
step leaves nothing half-written and a rerun starts clean.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dgpbench._device import DEVICE_OPTIONS
from dgpbench.cli.arguments import METHOD_HELP, MODEL_HELP
from dgpbench.cli.arguments import forward_pass_args as _forward_pass_args
from dgpbench.cli.arguments import parse_tags as _parse_tags
from dgpbench.cli.arguments import positive_int as _positive_int
from dgpbench.cli.arguments import require_arrays as _require
from dgpbench.cli.arguments import significance as _significance
from dgpbench.cli.registry import SUBCOMMANDS
from dgpbench.io import load_npz, save_npz, write_csv
from dgpbench.naming import ModelId, feature_key, parse_feature_key, parse_model_id

if TYPE_CHECKING:  # pandas (a third of a second) only in the steps that read or write records
    import pandas as pd

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------
def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", required=True, help="data set name (digits, mnist, ..., npz:<path>)"
    )
    p.add_argument("--data-root", default=None, help="torchvision data root")
    p.add_argument("--download", action="store_true", help="download missing data (network)")
    p.add_argument("--hidden", type=_positive_int, required=True, help="hidden units per layer")
    p.add_argument("--layers", type=_positive_int, required=True, help="number of linear maps")
    seeds = p.add_mutually_exclusive_group(required=True)
    seeds.add_argument("--seed", type=int, help="model seed: train one model into --out-dir")
    seeds.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        help="model seeds: train them at once, one folder per seed (h<hidden>-l<layers>-s<seed>) "
        "under --out-dir",
    )
    p.add_argument(
        "--activation", default="relu", choices=["relu", "tanh"], help="hidden activation"
    )
    p.add_argument("--lr", type=float, default=3e-4, help="Adam learning rate")
    p.add_argument("--epochs", type=_positive_int, default=40, help="training epochs")
    p.add_argument("--batch-size", type=_positive_int, default=32, help="training batch size")
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.2,
        help="share of the training split held out for validation",
    )
    p.add_argument("--threads", type=_positive_int, default=None, help="torch threads")
    p.add_argument(
        "--device", default="cpu", choices=DEVICE_OPTIONS, help="where to train (auto: GPU if any)"
    )
    p.add_argument(
        "--out-dir",
        required=True,
        help="folder for model.pt and metrics.csv (with --seeds: for the seeds' folders)",
    )


def _train(args: argparse.Namespace) -> None:
    import os

    from dgpbench.data.datasets import load_dataset, n_classes
    from dgpbench.models.architectures import ArchConfig
    from dgpbench.models.stacked import train_mlp_seeds
    from dgpbench.models.train import shift_detection_config, train_mlp
    from dgpbench.naming import model_id

    x, y = load_dataset(args.dataset, args.data_root, "train", download=args.download)
    arch = ArchConfig(
        n_inputs=int(np.prod(x.shape[1:])),
        hidden=args.hidden,
        n_layers=args.layers,
        n_classes=n_classes(args.dataset, args.data_root),
        activation=args.activation,
    )
    config = shift_detection_config(
        lr=args.lr,
        epochs=args.epochs,
        batch_size=args.batch_size,
        val_fraction=args.val_fraction,
        seed=args.seed if args.seeds is None else 0,
        threads=args.threads,
    )
    out = Path(args.out_dir)
    if args.seeds is None:
        finals = [
            train_mlp(x, y, arch, config, out, dataset=args.dataset, progress=True,
                      device=args.device)
        ]  # fmt: skip
    else:
        dirs = [out / model_id(args.hidden, args.layers, s) for s in args.seeds]
        finals = train_mlp_seeds(
            x, y, arch, config, args.seeds, dirs, dataset=args.dataset, progress=True,
            device=args.device,
        )  # fmt: skip
    for final in finals:
        os.replace(final, final.parent / "model.pt")  # a stable name for the workflow
        log.info("trained %s -> %s", arch, final.parent / "model.pt")


def _train_cnn_args(p: argparse.ArgumentParser) -> None:
    _train_args(p)
    p.add_argument(
        "--kind",
        default="cnn",
        choices=["cnn", "resnet"],
        help="cnn: two conv blocks; resnet: ResNet-18's layout (stages of basic blocks)",
    )
    p.add_argument(
        "--channels",
        type=_positive_int,
        nargs="+",
        default=None,
        help="output channels: of the CNN's two conv blocks (default 8 16) or of each ResNet "
        "stage (default 16 32 64 128)",
    )
    p.add_argument(
        "--blocks",
        type=_positive_int,
        nargs="+",
        default=None,
        help="basic blocks per ResNet stage (default 1 per stage; 2 2 2 2 is ResNet-18)",
    )


def _train_cnn(args: argparse.Namespace) -> None:
    import os

    from dgpbench.data.datasets import load_dataset, n_classes
    from dgpbench.models.architectures import CNNConfig, ResNetConfig
    from dgpbench.models.train import shift_detection_config, train_mlp
    from dgpbench.naming import model_id

    x, y = load_dataset(args.dataset, args.data_root, "train", download=args.download)
    common = {
        "input_shape": tuple(x.shape[1:]),
        "hidden": args.hidden,
        "n_layers": args.layers,
        "n_classes": n_classes(args.dataset, args.data_root),
        "activation": args.activation,
    }
    if args.kind == "cnn":
        if args.blocks is not None:
            raise ValueError("--blocks applies to --kind resnet only")
        arch: CNNConfig | ResNetConfig = CNNConfig(
            **common, channels=tuple(args.channels or (8, 16))
        )
    else:
        channels = tuple(args.channels or (16, 32, 64, 128))
        blocks = tuple(args.blocks or (1,) * len(channels))
        arch = ResNetConfig(**common, channels=channels, blocks=blocks)
    # As `train`: --seed trains one model into --out-dir, --seeds one folder per seed
    # (<kind>-h<hidden>-l<layers>-s<seed>); they train one seed after the other.
    out = Path(args.out_dir)
    if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds must be distinct, got {args.seeds}")
    if args.seeds is None:
        runs = [(args.seed, out)]
    else:
        runs = [(s, out / model_id(args.hidden, args.layers, s, args.kind)) for s in args.seeds]
    for seed, folder in runs:
        config = shift_detection_config(
            lr=args.lr,
            epochs=args.epochs,
            batch_size=args.batch_size,
            val_fraction=args.val_fraction,
            seed=seed,
            threads=args.threads,
        )
        final = train_mlp(
            x, y, arch, config, folder, dataset=args.dataset, progress=True, device=args.device
        )
        os.replace(final, folder / "model.pt")
        log.info("trained %s (seed %d) -> %s", arch, seed, folder / "model.pt")


# --------------------------------------------------------------------------------------------
# images / corrupt
# --------------------------------------------------------------------------------------------
def _images_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", required=True, help="data set name (digits, mnist, ..., npz:<path>)"
    )
    p.add_argument("--data-root", default=None, help="torchvision data root")
    p.add_argument("--download", action="store_true", help="download missing data (network)")
    p.add_argument("--n-refs", type=_positive_int, default=1000, help="labelled reference images")
    p.add_argument("--n-test", type=_positive_int, default=1000, help="clean test images")
    p.add_argument("--seed", type=int, default=112, help="seed of the image selection")
    p.add_argument("--out", required=True, help="output .npz (x_ref, y_ref, x_test, y_test)")


def _images(args: argparse.Namespace) -> None:
    from dgpbench.data.datasets import sample_image_sets

    sets = sample_image_sets(
        args.dataset,
        args.data_root,
        n_refs=args.n_refs,
        n_test=args.n_test,
        seed=args.seed,
        download=args.download,
    )
    save_npz(args.out, **sets)
    log.info(
        "%d reference and %d test images -> %s", len(sets["y_ref"]), len(sets["y_test"]), args.out
    )


def _corrupt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="selects the intensity table")
    p.add_argument("--images", required=True, help="clean image set (.npz from `dgpbench images`)")
    p.add_argument("--corruption", required=True, help="GB, GN, PD, UN, RO, ZO, TR or SH")
    p.add_argument(
        "--intensities", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6], help="intensities 1-6"
    )
    p.add_argument("--seed", type=int, default=112, help="seed of the corruption noise")
    p.add_argument("--out", required=True, help="output .npz with one array per intensity")


def _corrupt(args: argparse.Namespace) -> None:
    from dgpbench.shifts.corruptions import corrupt, corruption_code

    code = corruption_code(args.corruption)
    images = load_npz(args.images)
    _require(images, args.images, ["x_test"], "images")
    x_test = images["x_test"]
    arrays = {
        f"intensity_{i}": corrupt(x_test, code, i, dataset=args.dataset, seed=args.seed)
        for i in args.intensities
    }
    save_npz(args.out, corruption=np.array(code), **arrays)
    log.info("%s at intensities %s -> %s", code, args.intensities, args.out)


# --------------------------------------------------------------------------------------------
# features
# --------------------------------------------------------------------------------------------
def _features_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", required=True, help=METHOD_HELP)
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--clean", required=True, help="clean image set (.npz from `dgpbench images`)")
    p.add_argument("--corrupted", nargs="*", default=[], help="corrupted sets (`dgpbench corrupt`)")
    _forward_pass_args(p)
    p.add_argument(
        "--out", required=True, help="output .npz: `clean` and `<corruption>_<intensity>` arrays"
    )


def _check_scale(x: np.ndarray, where: str) -> None:
    """The scale rule of ``score`` and ``fit`` (:func:`dgpbench.data.datasets.load_npz_images`):
    uint8 pixels are 0-255, any other images must lie in [0, 1].
    """
    if x.dtype == np.uint8 or x.size == 0 or not np.issubdtype(x.dtype, np.number):
        return
    lo, hi = float(np.min(x)), float(np.max(x))
    if lo < 0.0 or hi > 1.0:
        raise ValueError(
            f"{where} has values in [{lo}, {hi}]; non-uint8 images must lie in [0, 1] "
            "(store 0-255 pixels as uint8, or divide by 255)"
        )


def _features(args: argparse.Namespace) -> None:
    import time

    from dgpbench.features.output import fit_method, transform_method
    from dgpbench.features.registry import make_features
    from dgpbench.progress import Progress
    from dgpbench.threads import torch_threads

    clean = load_npz(args.clean)
    _require(clean, args.clean, ["x_ref", "y_ref", "x_test"], "images")
    # Read every input before the (long) computation, so a bad file fails at once.
    sets = {"clean": clean["x_test"]}
    source = {"clean": args.clean}
    for path in args.corrupted:
        arrays = load_npz(path)
        _require(arrays, path, ["corruption"], "corrupt")
        code = str(arrays.pop("corruption"))
        for name, x in arrays.items():
            level = name.removeprefix("intensity_")
            if name == level or not level.isdigit():
                raise ValueError(
                    f"--corrupted: {path} holds an array {name!r}; a file of `dgpbench "
                    "corrupt` holds 'corruption' and 'intensity_<k>' arrays only (k = 1, 2, ...)"
                )
            key = feature_key(code, int(level))
            if key in sets:  # the later file would silently replace the earlier one's set
                raise ValueError(
                    f"--corrupted: {path} and {source[key]} both hold {key} "
                    f"(corruption {code}, {name}); give each corruption and intensity once"
                )
            sets[key], source[key] = x, path
    _check_scale(clean["x_ref"], f"{args.clean}:x_ref")
    for key, x in sets.items():
        _check_scale(x, f"{source[key]}:{key}")
    with torch_threads(args.threads):
        est = make_features(
            args.method,
            args.model,
            batch_size=args.batch_size,
            n_jobs=args.threads,
            device=args.device,
        )
        fit_method(est, clean["x_ref"], clean["y_ref"], args.method)
        feats = {}
        with Progress(len(sets), f"features {args.method}", unit="set") as bar:
            for i, (key, x) in enumerate(sets.items(), 1):
                start = time.perf_counter()
                feats[key] = transform_method(
                    est, x, args.method, f"image set {key} of {source[key]}"
                )
                bar.update()
                seconds = time.perf_counter() - start
                bar.log("%s (%d/%d): %d images, %.1f s", key, i, len(sets), len(x), seconds)
    widths = {f.shape[1] for f in feats.values()}
    if len(widths) != 1:
        raise ValueError(
            f"method {args.method!r} returned different numbers of features for different "
            f"image sets ({sorted(widths)})"
        )
    classes = getattr(est, "classes_", np.unique(clean["y_ref"]))  # custom methods may lack it
    save_npz(args.out, classes=classes, **feats)
    log.info(
        "%s features of %d image sets %s -> %s",
        args.method,
        len(feats),
        feats["clean"].shape,
        args.out,
    )


# --------------------------------------------------------------------------------------------
# detect
# --------------------------------------------------------------------------------------------
def _detect_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", required=True, help="features .npz from `dgpbench features`")
    p.add_argument("--ns", type=int, nargs="+", required=True, help="batch sizes n")
    p.add_argument("--deltas", type=float, nargs="+", required=True, help="corrupted ratios")
    p.add_argument(
        "--draws", type=_positive_int, default=100, help="bootstrap draws per (n, delta)"
    )
    p.add_argument("--seed", type=int, default=112, help="seed of the draws")
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
        help="two-sample test, a registered name (ks: the paper's; cvm, ad: per feature with "
        "--correction; energy, ...: multivariate); other than ks, records gain a test column",
    )
    p.add_argument(
        "--n-permutations", type=_positive_int, default=None, help="permutations (energy, ...)"
    )
    p.add_argument("--no-calibration", action="store_true", help="skip the delta = 0 draws")
    p.add_argument(
        "--labels", default=None, help="clean image set (.npz, its y_test) for the KO label shift"
    )
    p.add_argument(
        "--knockout-intensities",
        type=int,
        nargs="*",
        default=[],
        help="knock-out label-shift intensities (1-6; needs --labels)",
    )
    p.add_argument("--knockout-class", type=int, default=0, help="the class knocked out")
    p.add_argument(
        "--tag", action="append", default=[], help="key=value column added to the records"
    )
    p.add_argument("--out", required=True, help="output CSV of bootstrap records")


def _detect(args: argparse.Namespace) -> None:
    import time

    import pandas as pd

    from dgpbench.paper.protocol import bootstrap_detection
    from dgpbench.progress import Progress

    feats = load_npz(args.features)
    _require(feats, args.features, ["clean"], "features")
    clean = feats.pop("clean")
    feats.pop("classes", None)
    if args.knockout_intensities:
        from dgpbench.paper.label_shift import LABEL_SHIFT_CODE, label_shift_detection

        if args.labels is None:
            raise ValueError("--knockout-intensities needs --labels (the clean image set)")
        labels_file = load_npz(args.labels)
        _require(labels_file, args.labels, ["y_test"], "images")
        labels = labels_file["y_test"]
    common = {
        "ns": args.ns,
        "n_draws": args.draws,
        "seed": args.seed,
        "alpha": args.alpha,
        "correction": None if args.correction == "none" else args.correction,
    }
    if args.test != "ks":
        if args.knockout_intensities:
            raise ValueError("--knockout-intensities runs the KS test only: leave --test out")
        common.update(test=args.test, n_permutations=args.n_permutations)
    frames = []
    bar = Progress(len(feats) + (not args.no_calibration), "detect", unit="set")
    start = time.perf_counter()
    if not args.no_calibration:
        rec = bootstrap_detection(clean, None, deltas=[0.0], **common)
        frames.append(rec.assign(corruption="none", intensity=0))
        bar.update()
        bar.log("calibration (delta = 0): %d draws, %.1f s", len(rec), time.perf_counter() - start)
    for key in sorted(feats):
        code, intensity = parse_feature_key(key)
        rec = bootstrap_detection(clean, feats[key], deltas=args.deltas, **common)
        frames.append(rec.assign(corruption=code, intensity=intensity))
        bar.update()
        bar.log("%s: %d draws, %.1f s", key, len(rec), time.perf_counter() - start)
    bar.close()
    if args.knockout_intensities:
        rec = label_shift_detection(
            clean,
            labels,
            intensities=args.knockout_intensities,
            deltas=args.deltas,
            knocked_class=args.knockout_class,
            **common,
        )
        frames.append(rec.assign(corruption=LABEL_SHIFT_CODE))
    records = pd.concat(frames, ignore_index=True)
    records["n_features"] = clean.shape[1]  # d, to Bonferroni-adjust min_p afterwards
    if args.test != "ks":
        records["test"] = args.test
    front = ["corruption", "intensity"]
    records = records[front + [c for c in records.columns if c not in front]]
    for i, (key, value) in enumerate(_parse_tags(args.tag).items()):
        records.insert(i, key, value)
    write_csv(args.out, records, float_format="%.6g")
    log.info("%d records -> %s", len(records), args.out)


# --------------------------------------------------------------------------------------------
# aggregate / tables / figures
# --------------------------------------------------------------------------------------------
def _aggregate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="+", help="record CSV files")
    p.add_argument("--out", required=True, help="output CSV (.csv or .csv.gz)")


# Columns holding a draw's outcome; every other column identifies the draw.
_OUTCOME_COLUMNS = ("rejected", "min_p")


def _check_counted_once(records: pd.DataFrame, sources: pd.Series) -> None:
    """Refuse records that identify the same draw twice (they would double the statistics)."""
    key = [c for c in records.columns if c not in _OUTCOME_COLUMNS]
    dup = records.duplicated(key, keep=False)
    if dup.any():
        first = records[dup].iloc[0]
        same = records[dup & (records[key] == first[key]).all(axis=1)].index
        files = sorted(set(sources[same]))
        what = ", ".join(f"{c}={first[c]}" for c in key)
        raise ValueError(
            f"{int(dup.sum())} records identify a draw that is already counted, e.g. {what} "
            f"(in {', '.join(files)}); duplicated grid values or record files?"
        )


def _aggregate(args: argparse.Namespace) -> None:
    import pandas as pd

    paths = sorted(args.records)
    repeated = sorted({p for p in paths if paths.count(p) > 1})
    if repeated:
        raise ValueError(f"record files given more than once: {', '.join(repeated)}")
    frames = [pd.read_csv(path) for path in paths]
    records = pd.concat(frames, ignore_index=True)
    sources = pd.Series(np.repeat(paths, [len(f) for f in frames]))
    _check_counted_once(records, sources)
    _add_model_fields(records)
    write_csv(args.out, records, float_format="%.6g")
    log.info("%d records from %d files -> %s", len(records), len(frames), args.out)


def _add_model_fields(records: pd.DataFrame) -> None:
    """The model id's fields (kind, hidden, layers, seed) as columns, in place."""
    if "model" in records:
        ids = records["model"].astype(str)
        parts = {m: parse_model_id(m) for m in ids.unique()}
        for field in ModelId._fields:
            records[field] = ids.map({m: getattr(p, field) for m, p in parts.items()})


def _read_records(path: str) -> pd.DataFrame:
    import pandas as pd

    records = pd.read_csv(path)
    for col in ("dataset", "method", "corruption", "model", "kind"):
        if col in records:
            records[col] = records[col].astype(str)
    return records


def _pool_deltas_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pool-deltas",
        type=float,
        nargs="+",
        default=None,
        help="corrupted fractions pooled in a cell (default: every delta in the records)",
    )


def _tests_power_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--records", nargs="+", required=True,
        help="record CSVs of the tests (without a test column: KS's, e.g. the aggregate)",
    )  # fmt: skip
    _pool_deltas_arg(p)
    p.add_argument("--alpha", type=_significance, default=0.05, help="the records' level")
    p.add_argument("--out-dir", required=True, help="folder of table_tests_power.*")


def _tests_power(args: argparse.Namespace) -> None:
    import os

    import pandas as pd

    from dgpbench.paper.power_by_test import power_table

    real = [os.path.realpath(r) for r in args.records]
    if len(set(real)) != len(real):
        raise ValueError(f"a records file is given twice in {args.records}")
    frames = []
    for path in args.records:
        rec = _read_records(path)
        frames.append(rec.assign(test=rec["test"].astype(str)) if "test" in rec else
                      rec.assign(test="ks"))  # fmt: skip
    records = pd.concat(frames, ignore_index=True)
    sources = pd.Series(np.repeat(args.records, [len(f) for f in frames]))
    _check_counted_once(records, sources)
    _add_model_fields(records)  # the aggregate has them, single record files do not
    power_table(records, args.out_dir, args.pool_deltas, alpha=args.alpha)
    log.info("table_tests_power -> %s", args.out_dir)


def _tables_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", required=True, help="aggregated records CSV")
    p.add_argument(
        "--methods",
        nargs="+",
        default=["softmax", "tu", "magdiff", "dgp"],
        help="methods of Table 1, in column order",
    )
    p.add_argument(
        "--ablation-datasets",
        nargs="+",
        default=["none"],
        help="data sets of the ablation tables (none: no ablation)",
    )
    p.add_argument(
        "--ablation-ns",
        type=int,
        nargs="+",
        default=[20, 50, 100],
        help="sample sizes n of the ablation table",
    )
    _pool_deltas_arg(p)
    p.add_argument(
        "--alpha",
        type=_significance,
        default=0.05,
        help="significance level of the records (caption)",
    )
    p.add_argument("--out-dir", required=True, help="folder for the tables (.csv, .md, .tex)")


def _tables(args: argparse.Namespace) -> None:
    from dgpbench.paper import reporting

    records = reporting.pooled_records(_read_records(args.records), args.pool_deltas)
    ablation = [d for d in args.ablation_datasets if d != "none"]
    missing = sorted(set(args.ablation_ns) - set(records["n"])) if ablation else []
    if missing:
        raise ValueError(
            f"--ablation-ns {missing} are not among the sample sizes n of {args.records} "
            f"({sorted(set(records['n']))}); the ablation table can only show computed n"
        )
    reporting.main_table(records, args.out_dir, methods=args.methods)
    reporting.ablation_tables(records, args.out_dir, ablation, ns_main=args.ablation_ns)
    reporting.calibration_table(records, args.out_dir, alpha=args.alpha)
    reporting.auroc_table(reporting.paper_records(records), args.out_dir, methods=args.methods)
    reporting.beyond_tables(records, args.out_dir, methods=args.methods, alpha=args.alpha)
    log.info("tables -> %s", args.out_dir)


def _figures_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", required=True, help="aggregated records CSV")
    p.add_argument(
        "--methods",
        nargs="+",
        default=["softmax", "tu", "magdiff", "dgp"],
        help="methods drawn, in legend order",
    )
    _pool_deltas_arg(p)
    p.add_argument(
        "--alpha", type=float, default=0.05, help="significance level (marked in fig_calibration)"
    )
    p.add_argument("--out-dir", required=True, help="folder for the figures (.png, .pdf)")


def _figures(args: argparse.Namespace) -> None:
    from dgpbench.paper import reporting

    written = reporting.figures(
        _read_records(args.records),
        args.out_dir,
        methods=args.methods,
        pool_deltas=args.pool_deltas,
        alpha=args.alpha,
    )
    log.info("figures -> %s", [str(p) for p in written])


def _delta_set(text: str) -> tuple[str, list[float]]:
    label, sep, values = text.partition("=")
    try:
        deltas = [float(v) for v in values.split(",")] if sep else []
    except ValueError:
        deltas = []
    if not label or not deltas:
        raise argparse.ArgumentTypeError(f"expected LABEL=d1,d2,..., got {text!r}")
    return label, deltas


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", required=True, help="aggregated records CSV")
    p.add_argument(
        "--pool-deltas", type=float, nargs="+", required=True, help="deltas of the main file"
    )
    p.add_argument(
        "--delta-set",
        type=_delta_set,
        action="append",
        default=[],
        metavar="LABEL=D1,D2,...",
        help="a further comparison, written if every delta was run (repeatable)",
    )
    p.add_argument(
        "--published",
        default=None,
        help="published table CSV (dataset, corruption, n, method, detection_ratio_pct); "
        "default: the paper's Table 1 shipped with dgpbench",
    )
    p.add_argument("--name", default="comparison_table1", help="output file-name stem")
    p.add_argument("--out-dir", required=True, help="folder for the comparison files")


def _compare(args: argparse.Namespace) -> None:
    from dgpbench.paper.comparisons.table1 import write_comparisons

    labels = [label for label, _ in args.delta_set]
    if len(set(labels)) != len(labels):
        raise ValueError(f"--delta-set labels must be unique, got {labels}")
    summary = write_comparisons(
        _read_records(args.records),
        args.out_dir,
        pool_deltas=args.pool_deltas,
        delta_sets=dict(args.delta_set),
        published_path=args.published,
        name=args.name,
    )
    log.info("comparison summary:\n%s", summary.to_string(index=False))


SUBCOMMANDS.update(
    {
        "train": (
            "Train an MLP (--seed) or several seeds of one at once (--seeds); write model.pt "
            "and metrics.csv per model.",
            _train_args,
            _train,
        ),
        "train-cnn": (
            "Train a CNN (two conv blocks + MLP head) or a ResNet (--kind resnet) per seed; "
            "write model.pt and metrics.csv.",
            _train_cnn_args,
            _train_cnn,
        ),
        "images": ("Draw the reference and clean test image sets.", _images_args, _images),
        "corrupt": (
            "Corrupt the clean test images at several intensities.",
            _corrupt_args,
            _corrupt,
        ),
        "features": ("Fit a feature method and featurise image sets.", _features_args, _features),
        "detect": ("Run the bootstrap detection protocol on features.", _detect_args, _detect),
        "aggregate": ("Concatenate bootstrap records.", _aggregate_args, _aggregate),
        "tables": (
            "Write the paper's tables (CSV, Markdown, LaTeX, HTML).",
            _tables_args,
            _tables,
        ),
        "tests-power": (
            "Write table_tests_power: each test's power and level on the same draws.",
            _tests_power_args,
            _tests_power,
        ),
        "figures": ("Write the detection-ratio figures (PNG, PDF).", _figures_args, _figures),
        "compare": (
            "Compare this run's Table 1 with a published one (CSV, Markdown).",
            _compare_args,
            _compare,
        ),
    }
)
