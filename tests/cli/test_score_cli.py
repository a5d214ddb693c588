"""`dgpbench fit` / `score`: options a detector fixes, outputs over inputs, many batches,
the --refs rule, and what a command imports (issues 28.9, 28.10, 31.3, 31.4, 31.6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dgpbench.cli.main import COMMAND_MODULES, main

FACTORY = """
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)
    ).eval()
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scorecli")
    (folder / "scorecli_net.py").write_text(FACTORY)
    rng = np.random.default_rng(0)
    for name, n, shift in (("refs", 60, 0), ("clean", 60, 0), ("b1", 40, 0), ("b2", 40, 0),
                           ("noisy", 40, 0.6)):  # fmt: skip
        x = rng.uniform(size=(n, 1, 8, 8)).astype(np.float32)
        if shift:  # darker images: a shift a random network's softmax shows
            x = (x * (1 - shift)).astype(np.float32)
        np.savez(
            folder / f"{name}.npz", x=x, **({"y": np.arange(n) % 10} if name == "refs" else {})
        )
    sys.path.insert(0, str(folder))
    fit = ["fit", "--model", "scorecli_net:mlp", "--clean", str(folder / "clean.npz"),
           "--method", "softmax", "--out", str(folder / "det.npz")]  # fmt: skip
    assert main(fit) == 0
    yield folder
    sys.path.remove(str(folder))


def _score(work, *args):
    return ["score", "--model", "scorecli_net:mlp", *args]


@pytest.mark.parametrize(
    "option",
    [["--test", "mmd"], ["--alpha", "0.01"], ["--refs", "refs.npz"], ["--clean", "clean.npz"],
     ["--method", "dgp"], ["--correction", "fdr"], ["--seed", "3"], ["--head", "3"]],
)  # fmt: skip
def test_score_detector_refuses_what_the_file_fixes(work, option, capsys):
    # 28.9: these were silently ignored; now a usage error (exit 2) naming the option
    code = main(_score(work, "--detector", str(work / "det.npz"), "--batch", str(work / "b1.npz"),
                       *option))  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and option[0] in err and "the detector file fixes" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("target", ["model.pt", "clean.npz", "refs.npz"])
def test_out_naming_an_input_is_refused_before_any_work(work, target, tmp_path, capsys):
    # 28.10: `fit --out cnn.pt --model cnn.pt` destroyed the model; checked for every command
    model = tmp_path / "model.pt"
    model.write_bytes(b"a model the command must not overwrite")
    inputs = {"model.pt": model, "clean.npz": work / "clean.npz", "refs.npz": work / "refs.npz"}
    before = inputs[target].read_bytes()
    out = str(inputs[target])
    fit = ["fit", "--model", str(model), "--clean", str(work / "clean.npz"),
           "--refs", str(work / "refs.npz"), "--out", out]  # fmt: skip
    assert main(fit) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "is also the input" in err and inputs[target].read_bytes() == before


def test_out_check_covers_every_command_and_links(work, tmp_path, capsys):
    link = tmp_path / "link.npz"
    link.symlink_to(work / "clean.npz")
    code = main(["fl-shift", "--images", str(work / "clean.npz"), "--shift", "small_gn_shift",
                 "--out", str(link)])  # fmt: skip
    assert code == 2 and "is also the input --images" in capsys.readouterr().err


def test_many_batches_one_json_line_each_and_a_folder(work, capsys, tmp_path):
    folder = tmp_path / "batches"
    folder.mkdir()
    for name in ("b1", "b2", "noisy"):
        (folder / f"{name}.npz").write_bytes((work / f"{name}.npz").read_bytes())
    det = str(work / "det.npz")
    code = main(_score(work, "--detector", det, "--batch", str(folder), "--json"))
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [Path(r["batch"]).name for r in records] == ["b1.npz", "b2.npz", "noisy.npz"]
    assert code == int(any(r["shift"] for r in records)) and records[2]["shift"]
    # each batch alone gives the same record (one process or three)
    for record in records:
        assert main(_score(work, "--detector", det, "--batch", record["batch"], "--json")) in (0, 1)
        alone = json.loads(capsys.readouterr().out)
        assert alone["p_value"] == record["p_value"] and alone["features"] == record["features"]


def test_across_batches_fdr_and_bonferroni(work, capsys):
    from scipy.stats import false_discovery_control

    det, batches = str(work / "det.npz"), [str(work / f"{b}.npz") for b in ("b1", "b2", "noisy")]
    main(_score(work, "--detector", det, "--batch", *batches, "--json"))
    alone = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    p = np.array([r["p_value"] for r in alone])
    for correction, adjusted in (
        ("fdr", false_discovery_control(p, method="bh")),
        ("bonferroni", np.minimum(p * 3, 1)),
    ):
        main(_score(work, "--detector", det, "--batch", *batches, "--json", "--across", correction))
        records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [r["across"]["p_value_adjusted"] for r in records] == pytest.approx(adjusted)
        assert [r["shift"] for r in records] == (adjusted < 0.05).tolist()
        assert [r["across"]["shift_alone"] for r in records] == [r["shift"] for r in alone]


def test_device_option_on_score_and_fit(work, capsys):
    det = str(work / "det.npz")
    assert main(_score(work, "--detector", det, "--batch", str(work / "b1.npz"), "--device", "auto",
                       "--json")) in (0, 1)  # fmt: skip
    assert json.loads(capsys.readouterr().out)["n_batch"] == 40
    with pytest.raises(SystemExit, match="2"):  # argparse's usage error
        main(_score(work, "--detector", det, "--batch", str(work / "b1.npz"), "--device", "tpu"))
    assert "invalid choice: 'tpu'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("method", "test"),
    [("softmax", "mmd"), ("bbsds", "ks"), ("bbsdh", "chi2"), ("dgp", "ks"), ("tu", "mmd")],
)
def test_one_refs_rule_no_refs_or_no_labels_fits_every_method(work, method, test, tmp_path, capsys):
    # 31.6: `score --method softmax --test mmd` without --refs failed; bbsd* needed labels;
    # DGP/TU fit without labels in Python but not on the shell. Now: the Python rule.
    from dgpbench.features.registry import make_features

    unlabelled = tmp_path / "refs_x.npz"
    np.savez(unlabelled, x=np.load(work / "refs.npz")["x"])
    extra = ["--permutations", "50"] if test == "mmd" else []
    for refs in ([], ["--refs", str(unlabelled)]):
        args = _score(work, "--clean", str(work / "clean.npz"), "--batch", str(work / "b1.npz"),
                      "--method", method, "--test", test, "--json", *refs, *extra)  # fmt: skip
        assert main(args) in (0, 1), capsys.readouterr().err
        record = json.loads(capsys.readouterr().out)
        assert record["method"] == method and record["n_refs"] == 60
    if method == "dgp":  # the same features as Python's fit(X) without y
        feats = make_features("dgp", "scorecli_net:mlp").fit(np.load(unlabelled)["x"])
        clean = feats.transform(np.load(work / "clean.npz")["x"])
        batch = feats.transform(np.load(work / "b1.npz")["x"])
        from dgpbench import KSShiftDetector

        p = KSShiftDetector().fit(clean).test(batch).p_val
        assert [f["p_value"] for f in record["features"]] == pytest.approx(p.tolist())


def test_head_option_from_the_shell(work, capsys):
    args = _score(work, "--clean", str(work / "clean.npz"), "--batch", str(work / "b1.npz"),
                  "--method", "tu", "--head", "3", "--json")  # fmt: skip
    assert main(args) in (0, 1), capsys.readouterr().err
    assert len(json.loads(capsys.readouterr().out)["features"]) >= 1
    bad = _score(work, "--clean", str(work / "clean.npz"), "--batch", str(work / "b1.npz"),
                 "--method", "tu", "--head", "2")  # fmt: skip
    assert main(bad) == 2 and "not among the model's nn.Linear" in capsys.readouterr().err
    soft = _score(work, "--clean", str(work / "clean.npz"), "--batch", str(work / "b1.npz"),
                  "--method", "softmax", "--head", "3")  # fmt: skip
    assert main(soft) == 2 and "--head is for tu, dgp and magdiff" in capsys.readouterr().err


def test_every_command_is_in_the_import_table():
    import importlib

    from dgpbench.cli.main import _MODULES
    from dgpbench.cli.registry import SUBCOMMANDS

    for name in _MODULES:
        importlib.import_module(f"dgpbench.cli.{name}")
    assert set(SUBCOMMANDS) == set(COMMAND_MODULES)
    for command, module in COMMAND_MODULES.items():
        assert SUBCOMMANDS[command][2].__module__ == f"dgpbench.cli.{module}"


def test_score_imports_no_workflow_module():
    # 31.4: scoring pays for torch and scipy.stats (and, beyond softmax + KS, scikit-learn),
    # not for the workflow's modules or numba (tests/saved/test_scoring.py: no scikit-learn at all)
    code = (
        "import sys; from dgpbench.cli.main import build_parser; build_parser('score'); "
        "import dgpbench.cli.monitor, dgpbench.saved.scoring, dgpbench.features.softmax, "
        "dgpbench.detectors.ks, dgpbench.data.datasets, dgpbench.models.train; "
        "print(sorted(m for m in ('numba', 'dgpbench.cli.paper', 'dgpbench.cli.failing_loudly', "
        "'dgpbench.shifts', 'dgpbench.topology.activation', 'torchvision') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": ""}, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout


def test_an_in_memory_detector_asks_for_model_in_the_shells_words(work, tmp_path, capsys):
    # 31.7: the file records no model; the shell says --model, Python says model=
    import scorecli_net

    from dgpbench import KSShiftDetector, SoftmaxFeatures
    from dgpbench.saved import FittedDetector, load_detector, save_detector

    net = scorecli_net.mlp()
    x = np.load(work / "clean.npz")["x"]
    feats = SoftmaxFeatures(net).fit(x)
    fitted = FittedDetector(feats, KSShiftDetector().fit(feats.transform(x)), {"method": "softmax"})
    path = tmp_path / "mem.npz"
    save_detector(path, fitted)
    with pytest.raises(ValueError, match="pass model="):
        load_detector(path)
    code = main(["score", "--detector", str(path), "--batch", str(work / "b1.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "pass --model MODEL" in err and "model=" not in err


def test_a_named_head_of_a_plain_sequential_survives_saving(work, capsys):
    det = str(work / "det-head.npz")
    fit = ["fit", "--model", "scorecli_net:mlp", "--clean", str(work / "clean.npz"),
           "--method", "tu", "--head", "3", "--out", det]  # fmt: skip
    assert main(fit) == 0
    one_call = _score(work, "--clean", str(work / "clean.npz"), "--batch", str(work / "b1.npz"),
                      "--method", "tu", "--head", "3", "--json")  # fmt: skip
    main(one_call)
    direct = json.loads(capsys.readouterr().out)
    assert main(_score(work, "--detector", det, "--batch", str(work / "b1.npz"), "--json")) in (
        0,
        1,
    )
    saved = json.loads(capsys.readouterr().out)
    assert saved["features"] == direct["features"]


def test_no_page_shows_a_path_of_a_developers_machine():
    # 31.7: the docs are read on other machines
    import re

    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    found = [
        f"{page.name}: {m.group(0)}"
        for page in pages
        for m in re.finditer(r"(?<![\w.])/(?:work|home|Users|root)/[\w./-]+", page.read_text())
    ]
    assert not found, found


@pytest.mark.parametrize(
    ("test", "option"),
    [("ks", ["--permutations", "10"]), ("mmd", ["--correction", "fdr"]), ("ks", ["--seed", "1"]),
     ("chi2", ["--seed", "1"])],
)  # fmt: skip
def test_an_option_the_test_does_not_use_is_refused(work, test, option, tmp_path, capsys):
    out = tmp_path / "d.npz"
    fit = ["fit", "--model", "scorecli_net:mlp", "--clean", str(work / "clean.npz"),
           "--test", test, *option, "--out", str(out)]  # fmt: skip
    assert main(fit) == 2
    assert f"{option[0]} is for --test" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("across", ["none", "fdr"])
def test_a_bad_batch_gets_an_error_record_and_the_others_are_scored(work, across, tmp_path, capsys):
    x = np.random.default_rng(1).uniform(size=(40, 1, 8, 8)).astype(np.float32)
    x[3, 0, 2, 2] = np.nan
    np.savez(tmp_path / "bad_nan.npz", x=x)
    np.savez(tmp_path / "one.npz", x=x[:1] * 0)
    batches = [str(work / "b1.npz"), str(tmp_path / "bad_nan.npz"), str(tmp_path / "one.npz"),
               str(work / "noisy.npz")]  # fmt: skip
    code = main(_score(work, "--detector", str(work / "det.npz"), "--batch", *batches,
                       "--json", "--across", across))  # fmt: skip
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and [r["batch"] for r in records] == batches
    assert [("error" in r) for r in records] == [False, True, True, False]
    assert records[3]["shift"] and records[1]["shift"] is None
    assert "bad_nan.npz" in records[1]["error"] and "bad_nan.npz" in err
    # a one-image batch: the file and its image count, not the features' shape
    assert "one.npz has 1 image;" in records[2]["error"] and "shape" not in records[2]["error"]
    if across == "fdr":
        assert records[0]["across"]["n_batches"] == 2


def test_a_missing_batch_is_refused_before_any_is_scored(work, tmp_path, capsys):
    batches = [str(work / "b1.npz"), str(tmp_path / "absent.npz")]
    code = main(_score(work, "--detector", str(work / "det.npz"), "--batch", *batches, "--json"))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "absent.npz" in err and err.count("\n") == 1


def test_without_a_detector_a_bad_first_batch_does_not_stop_the_others(work, tmp_path, capsys):
    np.savez(tmp_path / "one.npz", x=np.zeros((1, 1, 8, 8), np.float32))
    code = main(_score(work, "--clean", str(work / "clean.npz"), "--method", "softmax",
                       "--batch", str(tmp_path / "one.npz"), str(work / "b1.npz"), "--json"))  # fmt: skip
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 2 and "error" in records[0] and records[1]["shift"] in (True, False)
    assert main(_score(work, "--clean", str(work / "clean.npz"), "--method", "softmax",
                       "--batch", str(tmp_path / "one.npz"))) == 2  # fmt: skip
