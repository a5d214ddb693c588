"""Does Rabanser et al.'s MMD bandwidth inflate the false-positive rate? (docs/failing-loudly.md)

Their kernel's bandwidth is the median of the *cross* distances between the two samples, fixed
by the observed split and kept for every permutation, so the test is not exactly a permutation
test. This script measures what that costs on real features: it draws ``2 n`` distinct rows of
the clean unseen images' features of a grid features file (``results/fl/features/...``), splits
them into a reference and a test sample of ``n`` each (m = n, as theirs: exchangeable by
construction, so every rejection is a false positive) and tests each pair with both kernels:
``rabanser`` and the detector's pooled median (a permutation-invariant bandwidth). Given the
file's pool of clean rows, the draws are independent (each a fresh random subset), so the
binomial (Wilson) interval of a rate counts them honestly; the pool itself is one.

    python scripts/fl_mmd_null.py FEATURES.npz --n 200 --draws 1000 [--permutations 1000]

Prints one line per kernel: rejections, rate, its 95% Wilson interval, and the share of
p-values below 0.01.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from dgpbench.failing_loudly.toolbox import decide
from dgpbench.io import load_npz
from dgpbench.paper.protocol import wilson_interval

KERNELS = ("rabanser", "median")


def null_p_values(
    features: np.ndarray, n: int, draws: int, *, n_permutations: int = 1000, seed: int = 0
) -> dict[str, np.ndarray]:
    """MMD p-values of ``draws`` exchangeable (reference, test) pairs under both kernels.

    Parameters
    ----------
    features : ndarray of shape (N, d)
        Features of clean images; ``N >= 2 n``.
    n : int
        Size of each sample.
    draws : int
        Independent pairs (fresh rows each).
    n_permutations : int
        Permutations of each test.
    seed : int
        Seeds the rows drawn and each test's permutations.

    Returns
    -------
    dict
        Kernel name -> p-values, shape (draws,); the same pairs for both kernels.
    """
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2 or len(features) < 2 * n:
        raise ValueError(f"need a 2-D array of at least {2 * n} rows, got {features.shape}")
    rng = np.random.default_rng(seed)
    out = {k: np.empty(draws) for k in KERNELS}
    for i in range(draws):
        rows = rng.choice(len(features), 2 * n, replace=False)
        ref, test = features[rows[:n]], features[rows[n:]]
        state = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])  # the same for both
        for k in KERNELS:
            p = decide(
                "mmd", ref, test, random_state=state, kernel=k, n_permutations=n_permutations
            )
            out[k][i] = p[1]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("features", help="a grid features file (.npz with an 'unseen' array)")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args(argv)
    features = load_npz(args.features)["unseen"]
    ps = null_p_values(features, args.n, args.draws, n_permutations=args.permutations,
                       seed=args.seed)  # fmt: skip
    for k, p in ps.items():
        r = int((p < args.alpha).sum())
        lo, hi = wilson_interval(r, len(p))
        print(f"{args.features} n={args.n} kernel={k}: {r}/{len(p)} rejected = "
              f"{r / len(p):.3f} [{lo:.3f}, {hi:.3f}]; p < 0.01: {np.mean(p < 0.01):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
