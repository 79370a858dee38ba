"""The kernels a lane reaches after its first batch, compiled (or loaded from numba's cache) on
scratch instances that see no data (so no privacy cost).

Numba compiles a kernel once per argument types, and an algorithm's own warm-up
(``Algorithm.warm_up``) types only what its first batch and live view need: read-only keys of one
kind. Later paths would compile while packets arrive (first use: seconds each): the exact
counter's tables growing past their first size and its heavy sources, the release at an epoch's
end, IPv6 keys, writable keys (as the truth thread and direct callers pass them). A live
capture's lanes can only queue what arrives meanwhile (``lanes.LIVE_QUEUE``), so a live session
reaches these paths before it opens its socket (``sources.warm_live``); ``dptop compile`` puts
them in the cache (dptop.kernels).
"""
from __future__ import annotations

import numpy as np


def keys_of(n: int, writable: bool, ipv6_every: int = 0, repeat: int = 1) -> np.ndarray:
    """``n`` keys of ``n // repeat`` sources (every ``ipv6_every``-th an IPv6 one), read-only as a
    capture's batches are or writable as arrays built by other callers are."""
    from dptop.engine.core.keys import IPV4_MAPPED, KEY_DTYPE

    ids = np.arange(n, dtype=np.uint64) // np.uint64(repeat)
    keys = np.zeros((n, 2), dtype=KEY_DTYPE)
    keys[:, 1] = np.uint64(IPV4_MAPPED | 0x0A00_0000) + ids
    if ipv6_every:
        keys[::ipv6_every, 0] = np.uint64(0x2001_0DB8 << 32)
    keys.flags.writeable = writable
    return keys


def exact_paths() -> None:
    """The exact counter's paths its first batch leaves cold: its tables growing, heavy sources,
    IPv6 keys, byte weights and point queries (the truth beside every session, or the ``exact``
    lane, reaches them as traffic grows)."""
    from dptop.engine.baselines.exact import ExactCounter

    for writable in (False, True):
        counter = ExactCounter()
        counter.add(keys_of(40 * 200, writable, repeat=40))  # sources past the count field: heavy, grown
        counter.add(keys_of(1 << 14, writable, ipv6_every=3))  # past load 5/8 of both tables: regrown
        keys = keys_of(64, writable, ipv6_every=2)
        counter.add(keys, np.full(len(keys), 1500, dtype=np.int64))
        for hi, lo in keys[:2].tolist():
            counter.count_of(hi, lo)
        counter.top(5)
        counter.items()


def other_paths(scratch) -> None:
    """What ``Algorithm.warm_up`` leaves to first use, on ``scratch`` (an algorithm instance no
    data reaches): IPv6 keys with their destinations, writable keys, the live view and the release;
    on a public clock (time epochs), a batch of its first cell and the tick that closes it."""
    from dptop.engine.core.keys import KeyBatch, tick

    n = 64
    keys = keys_of(n, writable=False, ipv6_every=5, repeat=7)
    clocked = scratch.settings.epoch_seconds is not None
    scratch.consume(KeyBatch(keys, np.zeros(n, np.int64), keys[::-1], np.full(n, 64, np.uint32),
                             0 if clocked else None, np.zeros(n, np.uint32)))
    if clocked:
        scratch.consume(tick(1))  # the first cell's release, as the clock's close makes it
    if not scratch.address_keys:  # those count (source, destination) pairs, built from a batch
        scratch.update(keys_of(n, writable=True, ipv6_every=5, repeat=7))
    scratch.live()
    scratch.finish()


def warm_lanes(algorithms) -> None:
    """Every path of the exact counter and of each of ``algorithms`` (a session's lanes' own
    instances, which this never touches: each gets a scratch twin of its settings). A path that
    fails here is left to the lane, which reports its own errors."""
    exact_paths()
    for algorithm in algorithms:
        try:
            other_paths(type(algorithm)(algorithm.settings, algorithm.facts, algorithm.counting))
        except Exception:  # noqa: BLE001 - the lane meets the same error and shows it
            pass
