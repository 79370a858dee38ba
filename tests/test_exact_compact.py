"""The exact baseline's compact IPv4 table (engine/baselines/quotient.py): counts against a dict
through many in-place doublings, its layout word by word, growth that never holds two tables,
growth forced by displacement, and reads from another thread while it grows."""
import threading
import tracemalloc

import numpy as np

from dptop.engine.baselines import quotient as qt
from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.core.keys import IPV4_MAPPED, KEY_DTYPE


def _v4(ips) -> np.ndarray:
    keys = np.zeros((len(ips), 2), dtype=KEY_DTYPE)
    keys[:, 1] = np.uint64(IPV4_MAPPED) | np.asarray(ips, dtype=np.uint64)
    return keys


def _layout(ec: ExactCounter) -> np.ndarray:
    """Check every word of the compact table; return the addresses it holds."""
    slots = ec.slots.astype(np.uint64)
    assert len(slots) == (1 << ec.bits) + qt.PAD and slots[-1] == 0
    occupied = np.flatnonzero(slots)
    words = slots[occupied]
    d = (words >> np.uint64(ec.bits - qt.D_BITS)) & np.uint64(qt.D_MAX)
    homes = occupied.astype(np.uint64) - d
    assert (homes < (1 << ec.bits)).all()
    # every position between a home and its word is occupied (the probe reaches it)
    run = np.diff(occupied) == 1
    starts = np.r_[0, np.flatnonzero(~run) + 1]
    run_start = np.repeat(occupied[starts], np.diff(np.r_[starts, len(occupied)]))
    assert (homes >= run_start.astype(np.uint64)).all()
    assert (words & np.uint64(qt.saturated(ec.bits)) >= 1).all()  # a stored field is never 0 (0 is empty)
    ips, counts = qt.entries(ec.slots, ec.bits, ec.seed, ec.heavy_x, ec.heavy_n, ec.heavy > 0)
    assert (counts >= 0).all()
    return ips


def test_counts_match_a_dict_through_many_doublings():
    rng = np.random.default_rng(21)
    ips = np.concatenate([rng.integers(0, 1 << 32, 150_000, dtype=np.uint64),  # spread over the space
                          np.arange(10 << 24, (10 << 24) + 50_000, dtype=np.uint64),  # one dense block
                          rng.zipf(1.3, 100_000).astype(np.uint64) % np.uint64(1 << 32),  # heavy sources
                          np.array([0, 0xFFFF_FFFF], dtype=np.uint64)])
    rng.shuffle(ips)
    weights = rng.integers(1, 1500, len(ips))
    weights[rng.random(len(ips)) < 0.01] = 0  # a packet of no bytes still makes its source seen
    ec = ExactCounter(capacity=8)
    for i in range(0, len(ips), 9_999):
        ec.add(_v4(ips[i:i + 9_999]), weights[i:i + 9_999])
    truth: dict = {}
    for ip, w in zip(ips.tolist(), weights.tolist()):
        truth[ip] = truth.get(ip, 0) + w
    assert ec.bits > qt.MIN_BITS + 5 and ec.heavy > 0
    held = _layout(ec)
    assert sorted(held.tolist()) == sorted(truth)
    keys, counts = ec.items()
    assert {int(lo) & 0xFFFF_FFFF: int(c) for lo, c in zip(keys[:, 1], counts)} == truth
    assert ec.size == len(truth) and ec.total == sum(truth.values())
    for ip in list(truth)[:300] + [0, 0xFFFF_FFFF]:
        assert ec.count_of(0, IPV4_MAPPED | ip) == truth[ip]
    assert ec.count_of(0, IPV4_MAPPED | 0x0102_0304) == truth.get(0x0102_0304, 0)
    expect = sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert [(it.lo & 0xFFFF_FFFF, it.estimate) for it in ec.top(20)] == [(ip, float(c)) for ip, c in expect]


def test_growth_never_holds_two_tables():
    """Doubling a 2^20-home table (4 MiB) into 2^21 holds the new size once, not old + new: a
    copying growth peaks at 12 MiB here."""
    limit = 5 << 17  # the load at which a table of 2^20 homes grows
    ips = np.random.default_rng(3).permutation(np.arange(1 << 22, dtype=np.uint64))[:limit + 1000]
    first, batch = _v4(ips[:limit - 1000]), _v4(ips[limit - 1000:])
    tracemalloc.start()
    try:
        ec = ExactCounter(capacity=1 << 20)
        ec.add(first)
        assert ec.bits == 20
        tracemalloc.reset_peak()
        ec.add(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ec.bits == 21 and ec.size == limit + 1000
    new_table = ec.slots.nbytes
    assert peak < new_table + (1 << 20), (peak, new_table)
    _layout(ec)


def test_a_cluster_longer_than_a_displacement_grows_the_table():
    """300 addresses crafted (with the seed known) to share one home at 2^12 homes: the 257th
    cannot lie within D_MAX of it, so the table doubles (until the cluster spreads) far below
    the load that grows it, every address still counted."""
    ec = ExactCounter(capacity=8)
    assert ec.bits == qt.MIN_BITS
    rest = 32 - qt.MIN_BITS
    xs = (np.uint64(5) << np.uint64(rest)) | (np.arange(300, dtype=np.uint64) << np.uint64(rest - 9))
    ips = np.array([qt.unscramble(x, ec.seed) for x in xs], dtype=np.uint64)
    assert all(qt.scramble(ip, ec.seed) >> rest == 5 for ip in ips)
    ec.add(_v4(ips))
    assert ec.bits > qt.MIN_BITS and ec.size == 300 < 5 << (ec.bits - 3 - 6)
    assert sorted(_layout(ec).tolist()) == sorted(ips.tolist())
    assert all(ec.count_of(0, IPV4_MAPPED | int(ip)) == 1 for ip in ips)


def test_reads_from_another_thread_while_the_table_grows():
    """The terminal view reads an exact lane's top list while its thread counts: growth
    reallocates the table in place, so reads and counting take turns (a read into a moved table
    would crash the process)."""
    ec = ExactCounter(capacity=8)
    ips = np.arange(1 << 21, dtype=np.uint64)
    stop = threading.Event()
    seen = []

    def read():
        while not stop.is_set():
            seen.append(len(ec.top(5)))
            ec.count_of(0, IPV4_MAPPED | 7)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(0, len(ips), 1 << 14):
            ec.add(_v4(ips[i:i + (1 << 14)]))
    finally:
        stop.set()
        reader.join()
    assert ec.size == len(ips) and ec.bits == 22 and len(seen) > 0
    assert ec.count_of(0, IPV4_MAPPED | 7) == 1
