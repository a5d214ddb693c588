"""The `dgpbench fl-*` subcommands: bad input is exit 2 with a message, outputs atomic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgpbench.cli.main import main
from dgpbench.io import save_npz


def _pools(path):
    rng = np.random.default_rng(0)
    x = rng.random((120, 1, 8, 8), dtype=np.float32)
    y = np.arange(120) % 10
    save_npz(path, x_fit=x[:40], y_fit=y[:40], x_ref=x[40:80], y_ref=y[40:80], x_test=x[80:],
             y_test=y[80:])  # fmt: skip


def test_shift_features_detect_chain_by_hand(tmp_path):
    _pools(tmp_path / "pools.npz")
    assert main(["fl-shift", "--images", str(tmp_path / "pools.npz"), "--shift", "ko_shift",
                 "--out", str(tmp_path / "ko.npz")]) == 0  # fmt: skip
    assert main(["fl-features", "--representation", "noredu", "--images",
                 str(tmp_path / "pools.npz"), "--shifts", str(tmp_path / "ko.npz"),
                 "--out", str(tmp_path / "f.npz")]) == 0  # fmt: skip
    out = tmp_path / "r.csv"
    assert main(["fl-detect", "--features", str(tmp_path / "f.npz"), "--method", "noredu+ks",
                 "--ns", "10", "30", "--draws", "3", "--tag", "dataset=toy", "--tag",
                 "model=none", "--tag", "kind=none", "--out", str(out)]) == 0  # fmt: skip
    rec = pd.read_csv(out)
    assert set(rec["shift"]) == {"none", "ko_shift"} and len(rec) == 3 * 2 * 4
    assert list(rec.columns[:3]) == ["dataset", "model", "kind"]


def test_missing_arrays_are_named(tmp_path, capsys):
    save_npz(tmp_path / "bad.npz", x=np.zeros(3))
    code = main(["fl-detect", "--features", str(tmp_path / "bad.npz"), "--method", "pca+ks",
                 "--ns", "10", "--out", str(tmp_path / "r.csv")])  # fmt: skip
    assert code == 2 and "fl-features" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_unknown_method_and_model_needing_representation(tmp_path, capsys):
    _pools(tmp_path / "pools.npz")
    code = main(["fl-detect", "--features", str(tmp_path / "pools.npz"), "--method", "pca+t",
                 "--ns", "10", "--out", str(tmp_path / "r.csv")])  # fmt: skip
    assert code == 2 and "representation+test" in capsys.readouterr().err
    code = main(["fl-features", "--representation", "dgp", "--images",
                 str(tmp_path / "pools.npz"), "--out", str(tmp_path / "f.npz")])  # fmt: skip
    assert code == 2 and "needs --model" in capsys.readouterr().err
    assert not (tmp_path / "f.npz").exists()


def test_truncated_pools_file_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "pools.npz").write_bytes(b"PK\x03\x04 not really")
    code = main(["fl-shift", "--images", str(tmp_path / "pools.npz"), "--shift",
                 "small_gn_shift", "--out", str(tmp_path / "s.npz")])  # fmt: skip
    assert code == 2 and "not an .npz file" in capsys.readouterr().err


def test_pools_mix_held_out_and_test_images_and_never_training_ones(tmp_path):
    from dgpbench.data.datasets import load_dataset, stratified_choice
    from dgpbench.io import load_npz
    from dgpbench.models.train import TrainConfig

    out = tmp_path / "pools.npz"
    assert main(["fl-images", "--dataset", "digits", "--n-fit", "100", "--n-ref-pool", "200",
                 "--n-test-pool", "300", "--out", str(out)]) == 0  # fmt: skip
    pools = load_npz(out)
    _, y_tr = load_dataset("digits", split="train")
    val = stratified_choice(y_tr, round(0.2 * len(y_tr)),
                            np.random.default_rng(TrainConfig().split_seed))  # fmt: skip
    ref = set(zip(pools["ref_split"].tolist(), pools["ref_index"].tolist(), strict=True))
    test = set(zip(pools["test_split"].tolist(), pools["test_index"].tolist(), strict=True))
    assert len(ref) == 200 and len(test) == 300 and not ref & test
    for split, index in ref | test:  # training images only where the models held them out
        assert split == 1 or index in set(val.tolist())
    assert set(pools["ref_split"]) == {0, 1} == set(pools["test_split"])
    assert not set(pools["fit_index"].tolist()) & set(val.tolist())
