"""The `dgpbench fl-*` subcommands: bad input is exit 2 with a message, outputs atomic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgpbench.cli.main import main
from dgpbench.io import save_npz


def _pools(path, runs=2, dataset="toy", seed=0):
    from dgpbench.failing_loudly.grid import run_split

    rng = np.random.default_rng(seed)
    x = rng.random((120, 1, 8, 8), dtype=np.float32)
    y = np.arange(120) % 10
    splits = [run_split(80, 40, 40, seed=seed, run=r) for r in range(runs)]
    save_npz(path, x_fit=x[:40], y_fit=y[:40], x_unseen=x[40:], y_unseen=y[40:],
             run_ref=np.stack([s[0] for s in splits]), run_test=np.stack([s[1] for s in splits]),
             n_classes=np.array(10), dataset=np.array(dataset),
             pools_id=np.array(f"{dataset}-{seed}-{runs}"))  # fmt: skip


def _ko_features(tmp_path):
    """Pools, ko_shift at the default fractions and their NoRed features: ``f.npz``."""
    _pools(tmp_path / "pools.npz")
    assert main(["fl-shift", "--images", str(tmp_path / "pools.npz"), "--shift", "ko_shift",
                 "--out", str(tmp_path / "ko.npz")]) == 0  # fmt: skip
    assert main(["fl-features", "--representation", "noredu", "--images",
                 str(tmp_path / "pools.npz"), "--shifts", str(tmp_path / "ko.npz"),
                 "--out", str(tmp_path / "f.npz")]) == 0  # fmt: skip
    return tmp_path / "f.npz"


def test_shift_features_detect_chain_by_hand(tmp_path):
    _ko_features(tmp_path)
    out = tmp_path / "r.csv"
    assert main(["fl-detect", "--features", str(tmp_path / "f.npz"), "--method", "noredu+ks",
                 "--ns", "10", "30", "--draws", "3", "--tag", "dataset=toy", "--tag",
                 "model=none", "--tag", "kind=none", "--out", str(out)]) == 0  # fmt: skip
    rec = pd.read_csv(out)
    # 2 runs x (none + ko_shift at 3 fractions) x 2 sizes x 3 draws, but n = 30 < pools of 40
    assert set(rec["shift"]) == {"none", "ko_shift"} and len(rec) == 2 * 4 * 2 * 3
    assert set(rec["run"]) == {0, 1} and set(rec["protocol"]) == {"dgpbench"}
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
    code = main(["fl-features", "--representation", "nosuch", "--images",
                 str(tmp_path / "pools.npz"), "--out", str(tmp_path / "f.npz")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "'nosuch' is unknown" in err and "noredu" in err
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
    source = list(zip(pools["unseen_split"].tolist(), pools["unseen_index"].tolist(),
                      strict=True))  # fmt: skip
    for split, index in source:  # training images only where the models held them out
        assert split == 1 or index in set(val.tolist())
    assert not set(pools["fit_index"].tolist()) & set(val.tolist())
    assert pools["run_ref"].shape == (5, 200) and pools["run_test"].shape == (5, 300)
    for ref_rows, test_rows in zip(pools["run_ref"], pools["run_test"], strict=True):
        ref = {source[i] for i in ref_rows}
        test = {source[i] for i in test_rows}
        assert len(ref) == 200 and len(test) == 300 and not ref & test
        assert {s for s, _ in ref} == {0, 1} == {s for s, _ in test}
    assert not np.array_equal(pools["run_test"][0], pools["run_test"][1])


# -- the fl-* steps ----------------------------------------------------------------------------
def test_features_refuse_a_shift_file_of_other_pools(tmp_path, capsys):
    _pools(tmp_path / "a.npz", dataset="mnist", seed=0)
    _pools(tmp_path / "b.npz", dataset="fashion-mnist", seed=1)
    assert main(["fl-shift", "--images", str(tmp_path / "b.npz"), "--shift", "ko_shift",
                 "--out", str(tmp_path / "ko.npz")]) == 0  # fmt: skip
    code = main(["fl-features", "--representation", "noredu", "--images",
                 str(tmp_path / "a.npz"), "--shifts", str(tmp_path / "ko.npz"),
                 "--out", str(tmp_path / "f.npz")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "other pools" in err and "fashion-mnist" in err
    assert not (tmp_path / "f.npz").exists()


def test_detect_refuses_a_method_of_another_representation_or_protocol(tmp_path, capsys):
    _pools(tmp_path / "pools.npz")
    assert main(["fl-features", "--representation", "noredu", "--images",
                 str(tmp_path / "pools.npz"), "--out", str(tmp_path / "f.npz")]) == 0  # fmt: skip
    for method in ("dgp+ks", "nosuch+ks"):
        code = main(["fl-detect", "--features", str(tmp_path / "f.npz"), "--method", method,
                     "--ns", "10", "--out", str(tmp_path / "r.csv")])  # fmt: skip
        assert code == 2 and "holds 'noredu' features" in capsys.readouterr().err
    code = main(
        [
            "fl-detect",
            "--features",
            str(tmp_path / "f.npz"),
            "--method",
            "noredu+ks",
            "--ns",
            "10",
            "--protocol",
            "rabanser",
            "--out",
            str(tmp_path / "r.csv"),
        ]
    )
    assert code == 2 and "protocol 'dgpbench'" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_fractions_equal_to_the_grids_resolution_are_refused(tmp_path, capsys):
    _pools(tmp_path / "pools.npz")
    code = main(
        [
            "fl-shift",
            "--images",
            str(tmp_path / "pools.npz"),
            "--shift",
            "ko_shift",
            "--fractions",
            "0.1",
            "0.1000001",
            "--out",
            str(tmp_path / "s.npz"),
        ]
    )
    assert code == 2 and "same fraction" in capsys.readouterr().err
    assert not (tmp_path / "s.npz").exists()


def test_an_exported_model_for_fgsm_is_a_clear_error(tmp_path, capsys):
    _pools(tmp_path / "pools.npz")
    (tmp_path / "x.pt2").write_bytes(b"PK")
    code = main(["fl-shift", "--images", str(tmp_path / "pools.npz"), "--shift",
                 "adversarial_shift", "--model", str(tmp_path / "x.pt2"),
                 "--out", str(tmp_path / "s.npz")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "x.pt2" in err and "training checkpoint" in err


def test_report_refuses_records_of_different_pools(tmp_path, capsys):
    import pandas as pd

    base = {"dataset": "mnist", "model": "none", "kind": "none", "method": "noredu+ks",
            "dimension": "univariate", "shift": "none", "fraction": 0.0, "n": 10, "run": 0,
            "draw": 0, "rejected": False}  # fmt: skip
    for name, pools_id in (("a.csv", "aaaa"), ("b.csv", "bbbb")):
        pd.DataFrame([base | {"pools_id": pools_id, "method": f"{name[0]}+ks"}]).to_csv(
            tmp_path / name, index=False
        )
    code = main(["fl-report", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out-dir",
                 str(tmp_path / "t")])  # fmt: skip
    assert code == 2 and "different pools" in capsys.readouterr().err


def test_detect_reports_progress_per_cell_and_run(tmp_path, caplog):
    """fl-detect's domain-classifier job trains a network per draw for most of an hour: its
    log (no terminal) gets one line per (cell, run), not silence until the end."""
    import logging

    _ko_features(tmp_path)
    with caplog.at_level(logging.INFO, logger="dgpbench.progress"):
        assert main(["fl-detect", "--features", str(tmp_path / "f.npz"), "--method",
                     "noredu+ks", "--ns", "10", "--draws", "2", "--tag", "dataset=toy",
                     "--tag", "model=none", "--tag", "kind=none",
                     "--out", str(tmp_path / "r.csv")]) == 0  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if r.name == "dgpbench.progress"]
    # 2 runs x (none + ko_shift at 3 fractions) = 8 units, numbered
    assert len(lines) == 8 and lines[-1].endswith("(8 of 8)"), lines
    assert lines[0].startswith("noredu+ks: none@")


def test_features_refuse_a_shift_file_given_twice(tmp_path, capsys):
    _ko_features(tmp_path)
    (tmp_path / "copy.npz").write_bytes((tmp_path / "ko.npz").read_bytes())
    for second in (tmp_path / "ko.npz", tmp_path / "copy.npz"):
        code = main(["fl-features", "--representation", "noredu", "--images",
                     str(tmp_path / "pools.npz"), "--shifts", str(tmp_path / "ko.npz"),
                     str(second), "--out", str(tmp_path / "g.npz")])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and str(second) in err and err.count("\n") == 1
        assert not (tmp_path / "g.npz").exists()


def test_report_names_a_binary_file_and_says_how_to_add_tags(tmp_path, capsys):
    _ko_features(tmp_path)
    binary = tmp_path / "records.csv"
    binary.write_bytes(bytes(range(128, 256)) * 4)
    out = ["--out-dir", str(tmp_path / "tables")]
    assert main(["fl-report", str(binary), *out]) == 2
    err = capsys.readouterr().err
    assert str(binary) in err and err.count("\n") == 1
    untagged = tmp_path / "untagged.csv"
    assert main(["fl-detect", "--features", str(tmp_path / "f.npz"), "--method", "noredu+ks",
                 "--ns", "10", "--draws", "2", "--out", str(untagged)]) == 0  # fmt: skip
    assert main(["fl-report", str(untagged), *out]) == 2
    err = capsys.readouterr().err
    assert str(untagged) in err and "--tag dataset=" in err and "--tag kind=" in err
    assert "expected `dgpbench fl-detect` output" not in err


def test_detect_runs_registered_tests_beside_ks_with_their_dimension(tmp_path):
    _ko_features(tmp_path)
    for method, dimension in [("noredu+cvm", "univariate"), ("noredu+energy", "multivariate")]:
        out = tmp_path / f"{method}.csv"
        assert main(["fl-detect", "--features", str(tmp_path / "f.npz"), "--method", method,
                     "--ns", "10", "--draws", "2", "--n-permutations", "19",
                     "--out", str(out)]) == 0  # fmt: skip
        rec = pd.read_csv(out)
        assert set(rec["dimension"]) == {dimension} and set(rec["method"]) == {method}
        assert len(rec) == 2 * 4 * 2 and rec["p_value"].between(0, 1).all()
