"""The ResNet family in the workflow: a CIFAR-shaped (3x32x32) tiny grid trains a ResNet with
`train_resnet`, attacks it with FGSM and reads its softmax and its head (DGP); its steps read
the files the steps before them wrote, whatever their size."""

from __future__ import annotations

import pandas as pd
import pytest
from _workflow import REPO, config_problem, snakemake, tiny_config, write_tiny_cifar

from dgpbench.failing_loudly.files import declared_bytes
from dgpbench.models.checkpoints import load_checkpoint
from dgpbench.npz import MAX_INPUT_BYTES_ENV


@pytest.mark.slow
def test_a_cifar_shaped_grid_trains_attacks_and_reads_a_resnet(tmp_path, monkeypatch):
    write_tiny_cifar(tmp_path / "data", n_per_batch=40)  # 160 training images: 5 batches
    # The 1 GiB input limit scaled down to the tiny grid: its pools and NoRed's (float64)
    # features pass 200 kB as the full grid's pass 1 GiB, and are read all the same.
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "200000")
    config = tiny_config(
        datasets=["cifar10"],
        data_root=str(tmp_path / "data"),
        models={"kind": ["resnet"], "hidden": [8], "layers": [2], "seeds": [0],
                "activation": "relu", "resnet_channels": [4, 8], "resnet_blocks": [1, 1],
                "resnet_training": {"batch_size": 16, "epochs": {"cifar10": 1, "mnist": 3}}},
    )  # fmt: skip
    config["failing_loudly"] = {
        "shifts": ["adversarial_shift"],
        "fractions": [1.0],
        "methods": ["bbsds+ks", "dgp+ks", "noredu+ks"],
        "images": {"n_fit": 20, "n_ref_pool": 15, "n_test_pool": 20, "seed": 1},
        "ns_univariate": [10],
        "runs": 1,
        "draws": 1,
        "adversarial": {"n_epsilons": 5},
    }
    targets = [
        *(f"results/fl/records/cifar10/resnet-h8-l2-s0/{m}.csv" for m in ("bbsds+ks", "dgp+ks")),
        "results/fl/records/cifar10/none/noredu+ks.csv",
    ]
    proc = snakemake(tmp_path / "run", config, *targets, cores=1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    _, meta = load_checkpoint(tmp_path / "run/results/models/cifar10/resnet-h8-l2-s0/model.pt")
    assert meta["kind"] == "resnet" and tuple(meta["arch"]["input_shape"]) == (3, 32, 32)
    assert tuple(meta["arch"]["channels"]) == (4, 8)
    train = meta["train_config"]  # the ResNets' own training, this data set's epochs
    assert (train["batch_size"], train["epochs"], train["lr"]) == (16, 1, config["training"]["lr"])
    for target in targets:
        records = pd.read_csv(tmp_path / "run" / target)
        assert set(records["shift"]) == {"none", "adversarial_shift"}
    features = tmp_path / "run/results/fl/features/cifar10/none/noredu.npz"
    assert declared_bytes(features) > 200000  # the limit was in force, and raised


def test_resnet_blocks_must_match_its_stages(tmp_path):
    config = tiny_config(models={"kind": "resnet", "hidden": [8], "layers": [2], "seeds": [0],
                                 "resnet_channels": [4, 8], "resnet_blocks": [1]})  # fmt: skip
    problem = config_problem(tmp_path, config)
    assert problem is not None and "resnet_blocks" in problem


def test_the_cifar_config_plans_resnets_attacked_by_fgsm(tmp_path):
    (tmp_path / "config.yaml").write_text((REPO / "config.yaml").read_text())
    layers = [str(REPO / "config" / name) for name in
              ("failing_loudly.yaml", "failing_loudly_rabanser.yaml", "failing_loudly_cifar.yaml")]  # fmt: skip
    proc = snakemake(tmp_path, None, "-n", "-p", "--configfile", *layers, cores=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for dataset, epochs in (("cifar10", 20), ("mnist", 5)):
        assert (
            f"train-cnn --kind resnet --dataset {dataset} " in out
            and f"--epochs {epochs} --batch-size 128" in out
        )
        assert (
            f"--model results/models/{dataset}/resnet-h100-l2-s0/model.pt --protocol rabanser"
            in out
        )
    assert "cnn-h" not in out and "train_cnn" not in out
