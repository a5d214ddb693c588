"""R² of NP ~ log-variance by training epoch, from the runs' curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dgpbench.analysis.variance import (
    linear_fit,
    np_variance_r2,
    r2_by_epoch,
    r2_by_epoch_table,
    table_epochs,
)
from dgpbench.cli.main import main

EPOCHS = [0.25 * k for k in range(1, 13)]  # 3 epochs, a quarter each


def _curves(n_runs: int = 6) -> pd.DataFrame:
    """Two relu architectures (2 and 3 linear maps) and a linear classifier; NP follows the
    log-variance more closely as training goes on (noise shrinking with the epoch)."""
    rng = np.random.default_rng(0)
    rows = []
    for layers, hidden in ((1, 1), (2, 50), (3, 50)):
        for r in range(n_runs):
            run = f"mnist/relu-l{layers}-h{hidden}-s{r}"
            for e in EPOCHS:
                lv = rng.normal(-4, 0.3)
                rows.append(dict(run=run, dataset="mnist", activation="relu", n_layers=layers,
                                 hidden=hidden, seed=r, epoch=e, log_variance=lv,
                                 np=0.5 + 0.1 * lv + rng.normal(0, 0.05 / e)))  # fmt: skip
    return pd.DataFrame(rows)


def test_each_epoch_is_the_fit_over_the_runs_at_that_epoch():
    curves = _curves()
    r2 = r2_by_epoch(curves)
    assert set(r2["n_layers"]) == {2, 3}  # linear classifiers left out, as in the R² table
    assert len(r2) == 2 * len(EPOCHS)
    for _, row in r2.iterrows():
        at = curves[(curves["n_layers"] == row["n_layers"]) & (curves["epoch"] == row["epoch"])]
        assert row["n"] == 6
        assert row["r2"] == pytest.approx(linear_fit(at["log_variance"], at["np"])[2], rel=1e-12)
    # the noise shrinks with training: the fit tightens
    first, last = r2[r2["epoch"] == 0.25], r2[r2["epoch"] == 3.0]
    assert (last["r2"].to_numpy() > first["r2"].to_numpy()).all()


def test_last_epoch_is_the_r2_table():
    """The models table takes NP and the variance from each run's last curve row."""
    curves = _curves()
    models = curves[curves["epoch"] == curves["epoch"].max()]
    deep = models[models["n_layers"] > 1]
    want = np_variance_r2(deep, confidence=None)
    got = r2_by_epoch(curves)
    got = got[got["epoch"] == 3.0].reset_index(drop=True)
    np.testing.assert_allclose(got["r2_pct"], want["r2_pct"], rtol=1e-12)


def test_table_and_its_epochs():
    assert table_epochs([0.25 * k for k in range(1, 29)]) == [1.0, 2.0, 3.0, 4.0, 5.0, 7.0]
    assert table_epochs([0.5]) == [0.5]
    wide = r2_by_epoch_table(r2_by_epoch(_curves()))
    assert wide.columns.tolist() == ["1", "2", "3"]
    assert wide.index.names == ["dataset", "activation", "hidden_layers", "hidden"]
    assert wide.index.get_level_values("hidden_layers").tolist() == [1, 2]


def test_bad_curves_are_refused():
    curves = _curves()
    with pytest.raises(ValueError, match="twice at epoch"):
        r2_by_epoch(pd.concat([curves, curves[curves["n_layers"] == 2].iloc[:1]]))
    with pytest.raises(ValueError, match="log_variance"):
        r2_by_epoch(curves.drop(columns="log_variance"))


def test_np_variance_writes_r2_by_epoch(tmp_path):
    curves = _curves()
    curves_csv, models_csv = tmp_path / "curves.csv", tmp_path / "models.csv"
    curves.to_csv(curves_csv, index=False)
    curves[curves["epoch"] == 3.0].to_csv(models_csv, index=False)
    out = tmp_path / "out"
    argv = ["analysis", "np-variance", "--models", models_csv, "--curves", curves_csv,
            "--out-dir", out]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    r2 = pd.read_csv(out / "r2_by_epoch.csv")
    final = pd.read_csv(out / "r2.csv")
    last = r2[r2["epoch"] == 3.0].reset_index(drop=True)
    np.testing.assert_allclose(last["r2_pct"], final["r2_pct"], rtol=1e-5)
    for name in ("table_r2_by_epoch.csv", "table_r2_by_epoch.md", "fig_r2_by_epoch.png",
                 "fig_r2_by_epoch.pdf"):  # fmt: skip
        assert (out / name).stat().st_size > 0
    assert "by training epoch" in (out / "table_r2_by_epoch.md").read_text()
