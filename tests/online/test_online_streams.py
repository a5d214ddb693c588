"""Streams drawn from a features file: the split, clean run times, shifted delays, the summary."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dgpbench.cli.main import main
from dgpbench.online import OnlineCVMDetector, OnlineMMDDetector, mean_run_time_interval
from dgpbench.online.stream_report import plot_streams, stream_markdown, summarise_streams
from dgpbench.online.streams import (
    WindowDraw,
    clean_run_times,
    shift_delays,
    split_reference,
    stream_records,
)

SMALL = {"window_size": 5, "n_bootstraps": 1000}


@pytest.fixture(scope="module")
def features():
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(400, 3))
    return {"clean": clean, "GN_6": clean + 3.0, "PD_6": clean * 1.05, "classes": np.arange(3)}


def test_split_is_disjoint_complete_and_seeded():
    ref, held = split_reference(50, 30, seed=1)
    assert len(ref) == 30 and len(held) == 20
    assert sorted(np.concatenate([ref, held]).tolist()) == list(range(50))
    again = split_reference(50, 30, seed=1)
    assert np.array_equal(ref, again[0]) and np.array_equal(held, again[1])
    assert not np.array_equal(ref, split_reference(50, 30, seed=2)[0])


@pytest.mark.parametrize("n_ref", [0, 50, 60])
def test_split_refuses_a_reference_leaving_no_held_out_rows(n_ref):
    with pytest.raises(ValueError, match="n_ref"):
        split_reference(50, n_ref, seed=0)


def test_clean_run_times_are_seeded_and_capped(features):
    det = OnlineCVMDetector(ert=20, random_state=0, **SMALL).fit(features["clean"][:200])
    pool = features["clean"][200:]
    times, censored = clean_run_times(det, pool, 15, 10_000, seed=3)
    again, _ = clean_run_times(det, pool, 15, 10_000, seed=3)
    assert np.array_equal(times, again) and not censored.any()
    capped, censored = clean_run_times(det, pool, 15, 8, seed=3)
    # The first step that can alarm is the window's last: run time 1 there, 4 at t = 8.
    assert (capped <= 4).all() and censored.sum() >= 10


def test_shift_delays_after_a_large_shift_are_short_and_past_the_change(features):
    det = OnlineMMDDetector(ert=200, random_state=0, **SMALL).fit(features["clean"][:200])
    pool = features["clean"][200:]
    delays = shift_delays(
        det, pool, pool + 5.0, change_point=5, n_streams=10, max_after=500, seed=0
    )
    assert ((delays >= 1) & (delays <= 5)).all()


def test_shift_delays_mark_a_miss_as_nan_and_an_early_alarm_as_non_positive(features):
    det = OnlineMMDDetector(ert=10, random_state=0, **SMALL).fit(features["clean"][:200])
    pool = features["clean"][200:]
    # No shift and 1 shifted row: most streams miss; a long clean prefix: early alarms.
    miss = shift_delays(det, pool, pool, change_point=5, n_streams=20, max_after=1, seed=0)
    assert np.isnan(miss).sum() >= 15
    early = shift_delays(det, pool, pool, change_point=300, n_streams=10, max_after=5, seed=0)
    assert (early <= 0).sum() >= 8


class _Recorder:
    """A detector stand-in that records the rows it is fed and alarms at step ``stop``."""

    def __init__(self, window_size: int, stop: int) -> None:
        self.window_size, self.stop, self.streams = window_size, stop, []

    def reset(self):
        self.streams.append([])
        return self

    def update(self, x):
        self.streams[-1].append(int(x[0]))
        t = len(self.streams[-1])
        return SimpleNamespace(t=t, is_drift=t >= self.stop, run_time=t)

    def run(self, X):
        return [self.update(x) for x in X[: self.stop]]


def _repeats_in_a_window(rows: list[int], w: int) -> int:
    return sum(len(set(rows[i : i + w])) < len(rows[i : i + w]) for i in range(len(rows)))


def test_window_draw_repeats_no_row_within_a_window_and_reaches_every_row():
    draw = WindowDraw(25, 20, np.random.default_rng(0))
    rows = draw.take(2000).tolist()
    assert _repeats_in_a_window(rows, 20) == 0 and set(rows) == set(range(25))
    # A window of 1: plain uniform draws with replacement (a chi-squared check of the counts).
    counts = np.bincount(WindowDraw(5, 1, np.random.default_rng(1)).take(5000), minlength=5)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_window_draw_refuses_a_pool_smaller_than_the_window():
    with pytest.raises(ValueError, match="window of 20"):
        WindowDraw(19, 20, np.random.default_rng(0))


def test_clean_and_shifted_streams_feed_no_row_twice_within_a_window():
    # 25 rows and a window of 20: draws with replacement would repeat a row in most windows.
    pool = np.arange(25.0)[:, None]
    det = _Recorder(window_size=20, stop=300)
    clean_run_times(det, pool, n_streams=3, max_steps=300, seed=0)
    assert all(_repeats_in_a_window(rows, 20) == 0 for rows in det.streams)
    det = _Recorder(window_size=20, stop=300)
    shift_delays(det, pool, pool + 100, change_point=20, n_streams=3, max_after=280, seed=0)
    assert all(_repeats_in_a_window(rows, 20) == 0 for rows in det.streams)
    assert all(min(rows[20:]) >= 100 > max(rows[:20]) for rows in det.streams)


def test_cvm_calibration_reaches_the_detector(features, monkeypatch):
    import dgpbench.online.streams as streams

    real, seen = dict(streams.ONLINE_DETECTORS), []

    def spy(name):
        def make(**params):
            seen.append((name, params.get("calibration"), params.get("n_bootstraps")))
            return real[name](**params)

        return make

    monkeypatch.setattr(streams, "ONLINE_DETECTORS", {name: spy(name) for name in real})
    kwargs = {"detectors": ["cvm_online", "mmd_online"], "erts": [10], "shifts": [], "n_ref": 200,
              "n_streams": 2, "n_shift_streams": 0, "seed": 0, **SMALL}  # fmt: skip
    for calibration in ("gaussian", "reference"):
        seen.clear()
        stream_records(features, cvm_calibration=calibration, **kwargs)
        assert seen == [("cvm_online", calibration, 1000), ("mmd_online", None, 1000)]
    seen.clear()
    per_ert = {**kwargs, "n_bootstraps": None, "erts": [10, 12]}
    stream_records(features, bootstraps_per_ert=50.5, **per_ert)
    assert [n for _, _, n in seen] == [505, 606, 505, 606]
    with pytest.raises(ValueError, match="not both"):
        stream_records(features, bootstraps_per_ert=50, **kwargs)
    with pytest.raises(ValueError, match="cvm_calibration"):
        stream_records(features, cvm_calibration="uniform", **kwargs)


def test_stream_records_have_one_row_per_stream(features):
    rec = stream_records(features, detectors=["cvm_online", "mmd_online"], erts=[10, 30],
                         shifts=["GN_6", "PD_6"], n_ref=200, n_streams=6, n_shift_streams=4,
                         seed=0, **SMALL)  # fmt: skip
    assert len(rec) == 2 * 2 * (6 + 2 * 4)
    counts = rec.groupby(["detector", "ert", "shift"]).size()
    assert (
        counts.xs("none", level="shift").eq(6).all()
        and counts.drop("none", level="shift").eq(4).all()
    )
    assert set(rec["change_point"]) == {5} and set(rec["n_features"]) == {3}
    gn = rec[rec["shift"] == "GN_6"]
    # A 3-sigma shift: detected before the window turns over (ERT 10: a rare early alarm).
    assert gn.loc[~gn["false_alarm"], "value"].between(1, 5).all()
    assert (gn["value"] <= 0).equals(gn["false_alarm"])
    again = stream_records(features, detectors=["cvm_online", "mmd_online"], erts=[10, 30],
                           shifts=["GN_6", "PD_6"], n_ref=200, n_streams=6, n_shift_streams=4,
                           seed=0, **SMALL)  # fmt: skip
    pd.testing.assert_frame_equal(rec, again)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shifts": ["GB_6"]}, "GB_6"),
        ({"detectors": ["ks_online"]}, "ks_online"),
        ({"n_ref": 400}, "n_ref"),
        ({"erts": []}, "erts"),
    ],
)
def test_stream_records_refuse_bad_arguments_naming_them(features, change, message):
    kwargs = {"detectors": ["cvm_online"], "erts": [10], "shifts": ["GN_6"], "n_ref": 200,
              "window_size": 5, "n_streams": 2, "n_shift_streams": 1, **change}  # fmt: skip
    with pytest.raises(ValueError, match=message):
        stream_records(features, **kwargs)


def test_stream_records_refuse_a_shifted_set_that_is_not_the_clean_sets_twin(features):
    bad = {**features, "GN_6": features["clean"][:100]}
    with pytest.raises(ValueError, match="twin"):
        stream_records(bad, detectors=["cvm_online"], erts=[10], shifts=["GN_6"], n_ref=200,
                       window_size=5, n_streams=2, n_shift_streams=1)  # fmt: skip


def test_measured_mean_run_time_interval_contains_the_ert(features):
    rec = stream_records(features, detectors=["mmd_online"], erts=[20], shifts=[], n_ref=200,
                         n_streams=60, n_shift_streams=0, seed=0, **SMALL)  # fmt: skip
    row = summarise_streams(rec).iloc[0]
    assert row["quantity"] == "run_time" and row["n_censored"] == 0
    assert row["low"] <= 20 <= row["high"] and row["ert_in_interval"]


def test_reference_splits_each_draw_their_own_reference_and_one_split_is_the_plain_run(features):
    kwargs = {"detectors": ["cvm_online"], "erts": [10], "shifts": ["GN_6"], "n_ref": 200,
              "n_streams": 4, "n_shift_streams": 2, "seed": 3, **SMALL}  # fmt: skip
    one = stream_records(features, **kwargs)
    three = stream_records(features, reference_splits=3, **kwargs)
    assert list(three.columns[:2]) == ["split", "detector"]
    assert three.groupby("split").size().tolist() == [6, 6, 6]
    # split 0 is the run of `seed` alone; the others draw other references and streams
    assert three[three["split"] == 0].reset_index(drop=True).equals(one)
    clean = three[three["shift"] == "none"]
    assert clean.groupby("split")["value"].apply(tuple).nunique() == 3


@pytest.mark.parametrize("splits", [0, -1, 1.5, True])
def test_reference_splits_must_be_a_positive_integer(features, splits):
    with pytest.raises((ValueError, TypeError), match="reference_splits"):
        stream_records(features, detectors=["cvm_online"], erts=[10], shifts=[], n_ref=200,
                       n_streams=1, n_shift_streams=0, reference_splits=splits, **SMALL)  # fmt: skip


def test_summary_rests_the_run_time_on_the_reference_splits():
    # Three splits whose references run at 100, 200 and 400 (20 streams each): they differ
    # by more than their streams' intervals allow, and the hull of the streams' interval
    # and the splits' bootstrap covers that spread.
    rng = np.random.default_rng(0)
    rows = [
        {"split": k, "detector": "mmd_online", "ert": 200, "shift": "none", "censored": False,
         "false_alarm": False, "value": float(v)}
        for k, mean in enumerate([100, 200, 400])
        for v in rng.geometric(1 / mean, size=20)
    ]  # fmt: skip
    rec = pd.DataFrame(rows)
    row = summarise_streams(rec).iloc[0]
    streams_low, streams_high = mean_run_time_interval(rec["value"])
    assert row["n_references"] == 3 and row["n_streams"] == 60
    assert row["low"] <= streams_low and row["high"] >= streams_high
    assert row["high"] - row["low"] > 1.5 * (streams_high - streams_low)
    means = rec.groupby("split")["value"].mean()
    assert row["reference_mean_min"] == means.min() and row["reference_mean_max"] == means.max()
    holding = sum(lo <= 200 <= hi for lo, hi in
                  (mean_run_time_interval(v) for _, v in rec.groupby("split")["value"]))  # fmt: skip
    assert row["references_holding_ert"] == holding
    # one split: the streams' interval alone, as before
    alone = summarise_streams(rec[rec["split"] == 1]).iloc[0]
    assert alone["n_references"] == 1
    assert (alone["low"], alone["high"]) == pytest.approx(
        mean_run_time_interval(rec[rec["split"] == 1]["value"])
    )


def test_summary_delay_interval_covers_the_spread_between_splits():
    rows = [
        {"split": k, "detector": "cvm_online", "ert": 20, "shift": "GN_6", "censored": False,
         "false_alarm": False, "value": float(base + d)}
        for k, base in enumerate([5, 5, 40]) for d in (0, 1, 2, 3)
    ]  # fmt: skip
    row = summarise_streams(pd.DataFrame(rows)).iloc[0]
    detected = np.array([r["value"] for r in rows])
    half = stats.t.ppf(0.975, len(detected) - 1) * detected.std(ddof=1) / np.sqrt(len(detected))
    assert row["n_references"] == 3
    assert row["low"] <= detected.mean() - half and row["high"] >= detected.mean() + half


def test_interval_over_reference_splits_contains_the_ert(features):
    rec = stream_records(features, detectors=["mmd_online", "cvm_online"], erts=[20], shifts=[],
                         n_ref=200, n_streams=20, n_shift_streams=0, reference_splits=3,
                         seed=1, **SMALL)  # fmt: skip
    summary = summarise_streams(rec)
    assert (summary["n_references"] == 3).all() and (summary["n_streams"] == 60).all()
    assert summary["ert_in_interval"].all(), summary[["detector", "mean", "low", "high"]]


def _records():
    none = dict(detector="cvm_online", ert=20, shift="none", censored=False, false_alarm=False)
    rows = [dict(none, value=v, model=m) for m, v in [("a", 10.0), ("a", 30.0), ("b", 25.0)]]
    shift = dict(detector="cvm_online", ert=20, shift="GN_6", model="a")
    rows += [dict(shift, value=v, censored=False, false_alarm=False) for v in (2.0, 4.0, 6.0)]
    rows += [dict(shift, value=-3.0, censored=False, false_alarm=True),
             dict(shift, value=np.nan, censored=True, false_alarm=False)]  # fmt: skip
    return pd.DataFrame(rows).assign(dataset="digits", method="dgp")


def test_summary_intervals_and_what_the_delay_leaves_out():
    summary = summarise_streams(_records())
    clean, shifted = summary.iloc[0], summary.iloc[1]
    assert clean["shift"] == "none" and clean["n_models"] == 2
    low, high = mean_run_time_interval([10, 30, 25])
    assert clean["mean"] == pytest.approx(65 / 3)
    assert (clean["low"], clean["high"]) == pytest.approx((low, high))
    assert shifted["mean"] == 4.0 and shifted["n_streams"] == 5
    assert shifted["n_false_alarms"] == 1 and shifted["n_censored"] == 1
    # t interval of (2, 4, 6): 4 +- t_{0.975, 2} * 2 / sqrt(3)
    assert shifted["high"] - 4.0 == pytest.approx(4.302653 * 2 / np.sqrt(3), rel=1e-5)


def test_summary_refuses_records_without_the_stream_columns():
    with pytest.raises(ValueError, match="value"):
        summarise_streams(_records().drop(columns="value"))


def test_markdown_and_figure(tmp_path):
    summary = summarise_streams(_records())
    text = stream_markdown(summary)
    assert "| digits" in text and "21.7 [" in text and "4.0 [" in text
    paths = plot_streams(summary, tmp_path / "fig")
    assert [p.name for p in paths] == ["fig.png", "fig.pdf"] and all(
        p.stat().st_size for p in paths
    )


def test_stream_commands_write_records_table_and_figure(features, tmp_path):
    np.savez(tmp_path / "f.npz", **features)
    out = tmp_path / "r.csv"
    args = ["stream", "--features", str(tmp_path / "f.npz"), "--detectors", "cvm_online",
            "--erts", "10", "--shifts", "GN_6", "--n-ref", "200", "--window-size", "5",
            "--n-streams", "3", "--n-shift-streams", "2", "--n-bootstraps", "500",
            "--cvm-calibration", "gaussian", "--tag", "dataset=toy", "--tag", "method=dgp", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    rec = pd.read_csv(out)
    assert list(rec.columns[:2]) == ["dataset", "method"] and len(rec) == 5
    assert main(["stream-report", str(out), "--out-dir", str(tmp_path / "rep")]) == 0
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert names == ["stream_delays.pdf", "stream_delays.png", "stream_summary.csv",
                     "stream_summary.md"]  # fmt: skip


def test_stream_command_refuses_an_unknown_shift_with_status_2(features, tmp_path, capsys):
    np.savez(tmp_path / "f.npz", **features)
    args = ["stream", "--features", str(tmp_path / "f.npz"), "--shifts", "ZO_6",
            "--out", str(tmp_path / "r.csv")]  # fmt: skip
    assert main(args) == 2
    assert "ZO_6" in capsys.readouterr().err and not (tmp_path / "r.csv").exists()


def test_stream_command_pools_the_shifted_sets_of_several_files(features, tmp_path):
    np.savez(tmp_path / "a.npz", clean=features["clean"], GN_6=features["GN_6"])
    np.savez(tmp_path / "b.npz", clean=features["clean"], FLGN_3=features["clean"] + 4.0)
    out = tmp_path / "r.csv"
    args = ["stream", "--features", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"),
            "--detectors", "mmd_online", "--erts", "10", "--shifts", "GN_6", "FLGN_3",
            "--n-ref", "200", "--window-size", "5", "--n-streams", "2", "--n-shift-streams",
            "2", "--n-bootstraps", "500", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert sorted(set(pd.read_csv(out)["shift"])) == ["FLGN_3", "GN_6", "none"]
    np.savez(tmp_path / "c.npz", clean=features["clean"] + 1.0, PD_6=features["PD_6"])
    args[3], args[-1] = str(tmp_path / "c.npz"), str(tmp_path / "bad.csv")
    assert main(args) == 2 and not (tmp_path / "bad.csv").exists()


def test_stream_shifts_writes_twins_of_every_clean_image_as_a_corrupt_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.random((12, 1, 8, 8), dtype=np.float32)
    np.savez(tmp_path / "images.npz", x_test=x, y_test=np.arange(12) % 3)
    out = tmp_path / "FLGN.npz"
    args = ["stream-shifts", "--images", str(tmp_path / "images.npz"), "--shifts",
            "large_gn_shift", "small_gn_shift", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    with np.load(out) as f:
        assert str(f["corruption"]) == "FLGN" and sorted(f.files) == [
            "corruption", "intensity_1", "intensity_3"]  # fmt: skip
        large, small = f["intensity_3"], f["intensity_1"]
    assert large.shape == x.shape and (large != x).mean() > 0.9  # every image altered
    assert np.abs(small - x).max() < np.abs(large - x).max()
    for bad in (["large_gn_shift", "medium_image_shift"], ["ko_shift"]):
        assert main(args[:4] + bad + ["--out", str(tmp_path / "bad.npz")]) == 2
        assert not (tmp_path / "bad.npz").exists()
    assert "ko_shift" in capsys.readouterr().err
