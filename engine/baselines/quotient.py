"""IPv4 counts in four bytes a slot: the compact table of the exact baseline (``exact.py``).

A bijective scramble of the 32-bit address, ``x = scramble(ip)``, splits into a *home*, its top
``bits`` bits, and a *remainder*, the other ``32 - bits``. The table has ``2^bits`` homes and
``PAD`` positions after the last one (so a probe never wraps), and keeps each address in one
``uint32`` word:

    [ remainder: 32 - bits | displacement (position - home): 8 bits | count: bits - 8 ]

Linear probing, first come first served (the heavy sources, seen early, sit at their homes),
below load 5/8, where the longest displacement of 2^25 homes stays near 180: eight bits hold it,
and the home of a word is its position minus its displacement, so the address is rebuilt from the
word and where it lies (quotienting). A count that would pass its field (``saturated(bits)``)
keeps 1 there and carries the rest to a small *heavy* table of (scrambled address, int64 count):
a source's count is its field plus its carry, a packed count never overflows, and a packet costs
one probe of the compact table (a carry one more, every 2^(bits-8) packets of a source at most).
0 is an empty slot (a stored count is at least 1).

Growth doubles the homes in place (``regrow``): the array is reallocated (its pages move, they are
not copied) and rehashed from the last position down. An entry's new home (its old home with one
more bit of the scramble) lies at or after its old position, except for the few entries whose home
is below their displacement: those are set aside and put back at the end. So growing never holds
two tables, and 2^24 addresses take 2^25 words (128 MiB).
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.jit import hot, inner, kernel
from dptop.engine.core.keys import IPV4_MAPPED

D_BITS = 8
D_MAX = (1 << D_BITS) - 1
"""The largest displacement a word holds; an insertion that would pass it grows the table."""
PAD = D_MAX + 1
"""Positions after the last home: an entry lies at most ``D_MAX`` after its home, so the last
position of the array is always empty and every probe ends inside it."""
MIN_BITS = 12
MAX_BITS = 31
"""Homes of the largest table (one remainder bit left)."""
GROW, GROW_HEAVY, DONE = -1, -2, -3  # why ``count_ipv4`` stopped
HEAVY_EMPTY = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
"""An empty slot of the heavy table (a scrambled address has 32 bits)."""
STASH = 1024
"""Entries ``regrow`` can set aside (at most 2·D_MAX are, plus any it could not place)."""


_M32 = np.uint64(0xFFFF_FFFF)
_C1 = np.uint64(0x85EBCA6B)  # the murmur3 finaliser's multipliers, odd: invertible mod 2^32
_C2 = np.uint64(0xC2B2AE35)
_C1_INV = np.uint64(pow(0x85EBCA6B, -1, 1 << 32))
_C2_INV = np.uint64(pow(0xC2B2AE35, -1, 1 << 32))
_S13, _S16, _S26, _S32 = np.uint64(13), np.uint64(16), np.uint64(26), np.uint64(32)
_DMASK = np.uint64(D_MAX)
_ONE = np.uint64(1)
_TAG = np.uint64(IPV4_MAPPED >> 32)  # the high 32 bits of an IPv4-mapped key's low word


@inner
def scramble(ip, seed):
    """A bijection of 32-bit ``ip`` (the murmur3 finaliser of ``ip ^ seed``)."""
    x = ip ^ seed
    x ^= x >> _S16
    x = (x * _C1) & _M32
    x ^= x >> _S13
    x = (x * _C2) & _M32
    return x ^ (x >> _S16)


@inner
def unscramble(x, seed):
    """The inverse of ``scramble``."""
    x ^= x >> _S16
    x = (x * _C2_INV) & _M32
    x ^= (x >> _S13) ^ (x >> _S26)
    x = (x * _C1_INV) & _M32
    x ^= x >> _S16
    return x ^ seed


@inner
def saturated(bits):
    """The count field's largest value (all ones)."""
    return (1 << (bits - D_BITS)) - 1


@inner
def _find(slots, bits, x):
    """(position, displacement, found) of scrambled address ``x``: its word, or the empty slot
    where it goes."""
    uc = np.uint64(bits - D_BITS)
    rest = np.uint64(32 - bits)
    tag = (x & ((_ONE << rest) - _ONE)) << np.uint64(D_BITS)  # the word's top bits at displacement 0
    p = x >> rest
    dist = np.uint64(0)
    while True:
        s = np.uint64(slots[p])
        if s == 0:
            return p, dist, False
        if s >> uc == tag | dist:
            return p, dist, True
        p += _ONE
        dist += _ONE


@inner
def _insert(slots, bits, p, dist, x, count):
    """Write ``x`` with ``count`` at the empty slot ``p`` (from ``_find``); False, writing
    nothing, when its displacement would pass ``D_MAX``."""
    if dist > _DMASK:
        return False
    rest = np.uint64(32 - bits)
    slots[p] = ((x & ((_ONE << rest) - _ONE)) << np.uint64(bits)) | (dist << np.uint64(bits - D_BITS)) | count
    return True


@inner
def heavy_slot(heavy_x, x):
    """Position of scrambled address ``x`` in the heavy table, or of the empty slot where it goes
    (linear probing from its top bits; the caller keeps the load at most 1/2)."""
    mask = np.uint64(len(heavy_x) - 1)
    p = (x * np.uint64(len(heavy_x))) >> _S32  # the top bits of x
    while True:
        k = heavy_x[p]
        if k == x or k == HEAVY_EMPTY:
            return p
        p = (p + _ONE) & mask


@kernel
def regrow_heavy(old_x, old_n, new_x, new_n):
    for i in range(len(old_x)):
        if old_x[i] != HEAVY_EMPTY:
            p = heavy_slot(new_x, old_x[i])
            new_x[p] = old_x[i]
            new_n[p] = old_n[i]


@hot
def count_ipv4(slots, bits, seed, size, keys, weights, start, other, n_other, xs, heavy_x, heavy_n, heavy_size):
    """Count ``keys[start:]`` (``weights[i]`` each, 1 when ``weights`` is empty): IPv4-mapped keys
    in ``slots``, what overflows a field carried to the heavy table; the indices of other keys go to
    ``other[n_other:]``. Returns (index reached, size, n_other, heavy_size, why): ``why`` is DONE,
    GROW (grow ``slots``, then resume at the index) or GROW_HEAVY (grow the heavy table, then
    resume). ``xs``: scratch for ``len(xs) - 1`` scrambled keys at a time."""
    weighted = len(weights) > 0
    limit = 5 << (bits - 3)  # grow past load 5/8 (the module's docstring)
    heavy_limit = len(heavy_x) // 2
    rest = np.uint64(32 - bits)
    sat = np.uint64(saturated(bits))
    chunk = len(xs) - 1
    for c in range(start, len(keys), chunk):
        stop = min(len(keys), c + chunk)
        for i in range(c, stop):  # the chunk's scrambles first: a loop the compiler vectorises
            xs[i - c] = scramble(keys[i, 1] & _M32, seed)
        touched = np.uint64(0)  # then a read of each home word: independent loads whose cache
        for i in range(c, stop):  # misses overlap, so the probes below find them in the cache
            touched ^= np.uint64(slots[xs[i - c] >> rest])
        xs[chunk] = touched  # kept, so the compiler keeps the loads
        for i in range(c, stop):
            hi = keys[i, 0]
            lo = keys[i, 1]
            if hi != 0 or (lo >> _S32) != _TAG:
                other[n_other] = i
                n_other += 1
                continue
            x = xs[i - c]
            w = np.uint64(weights[i]) if weighted else _ONE
            p, dist, hit = _find(slots, bits, x)
            count = np.uint64(slots[p]) & sat if hit else np.uint64(0)
            if count + w <= sat and (hit or w > 0):  # a new key of weight 0 keeps 1 and carries -1
                if hit:
                    slots[p] = np.uint64(slots[p]) + w
                    continue
                if size >= limit or not _insert(slots, bits, p, dist, x, w):
                    return i, size, n_other, heavy_size, GROW
                size += 1
                continue
            # the field would overflow (or a new count is 0): it keeps 1, the rest is carried
            q = heavy_slot(heavy_x, x)
            if heavy_x[q] != x and heavy_size >= heavy_limit:
                return i, size, n_other, heavy_size, GROW_HEAVY
            if hit:
                slots[p] = np.uint64(slots[p]) - count + _ONE
            else:
                if size >= limit or not _insert(slots, bits, p, dist, x, _ONE):
                    return i, size, n_other, heavy_size, GROW
                size += 1
            if heavy_x[q] != x:
                heavy_x[q] = x
                heavy_n[q] = 0
                heavy_size += 1
            heavy_n[q] += np.int64(count + w - _ONE)
    return len(keys), size, n_other, heavy_size, DONE


@inner
def _place(slots, bits, x, count):
    p, dist, _ = _find(slots, bits, x)
    return _insert(slots, bits, p, dist, x, count)


@kernel
def regrow(slots, bits, stash_x, stash_c, pending):
    """Rehash the table of ``2^bits`` homes in ``slots``, already enlarged (zeros after the old
    end) to ``2^(bits+1) + PAD`` positions, into the doubled one; then place the ``pending``
    entries of the stash. Returns the entries it could not place, left at the stash's start
    (-1 when the stash overflowed)."""
    rest = np.uint64(32 - bits)
    n = pending
    for p in range((1 << bits) + PAD - 1, -1, -1):
        if slots[p] == 0:
            continue
        x, count = scrambled(slots, bits, p)
        slots[p] = 0
        if np.int64(x >> (rest - _ONE)) >= p and _place(slots, bits + 1, x, count):
            continue  # its new home lies at or after p: only moved entries are there
        if n == len(stash_x):
            return -1
        stash_x[n] = x
        stash_c[n] = count
        n += 1
    left = 0
    for j in range(n):
        if not _place(slots, bits + 1, stash_x[j], stash_c[j]):
            stash_x[left] = stash_x[j]
            stash_c[left] = stash_c[j]
            left += 1
    return left


@inner
def carried(heavy_x, heavy_n, x):
    """What the heavy table holds of scrambled address ``x`` (0 when nothing)."""
    q = heavy_slot(heavy_x, x)
    return heavy_n[q] if heavy_x[q] == x else np.int64(0)


@kernel
def count_of(slots, bits, seed, heavy_x, heavy_n, ip):
    """The count of address ``ip`` (0 when absent)."""
    x = scramble(ip, seed)
    p, _, hit = _find(slots, bits, x)
    if not hit:
        return np.int64(0)
    return np.int64(np.uint64(slots[p]) & np.uint64(saturated(bits))) + carried(heavy_x, heavy_n, x)


@inner
def scrambled(slots, bits, p):
    """(scrambled address, count field) of the word at position ``p`` (occupied): its home is the
    position minus its displacement, its remainder the word's top bits."""
    s = np.uint64(slots[p])
    x = ((np.uint64(p) - ((s >> np.uint64(bits - D_BITS)) & _DMASK)) << np.uint64(32 - bits)) | (s >> np.uint64(bits))
    return x, s & np.uint64(saturated(bits))


@inner
def entry(slots, bits, seed, heavy_x, heavy_n, heavy, p):
    """(address, count) of the word at position ``p`` (occupied); ``heavy``: whether any count
    was carried (else the heavy table is not probed)."""
    x, field = scrambled(slots, bits, p)
    count = np.int64(field) + carried(heavy_x, heavy_n, x) if heavy else np.int64(field)
    return unscramble(x, seed), count


@kernel
def entries(slots, bits, seed, heavy_x, heavy_n, heavy):
    """(addresses, counts) of every entry (``heavy``: as in ``entry``)."""
    n = 0
    for p in range(len(slots)):
        if slots[p] != 0:
            n += 1
    ips = np.empty(n, np.uint64)
    counts = np.empty(n, np.int64)
    n = 0
    for p in range(len(slots)):
        if slots[p] != 0:
            ips[n], counts[n] = entry(slots, bits, seed, heavy_x, heavy_n, heavy, p)
            n += 1
    return ips, counts
