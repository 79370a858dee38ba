"""Fast bulk noise for per-update mechanisms (GaussBM, Private CountMin cells), in numba.

DEVELOPERS.md allows bulk per-update noise from a fast generator seeded from the OS; release-time
noise on released counts uses ``engine.noise`` (CSPRNG, exact discrete samplers) instead. The
generator is xoshiro256** with an explicit ``uint64[4]`` state array, so each algorithm owns its
stream (no hidden per-thread numba state) and a test can pass a fixed seed. Normals come from the
Marsaglia polar method on 53-bit uniforms.
"""
from __future__ import annotations

import os

import numpy as np

from engine.jit import kernel

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


@kernel
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@kernel
def next_u64(s):
    """xoshiro256**: next 64 random bits; advances ``s`` in place."""
    result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
    t = s[1] << np.uint64(17)
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


@kernel
def uniform(s):
    """Uniform in [0, 1) with 53 random bits."""
    return np.float64(next_u64(s) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@kernel
def normal(s):
    """One standard normal draw (Marsaglia polar method)."""
    while True:
        u = 2.0 * uniform(s) - 1.0
        v = 2.0 * uniform(s) - 1.0
        q = u * u + v * v
        if 0.0 < q < 1.0:
            return u * np.sqrt(-2.0 * np.log(q) / q)


@kernel
def fill_normal(s, out, sigma):
    """``out[...] = N(0, sigma^2)`` draws, in place, for any array shape."""
    flat = out.reshape(-1)
    for i in range(flat.size):
        flat[i] = sigma * normal(s)
