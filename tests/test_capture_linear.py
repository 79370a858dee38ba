"""Reading a capture is linear in its size whatever its block structure: adversarial pcapng files
(hundreds of thousands of interface, section or tiny blocks; blocks that each need a warning;
many gzip members) are generated here at two sizes, and reading four times the blocks must take
less than eight times as long (linear: four; quadratic: sixteen). The default run reads them plain
and in gzip members of 64 B (tests/test_capture_linear_gzip.py), the two ends; members of 4 KB run
under ``make test-slow``. Ratios of times measured
side by side, never seconds, so a busy machine does not fail them."""
from __future__ import annotations

import gc
import gzip
import time
import zlib

import pytest

from dptop.capture.pcap import MAX_WARNINGS, read_capture
from dptop.engine.core.keys import addresses_from_keys
from tests.capture_files import block, epb, ether, idb, ipv4, shb

N = 1 << 16
GROWTH = 8.0
"""Bound on the time ratio when the blocks grow fourfold (linear reading gives about four)."""
FRAME = epb(0, 1, ether(0x0800, ipv4("10.0.0.1")))

STRUCTURES = {
    "interfaces": lambda n: shb() + idb(1) * n + FRAME,
    "interfaces of mixed link types": lambda n: shb() + (idb(1) + idb(147)) * (n // 2) + FRAME,
    "sections": lambda n: (shb() + idb(1)) * n + FRAME,
    "sections of both byte orders": lambda n: (shb() + idb(1) + shb(True) + idb(1, big=True)) * (n // 2)
    + shb() + idb(1) + FRAME,
    "tiny unknown blocks": lambda n: shb() + idb(1) + block(99, b"") * n + FRAME,
    "interfaces that each warn (resolution)": lambda n: shb() + idb(1, tsresol=40) * n + FRAME,
    "interfaces that each warn (offset)": lambda n: shb() + idb(1, tsoffset=10**12) * n + FRAME,
}


BLOCKS = {("sections", "plain"): 1 << 21}
"""Larger sizes for a structure whose N blocks parse in about a millisecond: a read's fixed cost (its output rows,
measured 45 ms on a loaded 2-core machine) would then be all a ratio measured (2^14 sections read
in 1.6 ms once, 2^16 in 31 ms); 2^21 plain sections parse in about as long as that fixed cost."""


def seconds_to_read(path) -> float:
    """One timed read (after the caller's first read warmed kernels and page cache), in CPU seconds
    of this process: the suite's other workers share the cores, and a wall-clock ratio measured
    their bursts (16x for 4x the blocks while another test file started a capture). The collector
    is off while timing: a full collection of the test process's heap landing in one read of a few
    milliseconds measured 9-13x in CI; without it the ratios of every structure stay at 4.6 or below."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        read_capture(path)
        return time.process_time() - t0
    finally:
        gc.enable()


def alternating(paths: dict, rounds: int) -> dict:
    """The best time of each file over ``rounds`` rounds that read every file once, in turn: a stretch
    of contention (the other suite workers, a busy sibling hyperthread) then slows both sizes, not one
    (the small file read first and the large one after measured 9.1x in CI, 3.95x alone)."""
    best = {n: float("inf") for n in paths}
    for _ in range(rounds):
        for n, path in paths.items():
            best[n] = min(best[n], seconds_to_read(path))
    return best


def members(data: bytes, size: int) -> bytes:
    """``data`` as a gzip file of one member per ``size`` bytes."""
    return b"".join(gzip.compress(data[i:i + size], compresslevel=1) for i in range(0, len(data), size))


@pytest.mark.parametrize("packing", ["plain", pytest.param("gzip members of 4 KB", marks=pytest.mark.slow)])
@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_every_block_structure_reads_in_linear_time(tmp_path, structure, packing):
    assert_linear(tmp_path, structure, packing)


def assert_linear(tmp_path, structure: str, packing: str) -> None:
    """Four times the blocks of ``structure`` (``packing``: plain, or gzip members of 4 KB or 64 B)
    read in less than ``GROWTH`` times as long."""
    paths = {}
    big = BLOCKS.get((structure, packing), N)
    for n in (big // 4, big):
        data = STRUCTURES[structure](n)
        path = tmp_path / (f"c{n}.pcapng" + ("" if packing == "plain" else ".gz"))
        path.write_bytes(data if packing == "plain" else members(data, 4096 if "4 KB" in packing else 64))
        batch, stats = read_capture(path)
        assert addresses_from_keys(batch.keys) == ["10.0.0.1"]
        assert len(stats.warnings) <= MAX_WARNINGS + 1
        paths[n] = path
    seconds = alternating(paths, rounds=2)
    if seconds[big] / seconds[big // 4] >= GROWTH:  # another process's burst in some reads: measure once more
        more = alternating(paths, rounds=5)
        seconds = {n: min(seconds[n], more[n]) for n in paths}
    ratio = seconds[big] / seconds[big // 4]
    assert ratio < GROWTH, f"{structure}, {packing}: 4x the blocks took {ratio:.1f}x as long {seconds}"


def gzip_of_interface_blocks(path, n: int):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    path.write_bytes(z.compress(shb()) + z.compress(idb(1) * n) + z.compress(FRAME) + z.flush())
    return path


def test_a_50_kb_gzip_of_a_million_interface_blocks_reads_in_linear_time(tmp_path):
    """The acceptance case: about 50 KB compressed, 20 MB and 2^20 interface blocks inside; it takes
    less than eight times as long as a quarter of it (a ratio, not seconds)."""
    path = gzip_of_interface_blocks(tmp_path / "idb.pcapng.gz", 1 << 20)
    assert path.stat().st_size < 60_000
    batch, stats = read_capture(path)
    assert addresses_from_keys(batch.keys) == ["10.0.0.1"] and stats.warnings == []
    quarter = gzip_of_interface_blocks(tmp_path / "idb4.pcapng.gz", 1 << 18)
    read_capture(quarter)
    seconds = alternating({"all": path, "quarter": quarter}, rounds=3)
    ratio = seconds["all"] / seconds["quarter"]
    assert ratio < GROWTH, (ratio, seconds)


def test_warnings_past_the_cap_are_counted_in_one_line(tmp_path):
    path = tmp_path / "w.pcapng"
    path.write_bytes(shb() + idb(1, tsresol=40) * (MAX_WARNINGS + 10) + FRAME)
    _, stats = read_capture(path)
    assert len(stats.warnings) == MAX_WARNINGS + 1
    assert stats.warnings[-1] == "10 more warnings not shown"
    assert "interface 0 has timestamp resolution 10^-40" in stats.warnings[0]
