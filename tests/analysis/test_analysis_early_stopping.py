"""Early stopping (Algorithm 2 of Rieck et al. 2019) on hand-made curves."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgpbench.analysis.early_stopping import (
    DGP_TABLE_PAIRS,
    NP_TABLE_PAIRS,
    early_stopping_differences,
    early_stopping_grid,
    stop_evaluation,
)

EPOCHS = np.arange(1, 21) / 4  # 0.25 ... 5.0


def algorithm2(values, epochs, *, mode, patience, burn_in, min_delta=0.0):
    """The oracle: Algorithm 2 of Rieck et al., one evaluation at a time, in plain Python.

    A transcription of the rule in the module docstring of dgpbench.analysis.early_stopping
    (burn-in skips evaluations, the first value after it is the best so far, ties do not
    improve, stop once ``patience`` evaluations in a row did not improve).
    """
    sign = 1.0 if mode == "max" else -1.0
    best = None
    counter = 0
    for k, (value, epoch) in enumerate(zip(sign * np.asarray(values, float), epochs, strict=True)):
        if epoch <= burn_in:
            continue
        if best is None or value > best + min_delta:
            best, counter = value, 0
        else:
            counter += 1
        if counter >= patience:
            return k
    return len(values) - 1


def test_increasing_criterion_stops_after_patience_non_improvements():
    values = [1, 2, 3, 4, 4, 3.5, 5, 5, 5, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    # patience 2: evaluations 4 (tie) and 5 (drop) do not improve -> stop at index 5
    assert stop_evaluation(values, EPOCHS, mode="max", patience=2, burn_in=0) == 5
    # patience 3: index 6 improves (5 > 4), then 7, 8, 9 tie -> stop at index 9
    assert stop_evaluation(values, EPOCHS, mode="max", patience=3, burn_in=0) == 9
    # patience 5: never five non-improvements in a row -> train to the end
    assert stop_evaluation(values, EPOCHS, mode="max", patience=5, burn_in=0) == 19


def test_decreasing_criterion_is_mirrored():
    values = np.array([1, 2, 3, 4, 4, 3.5, 5, 5, 5, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15.0])
    for patience in (1, 2, 3, 5):
        assert stop_evaluation(
            -values, EPOCHS, mode="min", patience=patience, burn_in=0
        ) == stop_evaluation(values, EPOCHS, mode="max", patience=patience, burn_in=0)
    # variance that keeps decreasing never stops; one that rises stops
    assert stop_evaluation(np.linspace(1, 0, 20), EPOCHS, mode="min", patience=1, burn_in=0) == 19
    rising = np.r_[np.linspace(1, 0.5, 10), np.linspace(0.6, 1, 10)]
    assert stop_evaluation(rising, EPOCHS, mode="min", patience=2, burn_in=0) == 11


def test_burn_in_ignores_early_evaluations():
    # a spike during the burn-in would stop training at once without the burn-in
    values = np.r_[[10.0], np.arange(1, 20.0)]
    assert stop_evaluation(values, EPOCHS, mode="max", patience=3, burn_in=0) == 3
    # burn-in 1 epoch: evaluations at 0.25..1.0 are ignored; the rest increases
    assert stop_evaluation(values, EPOCHS, mode="max", patience=3, burn_in=1) == 19
    # burn-in 2 epochs with a plateau after it: first tracked value at epoch 2.25 (index 8)
    flat = np.r_[np.arange(8.0), np.full(12, 3.0)]
    assert stop_evaluation(flat, EPOCHS, mode="max", patience=4, burn_in=2) == 12


def test_min_delta_requires_margin():
    values = [1.0, 1.05, 1.1, 1.15, 1.2, 2.0]
    epochs = np.arange(1, 7) / 4
    assert stop_evaluation(values, epochs, mode="max", patience=2, burn_in=0) == 5
    assert stop_evaluation(values, epochs, mode="max", patience=2, burn_in=0, min_delta=0.1) == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"patience": 0}, "patience"),
        ({"patience": 1.5}, "patience"),
        ({"mode": "up"}, "mode"),
    ],
)
def test_stop_evaluation_rejects_bad_arguments(kwargs, match):
    args = {"mode": "max", "patience": 1, "burn_in": 0} | kwargs
    with pytest.raises(ValueError, match=match):
        stop_evaluation([1, 2, 3], [0.25, 0.5, 0.75], **args)
    with pytest.raises(ValueError, match="increasing"):
        stop_evaluation([1, 2, 3], [0.25, 0.25, 0.75], mode="max", patience=1, burn_in=0)
    with pytest.raises(ValueError, match="same length"):
        stop_evaluation([1, 2], [0.25, 0.5, 0.75], mode="max", patience=1, burn_in=0)


def _curves(rng, runs=3, n=24):
    rows = []
    for run in range(runs):
        epochs = np.arange(1, n + 1) / 4
        rows.append(
            pd.DataFrame(
                {
                    "dataset": "toy" if run < 2 else "other",
                    "run": run,
                    "epoch": epochs,
                    "np": np.cumsum(rng.normal(0.01, 0.02, n)),
                    "variance": np.cumsum(rng.normal(-0.01, 0.02, n)),
                    "dgp": rng.random(n),
                    "val_accuracy": np.round(rng.random(n), 1),  # ties on purpose
                    "test_accuracy": rng.random(n),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), min_delta=st.sampled_from([0.0, 0.01]))
def test_grid_agrees_with_reference_rule(seed, min_delta):
    rng = np.random.default_rng(seed)
    curves = _curves(rng)
    grid = early_stopping_grid(
        curves,
        burn_ins=[0, 0.5, 2, 5],
        patiences=[1, 2, 3, 7],
        run_columns=["dataset", "run"],
        min_delta=min_delta,
    )
    assert len(grid) == 3 * 4 * 4 * 4
    modes = {"np": "max", "variance": "min", "dgp": "max", "val_accuracy": "max"}
    for row in grid.sample(25, random_state=seed % 1000).itertuples():
        run = curves[curves.run == row.run]
        k = algorithm2(
            run[row.criterion],
            run["epoch"],
            mode=modes[row.criterion],
            patience=row.patience,
            burn_in=row.burn_in,
            min_delta=min_delta,
        )
        assert row.stop_epoch == run["epoch"].iloc[k]
        assert row.test_accuracy == run["test_accuracy"].iloc[k]
        assert row.dataset == run["dataset"].iloc[0]


def test_differences_table_layout_and_values():
    grid = pd.DataFrame(
        {
            "dataset": ["A"] * 8 + ["B"] * 8,
            "run": 0,
            "burn_in": 0,
            "patience": [1, 1, 1, 1, 2, 2, 2, 2] * 2,
            "criterion": ["np", "variance", "val_accuracy", "dgp"] * 4,
            "stop_epoch": [10, 12, 9, 8, 20, 21, 19, 18, 1, 2, 3, 4, 1, 2, 3, 4],
            "test_accuracy": [0.9, 0.91, 0.88, 0.87] * 2 + [0.5, 0.5, 0.5, 0.4] * 2,
        }
    )
    table = early_stopping_differences(grid, NP_TABLE_PAIRS)
    assert list(table.columns) == ["A", "B"]
    assert list(table.index) == [
        "Δ_epoch(NP, val)",
        "Δ_epoch(NP, var)",
        "Δ_epoch(var, val)",
        "Δ_accuracy(NP, val)",
        "Δ_accuracy(NP, var)",
        "Δ_accuracy(var, val)",
    ]
    assert table.loc["Δ_epoch(NP, val)", "A"] == pytest.approx(1.0)
    assert table.loc["Δ_epoch(NP, var)", "A"] == pytest.approx(-1.5)
    assert table.loc["Δ_epoch(NP, val)", "B"] == pytest.approx(-2.0)
    assert table.loc["Δ_accuracy(NP, val)", "A"] == pytest.approx(2.0)
    assert table.loc["Δ_accuracy(var, val)", "A"] == pytest.approx(3.0)
    dgp = early_stopping_differences(grid, DGP_TABLE_PAIRS)
    assert dgp.loc["Δ_epoch(DGP, NP)", "A"] == pytest.approx(-2.0)
    assert dgp.loc["Δ_accuracy(DGP, var)", "B"] == pytest.approx(-10.0)
    with pytest.raises(ValueError, match="criterion"):
        early_stopping_differences(grid, [("np", "val_loss")])


@settings(max_examples=50, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5, 1.0]), min_size=1, max_size=30),
    mode=st.sampled_from(["max", "min"]),
    patience=st.integers(1, 6),
    burn_in=st.sampled_from([0, 0.25, 0.6, 1, 3]),
    min_delta=st.sampled_from([0.0, 0.1]),
)
def test_stop_evaluation_agrees_with_the_oracle(values, mode, patience, burn_in, min_delta):
    # few distinct values, so ties and margins of exactly min_delta are frequent
    epochs = np.arange(1, len(values) + 1) / 4
    kwargs = {"mode": mode, "patience": patience, "burn_in": burn_in, "min_delta": min_delta}
    assert stop_evaluation(values, epochs, **kwargs) == algorithm2(values, epochs, **kwargs)
