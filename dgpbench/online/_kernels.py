"""Private numba kernels of the online detectors' step: they only loop, the detectors allocate.

One call does a whole stream step (the window's running counts or kernel sums updated in
place, the statistic returned), so a step pays one compiled call instead of a dozen numpy
calls, whose fixed costs dominated at the sizes of low-dimensional features. The
``*_steps`` kernels feed a block of samples and stop after the first one above its
threshold, for :meth:`~dgpbench.online.base.OnlineDetector.run`.

The Cramér-von Mises step costs ``O(W d + d log n)`` (:func:`cvm_statistics`), and a
simulated stream of its reference calibration ``O(W^2 d)`` (:func:`cvm_reference_maxima`,
no sorting of the stream's reference); the MMD step ``O((m + W) d)``, its dot products
and sums rounded in their own order (a few ulps from BLAS's).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _insert_sorted(buf, k, v):  # pragma: no cover
    """Insert ``v`` into the sorted ``buf[:k]`` (one step of an insertion sort: short buffers)."""
    i = k
    while i > 0 and buf[i - 1] > v:
        buf[i] = buf[i - 1]
        i -= 1
    buf[i] = v


@njit(cache=True, nogil=True)
def cvm_statistics(cum_k, cum_k2, a, left, cw, q, stats):  # pragma: no cover
    """Each feature's ``T`` of a full window into ``stats``; their maximum.

    ``a``, ``left``: per window slot, the number of reference values ``<= w`` and ``< w``;
    ``cw``: the number of window values ``<= w``; ``cum_k``, ``cum_k2``: prefix sums of
    ``k_i = n F_n(r_(i))`` and ``k_i^2`` over the sorted reference values ``r_(i)``
    (integers held exactly as floats); ``q`` scratch.

    The window's ECDF is constant between its values' ``left`` positions among the sorted
    reference (a reference value ``r_i`` has ``w <= r_i`` iff ``i >= left(w)``), so the
    reference points' sum ``sum_i (F_i - G_i)^2`` takes ``W + 1`` segments of prefix sums,
    ties included; the window points' sum takes one term per slot: ``O(W log W)`` per
    feature, whatever the reference's size.
    """
    n = cum_k.shape[0] - 1
    nn = float(n) * n
    W, d = a.shape
    scale = n * W / (n + W) ** 2
    best = -math.inf
    for j in range(d):
        for k in range(W):  # insertion sort of the left positions: W is small
            _insert_sorted(q, k, left[k, j])
        ref = 0.0
        prev = 0
        for s in range(W + 1):
            nxt = q[s] if s < W else n
            level = s / W
            s1 = (cum_k[nxt, j] - cum_k[prev, j]) / n  # sum of F_i over the segment
            s2 = (cum_k2[nxt, j] - cum_k2[prev, j]) / nn  # sum of F_i^2
            ref += s2 - 2.0 * level * s1 + level * level * (nxt - prev)
            prev = nxt
        win = 0.0
        for k in range(W):
            e = a[k, j] / n - cw[k, j] / W
            win += e * e
        stats[j] = scale * (ref + win)
        best = max(best, stats[j])
    return best


@njit(cache=True, nogil=True)
def cvm_step(x, ref_sorted, cum_k, cum_k2, window, a, left, cw, q, pos, filled,
             stats):  # pragma: no cover  # fmt: skip
    """One Cramér-von Mises step in place (``x`` into slot ``pos``); the largest ``T``.

    Only the window's counts change, by at most one each: ``O(W d + d log n)``. NaN while
    the window fills (``filled`` counts the values before this one).
    """
    W, d = window.shape
    # comparisons added as integers: no branches, so the loops vectorise
    if filled == W:  # the oldest value leaves
        for k in range(W):
            for j in range(d):
                cw[k, j] -= window[pos, j] <= window[k, j]
    for j in range(d):
        cw[pos, j] = 1
    for k in range(W):
        if k == pos or (filled < W and k >= filled):
            continue
        for j in range(d):
            cw[k, j] += x[j] <= window[k, j]
            cw[pos, j] += window[k, j] <= x[j]
    for j in range(d):
        window[pos, j] = x[j]
        a[pos, j] = np.searchsorted(ref_sorted[:, j], x[j], side="right")
        left[pos, j] = np.searchsorted(ref_sorted[:, j], x[j], side="left")
    if filled + 1 < W:
        return math.nan
    return cvm_statistics(cum_k, cum_k2, a, left, cw, q, stats)


@njit(cache=True, nogil=True)
def cvm_steps(X, ref_sorted, cum_k, cum_k2, window, a, left, cw, q, pos, filled, stats, out,
              thresholds, stop):  # pragma: no cover  # fmt: skip
    """:func:`cvm_step` for each row of ``X``; the rows fed.

    Statistics go to ``out``; with ``stop``, the feeding ends after the first row whose
    statistic :func:`exceeds` its step's threshold (``thresholds[r]`` for row ``r``).
    """
    W = window.shape[0]
    for r in range(X.shape[0]):
        out[r] = cvm_step(X[r], ref_sorted, cum_k, cum_k2, window, a, left, cw, q, pos, filled,
                          stats)  # fmt: skip
        pos = (pos + 1) % W
        filled = min(W, filled + 1)
        if stop and exceeds(out[r], thresholds[r]):
            return r + 1
    return X.shape[0]


@njit(cache=True, nogil=True)
def exceeds(stat, threshold):  # pragma: no cover
    """The alarm decision: ``stat > threshold``, strictly; a NaN on either side never alarms.

    The thresholds are NaN before the first step that can alarm, the statistics while the
    window fills. :class:`~dgpbench.online.base.OnlineDetector` decides with this function's
    Python original (``exceeds.py_func``), the compiled loops with the compiled one.
    """
    return stat > threshold


@njit(cache=True, nogil=True)
def mmd_step(x, ref_T, ref_sq, gamma, window, kyy, kxy, pos, filled, kyy_sum):  # pragma: no cover
    """One MMD step in place: the new slot's kernel row and reference sum; the new ``kyy_sum``.

    ``ref_T`` is the reference transposed (features x rows), ``ref_sq`` its rows' squared
    norms.
    ``kyy`` is the window's kernel matrix (0 for empty slots), ``kxy`` per slot the sum over
    the reference of ``k(x_i, y)``, ``kyy_sum`` the off-diagonal sum of ``kyy``.
    """
    d, m = ref_T.shape
    W = window.shape[0]
    xx = 0.0
    for j in range(d):
        xx += x[j] * x[j]
    new = 0.0  # off-diagonal sum of the new row
    old = 0.0  # and of the row it replaces
    for k in range(W):
        if k != pos:
            old += kyy[pos, k]
    for k in range(W):
        if k == pos:
            v = 1.0
        elif k >= filled:
            v = 0.0
        else:
            ww = 0.0
            wx = 0.0
            for j in range(d):
                ww += window[k, j] * window[k, j]
                wx += window[k, j] * x[j]
            v = math.exp(-gamma * max(ww + xx - 2.0 * wx, 0.0))
            new += v
        kyy[pos, k] = v
        kyy[k, pos] = v
    # the dot products with the reference feature after feature: the inner loop runs over
    # contiguous rows of the transposed reference and vectorises (same sums, same order)
    rx = np.zeros(m)
    for j in range(d):
        xj = x[j]
        for i in range(m):
            rx[i] += ref_T[j, i] * xj
    s = 0.0
    for i in range(m):
        s += math.exp(-gamma * max(ref_sq[i] + xx - 2.0 * rx[i], 0.0))
    kxy[pos] = s
    for j in range(d):
        window[pos, j] = x[j]
    return kyy_sum + 2.0 * (new - old)


@njit(cache=True, nogil=True)
def mmd_statistic(kxx_term, kyy_sum, kxy, m):  # pragma: no cover
    """The unbiased MMD^2 of a full window from its running sums (``m`` reference rows)."""
    W = kxy.shape[0]
    s = 0.0
    for k in range(W):
        s += kxy[k]
    return kxx_term + kyy_sum / (W * (W - 1)) - 2.0 * s / (m * W)


@njit(cache=True, nogil=True)
def mmd_steps(X, ref_T, ref_sq, gamma, window, kyy, kxy, pos, filled, kyy_sum, kxx_term,
              out, thresholds, stop):  # pragma: no cover  # fmt: skip
    """:func:`mmd_step` for each row of ``X``; the rows fed and the final ``kyy_sum``.

    The statistics go to ``out`` (NaN while the window fills); with ``stop``, the feeding
    ends after the first row whose statistic :func:`exceeds` its step's threshold
    (``thresholds[r]`` for row ``r``).
    """
    m = ref_T.shape[1]
    W = window.shape[0]
    for r in range(X.shape[0]):
        kyy_sum = mmd_step(X[r], ref_T, ref_sq, gamma, window, kyy, kxy, pos, filled, kyy_sum)
        pos = (pos + 1) % W
        filled = min(W, filled + 1)
        out[r] = math.nan if filled < W else mmd_statistic(kxx_term, kyy_sum, kxy, m)
        if stop and exceeds(out[r], thresholds[r]):
            return r + 1, kyy_sum
    return X.shape[0], kyy_sum


@njit(cache=True, nogil=True)
def all_finite(x):  # pragma: no cover
    """Whether every value of the 1-D ``x`` is finite (no NaN, no infinity)."""
    for v in x:
        if not math.isfinite(v):
            return False
    return True


@njit(cache=True, nogil=True)
def cvm_reference_maxima(rows, lo, hi, cum_k, cum_k2, W, out):  # pragma: no cover
    """Largest feature ``T`` of simulated streams of reference rows into ``out`` (b, W).

    Stream ``i`` takes the rows ``rows[i]`` (``L`` of them, in order) as its samples and the
    other ``m = n - L`` rows of the full reference as its reference; its windows are the
    ``W`` consecutive samples starting at ``0 .. W - 1``. ``lo``, ``hi`` (features x rows):
    each row's number of full-reference values below and at or below it per feature;
    ``cum_k``, ``cum_k2``: prefix sums of ``k_i = #{values <= x_(i)}`` and ``k_i^2`` over
    each sorted full column (as in :func:`cvm_statistics`).

    No stream reference is sorted: its ECDF at the ``i``-th sorted full value is
    ``(k_i - R_i) / m`` with ``R_i`` the stream values at or below it (those with ``lo <= i``),
    and the window's ECDF ``G`` changes at the window values' ``lo`` too. Between
    consecutive stream positions both are constant, so the sum over all full values takes
    ``L + 1`` segments of prefix sums; the stream values' own terms (their value groups,
    ties included) are then taken off and the window's added: ``O(L W)`` per stream and
    feature after an ``O(L^2)`` insertion sort, whatever ``n``.
    """
    b, L = rows.shape
    d, n = lo.shape
    m = n - L
    inv_m, inv_w, inv_mm = 1.0 / m, 1.0 / W, 1.0 / (float(m) * m)
    scale = m * W / (m + W) ** 2
    key = np.empty(L, np.int64)  # lo position * L + stream index, sorted
    who = np.empty(L, np.int64)  # the sorted stream values' indices in the stream
    # the non-empty segments between consecutive stream positions: the stream values
    # below (R), the full values' count and sums, and the hi count of the group of stream
    # values at the segment's start (one value, ties)
    seg_r = np.empty(L + 1, np.int64)
    seg_n = np.empty(L + 1, np.int64)
    seg_s1 = np.empty(L + 1)
    seg_s2 = np.empty(L + 1)
    seg_k = np.empty(L + 1, np.int64)
    total = np.empty(W)  # per window: the sum over the pooled points
    g = np.empty(W)  # per window: its values among the sorted stream values so far
    g_prev = np.empty(W)
    for i in range(b):
        for k in range(W):
            out[i, k] = -math.inf
        for j in range(d):
            for t in range(L):  # insertion sort by lo: L is small
                _insert_sorted(key, t, lo[j, rows[i, t]] * L + t)
            nseg = 0
            start = 0
            for s in range(L + 1):
                end = key[s] // L if s < L else n
                if s < L:
                    who[s] = key[s] % L
                if end > start:
                    seg_r[nseg] = s
                    seg_n[nseg] = end - start
                    seg_s1[nseg] = (cum_k[end, j] - cum_k[start, j]) * inv_m
                    seg_s2[nseg] = (cum_k2[end, j] - cum_k2[start, j]) * inv_mm
                    seg_k[nseg] = hi[j, rows[i, who[s - 1]]] if s > 0 else 0
                    nseg += 1
                    start = end
            # all windows at once, segment after segment: the loops over windows vectorise
            for k in range(W):
                total[k] = 0.0
                g[k] = 0.0
                g_prev[k] = 0.0
            t = 0
            prev_r = 0
            for u in range(nseg):
                r = seg_r[u]
                while t < r:  # stream value who[t] is in windows who[t] - W + 1 .. who[t]
                    for k in range(max(0, who[t] - W + 1), min(W, who[t] + 1)):
                        g[k] += 1.0
                    t += 1
                s1, s2, count = seg_s1[u], seg_s2[u], seg_n[u]
                base = r * inv_m
                if r == 0:
                    for k in range(W):
                        c = base + g[k] * inv_w  # R / m + G on the segment
                        total[k] += s2 - 2.0 * c * s1 + c * c * count
                else:  # the group: no reference points; window points if in the window
                    group = r - prev_r
                    kf = seg_k[u] * inv_m
                    for k in range(W):
                        c = base + g[k] * inv_w
                        f = kf - c
                        total[k] += (s2 - 2.0 * c * s1 + c * c * count
                                     + (g[k] - g_prev[k] - group) * f * f)  # fmt: skip
                for k in range(W):
                    g_prev[k] = g[k]
                prev_r = r
            for k in range(W):
                out[i, k] = max(out[i, k], scale * total[k])
