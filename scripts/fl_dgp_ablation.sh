#!/bin/bash
# What DGP cannot see (docs/failing-loudly.md): KS on DGP, DGP without standardisation,
# DGP with unsorted spanning-tree weights (node order), dgp_approx and BBSDs features of one
# MLP against `medium_image_shift` at fraction 1.0, n = 100, 5 independent runs x 6 draws,
# with calibration draws; then the nearest-class-mean accuracy of each representation on the
# unseen images. Run it in an empty directory:
#
#   DGPBENCH_DATA_ROOT=/path/to/torchvision/root bash scripts/fl_dgp_ablation.sh [EPOCHS]
#
# Writes mlp/ (the model), pools.npz, img.npz, <rep>.npz and <rep>.csv, and prints the rates.
set -euo pipefail
EPOCHS=${1:-1}
D="${PYTHON:-python} -m dgpbench"
$D train --dataset mnist --hidden 100 --layers 2 --seed 0 --epochs "$EPOCHS" --threads 1 --out-dir mlp
$D fl-images --dataset mnist --n-ref-pool 2000 --n-test-pool 2000 --runs 5 --out pools.npz
$D fl-shift --images pools.npz --shift medium_image_shift --fractions 1.0 --out img.npz
for rep in dgp dgp_nonorm dgp_unsorted dgp_approx bbsds; do
  $D fl-features --representation $rep --model mlp/model.pt --images pools.npz --shifts img.npz \
      --threads 1 --out $rep.npz
  $D fl-detect --features $rep.npz --method $rep+ks --ns 100 --draws 6 --tag dataset=mnist \
      --tag model=h100-l2-s0 --tag kind=mlp --out $rep.csv
done
${PYTHON:-python} - <<'PY'
import pandas as pd
from dgpbench.io import load_npz

y = load_npz("pools.npz")["y_unseen"]
for rep in ("dgp", "dgp_nonorm", "dgp_unsorted", "dgp_approx", "bbsds"):
    rec = pd.read_csv(f"{rep}.csv").groupby("shift")["rejected"].agg(["sum", "size"])
    f = load_npz(f"{rep}.npz")["unseen"]
    pred = f.argmax(1) if rep == "bbsds" else f.argmin(1)  # softmax / distances to class means
    print(rep, rec.to_dict("index"), f"nearest-class-mean accuracy {(pred == y).mean():.3f}")
PY
