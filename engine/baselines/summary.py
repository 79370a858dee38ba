"""The stream-summary layout shared by SpaceSaving and Misra-Gries (docs/dpss-eehh.md §3.1,
docs/dp-misra-gries.md §3.4), as numba helpers over one packed int64 array ``L``.

Slots are grouped in buckets of equal counter value; the buckets form a doubly linked list sorted by
value, and each bucket keeps its slots in the order they entered it (head = oldest), so moving a
slot up by one, or finding the minimum bucket, is O(1). Row i of ``L`` holds the fields of slot i
and of bucket i, so one update touches few cache lines; the last row holds the scalars. Packing
the linked-list state into one array matters for speed: numba reference-counts every array
argument of a call, so per-packet helpers take one array, not ten (measured: ~40x on the update
path). ``L`` is flat with rows of W = 8 fields, so an index is a shift and an add.
"""
import numpy as np

from dptop.engine.core.jit import inner, ix

NIL = -1
SLOT_BUCKET, SLOT_PREV, SLOT_NEXT = 0, 1, 2  # per slot; prev/next inside its bucket, head = oldest
B_COUNT, B_HEAD, B_TAIL, B_PREV, B_NEXT = 3, 4, 5, 6, 7  # per bucket; buckets sorted by count
W = 8
"""Fields per row of the flat ``L``: one 64-byte line, and row offsets are shifts."""
USED, B_MIN, FREE, N = 0, 1, 2, 3  # fields of the last row (FREE: head of the free buckets, chained
#                                    through B_NEXT); users may add their own after N


def counters(settings) -> int:
    """k~, the counters of a summary: ``settings.k_tilde``, default 2k."""
    return 2 * settings.k if settings.k_tilde is None else settings.k_tilde


def links_bytes(K: int) -> int:
    """The bytes ``make_links(K)`` allocates."""
    return 8 * (K + 2) * W


def make_links(K: int) -> np.ndarray:
    """Flat ``L`` of K + 2 rows of W fields for K slots with no bucket yet (field i of row r at
    ``L[r * W + i]``; the last row, ``L[-W + i]``, holds the scalars)."""
    links = np.full((K + 2, W), NIL, dtype=np.int64)
    links[:, B_COUNT] = 0
    links[:K, B_NEXT] = np.arange(1, K + 1)  # buckets 0..K free, K + 1 buckets at most in use
    links[-1, :] = 0
    links[-1, B_MIN] = NIL
    links[-1, FREE] = 0
    return links.reshape(-1)


@inner
def bucket_new(L, count, after):
    """A new empty bucket with ``count``, linked after bucket ``after`` (front if NIL)."""
    b = L[-W + FREE]
    L[-W + FREE] = L[ix(b * W + B_NEXT)]
    L[ix(b * W + B_COUNT)] = count
    L[ix(b * W + B_HEAD)] = NIL
    L[ix(b * W + B_TAIL)] = NIL
    if after == NIL:
        first = L[-W + B_MIN]
        L[ix(b * W + B_PREV)] = NIL
        L[ix(b * W + B_NEXT)] = first
        if first != NIL:
            L[ix(first * W + B_PREV)] = b
        L[-W + B_MIN] = b
    else:
        nb = L[ix(after * W + B_NEXT)]
        L[ix(b * W + B_PREV)] = after
        L[ix(b * W + B_NEXT)] = nb
        L[ix(after * W + B_NEXT)] = b
        if nb != NIL:
            L[ix(nb * W + B_PREV)] = b
    return b


@inner
def bucket_drop_if_empty(L, b):
    if L[ix(b * W + B_HEAD)] != NIL:
        return
    p = L[ix(b * W + B_PREV)]
    nx = L[ix(b * W + B_NEXT)]
    if p != NIL:
        L[ix(p * W + B_NEXT)] = nx
    else:
        L[-W + B_MIN] = nx
    if nx != NIL:
        L[ix(nx * W + B_PREV)] = p
    L[ix(b * W + B_NEXT)] = L[-W + FREE]
    L[-W + FREE] = b


@inner
def slot_unlink(L, s):
    b = L[ix(s * W + SLOT_BUCKET)]
    p = L[ix(s * W + SLOT_PREV)]
    nx = L[ix(s * W + SLOT_NEXT)]
    if p != NIL:
        L[ix(p * W + SLOT_NEXT)] = nx
    else:
        L[ix(b * W + B_HEAD)] = nx
    if nx != NIL:
        L[ix(nx * W + SLOT_PREV)] = p
    else:
        L[ix(b * W + B_TAIL)] = p


@inner
def slot_append(L, s, b):
    t = L[ix(b * W + B_TAIL)]
    L[ix(s * W + SLOT_PREV)] = t
    L[ix(s * W + SLOT_NEXT)] = NIL
    if t != NIL:
        L[ix(t * W + SLOT_NEXT)] = s
    else:
        L[ix(b * W + B_HEAD)] = s
    L[ix(b * W + B_TAIL)] = s
    L[ix(s * W + SLOT_BUCKET)] = b


@inner
def move_up(L, s):
    """The counter of slot ``s`` grows by one; ``s`` becomes the newest of its new bucket."""
    b = L[ix(s * W + SLOT_BUCKET)]
    c = L[ix(b * W + B_COUNT)]
    nb = L[ix(b * W + B_NEXT)]
    if L[ix(b * W + B_HEAD)] == s and L[ix(b * W + B_TAIL)] == s and (nb == NIL or L[ix(nb * W + B_COUNT)] > c + 1):
        L[ix(b * W + B_COUNT)] = c + 1  # alone in its bucket, no bucket at c + 1: the bucket moves up with it
        return
    if nb != NIL and L[ix(nb * W + B_COUNT)] == c + 1:
        target = nb
    else:
        target = bucket_new(L, c + 1, b)
    slot_unlink(L, s)
    slot_append(L, s, target)
    bucket_drop_if_empty(L, b)


