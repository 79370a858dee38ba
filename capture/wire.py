"""What every walk over captured bytes shares (numba): byte readers and the skip reasons.

A frame that gives no key is counted under one reason; ``REASON_NAMES`` are the names shown in
``CaptureStats.skipped`` and the live capture's stats (``UNSUPPORTED`` is named per link type).
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.jit import inner

OK = 0
NON_IP = 1
TRUNCATED = 2
MULTICAST = 3
UNSUPPORTED = 4
BAD_VERSION = 5
MALFORMED = 6
UNKNOWN_INTERFACE = 7
NON_DATA_80211 = 8
PROTECTED_80211 = 9
RESERVED_DESTINATION = 10
INNER_UNSUPPORTED = 11
BAD_HEADER = 12
N_REASONS = 13

REASON_NAMES = {
    NON_IP: "non-ip",
    TRUNCATED: "truncated header",
    MULTICAST: "multicast source",
    BAD_VERSION: "bad IP version",
    MALFORMED: "malformed record",
    UNKNOWN_INTERFACE: "unknown interface",
    NON_DATA_80211: "802.11 frame without data (management, control, null)",
    PROTECTED_80211: "802.11 protected (encrypted) frame",
    RESERVED_DESTINATION: "destination in ffff::/16 (invalid multicast; reserved for the engine's non-address keys)",
    INNER_UNSUPPORTED: "unsupported link type inside a PKTAP/PPI header",
    BAD_HEADER: "bad IPv4 header length",
}
"""Skip-reason names as they appear in ``CaptureStats.skipped`` (``UNSUPPORTED`` is named per
link type: ``"unsupported link type 147"``)."""

# Readers index with uint64: numba then skips the negative-index wraparound test on every byte,
# which cost the record walks over 40 % of their speed.
_Z, _B8 = np.uint64(0), np.uint64(8)
_U1, _U2, _U3 = np.uint64(1), np.uint64(2), np.uint64(3)


@inner
def u32(buf, o, big):
    """Unsigned 32-bit integer at ``buf[o]``, big- or little-endian, as int64."""
    p = np.uint64(o)
    b0 = np.int64(buf[p])
    b1 = np.int64(buf[p + _U1])
    b2 = np.int64(buf[p + _U2])
    b3 = np.int64(buf[p + _U3])
    if big:
        return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3
    return b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)


@inner
def u16(buf, o, big):
    """Unsigned 16-bit integer at ``buf[o]``, big- or little-endian, as int64."""
    p = np.uint64(o)
    b0 = np.int64(buf[p])
    b1 = np.int64(buf[p + _U1])
    if big:
        return (b0 << 8) | b1
    return b0 | (b1 << 8)


@inner
def word_be(buf, o, nbytes):
    """``nbytes`` (<= 8) big-endian bytes at ``buf[o]`` as uint64."""
    v = _Z
    p = np.uint64(o)
    for i in range(nbytes):
        v = (v << _B8) | np.uint64(buf[p + np.uint64(i)])
    return v
