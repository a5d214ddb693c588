"""Tables and figures in the paper's layout from the aggregated detection records.

Input: one tidy frame of bootstrap records with the columns ``dataset, hidden, layers, seed,
method, corruption, intensity, n, delta, draw, rejected`` (``corruption == "none"`` and
``delta == 0`` for the calibration runs), and optionally ``kind`` (``mlp`` or ``cnn``; missing
means MLP). The paper's tables and figures use MLPs and the paper's four corruptions only;
the shifts beyond the paper (RO, ZO, TR, SH, KO) and the CNNs go to their own tables
(:func:`beyond_tables`) and figure, so adding them never changes the paper's tables. A table
cell is the detection ratio in percent: the mean of ``rejected`` over models x intensities x
deltas x draws (the paper's aggregation); :func:`pooled_records` selects the deltas to pool
(the workflow's ``report.pool_deltas``).
The CSV versions add a 95% interval over the cell's trained models, its independent units
(the hull of a percentile bootstrap over the models and the draws' Wilson interval;
``n_models`` counts them: :func:`model_cells`); the figures draw it as a band.

Threshold-free views use the smallest per-feature p-value of every draw (``min_p``): the
AUROC table separates clean from shifted batches by it, and the calibration figure compares
its clean-vs-clean distribution with the uniform one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dgpbench.io import save_figure, write_csv, write_text
from dgpbench.labels import (
    check_unique_labels,
    dataset_label,
    method_label,
    method_order,
    not_computed,
)
from dgpbench.paper.protocol import detection_ratio
from dgpbench.tables import tex_escape, to_html, to_latex, to_markdown

log = logging.getLogger(__name__)

MAIN_METHODS = ("softmax", "tu", "magdiff", "dgp")
ABLATION_METHODS = ("tu", "tu_norm", "dgp_nonorm", "dgp")
CORRUPTION_ORDER = ("GB", "GN", "PD", "UN")
BEYOND_ORDER = ("RO", "ZO", "TR", "SH", "KO")
"""Shifts beyond the paper: image transformations and the knock-out label shift."""
SHIFT_ORDER = CORRUPTION_ORDER + BEYOND_ORDER


def _of_kind(records: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Records of one model kind (records without a ``kind`` column are all MLPs)."""
    if "kind" not in records:
        return records if kind == "mlp" else records.iloc[:0]
    return records[records["kind"] == kind]


def paper_records(records: pd.DataFrame) -> pd.DataFrame:
    """The records of the paper's setting: MLPs, the paper's four corruptions and the
    calibration runs (CNNs and the shifts beyond the paper left out).
    """
    rec = _of_kind(records, "mlp")
    return rec[rec["corruption"].isin([*CORRUPTION_ORDER, "none"])]


def _ordered(values: Sequence[str], order: Sequence[str]) -> list[str]:
    present = list(dict.fromkeys(values))
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


# --------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------
def detection_cells(
    records: pd.DataFrame, by: Sequence[str], unit: str | None = None
) -> pd.DataFrame:
    """Detection ratio (percent) with a 95% interval for every group of ``by``: Wilson's over
    the draws, or with ``unit`` (a column) hulled with a bootstrap over the independent units
    (:func:`~dgpbench.paper.protocol.detection_ratio`).
    """
    cells = detection_ratio(records, by=list(by), unit=unit)
    cells["ratio_pct"] = 100.0 * cells["detection_ratio"]
    cells["ci_low_pct"] = 100.0 * cells["ci_low"]
    cells["ci_high_pct"] = 100.0 * cells["ci_high"]
    return cells.rename(columns={"count": "n_draws"})


def model_cells(records: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """:func:`detection_cells` with the interval over the trained models, each record's
    independent unit (its data set's model, as model ids repeat across data sets; one unit
    where ``model`` is absent), counted in ``n_models``.
    """
    model = records["model"].astype(str) if "model" in records else "model"
    units = records.assign(_model=records["dataset"].astype(str) + "/" + model)
    return detection_cells(units, by, unit="_model").rename(columns={"units": "n_models"})


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _mark(cells: pd.DataFrame, group: Sequence[str], among: Sequence[str]) -> pd.DataFrame:
    """Add ``best`` (max over ``among`` methods per group) and ``star`` (better of TU and DGP)."""
    cells = cells.copy()
    rounded = cells["ratio_pct"].round(1)  # ties are judged on the printed value
    in_set = cells["method"].isin(among)
    best = rounded.where(in_set).groupby([cells[g] for g in group]).transform("max")
    cells["best"] = in_set & (rounded == best)
    pair = cells["method"].isin(("tu", "dgp"))
    pair_best = rounded.where(pair).groupby([cells[g] for g in group]).transform("max")
    pair_n = pair.groupby([cells[g] for g in group]).transform("sum")
    # a star only when both TU and DGP are present and one is strictly better
    pair_min = rounded.where(pair).groupby([cells[g] for g in group]).transform("min")
    cells["star"] = pair & (pair_n == 2) & (rounded == pair_best) & (pair_best > pair_min)
    return cells


def _decorate(cells: pd.DataFrame, style: str) -> pd.Series:
    text = cells["ratio_pct"].map(_fmt)
    star = np.where(cells["star"], "*", "")
    if style == "md":
        body = np.where(cells["best"], "**" + text + "**", text)
    elif style == "tex":
        body = np.where(cells["best"], r"\textbf{" + text + "}", text)
    elif style == "html":
        body = np.where(cells["best"], "<b>" + text + "</b>", text)
    else:
        body = text
    return pd.Series(body, index=cells.index) + star


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------
def _pivot(
    cells: pd.DataFrame, rows: list[str], cols: list[str], values: pd.Series
) -> pd.DataFrame:
    frame = cells[rows + cols].copy()
    frame["value"] = values.to_numpy()
    # observed=True: only the label combinations present (pandas 3's default; pandas 2 would
    # add an empty row or column for every unused category)
    return frame.pivot_table(
        index=rows, columns=cols, values="value", aggfunc="first", sort=False, observed=True
    )


def write_table(
    cells: pd.DataFrame,
    rows: list[str],
    cols: list[str],
    out_stem: str | os.PathLike,
    *,
    title: str,
    label: str,
) -> None:
    """Write ``<stem>.csv`` (long form with intervals), ``<stem>.md``, ``<stem>.tex`` and
    ``<stem>.html`` (the paper's layout, bold best and stars: the report shows it).
    """
    stem = Path(out_stem)
    keep = [
        c
        for c in [
            *rows,
            *cols,
            "ratio_pct",
            "ci_low_pct",
            "ci_high_pct",
            "n_models",
            "n_draws",
            "n_rejected",
            "best",
            "star",
        ]
        if c in cells.columns
    ]
    long = cells[keep].copy()
    for c in ("ratio_pct", "ci_low_pct", "ci_high_pct"):
        long[c] = long[c].round(4)
    write_csv(stem.with_suffix(".csv"), long)
    write_text(
        stem.with_suffix(".md"),
        to_markdown(_pivot(cells, rows, cols, _decorate(cells, "md")), title),
    )
    write_text(
        stem.with_suffix(".tex"),
        to_latex(_pivot(cells, rows, cols, _decorate(cells, "tex")), tex_escape(title), label),
    )
    write_text(
        stem.with_suffix(".html"),
        to_html(_pivot(cells, rows, cols, _decorate(cells, "html")), title),
    )


def write_empty_table(out_stem: str | os.PathLike, *, title: str, note: str) -> None:
    """Write the files of a table that has no data in this configuration, saying why
    (:func:`dgpbench.labels.not_computed`; the workflow's report leaves such tables out).
    """
    import html

    stem = Path(out_stem)
    note = not_computed(note)
    write_csv(stem.with_suffix(".csv"), pd.DataFrame({"note": [note]}))
    write_text(stem.with_suffix(".md"), f"### {title}\n\n{note}\n")
    write_text(stem.with_suffix(".tex"), f"% {title}\n% {note}\n")
    write_text(
        stem.with_suffix(".html"), f"<h3>{html.escape(title)}</h3>\n<p>{html.escape(note)}</p>\n"
    )


def _labelled(cells: pd.DataFrame) -> pd.DataFrame:
    """Replace codes by display labels, keeping a deterministic row/column order."""
    cells = cells.copy()
    for kind in ("method", "dataset"):
        if kind in cells:
            check_unique_labels(cells[kind], kind)
    if "method" in cells:
        order = method_order(cells["method"])
        cells["Method"] = pd.Categorical(
            cells["method"].map(method_label), [method_label(m) for m in order]
        )
    if "dataset" in cells:
        order = sorted(set(cells["dataset"]), key=dataset_label)
        cells["Dataset"] = pd.Categorical(
            cells["dataset"].map(dataset_label), [dataset_label(d) for d in order]
        )
    if "corruption" in cells:
        cells["Corruption"] = pd.Categorical(
            cells["corruption"], _ordered(cells["corruption"], SHIFT_ORDER)
        )
    return cells.sort_values(
        [c for c in ("n", "Dataset", "Corruption", "Method") if c in cells]
    ).reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# The paper's tables
# --------------------------------------------------------------------------------------------
def shift_records(records: pd.DataFrame) -> pd.DataFrame:
    """Records of corrupted batches (delta > 0)."""
    return records[(records["delta"] > 0) & (records["corruption"] != "none")]


def pooled_records(records: pd.DataFrame, deltas: Sequence[float] | None) -> pd.DataFrame:
    """Keep the corrupted-batch records of the ``deltas`` to pool (and every calibration one).

    The paper's text pools delta in {0.25, 0.5, 0.75}; the authors' evaluation script, which
    the published Table 1 fits, pools {0.25, 0.5, 1.0}. ``None`` keeps every delta.

    Raises
    ------
    ValueError
        If a requested delta has no corrupted-batch record.

    Examples
    --------
    >>> rec = pd.DataFrame({"corruption": ["GN", "GN", "none"], "delta": [0.5, 1.0, 0.0]})
    >>> pooled_records(rec, [1.0])["delta"].tolist()
    [1.0, 0.0]
    """
    if deltas is None:
        return records
    shifted = (records["delta"] > 0) & (records["corruption"] != "none")
    run = np.round(records.loc[shifted, "delta"].astype(float), 9)
    wanted = np.round(sorted({float(d) for d in deltas}), 9)
    absent = [float(d) for d in wanted if d not in set(run)]
    if absent:
        raise ValueError(
            f"pooled deltas {absent} have no records (the run computed {sorted(set(run))}); "
            "add them to protocol.deltas or change report.pool_deltas"
        )
    keep = ~shifted | np.isin(np.round(records["delta"].astype(float), 9), wanted)
    return records[keep]


def main_table(
    records: pd.DataFrame, out_dir: str | os.PathLike, methods: Sequence[str] = MAIN_METHODS
) -> pd.DataFrame:
    """Table 1: rows n x method, columns dataset x corruption (MLPs, the paper's corruptions)."""
    rec = shift_records(paper_records(records))
    rec = rec[rec["method"].isin(methods)]
    title = "Covariate shift detection ratio (%); bold = best per column and n; * = better of DGP and TU"
    if rec.empty:
        note = "No MLP with one of the paper's corruptions GB, GN, PD, UN (config keys models.kind, corruptions)."
        write_empty_table(Path(out_dir) / "table1_shift_detection", title=title, note=note)
        table1_ranks(rec, out_dir, methods)
        return pd.DataFrame()
    cells = model_cells(rec, ["dataset", "corruption", "n", "method"])
    cells = _labelled(_mark(cells, ["dataset", "corruption", "n"], methods))
    write_table(
        cells,
        ["n", "Method"],
        ["Dataset", "Corruption"],
        Path(out_dir) / "table1_shift_detection",
        title=title,
        label="tab:dnp:results",
    )
    table1_ranks(rec, out_dir, methods)
    return cells


def table1_ranks(
    records: pd.DataFrame, out_dir: str | os.PathLike, methods: Sequence[str] = MAIN_METHODS
) -> pd.DataFrame:
    """Ranks of Table 1's methods over its (dataset, corruption, n) blocks, with significance.

    Per data set and pooled over the data sets: each method's mean rank of detection ratio
    over the blocks (1 = best; ties share their mean rank), Friedman's test of equal ranks
    (``scipy.stats.friedmanchisquare``) and Nemenyi's post-hoc test of each method against
    the best-ranked one (``scikit_posthocs.posthoc_nemenyi_friedman``). Writes
    ``table1_ranks.{csv,md,tex,html}``; a scope with fewer than 3 methods or 2 blocks is left
    out (and the table says so if none is left). Blocks share models and images, so read the
    p-values as descriptive.

    Returns
    -------
    pandas.DataFrame
        ``scope``, ``method``, ``mean_rank``, ``blocks``, ``friedman_chi2``, ``friedman_p``,
        ``p_vs_best``.
    """
    from scipy.stats import friedmanchisquare

    stem = Path(out_dir) / "table1_ranks"
    title = "Table 1's methods ranked over (dataset, corruption, n) blocks (1 = best)"
    rec = records[records["method"].isin(methods)]
    rows: list[dict] = []
    scopes = sorted(rec["dataset"].unique()) if not rec.empty else []
    for scope in [*scopes, None] if len(scopes) > 1 else scopes:
        sub = rec if scope is None else rec[rec["dataset"] == scope]
        ratio = (
            sub.groupby(["dataset", "corruption", "n", "method"])["rejected"].mean()
            .unstack("method").dropna()
        )  # fmt: skip
        if ratio.shape[0] < 2 or ratio.shape[1] < 3:
            continue
        import scikit_posthocs as sp

        ranks = ratio.rank(axis=1, ascending=False, method="average").mean()
        stat, p = friedmanchisquare(*(ratio[c].to_numpy() for c in ratio.columns))
        nemenyi = sp.posthoc_nemenyi_friedman(ratio.to_numpy())
        nemenyi.index = nemenyi.columns = ratio.columns
        best = ranks.idxmin()
        for method, rank in ranks.sort_values(kind="stable").items():
            rows.append({
                "scope": "pooled" if scope is None else str(scope), "method": method,
                "mean_rank": float(rank), "blocks": int(ratio.shape[0]),
                "friedman_chi2": float(stat), "friedman_p": float(p),
                "p_vs_best": 1.0 if method == best else float(nemenyi.loc[best, method]),
            })  # fmt: skip
    table = pd.DataFrame(rows)
    if table.empty:
        write_empty_table(stem, title=title, note="Fewer than 3 methods or 2 blocks to rank.")
        return table
    write_csv(stem.with_suffix(".csv"), table.round(6))
    wide = table.assign(
        Scope=[dataset_label(s) if s != "pooled" else "pooled" for s in table["scope"]],
        Method=[method_label(m) for m in table["method"]],
        text=[
            f"{r:.2f} (p = {p:.2g})"
            for r, p in zip(table["mean_rank"], table["p_vs_best"], strict=True)
        ],
    ).pivot_table(index="Method", columns="Scope", values="text", aggfunc="first", sort=False)
    tests = "; ".join(
        f"{'pooled' if s == 'pooled' else dataset_label(s)}: Friedman chi2 = {c:.2f}, "
        f"p = {p:.2g}, {b} blocks"
        for s, c, p, b in table.groupby("scope", sort=False)[
            ["friedman_chi2", "friedman_p", "blocks"]].first().itertuples()
    )  # fmt: skip
    full = f"{title}; cell: mean rank (Nemenyi p against the best-ranked); {tests}"
    write_text(stem.with_suffix(".md"), to_markdown(wide, full))
    write_text(stem.with_suffix(".tex"), to_latex(wide, tex_escape(full), "tab:dnp:ranks"))
    write_text(stem.with_suffix(".html"), to_html(wide, full))
    return table


def ablation_tables(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    datasets: Sequence[str],
    ns_main: Sequence[int] = (20, 50, 100),
) -> pd.DataFrame:
    """The ablation table (n in ``ns_main``) and its full appendix version (all n)."""
    rec = shift_records(paper_records(records))
    rec = rec[rec["method"].isin(ABLATION_METHODS) & rec["dataset"].isin(datasets)]
    if rec.empty:
        note = "No ablation data set (config key ablation.datasets)."
        for stem in ("table2_ablation", "table_appendix_ablation_full"):
            write_empty_table(Path(out_dir) / stem, title="Ablation", note=note)
        return pd.DataFrame()
    cells = model_cells(rec, ["dataset", "corruption", "n", "method"])
    cells = _labelled(_mark(cells, ["dataset", "corruption", "n"], ABLATION_METHODS))
    short = cells[cells["n"].isin(ns_main)].copy()
    # the column header says which level is n: "n = 20 / GB", not "20 / GB"
    n_values = sorted(short["n"].unique())
    short["Sample size"] = pd.Categorical(
        short["n"].map(lambda n: f"n = {n}"), [f"n = {n}" for n in n_values]
    )
    names = ", ".join(dataset_label(d) for d in datasets)
    write_table(
        short,
        ["Dataset", "Method"],
        ["Sample size", "Corruption"],
        Path(out_dir) / "table2_ablation",
        title=f"Ablation on {names}: detection ratio (%); norm = layer-wise standardisation",
        label="tab:onp:ablation",
    )
    write_table(
        cells,
        ["Dataset", "n", "Corruption"],
        ["Method"],
        Path(out_dir) / "table_appendix_ablation_full",
        title=f"Full ablation on {names}: detection ratio (%)",
        label="tab:appendix:additional:onp:ablation:full",
    )
    return cells


def calibration_table(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    alpha: float = 0.05,
    kind: str = "mlp",
) -> pd.DataFrame:
    """False detection rates (delta = 0): rows n x method, columns data set.

    The paper shows TU and DGP; every computed method is included here, the paper's two first.
    ``alpha`` is the significance level the records were computed with (the protocol's
    ``alpha``); the caption states it, as the rates should lie near it. MLPs only
    (``kind="cnn"`` gives the CNNs' version, ``table_cnn_calibration``).
    """
    rec = clean_records(_of_kind(records, kind))
    stem = "table_appendix_calibration" if kind == "mlp" else f"table_{kind}_calibration"
    title = f"False detection rate (%) on clean batches (alpha = {100 * alpha:g}%)"
    if kind != "mlp":
        title += f", {kind.upper()}s"
    if rec.empty:
        write_empty_table(
            Path(out_dir) / stem,
            title=title,
            note=f"No {kind.upper()} models (config key models.kind).",
        )
        return pd.DataFrame()
    cells = model_cells(rec, ["dataset", "n", "method"])
    cells["best"] = False
    cells["star"] = False
    cells = _labelled(cells)
    write_table(
        cells,
        ["n", "Method"],
        ["Dataset"],
        Path(out_dir) / stem,
        title=title,
        label="tab:appendix:additional:onp:calibration"
        if kind == "mlp"
        else f"tab:{kind}:calibration",
    )
    return cells


def clean_records(records: pd.DataFrame) -> pd.DataFrame:
    """Records of clean-vs-clean calibration draws (delta = 0)."""
    return records[(records["delta"] == 0) | (records["corruption"] == "none")]


def auroc_cells(records: pd.DataFrame, methods: Sequence[str] | None = None) -> pd.DataFrame:
    """AUROC of clean-vs-shifted batches scored by their smallest p-value.

    Per (data set, method, corruption, n), the shifted draws (delta > 0, every model,
    intensity and delta pooled, as in the detection tables) are the positives and the
    calibration draws of the same data set, method and n (every model) the negatives; a
    smaller ``min_p`` means "more shifted". ``sklearn.metrics.roc_auc_score`` counts ties as
    half. 1 = every shifted batch has a smaller p-value than every clean one; 0.5 = chance.
    """
    from sklearn.metrics import roc_auc_score

    shifted, clean = shift_records(records), clean_records(records)
    if methods is not None:
        shifted = shifted[shifted["method"].isin(methods)]
    negatives = {key: g["min_p"].to_numpy() for key, g in clean.groupby(["dataset", "method", "n"])}
    rows = []
    for (dataset, method, corruption, n), pos in shifted.groupby(
        ["dataset", "method", "corruption", "n"]
    ):
        neg = negatives.get((dataset, method, n))
        if neg is None or len(neg) == 0:
            continue  # no calibration draws for this cell (run with --no-calibration)
        p = np.concatenate([pos["min_p"].to_numpy(), neg])
        label = np.r_[np.ones(len(pos), dtype=int), np.zeros(len(neg), dtype=int)]
        rows.append(
            dict(
                dataset=dataset,
                method=method,
                corruption=corruption,
                n=n,
                auroc=float(roc_auc_score(label, -p)),
                n_shifted=len(pos),
                n_clean=len(neg),
            )
        )
    return pd.DataFrame(
        rows, columns=["dataset", "method", "corruption", "n", "auroc", "n_shifted", "n_clean"]
    )


def auroc_table(
    records: pd.DataFrame, out_dir: str | os.PathLike, methods: Sequence[str] = MAIN_METHODS
) -> pd.DataFrame:
    """AUROC table (threshold-free): rows n x method, columns data set x corruption."""
    stem = Path(out_dir) / "table_auroc"
    title = "AUROC of clean vs. shifted batches scored by the smallest KS p-value; bold = best"
    cells = auroc_cells(records, methods)
    if cells.empty:
        write_empty_table(
            stem, title=title, note="No calibration (delta = 0) draws to compare with."
        )
        return cells
    rounded = cells["auroc"].round(3)
    group = [cells[g] for g in ("dataset", "corruption", "n")]
    cells["best"] = rounded == rounded.groupby(group).transform("max")
    cells = _labelled(cells)
    text = cells["auroc"].map(lambda v: f"{v:.3f}")
    md = pd.Series(np.where(cells["best"], "**" + text + "**", text), index=cells.index)
    tex = pd.Series(np.where(cells["best"], r"\textbf{" + text + "}", text), index=cells.index)
    rows, cols = ["n", "Method"], ["Dataset", "Corruption"]
    long = cells[["dataset", "corruption", "n", "method", "auroc", "n_shifted", "n_clean"]]
    write_csv(stem.with_suffix(".csv"), long.assign(auroc=long["auroc"].round(6)))
    write_text(stem.with_suffix(".md"), to_markdown(_pivot(cells, rows, cols, md), title))
    write_text(
        stem.with_suffix(".tex"),
        to_latex(_pivot(cells, rows, cols, tex), tex_escape(title), "tab:auroc"),
    )
    html = pd.Series(np.where(cells["best"], "<b>" + text + "</b>", text), index=cells.index)
    write_text(stem.with_suffix(".html"), to_html(_pivot(cells, rows, cols, html), title))
    return cells


def beyond_tables(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    methods: Sequence[str] = MAIN_METHODS,
    alpha: float = 0.05,
) -> dict[str, pd.DataFrame]:
    """The tables beyond the paper, in Table 1's layout (rows n x method, columns data set x
    shift): ``table_beyond_shifts`` (MLPs under RO, ZO, TR, SH and KO), ``table_cnn`` (CNNs
    under every configured shift) and ``table_cnn_calibration``. A table without data in this
    configuration is written with a note saying so.
    """
    out = Path(out_dir)
    mlp = shift_records(_of_kind(records, "mlp"))
    specs = {
        "table_beyond_shifts": (
            mlp[mlp["corruption"].isin(BEYOND_ORDER)],
            "Shift detection ratio (%) beyond the paper, MLPs: RO rotation, ZO zoom, TR "
            "translation, SH shear, KO knock-out label shift; bold = best per column and n; "
            "* = better of DGP and TU",
            "tab:beyond:shifts",
            "No shift beyond the paper for MLPs (config keys corruptions: RO, ZO, TR, SH; "
            "label_shift).",
        ),
        "table_cnn": (
            shift_records(_of_kind(records, "cnn")),
            "Shift detection ratio (%) with CNNs (TU, MAGDiff and DGP on the MLP head, Softmax "
            "on the whole network); bold = best per column and n; * = better of DGP and TU",
            "tab:cnn:shifts",
            "No CNN models (config key models.kind).",
        ),
    }
    tables = {}
    for stem, (rec, title, label, note) in specs.items():
        rec = rec[rec["method"].isin(methods)]
        if rec.empty:
            write_empty_table(out / stem, title=title, note=note)
            tables[stem] = pd.DataFrame()
            continue
        cells = model_cells(rec, ["dataset", "corruption", "n", "method"])
        cells = _labelled(_mark(cells, ["dataset", "corruption", "n"], methods))
        cells = cells.rename(columns={"Corruption": "Shift"})
        write_table(
            cells, ["n", "Method"], ["Dataset", "Shift"], out / stem, title=title, label=label
        )
        tables[stem] = cells
    tables["table_cnn_calibration"] = calibration_table(records, out, alpha=alpha, kind="cnn")
    return tables


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------
def _message_figure(message: str, stem: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 1.5))
    ax.text(0.5, 0.5, not_computed(message), ha="center", va="center", wrap=True)
    ax.set_axis_off()
    save_figure(fig, stem, bbox_inches="tight")
    plt.close(fig)


BAND_ALPHA = 0.35
"""Opacity of the interval bands of the line figures (0.2 was barely visible)."""


def _lineplot_grid(
    cells: pd.DataFrame, row: str | None, col: str | None, title: str, stem: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    labels = list(cells["Method"].cat.categories)
    palette = dict(zip(labels, sns.color_palette(n_colors=len(labels)), strict=True))
    grid = sns.relplot(
        data=cells,
        x="n",
        y="ratio_pct",
        hue="Method",
        style="Method",
        palette=palette,
        row=row,
        col=col,
        kind="line",
        errorbar=None,  # the bands are the cells' intervals, drawn below
        markers=True,
        dashes=False,
        height=2.6,
        aspect=1.2,
        facet_kws={"sharey": True, "margin_titles": True},
    )

    def interval_band(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for label, g in data.groupby("Method", observed=True):
            g = g.sort_values("n")
            ax.fill_between(
                g["n"],
                g["ci_low_pct"],
                g["ci_high_pct"],
                color=palette[label],
                alpha=BAND_ALPHA,
                lw=0,
            )
            for edge in ("ci_low_pct", "ci_high_pct"):  # edges keep overlapping bands apart
                ax.plot(g["n"], g[edge], color=palette[label], lw=0.6, ls=":", alpha=0.9)

    grid.map_dataframe(interval_band)
    for ax in grid.axes.flat:
        ax.set_xscale("log")
        ticks = sorted(cells["n"].unique())
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(-2, 102)
    # The band's meaning goes in the title: a longer y label overflows a 2.6-inch facet.
    grid.set_axis_labels("sample size n (images per batch)", "detection ratio (%)")
    grid.figure.suptitle(f"{title}\n(bands: 95% intervals over the models)", y=1.13)
    save_figure(grid.figure, stem, bbox_inches="tight")
    plt.close(grid.figure)


def figures(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    methods: Sequence[str] = MAIN_METHODS,
    pool_deltas: Sequence[float] | None = None,
    alpha: float = 0.05,
) -> list[Path]:
    """Gaussian noise by n per data set; by delta; overview of all corruptions (MLPs, the
    paper's corruptions); and ``fig_beyond``: the shifts beyond the paper (MLPs) and every
    shift for CNNs, by n.

    The by-n, overview and beyond figures pool ``pool_deltas`` (None: every delta); the
    by-delta figure shows every delta that was run. ``alpha`` (the protocol's level) is
    marked in the calibration figure.
    """
    out = Path(out_dir)
    beyond = beyond_figure(records, out, methods, pool_deltas)
    rec = shift_records(paper_records(records))
    rec = rec[rec["method"].isin(methods)]
    pooled = pooled_records(rec, pool_deltas) if len(rec) else rec
    written = []
    gn = rec[rec["corruption"] == "GN"]
    if len(gn):
        cells = _labelled(
            model_cells(pooled[pooled["corruption"] == "GN"], ["dataset", "n", "method"])
        )
        _lineplot_grid(
            cells,
            None,
            "Dataset",
            "Gaussian noise: detection ratio by sample size",
            out / "fig_gn_by_n",
        )
        cells = _labelled(model_cells(gn, ["dataset", "delta", "n", "method"]))
        cells["δ"] = cells["delta"].map(lambda d: f"{d:g}")  # panel titles "δ = 0.25"
        _lineplot_grid(
            cells,
            "Dataset",
            "δ",
            "Gaussian noise: detection ratio by corrupted fraction δ",
            out / "fig_gn_by_delta",
        )
    else:  # the workflow declares these files whatever the configured corruptions
        for stem in ("fig_gn_by_n", "fig_gn_by_delta"):
            _message_figure("No Gaussian noise (GN) among the corruptions.", out / stem)
    written += [out / "fig_gn_by_n.png", out / "fig_gn_by_delta.png"]
    if pooled.empty:
        _message_figure(
            "No MLP with one of the paper's corruptions GB, GN, PD, UN.", out / "fig_overview"
        )
    else:
        cells = _labelled(model_cells(pooled, ["dataset", "corruption", "n", "method"]))
        _lineplot_grid(
            cells,
            "Dataset",
            "Corruption",
            "All corruptions: detection ratio by sample size",
            out / "fig_overview",
        )
    written.append(out / "fig_overview.png")
    written.append(calibration_figure(paper_records(records), out, methods, alpha=alpha))
    return [*written, beyond]


def calibration_figure(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    methods: Sequence[str] | None = None,
    alpha: float = 0.05,
) -> Path:
    """Empirical CDF of the clean-vs-clean smallest p-values against the uniform CDF.

    Both axes show [0, max(0.2, 2 alpha)], the region where a test's level is read (on a
    0-1 axis it is a sliver), with ``alpha`` marked: the curve's height there is the false
    detection rate.

    With the records' ``n_features`` column (``d``) the p-value is Bonferroni-adjusted,
    ``min(d * min_p, 1)``, so the curve at ``alpha`` is the false detection rate of the
    calibration table; a calibrated test lies on or below the diagonal. Without that column
    the raw smallest p-value is drawn (and says so).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    stem = Path(out_dir) / "fig_calibration"
    rec = clean_records(records)
    if methods is not None:
        rec = rec[rec["method"].isin(methods)]
    if rec.empty:
        _message_figure("No calibration (delta = 0) draws in the records.", stem)
        return stem.with_suffix(".png")
    rec = _labelled(rec)
    if "n_features" in rec:
        rec["p"] = np.minimum(rec["min_p"] * rec["n_features"], 1.0)
        xlabel = "min(d · min p, 1)"
    else:
        rec["p"] = rec["min_p"]
        xlabel = "min p (uncorrected)"
    sns.set_theme(style="whitegrid", context="paper")
    grid = sns.displot(
        data=rec,
        x="p",
        hue="Method",
        row="Dataset",
        col="n",
        kind="ecdf",
        height=2.4,
        aspect=1.0,
        facet_kws={"margin_titles": True},
    )
    top = max(0.2, 2 * alpha)
    for ax in grid.axes.flat:
        ax.plot([0, top], [0, top], color="0.4", ls="--", lw=0.8)
        ax.axvline(alpha, color="firebrick", lw=0.8, ls=":")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xticks([0, alpha, top], ["0", rf"$\alpha$ = {alpha:g}", f"{top:g}"])
    grid.set_axis_labels(xlabel, "share of clean batches")
    grid.figure.suptitle(
        "Calibration: clean-vs-clean p-values against uniform (dashed); at alpha (dotted) the\n"
        "curve's height is the false detection rate",
        y=1.05,
    )
    save_figure(grid.figure, stem, bbox_inches="tight")
    plt.close(grid.figure)
    return stem.with_suffix(".png")


def beyond_figure(
    records: pd.DataFrame,
    out_dir: str | os.PathLike,
    methods: Sequence[str] = MAIN_METHODS,
    pool_deltas: Sequence[float] | None = None,
) -> Path:
    """Draw ``fig_beyond`` alone, as :func:`figures` does among its figures.

    The shifts beyond the paper (MLPs) and every shift for CNNs, by n; a note where the
    records have neither.

    Parameters
    ----------
    records : pandas.DataFrame
        Detection records (the workflow's aggregate).
    out_dir : str or os.PathLike
        Folder of ``fig_beyond.png`` and ``fig_beyond.pdf``.
    methods : sequence of str, default=MAIN_METHODS
        Methods drawn.
    pool_deltas : sequence of float or None, default=None
        Corrupted fractions pooled (None: every delta).

    Returns
    -------
    pathlib.Path
        The PNG's path.
    """
    return _beyond_figure(
        pooled_records(records, pool_deltas), Path(out_dir) / "fig_beyond", methods
    )


def _beyond_figure(records: pd.DataFrame, stem: Path, methods: Sequence[str]) -> Path:
    rec = shift_records(records)
    rec = rec[rec["method"].isin(methods)]
    kind = rec["kind"] if "kind" in rec else pd.Series("mlp", index=rec.index)
    rec = rec[(kind == "cnn") | rec["corruption"].isin(BEYOND_ORDER)].copy()
    if rec.empty:
        _message_figure("No shift beyond the paper and no CNN.", stem)
        return stem.with_suffix(".png")
    rec["kind"] = kind.loc[rec.index].str.upper()
    cells = _labelled(model_cells(rec, ["dataset", "kind", "corruption", "n", "method"]))
    cells["Models"] = cells["Dataset"].astype(str) + ", " + cells["kind"]
    cells = cells.rename(columns={"Corruption": "Shift"})
    _lineplot_grid(
        cells, "Models", "Shift", "Beyond the paper: detection ratio by sample size", stem
    )
    return stem.with_suffix(".png")
