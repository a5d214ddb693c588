"""Failing loudly's shifts (dgpbench.shifts) against their published definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import ndimage

from dgpbench.shifts import SHIFTS, apply_shift, identity_pool
from dgpbench.shifts._base import n_affected
from dgpbench.shifts.adversarial import fgsm_min_epsilon
from dgpbench.shifts.combos import compose
from dgpbench.shifts.image import IMAGE_SHIFTS, ImageShiftParams, _transform_matrix, random_affine
from dgpbench.shifts.knockout import knockout_shift, only_class_shift


def _pool(n=200, size=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 1, size, size), dtype=np.float32) * 0.6 + 0.2
    y = np.arange(n) % 10
    return x, y


@pytest.mark.parametrize("fraction", [0.1, 0.5, 1.0])
@pytest.mark.parametrize(("shift", "std"), [("small_gn_shift", 1), ("medium_gn_shift", 10)])
def test_gaussian_noise_alters_ceil_fraction_with_the_right_std(shift, std, fraction):
    x, y = _pool()
    pool = apply_shift(shift, fraction, x, y, seed=3)
    assert pool.shifted.sum() == math.ceil(fraction * len(y))
    assert np.array_equal(pool.index, np.arange(len(y)))
    images = pool.images(x)
    assert np.array_equal(images[~pool.shifted], x[~pool.shifted])  # the rest is clean
    noise = images[pool.shifted] - x[pool.shifted]  # no clipping: values in [0.2, 0.8]
    assert noise.std() == pytest.approx(std / 255, rel=0.05)
    assert abs(noise.mean()) < 3 * std / 255 / math.sqrt(noise.size)


def test_large_noise_is_clipped_to_the_unit_interval():
    x, y = _pool()
    images = apply_shift("large_gn_shift", 1.0, x, y).images(x)
    assert images.min() == 0.0 and images.max() == 1.0


def test_same_seed_same_pool_other_seed_other_pool():
    x, y = _pool()
    a = apply_shift("medium_image_shift", 0.5, x, y, seed=1)
    b = apply_shift("medium_image_shift", 0.5, x, y, seed=1)
    c = apply_shift("medium_image_shift", 0.5, x, y, seed=2)
    assert np.array_equal(a.x_new, b.x_new) and np.array_equal(a.shifted, b.shifted)
    assert not np.array_equal(a.shifted, c.shifted)


def test_transform_matrix_rotates_about_the_centre_like_rot90():
    img = np.arange(81, dtype=np.float64).reshape(9, 9)
    m = _transform_matrix(np.pi / 2, 0, 0, 0, 1, 1, 9, 9)
    out = ndimage.affine_transform(img, m[:2, :2], offset=m[:2, 2], order=1, mode="nearest")
    assert np.allclose(out, np.rot90(img, -1)) or np.allclose(out, np.rot90(img, 1))


def test_transform_matrix_shift_moves_rows_with_edge_replication():
    img = np.arange(49, dtype=np.float64).reshape(7, 7)
    m = _transform_matrix(0.0, 2.0, 0, 0, 1, 1, 7, 7)  # tx: along rows, as Keras's height shift
    out = ndimage.affine_transform(img, m[:2, :2], offset=m[:2, 2], order=1, mode="nearest")
    expected = np.concatenate([img[2:], np.repeat(img[-1:], 2, axis=0)])
    assert np.allclose(out, expected)


def test_zero_ranges_leave_images_unchanged():
    x, _ = _pool(20)
    still = ImageShiftParams(0.0, 0.0, 0.0, 0.0, 0.0, False, False)
    assert np.allclose(random_affine(x, still, np.random.default_rng(0)), x, atol=1e-6)


def test_flips_only_where_the_size_has_them():
    x, _ = _pool(200)
    flip_only = ImageShiftParams(0.0, 0.0, 0.0, 0.0, 0.0, True, True)
    out = random_affine(x, flip_only, np.random.default_rng(0))
    kinds = set()
    for a, b in zip(x, out, strict=True):
        for k, f in enumerate((lambda i: i, lambda i: i[:, :, ::-1], lambda i: i[:, ::-1, :],
                               lambda i: i[:, ::-1, ::-1])):  # fmt: skip
            if np.allclose(f(a), b, atol=1e-6):
                kinds.add(k)
                break
        else:
            raise AssertionError("an output is not a flip of its input")
    assert kinds == {0, 1, 2, 3}
    assert not IMAGE_SHIFTS["small"].horizontal_flip and not IMAGE_SHIFTS["medium"].vertical_flip


def test_larger_image_shifts_move_images_further():
    x, y = _pool(300, size=16)
    moved = [
        np.abs(apply_shift(f"{s}_image_shift", 1.0, x, y).images(x) - x).mean()
        for s in ("small", "medium", "large")
    ]
    assert moved[0] < moved[1] < moved[2]


@pytest.mark.parametrize("fraction", [0.1, 0.5, 1.0])
def test_knockout_removes_ceil_fraction_rounded_up_to_even(fraction):
    y = np.array([0] * 37 + [1] * 50 + [2] * 13)
    pool = knockout_shift(y, fraction, np.random.default_rng(0))
    removed = math.ceil(fraction * 37)
    removed = min(37, removed + removed % 2)
    assert (pool.y == 0).sum() == 37 - removed
    assert (pool.y == 1).sum() == 50 and (pool.y == 2).sum() == 13
    assert np.array_equal(y[pool.index], pool.y) and not pool.shifted.any()


def test_only_zero_keeps_class_zero():
    y = np.arange(50) % 5
    pool = only_class_shift(y)
    assert set(pool.y) == {0} and len(pool.y) == 10


def test_combined_shifts_follow_their_order():
    x, y = _pool(400)
    ko = apply_shift("medium_img_shift+ko_shift", 1.0, x, y, seed=5)
    assert (ko.y == 0).sum() == 0 and len(ko.y) == 360
    # the image half was drawn on the whole pool first: about half the survivors are altered
    assert 0.35 < ko.shifted.mean() < 0.65
    zero = apply_shift("only_zero_shift+medium_img_shift", 0.5, x, y, seed=5)
    assert set(zero.y) == {0} and zero.shifted.sum() == n_affected(40, 0.5)
    assert np.array_equal(zero.images(x)[~zero.shifted], x[zero.index[~zero.shifted]])


def test_compose_equals_applying_the_second_to_the_first_images():
    x, y = _pool(100)
    first = apply_shift("large_gn_shift", 0.5, x, y, seed=1)
    second = knockout_shift(first.y, 1.0, np.random.default_rng(2))
    second = type(second)(second.index, second.shifted, x[:0], second.y)
    both = compose(first, second)
    assert np.array_equal(both.images(x), first.images(x)[second.index])
    assert np.array_equal(both.images(x), identity_pool(both.images(x), both.y).images(
        both.images(x)))  # fmt: skip


class _Linear(torch.nn.Module):
    def __init__(self, d: int, k: int = 3) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(d, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x.reshape(len(x), -1))


def test_fgsm_uses_the_smallest_fooling_epsilon_of_the_grid():
    x, _ = _pool(60, size=4)
    model = _Linear(16)
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    x_adv, eps = fgsm_min_epsilon(model, x, pred, max_epsilon=1.0, n_epsilons=50)
    fooled = ~np.isnan(eps)
    assert fooled.sum() > len(x) // 2
    with torch.no_grad():
        adv_pred = model(torch.from_numpy(x_adv)).argmax(1).numpy()
    assert np.all(adv_pred[fooled] != pred[fooled])
    assert np.array_equal(x_adv[~fooled], x[~fooled])
    assert np.all(np.abs(x_adv - x).reshape(len(x), -1).max(1)[fooled] <= eps[fooled] + 1e-6)
    assert x_adv.min() >= 0.0 and x_adv.max() <= 1.0
    # one grid step less does not fool (minimality)
    for i in np.flatnonzero(fooled & (eps > 1.0 / 50 + 1e-9))[:10]:
        xt = torch.from_numpy(x[i : i + 1]).requires_grad_(True)
        torch.nn.functional.cross_entropy(model(xt), torch.tensor([pred[i]])).backward()
        smaller = (xt + (eps[i] - 1.0 / 50) * xt.grad.sign()).clamp(0, 1)
        assert model(smaller).argmax(1).item() == pred[i]


def test_adversarial_shift_replaces_a_fraction_by_fgsm_twins():
    x, y = _pool(60, size=4)
    pool = apply_shift("adversarial_shift", 0.5, x, y % 3, model=_Linear(16), seed=0)
    assert pool.shifted.sum() == 30 and np.array_equal(pool.y, y % 3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shift": "huge_gn_shift"}, "unknown shift"),
        ({"fraction": 0.0}, "fraction"),
        ({"shift": "adversarial_shift"}, "model"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, message):
    x, y = _pool(20)
    args = {"shift": "small_gn_shift", "fraction": 0.5} | kwargs
    with pytest.raises(ValueError, match=message):
        apply_shift(args["shift"], args["fraction"], x, y)


def test_every_name_of_failing_loudly_is_known():
    assert len(SHIFTS) == 10 and "only_zero_shift+medium_img_shift" in SHIFTS
