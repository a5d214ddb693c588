"""DeepKernelMMDShiftDetector: the training objective and the held-out statistic vs explicit
loops, level under the null, power, training, save/load of the initial network."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import binom
from sklearn.base import clone

from dgpbench.detectors import DeepKernelMMDShiftDetector
from dgpbench.detectors.lsdd import median_sigma_alibi
from dgpbench.detectors.mmd_deep import _DeepKernel, j_hat
from dgpbench.saved import FittedDetector, load_detector, save_detector

FAST = {"n_permutations": 99, "epochs": 1, "batch_size": 16}
FIXTURE = Path(__file__).parents[1] / "fixtures" / "mmd_deep" / "alibi_deep_kernel.json"


def test_power_proxy_equals_the_loops():
    rng = np.random.default_rng(0)
    n = 6
    kxx, kyy, kxy = (rng.uniform(size=(n, n)) for _ in range(3))
    kxx, kyy = (kxx + kxx.T) / 2, (kyy + kyy.T) / 2
    h = [[kxx[i, j] + kyy[i, j] - kxy[i, j] - kxy[j, i] for j in range(n)] for i in range(n)]
    mmd2 = sum(h[i][j] for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    rows = [sum(h[i]) for i in range(n)]
    var = 4 * sum(r * r for r in rows) / n**3 - 4 * sum(rows) ** 2 / n**4
    got = j_hat(*(torch.as_tensor(k) for k in (kxx, kyy, kxy)), var_reg=1e-5)
    assert float(got) == pytest.approx(mmd2 / math.sqrt(var + 1e-5), rel=1e-12)


@pytest.mark.skipif(not FIXTURE.exists(), reason="no alibi-detect fixture")
def test_kernel_and_training_steps_match_alibi_detect():
    """alibi-detect 0.13's DeepKernel and JHat (tests/fixtures/mmd_deep/
    make_alibi_deep_kernel.py) on the same minibatches and initial network: the same
    objective, bandwidths, eps and network after two Adam steps (theirs keeps the
    bandwidths in float32)."""
    for case in json.loads(FIXTURE.read_text()):
        x = torch.as_tensor(case["x"], dtype=torch.float64)
        y = torch.as_tensor(case["y"], dtype=torch.float64)
        det = DeepKernelMMDShiftDetector(random_state=case["seed"])
        det.fit(np.random.default_rng(case["seed"]).normal(size=(40, x.shape[1])))
        phi = det._network(x.shape[1])
        with torch.no_grad():
            for p, name in zip(phi.parameters(), det.initial_weights_, strict=True):
                p.copy_(torch.as_tensor(det.initial_weights_[name]))
        kernel = _DeepKernel(phi, torch.device("cpu"))
        optimizer = torch.optim.Adam(kernel.parameters(), lr=1e-3)
        values = []
        for _ in range(2):
            optimizer.zero_grad()
            estimate = j_hat(kernel(x, x), kernel(y, y), kernel(x, y))
            values.append(float(estimate.detach()))
            (-estimate).backward()
            optimizer.step()
        with torch.no_grad():
            values.append(float(j_hat(kernel(x, x), kernel(y, y), kernel(x, y))))
        np.testing.assert_allclose(values, case["j_hat"], rtol=1e-5)
        assert float(torch.exp(kernel.log_sigma_a.detach())) == pytest.approx(
            case["sigma_a"], rel=1e-5
        )
        assert float(torch.exp(kernel.log_sigma_b.detach())) == pytest.approx(
            case["sigma_b"], rel=1e-5
        )
        assert float(torch.sigmoid(kernel.logit_eps.detach())) == pytest.approx(
            case["eps"], rel=1e-6
        )
        for p, name in zip(phi.parameters(), det.initial_weights_, strict=True):
            np.testing.assert_allclose(p.detach().numpy(), case["phi"][name], rtol=1e-5, atol=1e-8)


def _phi(det, Z):
    w = det.initial_weights_
    hidden = np.maximum(Z @ w["phi_0_weight"].T + w["phi_0_bias"], 0.0)
    return hidden @ w["phi_2_weight"].T + w["phi_2_bias"]


def test_untrained_statistic_equals_the_loops(monkeypatch):
    """With no training step the kernel is the initial one, its bandwidths the median
    heuristic on the held-out pooled rows and eps = 1/2: the unbiased MMD^2 by loops."""
    monkeypatch.setattr(DeepKernelMMDShiftDetector, "_train", lambda *args: None)
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(16, 2)), rng.normal(loc=0.5, size=(12, 2))
    det = DeepKernelMMDShiftDetector(n_permutations=19, random_state=3).fit(X)
    res = det.test(Y)
    split = np.random.default_rng(det._seed(1))
    ref = X[split.permutation(16)[12:]]
    test = Y[split.permutation(12)[9:]]
    Z = np.concatenate([ref, test])
    P = _phi(det, Z)
    s_a, s_b = median_sigma_alibi(P), median_sigma_alibi(Z)

    def k(i, j):
        da = sum((P[i] - P[j]) ** 2)
        db = sum((Z[i] - Z[j]) ** 2)
        return 0.5 * math.exp(-da / (2 * s_a**2)) + 0.5 * math.exp(-db / (2 * s_b**2))

    n, m = len(ref), len(test)
    xx = sum(k(i, j) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = sum(k(i, j) for i in range(n, n + m) for j in range(n, n + m) if i != j) / (m * (m - 1))
    xy = sum(k(i, j) for i in range(n) for j in range(n, n + m)) / (n * m)
    assert res.statistic == pytest.approx(xx + yy - 2 * xy, rel=1e-9, abs=1e-12)
    assert res.details["eps"] == 0.5 and res.details["n_ref_test"] == 4


def test_training_moves_the_kernel_and_is_seeded():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(80, 3)), rng.normal(size=(80, 3))
    det = DeepKernelMMDShiftDetector(n_permutations=19, random_state=0).fit(X)
    a, b = det.test(Y), det.test(Y)
    assert a.to_dict() == b.to_dict()
    assert a.details["eps"] != 0.5  # Adam moved the mixing weight


@pytest.mark.parametrize(("n_ref", "n", "reps"), [(16, 12, 50), (60, 60, 30)])
def test_level_under_the_null(n_ref, n, reps):
    """Exchangeable samples: the kernel is trained on rows the permutation test never sees,
    so with B = 99 the level of p < 0.05 is 4/100; the count lies in its 99.9% interval."""
    rng = np.random.default_rng(n_ref + n)
    rejected = 0
    for r in range(reps):
        Z = rng.normal(size=(n_ref + n, 2))
        det = DeepKernelMMDShiftDetector(random_state=r, **FAST).fit(Z[:n_ref])
        rejected += det.predict(Z[n_ref:])
    low, high = binom.interval(0.999, reps, 0.04)
    assert low <= rejected <= high


def test_power_against_a_mean_shift():
    rng = np.random.default_rng(4)
    hits = 0
    for r in range(8):
        X, Y = rng.normal(size=(100, 3)), rng.normal(loc=0.8, size=(100, 3))
        hits += DeepKernelMMDShiftDetector(random_state=r, **FAST).fit(X).predict(Y)
    assert hits >= 7


def test_save_load_keeps_the_initial_network(tmp_path):
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=(40, 3))
    det = DeepKernelMMDShiftDetector(random_state=None, **FAST).fit(X)
    path = save_detector(tmp_path / "d.npz", FittedDetector(None, det, {}))
    with np.load(path, allow_pickle=False) as store:  # plain arrays, no pickle
        assert "detector/phi_0_weight" in store.files
    loaded = load_detector(path).detector
    for name, w in det.initial_weights_.items():
        np.testing.assert_array_equal(loaded.initial_weights_[name], w)
    for d in (det, loaded):
        d.set_params(random_state=9)
    assert loaded.test(Y).to_dict()["data"] == det.test(Y).to_dict()["data"]


def test_a_damaged_file_is_refused(tmp_path):
    det = DeepKernelMMDShiftDetector(random_state=0, **FAST).fit(np.eye(8))
    state, arrays = det.get_state()
    arrays["phi_2_weight"] = arrays["phi_2_weight"][:, :3]
    with pytest.raises(ValueError, match="phi_2_weight has shape"):
        clone(det).set_state(state, arrays)


def test_too_few_samples_to_split():
    with pytest.raises(ValueError, match="at least 2 of each"):
        DeepKernelMMDShiftDetector(**FAST).fit(np.eye(3))
    det = DeepKernelMMDShiftDetector(**FAST).fit(np.eye(8))
    with pytest.raises(ValueError, match="X has 3 samples"):
        det.test(np.eye(8)[:3])


@pytest.mark.parametrize(
    "params", [{"train_size": 1.0}, {"batch_size": 1}, {"epochs": 0}, {"device": "tpu"}]
)
def test_bad_parameters(params):
    with pytest.raises(ValueError):
        DeepKernelMMDShiftDetector(**params).fit(np.eye(8))
