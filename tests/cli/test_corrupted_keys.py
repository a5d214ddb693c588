"""A corrupted-images file with an unknown array is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from dgpbench.cli.main import main


@pytest.mark.parametrize("bad", ["foo", "intensity_x", "intensity_"])
def test_an_unknown_array_in_a_corrupted_file_is_named(tmp_path, capsys, bad):
    rng = np.random.default_rng(0)
    x = rng.random((4, 8, 8), dtype=np.float32)
    np.savez(tmp_path / "clean.npz", x_ref=x, y_ref=np.arange(4), x_test=x)
    np.savez(tmp_path / "GB.npz", corruption=np.array("GB"), intensity_1=x, **{bad: x})
    code = main(
        [
            "features",
            "--method",
            "softmax",
            "--model",
            str(tmp_path / "no-model-needed-before-the-check.pt"),
            "--clean",
            str(tmp_path / "clean.npz"),
            "--corrupted",
            str(tmp_path / "GB.npz"),
            "--out",
            str(tmp_path / "out.npz"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert repr(bad) in err and "intensity_<k>" in err and "invalid literal" not in err
    assert not (tmp_path / "out.npz").exists()
