"""The ``stream`` target's table and figure from per-stream records.

:func:`summarise_streams` turns the records of :func:`dgpbench.online.streams.stream_records`
(tagged with data set, model and method) into one row per data set, method, detector, ERT
and shift: under no shift the mean run time, under a shift the mean detection delay over
the streams that raised their alarm after the change. The streams of one fitted reference
share it: the reference splits are the independent units (split ``k`` draws the same
images for every model), so each interval is the hull of the streams' interval (exact
chi-squared for the run time, :func:`dgpbench.online.mean_run_time_interval`; t for the
delay) and a percentile bootstrap over the splits
(:func:`dgpbench.resampling.unit_bootstrap_interval`).
:func:`plot_streams` draws both on one log axis per data set and ERT.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dgpbench.online.evaluation import mean_run_time_interval
from dgpbench.resampling import BOOTSTRAP_SEED, unit_bootstrap_interval

__all__ = ["plot_streams", "stream_markdown", "summarise_streams"]

_KEYS = ["dataset", "method", "detector", "ert", "shift"]
_REQUIRED = ["detector", "ert", "shift", "value", "censored", "false_alarm"]


def _hull_over_splits(
    low: float, high: float, splits: list[np.ndarray], level: float, rng: np.random.Generator
) -> tuple[float, float]:
    """The hull of the streams' interval and the bootstrap of the pooled mean over the splits
    (the streams' interval alone with one split).
    """
    b_low, b_high = unit_bootstrap_interval([v.sum() for v in splits], [len(v) for v in splits],
                                            level, rng)  # fmt: skip
    return np.fmin(low, b_low), np.fmax(high, b_high)  # fmin/fmax: NaN with one split


def _by_split(frame: pd.DataFrame) -> list[np.ndarray]:
    return [v.to_numpy(dtype=np.float64) for _, v in frame.groupby("_unit", sort=True)["value"]]


def _summary_row(group: pd.DataFrame, level: float, rng: np.random.Generator) -> dict[str, Any]:
    from scipy.stats import t as student_t

    values = group["value"].to_numpy(dtype=np.float64)
    row: dict[str, Any] = {
        "n_models": group["model"].nunique() if "model" in group else 1,
        "n_references": group["_unit"].nunique(),
        "n_streams": len(group),
        "n_censored": int(group["censored"].sum()),
        "n_false_alarms": int(group["false_alarm"].sum()),
    }
    if group["shift"].iloc[0] == "none":
        # Censored run times enter as observed: the interval errs low (say so in the docs).
        splits = _by_split(group)
        low, high = _hull_over_splits(*mean_run_time_interval(values, level), splits, level, rng)
        ert = float(group["ert"].iloc[0])
        own = [mean_run_time_interval(v, level) for v in splits]
        row.update(quantity="run_time", mean=values.mean(), low=low, high=high,
                   ert_in_interval=bool(low <= ert <= high),
                   references_holding_ert=sum(lo <= ert <= hi for lo, hi in own),
                   reference_mean_min=min(v.mean() for v in splits),
                   reference_mean_max=max(v.mean() for v in splits))  # fmt: skip
        return row
    ok = (~group["censored"].to_numpy()) & (~group["false_alarm"].to_numpy())
    detected = values[ok]
    mean = float(detected.mean()) if len(detected) else float("nan")
    if len(detected) > 1:
        half = student_t.ppf((1 + level) / 2, len(detected) - 1) * detected.std(ddof=1)
        half /= np.sqrt(len(detected))
    else:
        half = float("nan")
    low, high = mean - half, mean + half
    if len(detected):
        low, high = _hull_over_splits(low, high, _by_split(group[ok]), level, rng)
    row.update(quantity="delay", mean=mean, low=low, high=high, ert_in_interval=None,
               references_holding_ert=None, reference_mean_min=np.nan,
               reference_mean_max=np.nan)  # fmt: skip
    return row


def summarise_streams(records: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per data set, method, detector, ERT and shift (``none``: clean streams).

    Parameters
    ----------
    records : DataFrame
        Per-stream records (:func:`dgpbench.online.streams.stream_records`), optionally
        tagged with ``dataset``, ``model`` and ``method``; the streams of several models
        and reference splits (``split``) of one data set and method are pooled.
    level : float, default=0.95
        Confidence level of the intervals.

    Returns
    -------
    DataFrame
        The keys, then ``quantity`` (``run_time`` or ``delay``), ``mean``, ``low``,
        ``high`` (the hull of the streams' interval and the bootstrap over the reference
        splits; the streams' alone with one split), ``ert_in_interval``, ``n_models``,
        ``n_references``, ``n_streams``, ``n_censored`` (clean: no alarm by the step
        limit; shifted: a miss), ``n_false_alarms`` (an alarm before the change; excluded
        from the delay), and for run times ``references_holding_ert`` (splits whose
        own streams' interval contains the ERT) and ``reference_mean_min`` /
        ``reference_mean_max`` (the range of the splits' mean run times: what one
        deployed reference can give).

    Raises
    ------
    ValueError
        If a column is missing or there are no records.

    Examples
    --------
    >>> rec = pd.DataFrame({"detector": "cvm_online", "ert": 20, "shift": "none",
    ...                     "value": [10.0, 30.0, 20.0], "censored": False,
    ...                     "false_alarm": False})
    >>> summarise_streams(rec)[["quantity", "mean", "n_streams"]].to_dict("records")
    [{'quantity': 'run_time', 'mean': 20.0, 'n_streams': 3}]
    """
    missing = [c for c in _REQUIRED if c not in records.columns]
    if missing:
        raise ValueError(f"stream records lack the column(s) {missing}")
    if records.empty:
        raise ValueError("no stream records")
    keys = [k for k in _KEYS if k in records.columns]
    # The independent unit: a reference split. Split k draws the same reference images for
    # every model of a run, so the models of one split are not independent references.
    records = records.assign(_unit=records["split"] if "split" in records.columns else 0)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    rows = [
        {**dict(zip(keys, key, strict=True)), **_summary_row(group, level, rng)}
        for key, group in records.groupby(keys, sort=True)
    ]
    out = pd.DataFrame(rows)
    # Clean streams first, then the shifts in their order.
    out["_clean"] = out["shift"] != "none"
    return (
        out.sort_values([*keys[:-1], "_clean", "shift"])
        .drop(columns="_clean")
        .reset_index(drop=True)
    )


def stream_markdown(summary: pd.DataFrame) -> str:
    """The summary as a Markdown table (means and intervals rounded to 0.1 step).

    Parameters
    ----------
    summary : DataFrame
        :func:`summarise_streams`'s output.

    Returns
    -------
    str
    """

    def cell(row: pd.Series) -> str:
        if not np.isfinite(row["mean"]):
            return "no detection"
        interval = f" [{row['low']:.1f}, {row['high']:.1f}]" if np.isfinite(row["low"]) else ""
        return f"{row['mean']:.1f}{interval}"

    table = summary.assign(**{"mean [interval]": summary.apply(cell, axis=1)})
    columns = [c for c in _KEYS if c in table.columns]
    columns += ["quantity", "mean [interval]", "ert_in_interval", "n_references",
                "references_holding_ert", "n_streams", "n_censored", "n_false_alarms"]  # fmt: skip
    title = (
        "Online detectors on streams: mean run time under no shift and mean detection delay "
        "per shift (streams detected after the change); interval: the hull of the streams' "
        "(exact chi-squared; t) and a bootstrap over the fitted references"
    )
    return f"# {title}\n\n{table[columns].to_markdown(index=False)}\n"


def plot_streams(summary: pd.DataFrame, stem: str | os.PathLike) -> list[Path]:
    """One panel per data set and ERT: run time and delays per shift on a log axis.

    Parameters
    ----------
    summary : DataFrame
        :func:`summarise_streams`'s output.
    stem : path-like
        Output path without suffix: ``.png`` and ``.pdf`` are written.

    Returns
    -------
    list of Path
        The files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dgpbench.io import save_figure

    data = summary.copy()
    if "dataset" not in data:
        data["dataset"] = ""
    if "method" not in data:
        data["method"] = ""
    datasets, erts = sorted(data["dataset"].unique()), sorted(data["ert"].unique())
    shifts = ["none", *[s for s in dict.fromkeys(data["shift"]) if s != "none"]]
    series = list(dict.fromkeys(zip(data["method"], data["detector"], strict=True)))
    methods = list(dict.fromkeys(data["method"]))  # a colour per method, a marker per detector
    fig, axes = plt.subplots(len(datasets), len(erts), squeeze=False, sharey=True, layout="constrained",
                             figsize=(1.2 + 0.9 * len(shifts) * len(erts), 0.6 + 3.0 * len(datasets)))  # fmt: skip
    width = 0.8 / max(1, len(series))
    colours = plt.get_cmap("tab10")
    for i, ds in enumerate(datasets):
        for j, ert in enumerate(erts):
            ax = axes[i, j]
            panel = data[(data["dataset"] == ds) & (data["ert"] == ert)]
            for s, (method, detector) in enumerate(series):
                part = panel[(panel["method"] == method) & (panel["detector"] == detector)]
                x = [shifts.index(v) - 0.4 + width * (s + 0.5) for v in part["shift"]]
                mean = part["mean"].to_numpy(dtype=float)
                low = np.maximum(part["low"].to_numpy(dtype=float), 1.0)  # a log axis
                err = np.abs(np.vstack([mean - low, part["high"] - mean]))
                ax.errorbar(x, mean, yerr=np.nan_to_num(err), fmt="o" if detector.startswith("cvm") else "s",
                            color=colours(methods.index(method) % 10), ms=4, capsize=2,
                            label=f"{method} ({detector})" if i == j == 0 else None)  # fmt: skip
            ax.axhline(ert, color="grey", ls="--", lw=1)
            ax.set_yscale("log")
            ax.set_xticks(range(len(shifts)), ["clean\n(run time)", *shifts[1:]], fontsize=8)
            ax.set_title(f"{ds} ERT {ert}".strip(), fontsize=9)
            if j == 0:
                ax.set_ylabel("samples (log)")
    fig.legend(loc="outside lower center", ncol=min(4, len(series)), fontsize=7)
    fig.suptitle("Mean run time under no shift (dashed: the ERT) and mean detection delay",
                 fontsize=10)  # fmt: skip
    try:
        return save_figure(fig, stem)
    finally:
        plt.close(fig)
