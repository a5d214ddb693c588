"""Write Failing loudly's image shifts of the clean test images as `dgpbench corrupt` files.

Rabanser et al.'s Gaussian-noise and image shifts (:func:`dgpbench.shifts.apply_shift`)
applied to every clean test image (fraction 1.0), so that row ``i`` of the shifted set is
the twin of clean row ``i``, as the shifted streams of ``dgpbench stream`` need. Each file
holds ``corruption`` (``FLGN`` or ``FLIMG``) and ``intensity_<k>`` (``k`` = 1, 2, 3 for
small, medium, large), so ``dgpbench features --corrupted`` reads it and names the
features ``FLGN_3`` (large_gn_shift), ``FLIMG_2`` (medium_image_shift), ...

    python scripts/fl_twins.py --images images.npz --shifts large_gn_shift \
        medium_image_shift --seed 112 --out-dir fl/

Knock-out shifts remove images instead of altering them: they have no twins (see
docs/online.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dgpbench.shifts import apply_shift

SIZES = {"small": 1, "medium": 2, "large": 3}
CODES = {"gn_shift": "FLGN", "image_shift": "FLIMG"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", required=True, help="clean image set of `dgpbench images`")
    p.add_argument("--shifts", nargs="+", required=True,
                   help="<small|medium|large>_gn_shift or _image_shift")  # fmt: skip
    p.add_argument("--seed", type=int, default=112)
    p.add_argument("--out-dir", required=True)
    args = p.parse_args()
    with np.load(args.images) as f:
        x, y = f["x_test"], f["y_test"].astype(np.int64)
    files: dict[str, dict[str, np.ndarray]] = {}
    for shift in args.shifts:
        size, _, kind = shift.partition("_")
        if size not in SIZES or kind not in CODES:
            raise SystemExit(f"unknown shift {shift!r}: <small|medium|large>_gn_shift or _image_shift")
        pool = apply_shift(shift, 1.0, x, y, seed=args.seed)
        assert np.array_equal(pool.index, np.arange(len(x))) and pool.shifted.all()
        files.setdefault(CODES[kind], {})[f"intensity_{SIZES[size]}"] = pool.images(x)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for code, arrays in files.items():
        np.savez(out / f"{code}.npz", corruption=np.array(code), **arrays)
        print(f"{code}: {sorted(arrays)} -> {out / f'{code}.npz'}")


if __name__ == "__main__":
    main()
