"""Detector files written by an earlier dgpbench load and give the results recorded then.

``tests/fixtures/saved/`` holds one file per saveable kind (every transformer family and
every test), written once by ``tests/fixtures/saved/make.py``, with the results each gave
on a fixed batch (``expected.json``). Loading them with today's code must reproduce those
numbers exactly: the file format, the network fingerprint and every family's state are
read as they were written.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dgpbench.saved import load_detector, load_scorer
from dgpbench.saved.scoring import RestoredKS, RestoredSoftmax

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "saved"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())


def _same_results(result: Any, expected: dict[str, Any]) -> None:
    """The recorded decisions and p-values exactly; the statistics to the last few bits
    (a feature computed with another number of threads may differ in its last bit)."""
    got = MAKE.record(result)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        if key in ("statistic", "distance"):
            np.testing.assert_allclose(got[key], value, rtol=1e-9, atol=0, err_msg=key)
        else:
            assert got[key] == value, key


def _make() -> Any:
    spec = importlib.util.spec_from_file_location("saved_fixtures_make", FIXTURES / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE = _make()


@pytest.fixture(scope="module")
def batch() -> np.ndarray:
    with np.load(FIXTURES / "batch.npz") as store:
        return store["x"]


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "networks.npz") as store:
        return {k: store[k] for k in store.files}


def _model(kind: str, weights: dict[str, np.ndarray]) -> Any:
    net = MAKE.KINDS[kind][1]
    return None if net is None else MAKE.network(net, weights)


def test_every_kind_has_a_fixture() -> None:
    assert set(EXPECTED) == set(MAKE.KINDS)
    assert sorted(p.stem for p in FIXTURES.glob("*.npz")) == sorted(
        [*MAKE.KINDS, "batch", "networks"]
    )


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_saved_file_gives_the_recorded_results(kind: str, batch, weights) -> None:
    fitted = load_detector(FIXTURES / f"{kind}.npz", model=_model(kind, weights))
    assert fitted.info == {"kind": kind, "test": MAKE.KINDS[kind][2]}
    _same_results(fitted.test(batch), EXPECTED[kind])


@pytest.mark.parametrize("kind", sorted(k for k in EXPECTED if MAKE.KINDS[k][2] == "ks"))
def test_saved_file_scores_the_recorded_results(kind: str, batch, weights) -> None:
    """Through :func:`load_scorer` too (restored without scikit-learn for softmax + KS)."""
    fitted = load_scorer(FIXTURES / f"{kind}.npz", model=_model(kind, weights))
    light = MAKE.KINDS[kind][0].startswith("softmax")
    assert isinstance(fitted.detector, RestoredKS) == light
    assert isinstance(fitted.features, RestoredSoftmax) == light
    _same_results(fitted.test(batch), EXPECTED[kind])


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_get_state_gives_back_the_saved_state(kind: str, weights) -> None:
    """``set_state`` then ``get_state`` is the identity on every family's saved state."""
    path = FIXTURES / f"{kind}.npz"
    fitted = load_detector(path, model=_model(kind, weights))
    with np.load(path) as store:
        meta = json.loads(str(store["__meta__"]))
        stored = {k: store[k] for k in store.files if k != "__meta__"}
    given = {}
    for role in ("features", "detector"):
        est = getattr(fitted, role)
        if est is None:
            assert meta[role] is None
            continue
        state, arrays = est.get_state()
        assert state == meta[role]["state"], role
        given.update({f"{role}/{k}": v for k, v in arrays.items()})
    assert given.keys() == stored.keys()
    for key, value in stored.items():
        assert given[key].dtype == value.dtype, key
        np.testing.assert_array_equal(given[key], value, err_msg=key)


def test_forward_pass_parameters_of_earlier_files_are_dropped(batch, weights) -> None:
    """A model-free transformer that does not take the forward-pass parameters (batch size,
    threads, progress, device) still loads a file that records them, once they are valid."""
    from sklearn.base import BaseEstimator

    from dgpbench.features.reductions import NoRedFeatures
    from dgpbench.saved.files import _class, _load

    class Lean(NoRedFeatures):
        def __init__(self) -> None:
            pass

    assert BaseEstimator.get_params(Lean()) == {}
    classes = {"NoRedFeatures": Lean}.get
    path = FIXTURES / "noredu_ks.npz"
    fitted = _load(path, None, lambda name: classes(name) or _class(name))
    assert type(fitted.features) is Lean
    _same_results(fitted.test(batch), EXPECTED["noredu_ks"])


def test_dropped_parameters_are_still_checked(tmp_path: Path) -> None:
    from dgpbench.features.reductions import NoRedFeatures
    from dgpbench.saved.files import _class, _load

    class Lean(NoRedFeatures):
        def __init__(self) -> None:
            pass

    with np.load(FIXTURES / "noredu_ks.npz") as store:
        arrays = {k: store[k] for k in store.files}
    meta = json.loads(str(arrays["__meta__"]))
    meta["features"]["params"]["batch_size"] = 0
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "det.npz", **arrays)
    with pytest.raises(ValueError, match="batch_size must be an int in the range"):
        _load(
            tmp_path / "det.npz",
            None,
            lambda name: Lean if name == "NoRedFeatures" else _class(name),
        )
