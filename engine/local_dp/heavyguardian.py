"""HeavyGuardian (003 A.7.2, ref [62]; docs/local-dp.md §2): the base sketch, with exact exponential decay.

``w`` buckets of ``λ_h`` heavy cells ⟨ID, count⟩ and ``λ_l`` light counters. INSERT(e) (§2.2):
a heavy cell holding e counts +1; else an empty heavy cell takes ⟨e, 1⟩; else the weakest cell
(smallest count, ties to the lowest index) decays by 1 with probability P = b^(−C) and, once at
or below 0, is replaced by ⟨e, 1⟩; otherwise the light counter h2(e) mod λ_l (if any) counts +1.

ED (§2.3): b = e^r with the rational r = ln b = 77/1000 (b ≈ 1.08004), so for an integer count
γ = C·r is an exact rational and ``bern_exp`` samples exp(−γ) exactly. The local-DP collectors
hold real (partially debiased) counts; there C is taken in 2^−20 fixed point, which is exact for
integers and half-integers and otherwise off by less than 2^−20 of a count (post-processing: no
privacy effect, §2.3). Counts above 2^36 are capped before sampling (P < e^−5·10^9 either way).
``ED_INVERTED`` reproduces [C]'s reversed direction, decay with probability 1 − b^(−C).

This module is the non-private sketch (tests L5, L6 and the helpers the collectors share); the
local-DP collectors use w = 1 only (§2.1: buckets leak).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import mix64
from dptop.engine.local_dp.entropy import RESERVE, Entropy, WordBuffer, bern_exp, drive

EMPTY = -1
ED_NUM, ED_DEN = 77, 1000
"""ln b as the exact rational 77/1000: b = e^0.077 ≈ 1.08004 (the original code's 1.08)."""
FIXED_SHIFT = 20
ED_SPEC, ED_INVERTED = 0, 1
ED_RULES = {"b^-C": ED_SPEC, "1-b^-C": ED_INVERTED}
_CAP = float(1 << 36)


def ed_base() -> float:
    return float(np.exp(ED_NUM / ED_DEN))


@inner
def ed_fires(words, pos, count, rule):
    """One ED trial on a weakest count C > 0: decay with probability b^(−C) (or 1 − b^(−C))."""
    c = min(count, _CAP)
    fixed = np.int64(c * (1 << FIXED_SHIFT))
    hit = bern_exp(words, pos, fixed * ED_NUM, ED_DEN << FIXED_SHIFT)
    return hit if rule == ED_SPEC else not hit


@inner
def weakest(ids, cnt):
    """Index of an empty cell if any (``EMPTY`` id), else of the smallest count (lowest index on
    ties); second value: True when the cell is empty."""
    best = 0
    for j in range(len(ids)):
        if ids[j] == EMPTY:
            return j, True
        if cnt[j] < cnt[best]:
            best = j
    return best, False


class HGState(NamedTuple):
    ids: np.ndarray  # (w, λh) int64, EMPTY = −1
    cnt: np.ndarray  # (w, λh) int64
    light: np.ndarray  # (w, λl) int32
    seed: np.ndarray  # (1,) uint64: bucket hash seed
    rule: np.ndarray  # (1,) int64: ED direction


def make_hg_state(buckets: int, heavy: int, light: int = 0, seed: int = 0, rule: int = ED_SPEC) -> HGState:
    return HGState(np.full((buckets, heavy), EMPTY, np.int64), np.zeros((buckets, heavy), np.int64),
                   np.zeros((buckets, light), np.int32), np.array([seed], np.uint64), np.array([rule], np.int64))


@inner
def _bucket(item, seed, w):
    return np.int64(mix64(np.uint64(item) ^ seed) % np.uint64(w))


@kernel
def hg_insert_batch(st, items, words, pos, start):
    """INSERT every item of ``items[start:]`` (§2.2); returns the index reached."""
    w, lh = st.ids.shape
    ll = st.light.shape[1]
    i = start
    while i < len(items) and len(words) - pos[0] >= RESERVE:
        e = items[i]
        b = _bucket(e, st.seed[0], w)
        ids, cnt = st.ids[b], st.cnt[b]
        i += 1
        hit = -1
        for j in range(lh):
            if ids[j] == e:
                hit = j
                break
        if hit >= 0:
            cnt[hit] += 1
            continue
        j, empty = weakest(ids, cnt)
        if empty:
            ids[j], cnt[j] = e, 1
            continue
        if ed_fires(words, pos, np.float64(cnt[j]), st.rule[0]):
            cnt[j] -= 1
        if cnt[j] <= 0:
            ids[j], cnt[j] = e, 1
        elif ll > 0:
            k = np.int64(mix64(np.uint64(e) ^ ~st.seed[0]) % np.uint64(ll))
            if st.light[b, k] < 2147483647:
                st.light[b, k] += 1
    return i


class HeavyGuardian:
    """Non-private HeavyGuardian over int64 items (docs/local-dp.md §2; the baseline of tests L5/L6)."""

    def __init__(self, buckets: int = 1, heavy: int = 16, light: int = 0, rule: str = "b^-C",
                 seed: int | None = None):
        if rule not in ED_RULES:
            raise ValueError(f"ed ({rule!r}) must be one of {', '.join(ED_RULES)}")
        self.buffer = WordBuffer(Entropy(seed))
        self.state = make_hg_state(buckets, heavy, light, int(self.buffer.entropy.words(1)[0]), ED_RULES[rule])

    def insert(self, items: np.ndarray) -> None:
        items = np.ascontiguousarray(items, dtype=np.int64)
        drive(self.buffer, len(items), lambda words, pos, s: hg_insert_batch(self.state, items, words, pos, s))

    def query(self, item: int) -> int:
        """Heavy count of ``item``, else its light counter (0 without a light part)."""
        w = self.state.ids.shape[0]
        b = int(_bucket(np.int64(item), self.state.seed[0], w))
        row = np.flatnonzero(self.state.ids[b] == item)
        if len(row):
            return int(self.state.cnt[b, row[0]])
        ll = self.state.light.shape[1]
        if not ll:
            return 0
        k = int(mix64(np.uint64(item) ^ ~self.state.seed[0]) % np.uint64(ll))
        return int(self.state.light[b, k])

    def top(self, k: int) -> list[tuple[int, int]]:
        """The ``k`` largest heavy cells over all buckets as (item, count), ties by item."""
        ids, cnt = self.state.ids.ravel(), self.state.cnt.ravel()
        rows = sorted((( -int(c), int(i)) for i, c in zip(ids, cnt) if i != EMPTY))[:k]
        return [(i, -c) for c, i in rows]


# --- the ED step of the local-DP collectors (w = 1, real counts, entry stamps) -----------------
@inner
def ed_decay(cnt, j, words, pos, rule):
    """Case 3's decay of weakest cell ``j`` (only while its count is > 0; <= 0 is evicted without
    sampling, as in [C])."""
    if cnt[j] > 0.0 and ed_fires(words, pos, cnt[j], rule):
        cnt[j] -= 1.0


@inner
def ed_place_at(ids, cnt, stamp, j, empty, x, now, words, pos, rule):
    """A report of item ``x`` that matched no cell, with ``j`` the weakest cell (``empty``: an
    empty one): an empty cell takes ⟨x, 1⟩; else cell j decays (ED) and, once <= 0, is replaced
    by ⟨x, 1⟩ (plain 1: no history compensation, docs/local-dp.md §3). True if ``x`` took cell j."""
    if not empty:
        ed_decay(cnt, j, words, pos, rule)
    if empty or cnt[j] <= 0.0:
        ids[j], cnt[j], stamp[j] = x, 1.0, now
        return True
    return False


@inner
def ed_place(ids, cnt, stamp, x, now, words, pos, rule):
    """``ed_place_at`` at the current weakest cell."""
    j, empty = weakest(ids, cnt)
    return ed_place_at(ids, cnt, stamp, j, empty, x, now, words, pos, rule)
