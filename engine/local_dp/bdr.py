"""BDR and CNR (docs/local-dp.md §6; 003 Thm 4.1, 4.2): agent and collector halves.

**Agent** (``BDRAgent``), (ε1 + ε2)-LDP per report with ε1 = α·ε, ε2 = (1 − α)·ε (Thm 4.1):
M_judge reports "v ∈ H" truthfully with p1 = e^ε1/(e^ε1 + 1); judged hot, M_hot applies GRR over
H (ε2) to a hot v and outputs a uniform hot element for a cold v; judged cold, M_cold applies GRR
over Ω \\ H (ε2) to a cold v and outputs a uniform cold element for a hot v. Tags ``TAG_HOT`` /
``TAG_COLD`` carry the judged flag, which the output implies anyway (§6.1 step 4). Before the
collector has any hot item the agent sends GRR over Ω with the whole ε (``TAG_GRR``): the LDP
warm-up §10.3 item 4 asks for, never clear text.

**Collector**, heavy cells in units s = p1(p2 − q2) at h = λ_h: a hot or cold report subtracts
(ĥ·p1·q2 + (1 − ĥ)·q1/h)·s/(p1(p2 − q2)) from every cell that was hot in its snapshot, with
ĥ = (φ − q1)/(p1 − q1) and φ = [tag is hot]: an unbiased estimate of [v ∈ H] from the report
itself, whose sum over reports is §6.2's N^_h, so no clear-text warm-up and no running γ_H are
needed [D]. A hot report adds s/(p1(p2 − q2)) to the cell it names (if not replaced since the
snapshot). Publish: count/s clipped at 0, which is Thm 4.2's unbiased estimator.

* BDR: a cold report of an item not in the heavy part goes through ED (§2.2 case 3) and takes
  the weakest cell once it is at or below 0.
* CNR (``nominate=True``; docs/local-dp.md §6.3, known from [C] only: low confidence): the light part is a
  buffer of λ_l ⟨ID, count⟩ cold candidates in units p1(p3 − q3), debiased per report by
  ((1 − ĥ)·p1·q3 + ĥ·q1/(d − h)) (the §6.3 [R] terms) with its own ED; a cold report decays the
  weakest heavy cell and enters the buffer; when the weakest heavy count reaches 0 the strongest
  buffer item is nominated into the heavy part (starting at 1) and the evicted item moves to
  the buffer. Releases come from the heavy part only.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.local_dp.dsr import Mechanism, grr_mechanism, null_variance
from dptop.engine.local_dp.entropy import RESERVE, Entropy, WordBuffer, below, bernoulli, drive
from dptop.engine.local_dp.grr import grr_batch, grr_draw
from dptop.engine.local_dp.heavyguardian import EMPTY, ED_SPEC, ed_decay, ed_place, weakest
from dptop.engine.local_dp.protocol import (TAG_COLD, TAG_GRR, TAG_HOT, CollectorBase, Reports, Snapshot,
                                            make_reports)


def bdr_epsilons(epsilon: float, split: float) -> tuple[float, float]:
    """Privacy map of the budget division: (ε1, ε2) = (α·ε, (1 − α)·ε), ε1 + ε2 = ε (Thm 4.1)."""
    if not 0.0 < split < 1.0:
        raise ValueError(f"split ({split!r}) must be in (0, 1): the share of epsilon for M_judge")
    return split * epsilon, (1.0 - split) * epsilon


class Split(NamedTuple):
    """The three mechanisms of one hot-set size h (integer weights and their p/q)."""

    judge: Mechanism  # binary RR, ε1
    hot: Mechanism  # GRR over H, ε2 (h = 1: the only hot element, p = 1, q = 0)
    cold: Mechanism  # GRR over Ω \ H, ε2


def split_mechanisms(eps1: float, eps2: float, d: int, h: int) -> Split:
    if not 1 <= h <= d - 2:
        raise ValueError(f"hot set size ({h}) must be in [1, domain size − 2 = {d - 2}]")
    hot = grr_mechanism(eps2, h) if h >= 2 else Mechanism(1, 1, 1, 1.0, 0.0)
    return Split(grr_mechanism(eps1, 2), hot, grr_mechanism(eps2, d - h))


@inner
def _cold_item(hot, c):
    """The c-th element of Ω \\ H (``hot`` sorted)."""
    x = c
    for v in hot:
        if v <= x:
            x += 1
        else:
            break
    return x


@kernel
def bdr_batch(items, hot, d, jA, jB, hA, hB, cA, cB, words, pos, tags, out, start):
    """BDR client reports (§6.1) of ``items[start:]`` against the sorted hot set; returns the
    index reached."""
    h = len(hot)
    i = start
    while i < len(items) and len(words) - pos[0] >= RESERVE:
        v = items[i]
        at = np.searchsorted(hot, v)
        is_hot = at < h and hot[at] == v
        if bernoulli(words, pos, jA, jA + jB) == is_hot:  # M_judge: flag hot
            tags[i] = TAG_HOT
            if is_hot:
                out[i] = grr_draw(words, pos, at, h, hA, hB) if h >= 2 else 0
            else:
                out[i] = below(words, pos, h)
        else:
            tags[i] = TAG_COLD
            if is_hot:
                c = below(words, pos, d - h)
            else:
                c = grr_draw(words, pos, v - at, d - h, cA, cB)
            out[i] = _cold_item(hot, c)
        i += 1
    return i


class BDRAgent:
    """The BDR/CNR randomizer (public parameters only)."""

    def __init__(self, epsilon: float, split: float, domain_size: int, entropy: Entropy):
        self.epsilon, self.domain_size = epsilon, domain_size
        self.eps1, self.eps2 = bdr_epsilons(epsilon, split)
        self.buffer = WordBuffer(entropy)
        self.warm = grr_mechanism(epsilon, domain_size)
        self._split: dict[int, Split] = {}

    def mechanisms(self, h: int) -> Split:
        if h not in self._split:
            self._split[h] = split_mechanisms(self.eps1, self.eps2, self.domain_size, h)
        return self._split[h]

    def randomize(self, items: np.ndarray, snap: Snapshot) -> Reports:
        out = make_reports(len(items))
        out.version[:] = snap.version
        d = self.domain_size
        if snap.phase == TAG_GRR:
            m = self.warm
            drive(self.buffer, len(items), lambda w, p, s: grr_batch(items, d, m.A, m.B, w, p, out.symbol, s))
            return out
        hot = np.sort(np.asarray(snap.hot, np.int64))
        j, h, c = self.mechanisms(len(hot))
        drive(self.buffer, len(items), lambda w, p, s: bdr_batch(
            items, hot, d, j.A, j.B, h.A, h.B, c.A, c.B, w, p, out.tag, out.symbol, s))
        return out


class BDRState(NamedTuple):
    ids: np.ndarray  # (λh,) int64
    cnt: np.ndarray  # (λh,) float64, units p1(p2 − q2) at h = λh
    stamp: np.ndarray  # (λh,) int64
    bids: np.ndarray  # (λl,) int64: CNR's buffer of cold candidates
    bcnt: np.ndarray  # (λl,) float64, units p1(p3 − q3) at h = λh
    bstamp: np.ndarray  # (λl,) int64
    meta: np.ndarray  # int64 [reports, ED rule, nominate]


class BDRVersion(NamedTuple):
    stamp: int
    hot: np.ndarray  # sorted hot IDs
    cells: np.ndarray  # heavy cell of each hot ID
    split: Split | None  # None before any hot item (GRR warm-up)


@inner
def _weigh(ids, cnt, stamp, stamp_v, sub):
    for j in range(len(ids)):
        if ids[j] != EMPTY and stamp[j] <= stamp_v:
            cnt[j] -= sub


@inner
def _find(ids, x):
    for j in range(len(ids)):
        if ids[j] == x:
            return j
    return -1


@inner
def _nominate(st, j, x, now, rb, words, pos):
    """CNR (§6.3): cold item x enters the buffer; if heavy cell j is at or below 0, the strongest
    buffer item takes it and the evicted item takes the buffer slot."""
    b = _find(st.bids, x)
    if b >= 0:
        st.bcnt[b] += rb
    else:
        ed_place(st.bids, st.bcnt, st.bstamp, x, now, words, pos, st.meta[1])
    if st.cnt[j] > 0.0:
        return
    best = -1
    for b in range(len(st.bids)):
        if st.bids[b] != EMPTY and (best < 0 or st.bcnt[b] > st.bcnt[best]):
            best = b
    old = st.ids[j]
    st.ids[j], st.cnt[j], st.stamp[j] = st.bids[best], 1.0, now
    st.bids[best], st.bcnt[best] = old, 0.0


@kernel
def bdr_insert(st, tags, syms, stamp_v, cells, h, d, mech, s_ref, s_buf, words, pos, start):
    """Insert reports ``start:`` of one version (§6.2, §6.3); ``mech`` = (p1, q1, p2, q2, p3, q3,
    p_grr, q_grr). Returns the index reached."""
    p1, q1, p2, q2, p3, q3, pg, qg = mech[0], mech[1], mech[2], mech[3], mech[4], mech[5], mech[6], mech[7]
    ids, cnt = st.ids, st.cnt
    i = start
    while i < len(syms) and len(words) - pos[0] >= RESERVE:
        t, x = tags[i], syms[i]
        st.meta[0] += 1
        now = st.meta[0]
        i += 1
        if t == TAG_GRR:  # warm-up: GRR over Ω, every occupied cell was in its domain
            r = s_ref / (pg - qg)
            _weigh(ids, cnt, st.stamp, now, qg * r)
            j = _find(ids, x)
            if j >= 0:
                cnt[j] += r
            else:
                ed_place(ids, cnt, st.stamp, x, now, words, pos, st.meta[1])
            continue
        hh = ((1.0 if t == TAG_HOT else 0.0) - q1) / (p1 - q1)
        r = s_ref / (p1 * (p2 - q2))
        _weigh(ids, cnt, st.stamp, stamp_v, (hh * p1 * q2 + (1.0 - hh) * q1 / h) * r)
        rb = s_buf / (p1 * (p3 - q3))
        if st.meta[2]:
            _weigh(st.bids, st.bcnt, st.bstamp, now, ((1.0 - hh) * p1 * q3 + hh * q1 / (d - h)) * rb)
        if t == TAG_HOT:
            c = cells[x]
            if ids[c] != EMPTY and st.stamp[c] <= stamp_v:
                cnt[c] += r
            continue
        if _find(ids, x) >= 0:  # entered after the snapshot: no estimator covers it here
            continue
        if not st.meta[2]:
            ed_place(ids, cnt, st.stamp, x, now, words, pos, st.meta[1])
            continue
        j, empty = weakest(ids, cnt)
        if empty:
            ids[j], cnt[j], st.stamp[j] = x, 1.0, now
            continue
        ed_decay(cnt, j, words, pos, st.meta[1])
        _nominate(st, j, x, now, rb, words, pos)
    return i


class BDRCollector(CollectorBase):
    """The untrusted BDR collector (``nominate=True``: CNR, with a buffer of ``light`` cells)."""

    def __init__(self, epsilon: float, split: float, domain_size: int, heavy: int, entropy: Entropy,
                 nominate: bool = False, light: int = 0, rule: int = ED_SPEC, keep: int = 16):
        super().__init__(keep)
        self.epsilon, self.domain_size, self.heavy = epsilon, domain_size, heavy
        self.eps1, self.eps2 = bdr_epsilons(epsilon, split)
        ref = split_mechanisms(self.eps1, self.eps2, domain_size, heavy)
        self.s_ref = ref.judge.p * ref.hot.scale
        self.s_buf = ref.judge.p * ref.cold.scale
        self.warm = grr_mechanism(epsilon, domain_size)
        self.buffer = WordBuffer(entropy)
        light = light if nominate else 0
        if nominate and light < 1:
            raise ValueError(f"light ({light}) must be >= 1: CNR's buffer of cold candidates")
        self.state = BDRState(np.full(heavy, EMPTY, np.int64), np.zeros(heavy), np.zeros(heavy, np.int64),
                              np.full(light, EMPTY, np.int64), np.zeros(light), np.zeros(light, np.int64),
                              np.array([0, rule, int(nominate)], np.int64))
        self._split: dict[int, Split] = {heavy: ref}

    @property
    def reports(self) -> int:
        return int(self.state.meta[0])

    def snapshot(self, parents=None) -> Snapshot:
        """Publish the hot set (the occupied heavy cells) as a new version."""
        cells = np.flatnonzero(self.state.ids != EMPTY)
        order = np.argsort(self.state.ids[cells], kind="stable")
        hot, cells = self.state.ids[cells][order], cells[order]
        h = len(hot)
        if h and h not in self._split:
            self._split[h] = split_mechanisms(self.eps1, self.eps2, self.domain_size, h)
        version = self.book.publish(BDRVersion(self.reports, hot, cells, self._split.get(h)))
        return Snapshot(version, TAG_HOT if h else TAG_GRR, hot, np.zeros(0, np.int64))

    def allowed(self, info: BDRVersion, tags: np.ndarray) -> np.ndarray:
        if info.split is None:
            return tags == TAG_GRR
        return (tags == TAG_HOT) | (tags == TAG_COLD)

    def valid(self, info: BDRVersion, tags: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        hot = tags == TAG_HOT
        limit = np.where(hot, len(info.hot), self.domain_size)
        ok = (symbols >= 0) & (symbols < limit)
        return ok & (hot | ~np.isin(symbols, info.hot))

    def _insert_run(self, info: BDRVersion, tags: np.ndarray, symbols: np.ndarray) -> None:
        sp, w = info.split, self.warm
        h = len(info.hot)
        if sp is None:
            mech = np.array([0.5, 0.5, 1.0, 0.0, 1.0, 0.0, w.p, w.q])
            self._account(len(symbols), null_variance(w), 1 / w.scale)
        else:
            mech = np.array([sp.judge.p, sp.judge.q, sp.hot.p, sp.hot.q, sp.cold.p, sp.cold.q, w.p, w.q])
            m = max(sp.judge.p * sp.hot.q, sp.judge.q / h)  # a non-holder's chance to name a hot cell
            scale = sp.judge.p * sp.hot.scale
            self._account(len(symbols), m * (1 - m) / scale ** 2, 1 / scale)
        drive(self.buffer, len(symbols), lambda words, pos, start: bdr_insert(
            self.state, tags, symbols, info.stamp, info.cells, max(h, 1), self.domain_size, mech,
            self.s_ref, self.s_buf, words, pos, start))

    def unit(self) -> float:
        return 1.0 / self.s_ref

    def estimates(self) -> tuple[np.ndarray, np.ndarray]:
        """Count/(p1(p2 − q2)) of the occupied heavy cells, clipped at 0 (Thm 4.2)."""
        full = self.state.ids != EMPTY
        return self.state.ids[full].copy(), np.maximum(self.state.cnt[full] / self.s_ref, 0.0)


def bdr_estimate(support, t: int, n_hot: int, sp: Split, h: int):
    """Thm 4.2: f~ = (f^ − N_h·p1·q2 − (t − N_h)·q1/h)/(p1(p2 − q2)) for hot items."""
    j, m = sp.judge, sp.hot
    return (np.asarray(support, np.float64) - n_hot * j.p * m.q - (t - n_hot) * j.q / h) / (j.p * m.scale)


def bdr_variance(f, t: int, n_hot: int, sp: Split, h: int):
    """Var[f~] from §6.2's decomposition Bin(f, p1p2) + Bin(N_h − f, p1q2) + Bin(t − N_h, q1/h)."""
    j, m = sp.judge, sp.hot
    f = np.asarray(f, np.float64)
    a, b, c = j.p * m.p, j.p * m.q, j.q / h
    return (f * a * (1 - a) + (n_hot - f) * b * (1 - b) + (t - n_hot) * c * (1 - c)) / (j.p * m.scale) ** 2
