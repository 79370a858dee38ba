"""The neighbouring captures of the product conformance matrix (dptop.lab.product_matrix): four
seconds of traffic on a public range starting at ``T0``, and each neighbour kind written beside it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dptop.capture.synth import write_pcap

T0 = 1_700_000_000 * 10**9
SECOND = 10**9
EPOCHS = 4
HEAVY = (0x0A00_0001, 0x0A00_0002, 0x0A00_0003)
LIGHT_HOST = 0x0B00_0007  # a light source whose packets one neighbour removes
QUIET_FROM = 2_500_000_000  # ns into the range: silence after it, where a packet added at the end falls
LATE_PACKET = 3_600_000_000  # the packet added at the end: alone, late in a cell (the timing finding)
NEIGHBOURS = ("added-start", "added-middle", "added-end", "removed-start", "removed-middle", "removed-end",
              "substituted", "host-removed")


def base_stream() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four seconds of traffic: three heavy sources far above any threshold, a light tail, one
    light host; sources, destinations (heavy ones mirrored) and stamps in time order."""
    rng = np.random.default_rng(17)
    n = EPOCHS * 300
    src = np.where(rng.random(n) < 0.8, np.array(HEAVY)[rng.integers(0, 3, n)],
                   0x0B00_0100 + rng.integers(0, 300, n)).astype(np.uint32)
    src[rng.choice(n, 6, replace=False)] = LIGHT_HOST
    dst = np.where(np.isin(src, HEAVY), src + 0x0100_0000, 0xC0A8_0001).astype(np.uint32)
    ts = T0 + 10**6 + np.sort(rng.integers(0, QUIET_FROM - 2 * 10**6, n))
    return src, dst, ts


def neighbour_pair(folder: Path, kind: str) -> tuple[Path, Path]:
    """The two captures of neighbour ``kind``: a light packet added or removed at the start, in
    the middle or at the end, one packet's source (and destination) substituted, or every packet
    of one light host removed."""
    src, dst, ts = base_stream()
    folder.mkdir(parents=True, exist_ok=True)

    def write(name, s, d, t):
        path = folder / f"{name}.pcap"
        write_pcap(path, s, t, d, np.full(len(s), 600))
        return path

    x = write("x", src, dst, ts)
    at = {"start": 0, "middle": len(ts) // 2, "end": len(ts) - 1}
    if kind.startswith("added"):
        where = kind.split("-")[1]
        i = at[where] + (where == "end")
        stamp = {"start": ts[0] - 10**5, "middle": ts[at["middle"]], "end": T0 + LATE_PACKET}[where]
        return x, write(kind, np.insert(src, i, 0x0B00_0FFF), np.insert(dst, i, 0xC0A8_0001), np.insert(ts, i, stamp))
    if kind.startswith("removed"):
        i = at[kind.split("-")[1]]
        i = i if not np.isin(src[i], HEAVY) else i + 1
        keep = np.arange(len(ts)) != i
        return x, write(kind, src[keep], dst[keep], ts[keep])
    if kind == "substituted":
        s, d = src.copy(), dst.copy()
        i = int(np.flatnonzero(~np.isin(src, HEAVY))[len(src) // 10])
        s[i], d[i] = 0x0B00_0EEE, 0xC0A8_0009
        return x, write(kind, s, d, ts)
    if kind == "host-removed":
        keep = src != LIGHT_HOST
        return x, write(kind, src[keep], dst[keep], ts[keep])
    raise ValueError(f"unknown neighbour kind {kind!r}")
