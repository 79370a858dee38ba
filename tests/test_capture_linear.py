"""Reading a capture is linear in its size whatever its block structure: adversarial pcapng files
(hundreds of thousands of interface, section or tiny blocks; blocks that each need a warning;
many gzip members) are generated here and read within a time bound per megabyte."""
from __future__ import annotations

import gzip
import time
import zlib

import pytest

from dptop.capture.pcap import MAX_WARNINGS, read_capture
from dptop.engine.core.keys import addresses_from_keys
from tests.capture_files import block, epb, ether, idb, ipv4, shb

SECONDS_PER_MB = 1.0
"""Bound on reading time per megabyte (uncompressed) of any block structure; the walk itself
takes a few ms per MB, blocks left to Python (those that warn) about 0.3 s per MB on a loaded
2-core machine."""

N = 1 << 16
FRAME = epb(0, 1, ether(0x0800, ipv4("10.0.0.1")))

STRUCTURES = {
    "interfaces": lambda: shb() + idb(1) * N + FRAME,
    "interfaces of mixed link types": lambda: shb() + (idb(1) + idb(147)) * (N // 2) + FRAME,
    "sections": lambda: (shb() + idb(1)) * N + FRAME,
    "sections of both byte orders": lambda: (shb() + idb(1) + shb(True) + idb(1, big=True)) * (N // 2)
    + shb() + idb(1) + FRAME,
    "tiny unknown blocks": lambda: shb() + idb(1) + block(99, b"") * N + FRAME,
    "interfaces that each warn (resolution)": lambda: shb() + idb(1, tsresol=40) * N + FRAME,
    "interfaces that each warn (offset)": lambda: shb() + idb(1, tsoffset=10**12) * N + FRAME,
}


def members(data: bytes, size: int) -> bytes:
    """``data`` as a gzip file of one member per ``size`` bytes."""
    return b"".join(gzip.compress(data[i:i + size], compresslevel=1) for i in range(0, len(data), size))


@pytest.mark.parametrize("packing", ["plain", "gzip members of 4 KB", "gzip members of 64 B"])
@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_every_block_structure_reads_in_linear_time(tmp_path, structure, packing):
    data = STRUCTURES[structure]()
    path = tmp_path / ("c.pcapng" + ("" if packing == "plain" else ".gz"))
    path.write_bytes(data if packing == "plain" else members(data, 4096 if "4 KB" in packing else 64))
    read_capture(path)  # warm (kernels and page cache)
    t0 = time.perf_counter()
    batch, stats = read_capture(path)
    seconds = time.perf_counter() - t0
    mb = len(data) / 1e6
    assert addresses_from_keys(batch.keys) == ["10.0.0.1"]
    assert len(stats.warnings) <= MAX_WARNINGS + 1
    assert seconds < SECONDS_PER_MB * mb, f"{structure}, {packing}: {seconds:.2f} s for {mb:.1f} MB"


def test_a_50_kb_gzip_of_a_million_interface_blocks_reads_in_seconds(tmp_path):
    """The acceptance case: about 50 KB compressed, 20 MB and 2^20 interface blocks inside."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    path = tmp_path / "idb.pcapng.gz"
    path.write_bytes(z.compress(shb()) + z.compress(idb(1) * (1 << 20)) + z.compress(FRAME) + z.flush())
    assert path.stat().st_size < 60_000
    t0 = time.perf_counter()
    batch, stats = read_capture(path)
    assert time.perf_counter() - t0 < 5
    assert addresses_from_keys(batch.keys) == ["10.0.0.1"] and stats.warnings == []


def test_warnings_past_the_cap_are_counted_in_one_line(tmp_path):
    path = tmp_path / "w.pcapng"
    path.write_bytes(shb() + idb(1, tsresol=40) * (MAX_WARNINGS + 10) + FRAME)
    _, stats = read_capture(path)
    assert len(stats.warnings) == MAX_WARNINGS + 1
    assert stats.warnings[-1] == "10 more warnings not shown"
    assert "interface 0 has timestamp resolution 10^-40" in stats.warnings[0]
