"""Fast bulk noise for per-update mechanisms (GaussBM, Private CountMin cells), in numba.

DEVELOPERS.md allows bulk per-update noise from a fast generator seeded from the OS; release-time
noise on released counts uses ``dptop.engine.privacy.noise`` (CSPRNG, exact discrete samplers) instead. The
generator is xoshiro256** with an explicit ``uint64[4]`` state array, so each algorithm owns its
stream (no hidden per-thread numba state) and a test can pass a fixed seed. ``fill_normal`` draws
normals by the Marsaglia-Tsang ziggurat. ``add_normal_stream`` draws from one of many independent
streams of a keyed generator (a state per stream, seeded by splitmix64 from the key and the stream's
numbers), so a structure can draw a part's noise whenever it first needs it and get the same values.
"""
from __future__ import annotations

import os

import numpy as np

from dptop.engine.core.jit import inner, kernel
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


def _ziggurat_tables(layers: int = 256, r: float = 3.6541528853610088, v: float = 0.00492867323399):
    """Marsaglia-Tsang ziggurat tables for N(0, 1) with 256 layers and 52-bit magnitudes (the layout
    numpy's ``standard_normal`` uses): ``ki`` acceptance bounds, ``wi`` scales, ``fi`` densities."""
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
_ZIG_R = 3.6541528853610088


@inner
def _ziggurat(s0, s1, s2, s3):
    """One standard normal draw by the ziggurat method (exact up to floating point; about 99% of
    draws cost one 64-bit word and one multiply): (x, new state)."""
    while True:
        r, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
        idx = np.int64(r & np.uint64(0xFF))
        r >>= np.uint64(8)
        negative = (r & _ONE) == _ONE
        rabs = (r >> _ONE) & np.uint64(0x000F_FFFF_FFFF_FFFF)
        x = np.float64(rabs) * _ZIG_WI[idx]
        if negative:
            x = -x
        if rabs < _ZIG_KI[idx]:
            return x, s0, s1, s2, s3
        if idx == 0:  # the base strip's tail beyond r
            while True:
                u, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
                xx = -np.log1p(-_unit(u)) / _ZIG_R
                u, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
                yy = -np.log1p(-_unit(u))
                if yy + yy > xx * xx:
                    x = -(_ZIG_R + xx) if ((rabs >> np.uint64(8)) & _ONE) == _ONE else _ZIG_R + xx
                    return x, s0, s1, s2, s3
        u, s0, s1, s2, s3 = _step(s0, s1, s2, s3)
        if (_ZIG_FI[idx - 1] - _ZIG_FI[idx]) * _unit(u) + _ZIG_FI[idx] < np.exp(-0.5 * x * x):
            return x, s0, s1, s2, s3


@kernel
def fill_normal(s, out, sigma):
    """``out[...] = N(0, sigma^2)`` draws, in place, for any contiguous array shape (ziggurat).
    The generator state lives in registers for the loop (about 1.5x faster than in ``s``)."""
    flat = out.reshape(-1)
    s0, s1, s2, s3 = s[0], s[1], s[2], s[3]
    for i in range(flat.size):
        x, s0, s1, s2, s3 = _ziggurat(s0, s1, s2, s3)
        flat[i] = sigma * x
    s[0], s[1], s[2], s[3] = s0, s1, s2, s3


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
