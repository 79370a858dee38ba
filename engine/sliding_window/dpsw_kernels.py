"""DPSW-Sketch's numba state and kernels [004 §3.5, §4.1; docs/dpsw-sketch.md §3–§4]: the cells of
every PCMS of every channel, NEW_SUBSTREAM, PROCESS over a batch of items (FREEZE implicit), and
ESTIMATE over the frozen PCMSs of a plan, whose noise each read draws from the instance's own
stream. The sketch object, its layout and the privacy checks of a read are in ``dpsw``."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.privacy.bulknoise import add_normal_stream
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import LO_MULTIPLIER, hash_key, mix64

FAMILY_ANY, FAMILY_V4, FAMILY_V6 = 0, 4, 6
"""A channel's address family: every key, IPv4 keys only, other keys only (``dpsw.Channel``)."""
INGEST_BLOCK = 256
"""Keys a channel hashes before it counts them row by row (``process_batch``)."""


class DPSWState(NamedTuple):
    cells: np.ndarray  # int32[H*S]     every channel's PCMS counts, flat (channel block of S cells)
    off: np.ndarray  # int64[n_sk]      offset of sketch id inside a channel block
    width: np.ndarray  # int64[n_sk]    columns of sketch id
    shift: np.ndarray  # uint64[n_sk]   column = hash >> shift
    sigma: np.ndarray  # float64[H, n_sk] noise standard deviation sqrt(a/ρ_j)
    I: np.ndarray  # int64[m]
    Ip: np.ndarray  # int64[m]
    seeds: np.ndarray  # uint64[H, a]
    mask: np.ndarray  # uint64[H, 2]    channel key = (hi & mask[0], lo & mask[1])
    family: np.ndarray  # int64[H]       FAMILY_ANY / FAMILY_V4 / FAMILY_V6
    rng: np.ndarray  # uint64[4]      the noise generator's key (one stream per PCMS instance)
    seen: np.ndarray  # uint8[2, n_sk]  items of IPv4 [0] / other [1] keys written since the id's last reset
    clock: np.ndarray  # int64[3]       t (items so far), k (current substream), p (position in it)
    owner: np.ndarray  # int64[n_sk]    substream whose PCMS the id holds (instrumentation + checks)
    start: np.ndarray  # int64[n_sk]    global range of the PCMS
    end: np.ndarray  # int64[n_sk]
    writes: np.ndarray  # int64[n_sk]   items added since creation
    last: np.ndarray  # int64[n_sk]     position of the last write (-1: none)
    geom: np.ndarray  # int64[5]        L, m, K, a, S
    hm: np.ndarray  # uint64[H*a]     mix64(kh ^ seed) ^ seed per channel row, for the channel's high word hk[ch]
    hk: np.ndarray  # uint64[H]
    ids: np.ndarray  # int64[2m - 1]  ingest scratch: the sketch ids holding the current position
    rows: np.ndarray  # uint64[(2m-1)*a] ingest scratch: the first cell of each row of each sketch in ids
    shs: np.ndarray  # uint64[2m - 1]  ingest scratch: the column shift of each sketch in ids
    hs: np.ndarray  # uint64[a * INGEST_BLOCK] ingest scratch: each row's hash of a block of keys


@inner
def _is_v4(hi, lo):
    return hi == np.uint64(0) and (lo >> np.uint64(32)) == np.uint64(0xFFFF)


@kernel
def _new_substream(st, k, t):
    """NEW_SUBSTREAM(k) of §3.5: fresh instances (zero counts) of the slot's whole + suffix sketches and the prefix block."""
    L, m, K, a, S = st.geom[0], st.geom[1], st.geom[2], st.geom[3], st.geom[4]
    slot = (k - 1) % K
    for q in range(m):
        sid = slot * m + q
        st.start[sid] = t + st.Ip[q] - 1
        st.end[sid] = t + L - 1
        st.owner[sid] = k
        st.writes[sid] = 0
        st.last[sid] = -1
    for q in range(1, m):
        sid = K * m + q - 1
        st.start[sid] = t
        st.end[sid] = t + st.I[q] - 1
        st.owner[sid] = k
        st.writes[sid] = 0
        st.last[sid] = -1
    for ch in range(st.sigma.shape[0]):
        for sid in range(slot * m, slot * m + m):
            _fresh(st, ch, sid, a, S)
        for sid in range(K * m, K * m + m - 1):
            _fresh(st, ch, sid, a, S)
    for sid in range(slot * m, slot * m + m):
        st.seen[0, sid] = 0
        st.seen[1, sid] = 0
    for sid in range(K * m, K * m + m - 1):
        st.seen[0, sid] = 0
        st.seen[1, sid] = 0


@inner
def _fresh(st, ch, sid, a, S):
    """A new PCMS instance in the cells of the one ``sid`` held: zero counts. The cells are cleared
    only if an item of the channel's family was written since the last reset (``seen``); otherwise
    they are still zero (at w = 100 000 with IPv4 traffic the IPv6 levels are never written: two
    thirds of the zeroing)."""
    fam = st.family[ch]
    if fam == FAMILY_V4:
        written = st.seen[0, sid]
    elif fam == FAMILY_V6:
        written = st.seen[1, sid]
    else:
        written = st.seen[0, sid] | st.seen[1, sid]
    if written:
        o = ch * S + st.off[sid]
        st.cells[o:o + a * st.width[sid]] = 0


@kernel
def instance_noise(st, ch, sid, out):
    """The noise PCMS ``sid`` of channel ``ch`` holds or will hold, in ``out`` (a test hook)."""
    out[:] = 0.0
    add_normal_stream(st.rng, ch, sid, st.owner[sid], out, st.sigma[ch, sid])


@inner
def _segment_end(I, Ip, m, L, p):
    """The last position of the run that starts at position ``p + 1``, in which every position
    lies in the same sketches: the run ends before the next prefix end ``I[q]`` or suffix start
    ``I'[q]`` is crossed, or at ``L``."""
    e = L
    for q in range(1, m):
        if I[q] > p and I[q] < e:
            e = I[q]
        if Ip[q] - 1 > p and Ip[q] - 1 < e:
            e = Ip[q] - 1
    return e


@hot
def process_batch(st, keys):
    """PROCESS(e) of §3.5 for every key of the batch (FREEZE is implicit: a PCMS is never written
    past its public end position, and reads check ``end <= t``). The batch is cut into runs of
    positions that lie in the same sketches (between two checkpoints of §3.2): the sketch ids and
    their clocks are set once per run, and each channel then takes the whole run in turn, so only
    that channel's sketches are in the cache while it counts. A channel hashes ``INGEST_BLOCK``
    keys at a time into every row, then counts them row by row and sketch by sketch, so the cells
    it adds to are one row of one sketch (at most 16 KiB at w = 4096) rather than all of them:
    a third less time than counting each key in every row and sketch in turn, and the same counts
    (integer additions, in any order). No allocation and no reference counting in the per-item
    loops."""
    L, m, K, a, S = st.geom[0], st.geom[1], st.geom[2], st.geom[3], st.geom[4]
    ids, rows, shs, hs, cells, off, width, shift = st.ids, st.rows, st.shs, st.hs, st.cells, st.off, st.width, st.shift
    I, Ip, writes, last, seen = st.I, st.Ip, st.writes, st.last, st.seen
    family, mask, seeds, hm, hk = st.family, st.mask, st.seeds.reshape(-1), st.hm, st.hk
    H = family.shape[0]
    t, k, p = st.clock[0], st.clock[1], st.clock[2]
    i0 = 0
    nk = keys.shape[0]
    while i0 < nk:
        if p >= L:
            p = 0
            k += 1
            _new_substream(st, k, t + 1)
        e = _segment_end(I, Ip, m, L, p)
        i1 = min(nk, i0 + e - p)
        slot = (k - 1) % K
        ids[0] = slot * m
        n = 1
        for q in range(1, m):  # prefixes: p <= I[q]; I decreasing
            if p + 1 > I[q]:
                break
            ids[n] = K * m + q - 1
            n += 1
        for q in range(1, m):  # suffixes: p >= I'[q]; I' increasing
            if p + 1 < Ip[q]:
                break
            ids[n] = slot * m + q
            n += 1
        n4 = 0
        for i in range(i0, i1):
            if _is_v4(keys[i, 0], keys[i, 1]):
                n4 += 1
        t += i1 - i0
        p += i1 - i0
        for j in range(n):
            writes[ids[j]] += i1 - i0
            last[ids[j]] = t
            if n4 > 0:
                seen[0, ids[j]] = 1
            if n4 < i1 - i0:
                seen[1, ids[j]] = 1
        for ch in range(H):
            fam = family[ch]
            if (fam == FAMILY_V4 and n4 == 0) or (fam == FAMILY_V6 and n4 == i1 - i0):
                continue  # no item of the channel's family in this run
            m0, m1, f0 = mask[ch, 0], mask[ch, 1], ch * a
            for j in range(n):  # the first cell of every row of every sketch the run reaches
                sid = ids[j]
                for r in range(a):
                    rows[j * a + r] = np.uint64(ch * S + off[sid] + r * width[sid])
                shs[j] = shift[sid]
            for b0 in range(i0, i1, INGEST_BLOCK):
                got = 0  # keys of the channel's family in this block
                for i in range(b0, min(i1, b0 + INGEST_BLOCK)):
                    hi = keys[ix(i), 0]
                    lo = keys[ix(i), 1]
                    if fam != FAMILY_ANY and (fam == FAMILY_V4) != _is_v4(hi, lo):
                        continue  # the other family's position: a no-op for this channel
                    kh = hi & m0
                    if kh != hk[ch]:  # hash_key's inner mix per row, kept for the channel's last high word
                        for r in range(a):
                            hm[f0 + r] = mix64(kh ^ seeds[f0 + r]) ^ seeds[f0 + r]
                        hk[ch] = kh
                    x = (lo & m1) * LO_MULTIPLIER
                    for r in range(a):  # hash_key(kh, lo & m1, seed) of every row
                        hs[ix(r * INGEST_BLOCK + got)] = mix64(hm[f0 + r] ^ x)
                    got += 1
                for r in range(a):  # then one row of one sketch at a time
                    for j in range(n):
                        first, sh = rows[j * a + r], shs[j]
                        for q in range(got):
                            cells[ix(first + (hs[ix(r * INGEST_BLOCK + q)] >> sh))] += np.int32(1)
        i0 = i1
    st.clock[0] = t
    st.clock[1] = k
    st.clock[2] = p


@kernel
def estimate_keys(st, ch, ids, keys, sum_min, out):
    """ESTIMATE of §4.1 for every key over the PCMSs ``ids`` of channel ``ch``: the sum of per-sketch
    row minima (``sum_min=False``) or the row minimum of per-row sums (§4.4 (ii)). The PCMSs are
    read as a copy of their counts plus their instance's noise (``vals``, for this call only). No
    key, no read."""
    if keys.shape[0] == 0:
        return
    a, S = st.geom[3], st.geom[4]
    base = ch * S
    start = np.empty(ids.shape[0] + 1, dtype=np.int64)
    start[0] = 0
    for j in range(ids.shape[0]):
        start[j + 1] = start[j] + a * st.width[ids[j]]
    vals = np.empty(start[-1], dtype=np.float64)
    for j in range(ids.shape[0]):
        sid = ids[j]
        o = base + st.off[sid]
        for u in range(start[j + 1] - start[j]):
            vals[start[j] + u] = st.cells[o + u]
        add_normal_stream(st.rng, ch, sid, st.owner[sid], vals[start[j]:start[j + 1]], st.sigma[ch, sid])
    hs = np.empty(a, dtype=np.uint64)
    rows = np.empty(a, dtype=np.float64)
    for i in range(keys.shape[0]):
        kh = keys[i, 0] & st.mask[ch, 0]
        kl = keys[i, 1] & st.mask[ch, 1]
        for r in range(a):
            hs[r] = hash_key(kh, kl, st.seeds[ch, r])
            rows[r] = 0.0
        total = 0.0
        for j in range(ids.shape[0]):
            sid = ids[j]
            wd = st.width[sid]
            sh = st.shift[sid]
            best = np.inf
            for r in range(a):
                v = vals[start[j] + r * wd + np.int64(hs[r] >> sh)]
                rows[r] += v
                if v < best:
                    best = v
            total += best
        if sum_min:
            total = np.inf if ids.shape[0] else 0.0
            for r in range(a):
                if rows[r] < total:
                    total = rows[r]
        out[i] = total


@kernel
def _fill_mixes(seeds, hm):
    for f in range(seeds.size):
        hm[f] = mix64(seeds.reshape(-1)[f]) ^ seeds.reshape(-1)[f]


def hash_cache(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ingest's per-channel hash cache (``hm``, ``hk``), filled for the high word 0."""
    hm = np.zeros(seeds.size, dtype=np.uint64)
    _fill_mixes(seeds, hm)
    return hm, np.zeros(seeds.shape[0], dtype=np.uint64)
