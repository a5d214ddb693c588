"""Private numba kernels: they only loop. Public wrappers validate and allocate.

Every kernel reads a bipartite edge weight as ``|c[i] * R[i, j] - mu| * s``:

* explicit matrices (``mst_weights``, ``summary_matrix``): ``c = 1``, ``mu = 0``, ``s = 1``, so
  the weight is ``R[i, j]`` bit for bit (``R >= 0``);
* activation graphs (TU, DGP): ``c = a`` (the layer input), ``R = W`` (signed weights),
  ``|a_i W_ij|`` without standardisation (``mu = 0``, ``s = 1``), or the standardised
  ``|a_i W_ij - mu| / (sigma + 1e-8)`` with ``s = 1 / (sigma + 1e-8)``.

Forming the weight on the fly keeps one copy of ``W`` in cache for a whole batch and never
materialises a batch of graphs. The products are rounded exactly like the explicit graph
``a[:, None] * W`` (no fastmath, so no fused multiply-add), which makes the fused TU kernel
bit-identical to building the graph first.

Vectorisation notes (checked on the generated assembly): loops run over ``range(n)`` of a
slice, because a loop starting at a non-zero index makes numba emit wraparound checks that
block SIMD; maxima of keys are taken on the integer view of the float bits (for
non-negative floats the orderings agree; negative keys only mark "not selectable"), because
LLVM will not vectorise a float max-reduction without fastmath.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

# Keys are grouped in blocks whose maxima are kept up to date, so selecting the next Prim
# vertex scans (n + m) / BLOCK block maxima plus one block instead of all n + m keys.
BLOCK = 128


def _int_view(a):  # pragma: no cover - replaced by the overload inside numba
    raise NotImplementedError


@overload(_int_view)
def _int_view_impl(a):
    if a.dtype == types.float32:
        return lambda a: a.view(np.int32)
    return lambda a: a.view(np.int64)


@njit(cache=True, nogil=True)
def _block_max(keys_int, blk):
    """blk[b] = max of keys_int[b*BLOCK:(b+1)*BLOCK] (integer view, vectorised)."""
    for b in range(blk.shape[0]):
        part = keys_int[b * BLOCK : (b + 1) * BLOCK]
        best = part[0]
        for t in range(BLOCK):
            v = part[t]
            best = v if v > best else best
        blk[b] = best


@njit(cache=True, nogil=True)
def _find_in_block(keys_int, b, value):
    """Offset of the first key equal to ``value`` in block ``b`` (branch-free, vectorised)."""
    part = keys_int[b * BLOCK : (b + 1) * BLOCK]
    pos = BLOCK
    for t in range(BLOCK):
        cand = t if part[t] == value else BLOCK
        pos = min(pos, cand)
    return b * BLOCK + pos


@njit(cache=True, nogil=True)
def _prim_mst(c, R, RT, mu, s, skip_zero_rows, by_node, out):
    """Maximum spanning tree weights of a complete bipartite graph by dense Prim.

    Rows of ``R`` (n, m) are the A-vertices, columns the B-vertices, and edge ``(i, j)``
    weighs ``|c[i] * R[i, j] - mu| * s`` (all weights must be >= 0 and finite). ``RT`` is
    ``R`` transposed (C-contiguous), so that both row and column updates read contiguous
    memory. Writes the tree weights, in the order Prim finds them (not sorted), into
    ``out`` and returns their number, ``n + m - 1``.

    With ``by_node`` (valid only without ``skip_zero_rows``, so that Prim starts from node 0),
    the weights go in node order instead: nodes are numbered A-vertices ``0..n-1`` then
    B-vertices ``n..n+m-1``, and the key with which node ``v >= 1`` joined -- the weight of
    the tree edge that attached it -- goes to ``out[v - 1]``.

    With ``skip_zero_rows`` (valid only when ``mu == 0``), rows with ``c[i] == 0`` -- all-zero
    rows of the graph -- are left out and the tree of the remaining graph is returned
    (``n_active + m - 1`` weights; 0 if no row is active). Each left-out row adds exactly
    one edge of weight 0 to the full tree: Kruskal meets its edges last and the rest of
    the graph is already connected. The caller pads with zeros.

    Prim from the first active A-vertex: ``key[v]`` is the heaviest edge from the tree to
    ``v``; the heaviest key joins next and its key is a tree weight. Among equal keys the
    lowest node number joins first (A-vertices before B-vertices, then by index), which
    makes ``by_node`` deterministic; the sorted weights do not depend on it, as every
    maximum spanning tree has the same multiset of weights.
    """
    n = R.shape[0]
    m = R.shape[1]
    nb_a = (n + BLOCK - 1) // BLOCK
    nb_b = (m + BLOCK - 1) // BLOCK
    ninf = -np.inf
    # -inf marks vertices in the tree, left-out rows and padding: never selected, and the
    # -inf penalty keeps max(key, w + penalty) at -inf.
    key_a = np.full(nb_a * BLOCK, ninf, dtype=R.dtype)
    key_b = np.full(nb_b * BLOCK, ninf, dtype=R.dtype)
    ki_a = _int_view(key_a)
    ki_b = _int_view(key_b)
    pen_a = np.zeros(n, dtype=R.dtype)
    pen_b = np.zeros(m, dtype=R.dtype)
    blk_a = np.empty(nb_a, dtype=ki_a.dtype)
    blk_b = np.empty(nb_b, dtype=ki_b.dtype)

    n_active = n
    first = 0
    if skip_zero_rows:
        n_active = 0
        first = -1
        for i in range(n):
            if c[i] == 0:
                pen_a[i] = ninf
            else:
                n_active += 1
                if first < 0:
                    first = i
        if n_active == 0:
            return 0

    pen_a[first] = ninf
    row = R[first]
    c0 = c[first]
    for j in range(m):
        key_b[j] = abs(c0 * row[j] - mu) * s
    _block_max(ki_a, blk_a)
    _block_max(ki_b, blk_b)

    n_edges = n_active + m - 1
    for step in range(n_edges):
        best = blk_a[0]
        side = 0
        bb = 0
        for b in range(1, nb_a):
            if blk_a[b] > best:
                best = blk_a[b]
                bb = b
        for b in range(nb_b):
            if blk_b[b] > best:
                best = blk_b[b]
                bb = b
                side = 1
        if side == 0:
            v = _find_in_block(ki_a, bb, best)
            out[v - 1 if by_node else step] = key_a[v]
            key_a[v] = ninf
            pen_a[v] = ninf
            _block_max(ki_a[bb * BLOCK : (bb + 1) * BLOCK], blk_a[bb : bb + 1])
            # A-vertex v joined: relax the keys of all B-vertices with row v.
            row = R[v]
            cv = c[v]
            for j in range(m):
                key_b[j] = max(key_b[j], abs(cv * row[j] - mu) * s + pen_b[j])
            _block_max(ki_b, blk_b)
        else:
            v = _find_in_block(ki_b, bb, best)
            out[n + v - 1 if by_node else step] = key_b[v]
            key_b[v] = ninf
            pen_b[v] = ninf
            _block_max(ki_b[bb * BLOCK : (bb + 1) * BLOCK], blk_b[bb : bb + 1])
            # B-vertex v joined: relax the keys of all A-vertices with column v.
            col = RT[v]
            for i in range(n):
                key_a[i] = max(key_a[i], abs(c[i] * col[i] - mu) * s + pen_a[i])
            _block_max(ki_a, blk_a)
    return n_edges


@njit(cache=True, nogil=True)
def _mst_sorted(c, R, RT, mu, s, skip_zero_rows, out):
    """Sorted (descending) MST weights of the full n x m graph into ``out`` (n + m - 1)."""
    total = R.shape[0] + R.shape[1] - 1
    tmp = np.zeros(total, dtype=out.dtype)  # left-out zero rows contribute zeros
    found = _prim_mst(c, R, RT, mu, s, skip_zero_rows, False, tmp)
    head = np.sort(tmp[:found])
    for t in range(found):
        out[t] = head[found - 1 - t]
    for t in range(found, total):
        out[t] = 0


@njit(cache=True, nogil=True)
def _mst_by_node(c, R, RT, mu, s, out):
    """MST weights of the full n x m graph in node order (n + m - 1; see ``_prim_mst``)."""
    _prim_mst(c, R, RT, mu, s, False, True, out)


@njit(cache=True, nogil=True)
def _mst_one(W, out):
    """Sorted MST weights of one explicit non-negative matrix."""
    c = np.ones(W.shape[0], dtype=W.dtype)
    WT = np.ascontiguousarray(W.T)
    _mst_sorted(c, W, WT, W.dtype.type(0), W.dtype.type(1), False, out)


@njit(cache=True, parallel=True)
def _mst_batch(W, out):
    """Sorted MST weights of each matrix of a batch ``W`` (B, n, m) into ``out`` (B, n+m-1)."""
    for q in prange(W.shape[0]):
        _mst_one(W[q], out[q])


@njit(cache=True, nogil=True)
def _summary_t(a, a_off, WT, w_off, sizes, mu, s, out):
    """Transposed DGP summary matrix ``S.T`` (n_L, n_0) of a chain of layers (Algorithm 1).

    Layer ``l`` has edge weights ``|a_l[i] * W_l[i, j] - mu[l]| * s[l]``, where ``a_l`` is
    ``a[a_off[l]:a_off[l+1]]`` and ``W_l.T`` (torch orientation, (n_{l+1}, n_l)) is
    ``WT[w_off[l]:w_off[l+1]]``. ``S[i, k]`` = max over paths from input ``i`` to output
    ``k`` of the minimum edge weight, built from the outputs backwards:
    ``S_l[i, k] = max_j min(G_l[i, j], S_{l+1}[j, k])``.

    S is kept transposed so the innermost loop is an element-wise max/min over the input
    nodes ``i`` (contiguous, vectorised) for one output node ``k`` and one middle node ``j``.
    """
    n_layers = sizes.shape[0] - 1
    n_out = sizes[n_layers]
    widest = 1
    for layer in range(n_layers):
        widest = max(widest, sizes[layer])
    cur = np.empty((n_out, widest), dtype=out.dtype)
    nxt = np.empty((n_out, widest), dtype=out.dtype)
    g = np.empty((4, widest), dtype=out.dtype)

    layer = n_layers - 1
    n = sizes[layer]
    wl = WT[w_off[layer] : w_off[layer + 1]].reshape((n_out, n))
    al = a[a_off[layer] : a_off[layer + 1]]
    mul = mu[layer]
    sl = s[layer]
    for k in range(n_out):
        dst = cur[k, :n]
        src = wl[k]
        for i in range(n):
            dst[i] = abs(al[i] * src[i] - mul) * sl

    for layer in range(n_layers - 2, -1, -1):
        n = sizes[layer]
        m = sizes[layer + 1]
        wl = WT[w_off[layer] : w_off[layer + 1]].reshape((m, n))
        al = a[a_off[layer] : a_off[layer + 1]]
        mul = mu[layer]
        sl = s[layer]
        for k in range(n_out):
            dst = nxt[k, :n]
            for i in range(n):
                dst[i] = 0  # every weight is >= 0, so 0 is the neutral element of max
        # Middle nodes j whose column of S_{l+1} is all zero add nothing (min with 0 is 0):
        # skip them (after ReLU, without standardisation, about half the nodes).
        active = np.empty(m, dtype=np.int64)
        n_active = 0
        for j in range(m):
            top = cur[0, j]
            for k in range(1, n_out):
                top = max(top, cur[k, j])
            if top > 0:
                active[n_active] = j
                n_active += 1
        # Four middle nodes at a time: one load and one store of S_l per four min/max pairs
        # instead of per pair (the loop is bound by memory operations, not by min/max).
        t = 0
        while t + 4 <= n_active:
            for r in range(4):
                src = wl[active[t + r]]
                gr = g[r, :n]
                for i in range(n):
                    gr[i] = abs(al[i] * src[i] - mul) * sl
            g0 = g[0, :n]
            g1 = g[1, :n]
            g2 = g[2, :n]
            g3 = g[3, :n]
            j0 = active[t]
            j1 = active[t + 1]
            j2 = active[t + 2]
            j3 = active[t + 3]
            for k in range(n_out):
                c0 = cur[k, j0]
                c1 = cur[k, j1]
                c2 = cur[k, j2]
                c3 = cur[k, j3]
                dst = nxt[k, :n]
                for i in range(n):
                    x = max(min(g0[i], c0), min(g1[i], c1))
                    y = max(min(g2[i], c2), min(g3[i], c3))
                    dst[i] = max(dst[i], max(x, y))
            t += 4
        while t < n_active:
            j = active[t]
            src = wl[j]
            g0 = g[0, :n]
            for i in range(n):
                g0[i] = abs(al[i] * src[i] - mul) * sl
            for k in range(n_out):
                cv = cur[k, j]
                dst = nxt[k, :n]
                for i in range(n):
                    dst[i] = max(dst[i], min(g0[i], cv))
            t += 1
        cur, nxt = nxt, cur

    n0 = sizes[0]
    for k in range(n_out):
        src = cur[k, :n0]
        dst = out[k]
        for i in range(n0):
            dst[i] = src[i]


@njit(cache=True, nogil=True)
def _global_max(a, a_off, wmax, wmin, mu, s):
    """Largest activation-graph weight over all layers, from row maxima/minima of W.

    ``x -> |c * x - mu| * s`` is convex in ``x`` and its rounding is monotone on each side of
    its minimum, so over a row it peaks at the row's max or min weight: the result equals
    the maximum over the explicit graph bit for bit.
    """
    best = 0.0
    for layer in range(mu.shape[0]):
        lo = a_off[layer]
        for i in range(a_off[layer + 1] - lo):
            c = a[lo + i]
            v1 = abs(c * wmax[lo + i] - mu[layer]) * s[layer]
            v2 = abs(c * wmin[lo + i] - mu[layer]) * s[layer]
            best = max(best, max(v1, v2))
    return best


@njit(cache=True, nogil=True)
def _dgp_one(a, a_off, WT, w_off, sizes, wmax, wmin, mu, s, scale_by_max, sort, res):
    """DGP raw representation of one sample: the MST weights of S(x) into ``res``.

    Sorted in descending order, or with ``sort=False`` in node order (``_mst_by_node``):
    ``res[v - 1]`` is the weight of the edge that attached node ``v`` (inputs ``0..n0-1``,
    then outputs) when Prim starts from input 0. With ``scale_by_max`` the tree weights are
    divided by the sample's largest graph weight at the end: scaling by a positive constant
    commutes with the max/min of S and with the MST (both only compare), and correctly
    rounded division is monotone, so this equals scaling the graphs first.
    """
    n0 = sizes[0]
    n_out = sizes[sizes.shape[0] - 1]
    total = n0 + n_out - 1
    st = np.empty((n_out, n0), dtype=a.dtype)
    _summary_t(a, a_off, WT, w_off, sizes, mu, s, st)
    sm = np.ascontiguousarray(st.T)
    c = np.ones(n0, dtype=a.dtype)
    zero = a.dtype.type(0)
    one = a.dtype.type(1)
    if sort:
        _mst_sorted(c, sm, st, zero, one, False, res)
    else:
        _mst_by_node(c, sm, st, zero, one, res)
    if scale_by_max:
        gmax = _global_max(a, a_off, wmax, wmin, mu, s)
        if gmax > 0:  # all-zero graphs stay zero
            g = a.dtype.type(gmax)
            for t in range(total):
                res[t] = res[t] / g


@njit(cache=True, parallel=True)
def _dgp_batch(A, a_off, WT, w_off, sizes, wmax, wmin, mu, s, scale_by_max, out):
    """DGP raw representation of a batch: sorted MST weights of S(x) per sample.

    ``A`` (N, sum n_l) concatenates the layer inputs; ``mu``, ``s`` (N, L) are the
    per-sample, per-layer standardisation (0 and 1 to skip it); see ``_dgp_one``.
    """
    for q in prange(A.shape[0]):
        _dgp_one(A[q], a_off, WT, w_off, sizes, wmax, wmin, mu[q], s[q], scale_by_max, True, out[q])


@njit(cache=True, parallel=True)
def _dgp_batch_unsorted(A, a_off, WT, w_off, sizes, wmax, wmin, mu, s, scale_by_max, out):
    """``_dgp_batch`` with the MST weights of S(x) in node order, not sorted (the ablation
    "DGP (- sort)"): a separate entry point keeps ``_dgp_batch``'s signature, which
    ``dgpbench.topology.activation._summary_rows`` shares with ``_dgp_approx_batch``.
    """
    for q in prange(A.shape[0]):
        _dgp_one(
            A[q], a_off, WT, w_off, sizes, wmax, wmin, mu[q], s[q], scale_by_max, False, out[q]
        )


@njit(cache=True, parallel=True)
def _dgp_approx_batch(A, a_off, WT, w_off, sizes, wmax, wmin, mu, s, scale_by_max, out):
    """Row maxima then column maxima of S(x) per sample into ``out`` (N, n0 + n_out): the
    DGP authors' ``dgp_approximate``, with ``_dgp_batch``'s signature.
    """
    n0 = sizes[0]
    n_out = sizes[sizes.shape[0] - 1]
    for q in prange(A.shape[0]):
        a = A[q]
        st = np.empty((n_out, n0), dtype=A.dtype)  # S transposed: st[k, i] = S[i, k]
        _summary_t(a, a_off, WT, w_off, sizes, mu[q], s[q], st)
        res = out[q]
        for i in range(n0):
            best = st[0, i]
            for k in range(1, n_out):
                best = max(best, st[k, i])
            res[i] = best
        for k in range(n_out):
            best = st[k, 0]
            for i in range(1, n0):
                best = max(best, st[k, i])
            res[n0 + k] = best
        if scale_by_max:
            gmax = _global_max(a, a_off, wmax, wmin, mu[q], s[q])
            if gmax > 0:
                g = A.dtype.type(gmax)
                for t in range(n0 + n_out):
                    res[t] = res[t] / g


@njit(cache=True, parallel=True)
def _tu_batch(A, a_off, W, WT, w_off, sizes, mu, s, skip_zero_rows, out, o_off):
    """TU raw representation of a batch: per layer, sorted MST weights of the graph.

    Layer ``l`` of sample ``q`` goes to ``out[q, o_off[l]:o_off[l+1]]``. With
    ``skip_zero_rows`` (only valid when ``mu == 0``), input nodes with activation 0 -- whole
    zero rows, common after ReLU and on image backgrounds -- are left out of Prim and
    contribute one 0 each (see ``_mst_sorted``).
    """
    n_layers = sizes.shape[0] - 1
    for q in prange(A.shape[0]):
        a = A[q]
        for layer in range(n_layers):
            n = sizes[layer]
            m = sizes[layer + 1]
            wl = W[w_off[layer] : w_off[layer + 1]].reshape((n, m))
            wtl = WT[w_off[layer] : w_off[layer + 1]].reshape((m, n))
            al = a[a_off[layer] : a_off[layer + 1]]
            _mst_sorted(
                al,
                wl,
                wtl,
                mu[q, layer],
                s[q, layer],
                skip_zero_rows,
                out[q, o_off[layer] : o_off[layer + 1]],
            )


@njit(cache=True, parallel=True)
def _stacked_trees(G, D, w_off, sizes, t_off, dgp, np_out, dgp_out):
    """Sorted MST weights of every layer (NP) and of every summary matrix (DGP).

    ``G`` (S * total,) holds per network the normalised absolute layers in graph orientation
    ``(n_l, n_{l+1})``; ``D`` (S * total,) the standardised, scaled absolute layers in torch
    orientation ``(n_{l+1}, n_l)`` (the layout of ``_summary_t``); ``w_off`` the layer
    offsets within one network's ``total`` entries. Tree ``l`` of network ``q`` goes to
    ``np_out[q, t_off[l]:t_off[l+1]]``; the DGP tree of network ``q`` to ``dgp_out[q]``.
    """
    n_layers = sizes.shape[0] - 1
    total = w_off[n_layers]
    n_nets = np_out.shape[0]
    per_net = n_layers + 1 if dgp else n_layers
    n0 = sizes[0]
    n_out = sizes[n_layers]
    for task in prange(n_nets * per_net):
        q = task // per_net
        layer = task % per_net
        base = q * total
        if layer < n_layers:
            n = sizes[layer]
            m = sizes[layer + 1]
            R = G[base + w_off[layer] : base + w_off[layer + 1]].reshape((n, m))
            _mst_one(R, np_out[q, t_off[layer] : t_off[layer + 1]])
        else:
            WT = D[base : base + total]
            a = np.ones(total, dtype=D.dtype)  # edge weight |1 * w - 0| * 1 = w
            mu = np.zeros(n_layers, dtype=D.dtype)
            s = np.ones(n_layers, dtype=D.dtype)
            a_off = np.zeros(n_layers + 1, dtype=np.int64)
            for k in range(n_layers):
                a_off[k + 1] = a_off[k] + sizes[k]
            st = np.empty((n_out, n0), dtype=D.dtype)
            _summary_t(a, a_off, WT, w_off, sizes, mu, s, st)
            sm = np.ascontiguousarray(st.T)
            c = np.ones(n0, dtype=D.dtype)
            _mst_sorted(c, sm, st, D.dtype.type(0), D.dtype.type(1), False, dgp_out[q])
