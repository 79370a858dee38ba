"""The numba side of the private sketches [001 Alg 3–5; docs/lazyhh.md §4–5]: the sketch state,
the secret row hashes h_i (buckets) and g_i (signs), the CountMin and Count Sketch queries of the
released grid O, LAZY_UPDATE, and the batch loops of LazySketch and PunctualSketch. The sketch
classes and the registered algorithms are in ``lazysketch``."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.privacy import bulknoise
from dptop.engine.continual.gaussbm import CHUNK, BMState, push_column
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import LO_MULTIPLIER, hash_key, mix64

_U32 = np.uint64(32)
_U31 = np.uint64(31)
_ONE = np.uint64(1)


class SketchState(NamedTuple):
    p: np.ndarray  # int16[w, d] (int32 from w = 2^15, ``pending_dtype``): Lazy: pending increments; Punctual: one arrival's
    seeds: np.ndarray  # uint64[2d + 1] secret hash parameters a_0..a_d-1, b_0..b_d-1, fingerprint seed (never released, P11)
    meta: np.ndarray  # int64[1]: next column to push (Lazy)
    bk: np.ndarray  # int64[d]: cells of the last arrival, flat indices i + d·h_i(x) (scratch)
    sg: np.ndarray  # int64[d]: its signs (CS scratch; all 1 for CMS)
    bm: BMState
    hm: np.ndarray  # uint64[2]: a high word and the fingerprint's inner mix of it (``row_buckets``)


@inner
def _bucket(h, width):
    """Multiply-shift of the top 32 hash bits onto [0, width); width < 2^32 (the memory cap), and
    saying so lets the compiler use a 32-bit multiply (the same product)."""
    return np.int64(((h >> _U32) * np.uint64(np.uint32(width))) >> _U32)


@inner
def _sign(h):
    return np.int64(1) if (h >> _U31) & _ONE else np.int64(-1)


@inner
def fingerprint(seeds, hi, lo):
    """The key's 64-bit fingerprint f(x): ``hash_key`` under the secret seed ``seeds[2d]``."""
    return hash_key(hi, lo, seeds[len(seeds) - 1])


@inner
def cell(seeds, row, f, width):
    """(bucket h_i(x) in [0, w), sign g_i(x) in {-1, +1}) in ``row`` of the key with fingerprint
    ``f``: h = a_i·f + b_i mod 2^64, the bucket from its top 32 bits (multiply-shift), the sign
    its bit 31."""
    h = seeds[row] * f + seeds[(len(seeds) >> 1) + row]
    return _bucket(h, width), _sign(h)


@inner
def row_buckets(seeds, hm, hi, lo, width, bk):
    """``cell``'s buckets of (hi, lo) in every row at once, into ``bk`` as flat indices
    i + d·h_i(x) of a ``(w, d)`` grid (P, ``pre``), of any integer type. The fingerprint
    mix64(mix64(hi ^ s) ^ lo·M1 ^ s) keeps its inner mix of the high word in ``hm`` and
    recomputes it only when the high word changes (never for IPv4 keys); then a row costs one
    multiply-add, and the row loop is vectorised."""
    d = len(seeds) >> 1
    s = seeds[2 * d]
    if hi != hm[0]:
        hm[0] = hi
        hm[1] = mix64(hi ^ s)
    f = mix64(hm[1] ^ (lo * LO_MULTIPLIER) ^ s)
    for i in range(d):
        b, g = cell(seeds, i, f, width)
        bk[i] = b * d + i


def high_word_mixes(seeds: np.ndarray) -> np.ndarray:
    """A ``row_buckets`` cache, filled for the high word 0."""
    hm = np.zeros(2, dtype=np.uint64)
    _fill_mixes(seeds, hm)
    return hm


@kernel
def _fill_mixes(seeds, hm):
    hm[0] = 0
    hm[1] = mix64(seeds[len(seeds) - 1])


@inner
def row_cells(seeds, hi, lo, width, bk, sg):
    """``cell`` in every row at once: buckets into ``bk`` as flat indices (``row_buckets``), signs
    into ``sg``."""
    d = len(seeds) >> 1
    f = fingerprint(seeds, hi, lo)
    for i in range(d):
        b, g = cell(seeds, i, f, width)
        bk[i] = b * d + i
        sg[i] = g


@inner
def cms_estimate(flat, cells, row, floor):
    """CMS f̂ of a key from its cells ``cells[row]``, flat indices i + d·h_i(x) into the released
    ``pre`` (``flat`` = pre.reshape(-1)): the min over the rows. Unsigned indices (no negative
    index check) and four running minima, not one chain that waits on every compare (min is
    exact, so the result is the same). It may stop once the minimum so far is below ``floor``
    (every four rows), returning that minimum: then f̂ <= the value returned < ``floor``."""
    d = cells.shape[1]
    own = cells[ix(row)]
    b0 = flat[own[0]]
    b1 = b0
    b2 = b0
    b3 = b0
    i = 1
    while i + 3 < d:
        b0 = min(b0, flat[own[ix(i)]])
        b1 = min(b1, flat[own[ix(i + 1)]])
        b2 = min(b2, flat[own[ix(i + 2)]])
        b3 = min(b3, flat[own[ix(i + 3)]])
        i += 4
        if min(min(b0, b1), min(b2, b3)) < floor:
            return min(min(b0, b1), min(b2, b3))
    while i < d:
        b0 = min(b0, flat[own[ix(i)]])
        i += 1
    return min(min(b0, b1), min(b2, b3))


@inner
def estimate(pre, seeds, signed, hi, lo, scratch):
    """f̂(x) from the released cells: min over rows (CMS) or median of g_i(x)·cell (CS, odd d)."""
    w, d = pre.shape
    f = fingerprint(seeds, hi, lo)
    if not signed:
        best = np.inf
        for i in range(d):
            b, g = cell(seeds, i, f, w)
            if pre[b, i] < best:
                best = pre[b, i]
        return best
    for i in range(d):
        b, g = cell(seeds, i, f, w)
        scratch[i] = g * pre[b, i]
    scratch.sort()
    return scratch[d // 2]


@kernel
def query_estimates(st, signed, keys, out):
    pre, seeds = st.bm.pre, st.seeds
    scratch = np.empty(pre.shape[1], dtype=np.float64)
    for n in range(len(keys)):
        out[n] = estimate(pre, seeds, signed, keys[n, 0], keys[n, 1], scratch)


@inner
def lazy_update(p, bk, sg, ex, sx, pre, upd, pos, sigma, z, zo):
    """LAZY_UPDATE(x) (docs/lazyhh.md §5.2) for x's cells ``bk`` (flat indices, ``row_buckets``) and signs
    ``sg`` (all 1 for CMS): add x to P, then push column ``pos`` of P (zeros too, with draws
    ``z[zo:zo+d]``) and clear it; returns the next column."""
    flat = p.reshape(-1)
    for i in range(p.shape[1]):
        flat[ix(bk[i])] += sg[i]
    return push_next(p, ex, sx, pre, upd, pos, sigma, z, zo)


@inner
def push_next(p, ex, sx, pre, upd, pos, sigma, z, zo):
    """LAZY_UPDATE step 2–3 (docs/lazyhh.md §5.2): push column ``pos`` of P into O (zeros too, draws
    ``z[zo:zo+d]``) and clear it; returns the next column."""
    push_column(ex, sx, pre, upd, pos, p, sigma, z, zo, True)
    return pos + 1 if pos + 1 < p.shape[0] else 0


@hot
def lazy_batch(st, signed, keys, sigma, rng):
    p, seeds, meta, bk, sg, hm = st.p, st.seeds, st.meta, st.bk, st.sg, st.hm
    ex, sx, pre, upd, z = st.bm
    w, d = p.shape
    pos = meta[0]
    for c0 in range(0, len(keys), CHUNK):
        if sigma > 0.0:
            bulknoise.fill_normal(rng, z[:CHUNK * d], 1.0)
        for n in range(c0, min(len(keys), c0 + CHUNK)):
            if signed:
                row_cells(seeds, keys[n, 0], keys[n, 1], w, bk, sg)
            else:
                row_buckets(seeds, hm, keys[n, 0], keys[n, 1], w, bk)
            pos = lazy_update(p, bk, sg, ex, sx, pre, upd, pos, sigma, z, (n - c0) * d)
    meta[0] = pos


@hot
def punctual_batch(st, signed, keys, sigma, rng):
    """Alg 3: per arrival, every column is pushed; P holds only this arrival's increments. Without
    reference counting (``hot``): with it the w inlined pushes per arrival cost four times as much."""
    p, seeds = st.p, st.seeds
    ex, sx, pre, upd, z = st.bm
    w, d = p.shape
    for n in range(len(keys)):
        f = fingerprint(seeds, keys[n, 0], keys[n, 1])
        for i in range(d):
            b, g = cell(seeds, i, f, w)
            p[b, i] += g if signed else 1
        if sigma > 0.0:
            bulknoise.fill_normal(rng, z[:w * d], 1.0)
        for j in range(w):
            push_column(ex, sx, pre, upd, j, p, sigma, z, j * d, False)
        for i in range(d):
            b, g = cell(seeds, i, f, w)
            p[b, i] = 0


@kernel
def key_cells(seeds, width, keys, out_b, out_g):
    for n in range(len(keys)):
        f = fingerprint(seeds, keys[n, 0], keys[n, 1])
        for i in range(len(seeds) >> 1):
            b, g = cell(seeds, i, f, width)
            out_b[n, i] = b
            out_g[n, i] = g
