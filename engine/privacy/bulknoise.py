"""Fast bulk noise for per-update mechanisms (GaussBM, Private CountMin cells), in numba.

The project's standard (docs/README.md, Noise) allows bulk per-update noise from a fast generator seeded from the OS; release-time
noise on released counts uses ``dptop.engine.privacy.noise`` (CSPRNG, exact discrete samplers) instead. The
generator is xoshiro256** with explicit state arrays, so each algorithm owns its stream (no hidden
per-thread numba state) and a test can pass a fixed seed. ``fill_normal`` draws normals by the
Marsaglia-Tsang ziggurat from ``LANES`` interleaved xoshiro256** streams (a ``make_lanes``
state), which the compiler vectorises: about 1.1 ns a draw (measured in blocks of 6656, as LazyHH
draws them), 0.85 ns of it the vectorised loop and the rest the rare rejected proposals (with 256
layers instead of 1024: 1.3 ns, half of it the rejected ones). ``add_normal_stream`` draws from
one of many independent streams of a keyed generator (a state per stream, seeded by splitmix64
from the key and the stream's numbers), so a structure can draw a part's noise whenever it first
needs it and get the same values.
"""
from __future__ import annotations

import os

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from dptop.engine.core.jit import hot, inner
from dptop.engine.core.keys import mix64

_ONE = np.uint64(1)


def make_rng(seed: int | None = None) -> np.ndarray:
    """A generator state: from ``os.urandom`` (default) or, for tests only, from ``seed``."""
    if seed is None:
        words = np.frombuffer(os.urandom(32), dtype=np.uint64).copy()
    else:
        words = np.random.SeedSequence(seed).generate_state(4, dtype=np.uint64)
    if not words.any():
        words[0] = 1
    return words.astype(np.uint64)


LANES = 64
"""Interleaved streams of a ``make_lanes`` state: ``fill_normal`` draws LANES normals per step."""


def make_lanes(seed: int | None = None) -> np.ndarray:
    """A ``fill_normal`` state ``uint64[5, LANES]``: rows 0-3 hold LANES independent xoshiro256**
    states (from ``os.urandom``, or for tests only from ``seed``), row 4 is the words of the
    current block (scratch)."""
    if seed is None:
        words = np.frombuffer(os.urandom(32 * LANES), dtype=np.uint64).reshape(4, LANES).copy()
    else:
        words = np.random.SeedSequence((seed, LANES)).generate_state(4 * LANES, dtype=np.uint64).reshape(4, LANES)
    for lane in range(LANES):
        if not words[:, lane].any():
            words[0, lane] = 1
    return np.concatenate([words, np.zeros((1, LANES), dtype=np.uint64)])


@inner
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@inner
def _step(s0, s1, s2, s3):
    """xoshiro256** on a state held in registers: (next 64 random bits, new state)."""
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@inner
def _unit(bits):
    """Uniform in [0, 1) from the top 53 of 64 random bits."""
    return np.float64(bits >> np.uint64(11)) * (1.0 / 9007199254740992.0)


ZIG_BITS = 10
"""log2 of the ziggurat's layers. With 1024 layers 0.43 % of proposals fail the rectangle test
(1.5 % with 256): a block with a failed one leaves the vectorised loop for the wedge or tail
test, which costs tens of ns, so with 256 layers half of a draw's time went there. The word
still holds the layer, the sign and 52 bits of magnitude (10 + 1 + 52 <= 64)."""
_ZIG_R = 4.038849846109504
"""The base strip's edge r for 1024 layers; with v below, the layers close at f(0) = 1
(bisection on r of Marsaglia-Tsang's recurrence, which for 256 layers gives 3.6541528853610088)."""
_ZIG_V = 0.0012263246463530893
"""The area of every layer (the base strip's: r·f(r) plus the tail beyond r, f unnormalised)."""


def _ziggurat_tables(layers: int = 1 << ZIG_BITS, r: float = _ZIG_R, v: float = _ZIG_V):
    """Marsaglia-Tsang ziggurat tables for N(0, 1) with ``layers`` layers and 52-bit magnitudes
    (the layout numpy's ``standard_normal`` uses): ``ki`` acceptance bounds, ``wi`` scales,
    ``fi`` densities."""
    m = float(1 << 52)
    ki = np.zeros(layers, dtype=np.uint64)
    wi = np.zeros(layers)
    fi = np.zeros(layers)
    dn = tn = r
    q = v / np.exp(-0.5 * dn * dn)
    ki[0] = np.uint64((dn / q) * m)
    wi[0] = q / m
    wi[-1] = dn / m
    fi[0] = 1.0
    fi[-1] = np.exp(-0.5 * dn * dn)
    for i in range(layers - 2, 0, -1):
        dn = np.sqrt(-2.0 * np.log(v / dn + np.exp(-0.5 * dn * dn)))
        ki[i + 1] = np.uint64((dn / tn) * m)
        tn = dn
        fi[i] = np.exp(-0.5 * dn * dn)
        wi[i] = dn / m
    return ki, wi, fi


_ZIG_KI, _ZIG_WI, _ZIG_FI = _ziggurat_tables()


@inner
def _proposal(r):
    """The ziggurat's proposal from one 64-bit word: (x, layer, |x| in 2^-52 units, whether the
    rectangle test accepts it, as 99.6 % of proposals are)."""
    idx = np.int64(r & np.uint64((1 << ZIG_BITS) - 1))
    r >>= np.uint64(ZIG_BITS)
    rabs = (r >> _ONE) & np.uint64(0x000F_FFFF_FFFF_FFFF)
    x = np.float64(rabs) * _ZIG_WI[idx]
    x = -x if (r & _ONE) == _ONE else x
    return x, idx, rabs, rabs < _ZIG_KI[idx]


@inner
def _settle(x, idx, rabs, s0, s1, s2, s3):
    """A proposal the rectangle test rejected: the base strip's tail or the wedge test, with
    fresh words. (accepted, x, new state); a refused proposal starts the draw again."""
    if idx == 0:  # the base strip's tail beyond r
        while True:
            u, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
            xx = -np.log1p(-_unit(u)) / _ZIG_R
            u, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
            yy = -np.log1p(-_unit(u))
            if yy + yy > xx * xx:
                x = -(_ZIG_R + xx) if ((rabs >> np.uint64(8)) & _ONE) == _ONE else _ZIG_R + xx
                return True, x, s0, s1, s2, s3
    u, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
    ok = (_ZIG_FI[idx - 1] - _ZIG_FI[idx]) * _unit(u) + _ZIG_FI[idx] < np.exp(-0.5 * x * x)
    return ok, x, s0, s1, s2, s3


@inner
def _ziggurat(s0, s1, s2, s3):
    """One standard normal draw by the ziggurat method (exact up to floating point; about 99% of
    draws cost one 64-bit word and one multiply): (x, new state)."""
    while True:
        r, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
        x, idx, rabs, ok = _proposal(r)
        if ok:
            return x, s0, s1, s2, s3
        ok, x, s0, s1, s2, s3 = _settle(x, idx, rabs, s0, s1, s2, s3)
        if ok:
            return x, s0, s1, s2, s3


@hot
def fill_normal(s, out, sigma):
    """``out[:] = N(0, sigma^2)`` draws, in place, into a 1-D contiguous array (ziggurat), from a
    ``make_lanes`` state. Per block of LANES draws, one step of every lane and the rectangle test
    run in one loop the compiler vectorises (a rejected proposal leaves its word in ``s[4]``, an
    accepted one 0, which no rejected word is); in a block with a rejected one (about 0.43 % of
    proposals, a quarter of the blocks) a second vectorised loop makes a mask of them, and they
    are completed lane by lane from its set bits, exactly as ``_ziggurat`` does, with fresh
    words from lane 0. Every word is used once; the last partial block comes from lane 0
    alone. Written for the vectoriser: no reshape, no call and no step-range loop around the lane
    loop (each of them stops it: 2.5x slower)."""
    n = out.size
    full = n - n % LANES
    a0, a1, a2, a3, w = s[0], s[1], s[2], s[3], s[4]
    for block in range(full // LANES):
        o = block * LANES
        rejected = np.uint64(0)
        for lane in range(LANES):
            s0 = a0[lane]
            s1 = a1[lane]
            s2 = a2[lane]
            s3 = a3[lane]
            r, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
            a0[lane] = s0
            a1[lane] = s1
            a2[lane] = s2
            a3[lane] = s3
            x, idx, rabs, ok = _proposal(r)
            out[o + lane] = sigma * x
            kept = np.uint64(0) if ok else r
            w[lane] = kept
            rejected |= kept
        if rejected:
            mask = np.uint64(0)
            for lane in range(LANES):
                mask |= np.uint64(0 if w[lane] == 0 else 1) << np.uint64(lane)
            s0, s1, s2, s3 = a0[0], a1[0], a2[0], a3[0]
            while mask:
                lane = trailing_zeros(mask)
                mask &= mask - _ONE
                x, idx, rabs, ok = _proposal(w[lane])
                ok, x, s0, s1, s2, s3 = _settle(x, idx, rabs, s0, s1, s2, s3)
                if not ok:
                    x, s0, s1, s2, s3 = _ziggurat(s0, s1, s2, s3)
                out[o + lane] = sigma * x
            a0[0], a1[0], a2[0], a3[0] = s0, s1, s2, s3
    s0, s1, s2, s3 = a0[0], a1[0], a2[0], a3[0]
    for i in range(full, n):
        x, s0, s1, s2, s3 = _ziggurat(s0, s1, s2, s3)
        out[i] = sigma * x
    a0[0], a1[0], a2[0], a3[0] = s0, s1, s2, s3


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@inner
def add_normal_stream(key, a, b, c, out, sigma):
    """``out += N(0, sigma^2)`` draws of stream ``(a, b, c)`` of the generator keyed by ``key``
    (a ``make_rng`` state): a xoshiro256** state seeded by splitmix64 from the key and the three
    numbers. The same key and stream give the same draws, whenever they are made."""
    h = mix64(key[0] ^ np.uint64(a))
    h = mix64(h ^ key[1] ^ np.uint64(b))
    h = mix64(h ^ key[2] ^ np.uint64(c))
    s0 = mix64(h + _GOLDEN) ^ key[3]
    s1 = mix64(h + _GOLDEN * np.uint64(2))
    s2 = mix64(h + _GOLDEN * np.uint64(3))
    s3 = mix64(h + _GOLDEN * np.uint64(4))
    if s0 == 0 and s1 == 0 and s2 == 0 and s3 == 0:
        s0 = _ONE
    flat = out.reshape(-1)
    for i in range(flat.size):
        x, s0, s1, s2, s3 = _ziggurat(s0, s1, s2, s3)
        flat[i] += sigma * x


def on_grid(estimates) -> np.ndarray:
    """Released estimates that carry this generator's Gaussian noise, rounded to whole updates.

    A float64 sum ``count + noise`` keeps low-order bits that depend on the exact count: the set
    of doubles a count can produce differs from its neighbour's (Mironov 2012, "On significance of
    the least significant bits for differential privacy"). Counts are whole updates, so one update
    is the public granularity; rounding is post-processing and costs no privacy. Rounded half to
    even (``np.rint``), as float64 integers (exact below 2^53)."""
    return np.rint(np.asarray(estimates, dtype=np.float64))
