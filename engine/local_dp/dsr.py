"""BGR and DSR (docs/local-dp.md §4, §5; 003 Thm 3.2, Alg 12/13): agent and collector halves.

**Agent** (``DSRAgent.randomize(items, snapshot) -> Reports``), ε-LDP per report:

* phase ``TAG_GRR`` (BGR always; DSR's *entire* phase): GRR over the version's domain;
* phase ``TAG_SHRUNK`` (DSR when every heavy cell has count > 1): v ↦ its hot cell index if v
  is hot, else ⊥ (= λ_h), then GRR over those λ_h + 1 symbols.

**Collector** (``DSRCollector``), one bucket (w = 1, §2.1), λ_h heavy cells with real counts kept
in the units of the collector's current phase (Alg 12): a report with mechanism (p_r, q_r)
subtracts q_r·s/(p_r − q_r) from every cell its mechanism could have named and adds
s/(p_r − q_r) to the cell it names, where s = p − q of the current phase; when the phase changes
(weakest ≤ 1: entire, else shrunk) every count is converted by s_new/s_old. The tag decides the
(p, q), never the collector's phase (§5 [D] rule). A shrunk symbol names a cell of the snapshot;
it counts only if that cell has not been replaced since (its entry stamp precedes the snapshot),
and only such cells are debiased for it. Non-matching reports trigger ED (§2.2 case 3; weakest
<= 0 is replaced without sampling; a ⊥ only decays). A new occupant starts at 1 (no history
compensation: the §3 alternative, so that a late heavy hitter can still enter). Publish:
count/s, clipped at 0 (Alg 13).

Prefix mode (``shift`` > 0): the domain of a version is the 2^shift children of its sorted
parent prefixes plus "other" (``OTHER``); GRR symbols are decoded through the version's parents,
and a cell is debiased for a GRR report only if its prefix lies under one of them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core.jit import kernel
from dptop.engine.local_dp.entropy import RESERVE, Entropy, WordBuffer, drive
from dptop.engine.local_dp.grr import grr_batch, grr_pq, rr_weights
from dptop.engine.local_dp.heavyguardian import EMPTY, ED_SPEC, ed_decay, ed_place_at, weakest
from dptop.engine.local_dp.protocol import TAG_GRR, TAG_SHRUNK, CollectorBase, Reports, Snapshot, make_reports

OTHER = -2
"""Prefix mode's "not under any parent" item."""


class Mechanism(NamedTuple):
    """A GRR stage: integer weights and the probabilities they fix exactly."""

    d: int
    A: int
    B: int
    p: float
    q: float

    @property
    def scale(self) -> float:
        return self.p - self.q


def null_variance(m: Mechanism) -> float:
    """Variance one report adds to the estimate of an item it does not hold: q(1 − q)/(p − q)²."""
    return m.q * (1 - m.q) / m.scale ** 2


def grr_mechanism(epsilon: float, d: int) -> Mechanism:
    """GRR over ``d`` values; d = 1 (a domain that is only "other") reports a constant."""
    if d == 1:
        return Mechanism(1, 1, 1, 1.0, 0.0)
    A, B = rr_weights(epsilon, d)
    return Mechanism(d, A, B, *grr_pq(A, B, d))


def domain_index(items: np.ndarray, parents: np.ndarray, shift: int) -> np.ndarray:
    """Prefix mode: item -> index among the children of ``parents`` (other: the last index)."""
    other = len(parents) << shift
    if not len(parents):
        return np.full(len(items), other, np.int64)
    up = items >> shift
    at = np.minimum(np.searchsorted(parents, up), len(parents) - 1)
    found = (items >= 0) & (parents[at] == up)
    return np.where(found, (at << shift) | (items & ((1 << shift) - 1)), other).astype(np.int64)


def domain_item(symbols: np.ndarray, parents: np.ndarray, shift: int) -> np.ndarray:
    """Inverse of ``domain_index`` (the last index decodes to ``OTHER``)."""
    other = len(parents) << shift
    safe = np.minimum(symbols >> shift, max(len(parents) - 1, 0))
    base = parents[safe] << shift if len(parents) else np.zeros(len(symbols), np.int64)
    return np.where(symbols >= other, OTHER, base | (symbols & ((1 << shift) - 1))).astype(np.int64)


class DSRAgent:
    """The randomizer (BGR when ``shrink`` is False). Holds only public parameters."""

    def __init__(self, epsilon: float, domain_size: int, heavy: int, entropy: Entropy, shift: int = 0):
        self.epsilon, self.domain_size, self.heavy, self.shift = epsilon, domain_size, heavy, shift
        self.buffer = WordBuffer(entropy)
        self.shrunk = grr_mechanism(epsilon, heavy + 1)
        self._entire: dict[int, Mechanism] = {}

    def entire(self, d: int) -> Mechanism:
        if d not in self._entire:
            self._entire = {d: grr_mechanism(self.epsilon, d)}
        return self._entire[d]

    def randomize(self, items: np.ndarray, snap: Snapshot) -> Reports:
        out = make_reports(len(items))
        out.version[:] = snap.version
        if snap.phase == TAG_SHRUNK:
            hot = np.asarray(snap.hot, dtype=np.int64)
            order = np.argsort(hot, kind="stable")
            at = np.minimum(np.searchsorted(hot[order], items), len(hot) - 1)
            values = np.where(hot[order][at] == items, order[at], self.heavy).astype(np.int64)
            mech = self.shrunk
        else:
            values = domain_index(items, snap.parents, self.shift) if self.shift else items
            mech = self.entire(((len(snap.parents) << self.shift) + 1) if self.shift else self.domain_size)
        out.tag[:] = snap.phase
        drive(self.buffer, len(values),
              lambda w, p, s: grr_batch(values, mech.d, mech.A, mech.B, w, p, out.symbol, s))
        return out


class DSRState(NamedTuple):
    ids: np.ndarray  # (λh,) int64, EMPTY = −1
    cnt: np.ndarray  # (λh,) float64, in the current phase's units
    stamp: np.ndarray  # (λh,) int64: reports processed when the occupant entered
    dom: np.ndarray  # (λh,) bool: occupant inside the current run's GRR domain
    meta: np.ndarray  # int64 [phase, reports, ED rule, shrinking allowed]
    scale: np.ndarray  # float64 [s of the current phase]


class VersionInfo(NamedTuple):
    stamp: int
    phase: int
    entire: Mechanism
    parents: np.ndarray


@kernel
def dsr_insert(st, tags, values, stamp_v, e_p, e_q, s_p, s_q, latest_scale, words, pos, start):
    """Insert reports ``start:`` of one version (§5); returns the index reached. One pass over
    the cells debiases, finds the named cell and the weakest one; Alg 12's phase (entire while
    the weakest count is <= 1 or a cell is empty) is re-evaluated after every report."""
    ids, cnt = st.ids, st.cnt
    i = start
    while i < len(values) and len(words) - pos[0] >= RESERVE:
        x = values[i]
        shrunk = tags[i] == TAG_SHRUNK
        r = st.scale[0] / ((s_p - s_q) if shrunk else (e_p - e_q))
        sub = (s_q if shrunk else e_q) * r
        hit, weak, empty = -1, -1, -1
        for j in range(len(ids)):
            if ids[j] == EMPTY:
                if empty < 0:
                    empty = j
                continue
            if (st.stamp[j] <= stamp_v) if shrunk else st.dom[j]:
                cnt[j] -= sub
                if (j == x) if shrunk else (ids[j] == x):
                    hit = j
            if weak < 0 or cnt[j] < cnt[weak]:
                weak = j
        st.meta[1] += 1
        i += 1
        changed = hit >= 0 and hit == weak
        if hit >= 0:
            cnt[hit] += r
        elif empty >= 0:
            if not shrunk:  # ⊥ or a replaced cell carries no item to insert
                ids[empty], cnt[empty], st.stamp[empty], st.dom[empty] = x, 1.0, st.meta[1], True
                changed = True
        elif shrunk:
            ed_decay(cnt, weak, words, pos, st.meta[2])
        elif ed_place_at(ids, cnt, st.stamp, weak, False, x, st.meta[1], words, pos, st.meta[2]):
            st.dom[weak] = True
            changed = True
        if not st.meta[3]:
            continue
        if changed:
            weak, vacant = weakest(ids, cnt)
            empty = weak if vacant else -1
        phase = TAG_SHRUNK if empty < 0 and cnt[weak] > 1.0 else TAG_GRR
        if phase != st.meta[0]:
            target = (s_p - s_q) if phase == TAG_SHRUNK else latest_scale
            cnt[:] *= target / st.scale[0]
            st.scale[0] = target
            st.meta[0] = phase
    return i


class DSRCollector(CollectorBase):
    """The untrusted collector: validates, debiases and inserts reports; publishes snapshots and
    the top-k. ``shrink=False`` is BGR."""

    def __init__(self, epsilon: float, domain_size: int, heavy: int, entropy: Entropy, shrink: bool = True,
                 rule: int = ED_SPEC, shift: int = 0, keep: int = 16):
        super().__init__(keep)
        self.epsilon, self.domain_size, self.heavy, self.shift = epsilon, domain_size, heavy, shift
        self.shrunk = grr_mechanism(epsilon, heavy + 1)
        self.buffer = WordBuffer(entropy)
        self.state = DSRState(np.full(heavy, EMPTY, np.int64), np.zeros(heavy), np.zeros(heavy, np.int64),
                              np.ones(heavy, bool), np.array([TAG_GRR, 0, rule, int(shrink)], np.int64),
                              np.ones(1))
        self.latest: VersionInfo | None = None

    @property
    def reports(self) -> int:
        return int(self.state.meta[1])

    def snapshot(self, parents: np.ndarray | None = None) -> Snapshot:
        """Publish the current phase (and hot IDs in the shrunk phase) as a new version."""
        parents = np.zeros(0, np.int64) if parents is None else np.asarray(parents, np.int64)
        d = ((len(parents) << self.shift) + 1) if self.shift else self.domain_size
        entire = self.latest.entire if self.latest and self.latest.entire.d == d else grr_mechanism(self.epsilon, d)
        st = self.state
        if st.meta[0] == TAG_GRR and (self.latest is None or entire.scale != st.scale[0]):
            st.cnt[:] *= entire.scale / st.scale[0]  # entire units follow the latest domain size
            st.scale[0] = entire.scale
        phase = int(st.meta[0])
        self.latest = VersionInfo(self.reports, phase, entire, parents)
        version = self.book.publish(self.latest)
        hot = st.ids.copy() if phase == TAG_SHRUNK else np.zeros(0, np.int64)
        return Snapshot(version, phase, hot, parents)

    def allowed(self, info: VersionInfo, tags: np.ndarray) -> np.ndarray:
        return (tags == TAG_GRR) | ((tags == TAG_SHRUNK) & bool(self.state.meta[3]))

    def valid(self, info: VersionInfo, tags: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        return (symbols >= 0) & (symbols < np.where(tags == TAG_SHRUNK, self.heavy + 1, info.entire.d))

    def _insert_run(self, info: VersionInfo, tags: np.ndarray, sym: np.ndarray) -> None:
        values = sym
        if self.shift:
            grr = tags == TAG_GRR
            values = sym.copy()
            values[grr] = domain_item(sym[grr], info.parents, self.shift)
            ids = self.state.ids
            self.state.dom[:] = (ids == OTHER) | np.isin(ids >> self.shift, info.parents) & (ids >= 0)
        e, s = info.entire, self.shrunk
        shrunk = int((tags == TAG_SHRUNK).sum())
        self._account(len(tags) - shrunk, null_variance(e), 1 / e.scale)
        self._account(shrunk, null_variance(s), 1 / s.scale)
        latest = self.latest.entire.scale
        drive(self.buffer, len(values), lambda w, p, start: dsr_insert(
            self.state, tags, values, info.stamp, e.p, e.q, s.p, s.q, latest, w, p, start))

    def unit(self) -> float:
        return 1.0 / self.state.scale[0]

    def estimates(self) -> tuple[np.ndarray, np.ndarray]:
        """Count/s of the occupied cells, clipped at 0 (Alg 13)."""
        full = self.state.ids != EMPTY
        return self.state.ids[full].copy(), np.maximum(self.state.cnt[full] / self.state.scale[0], 0.0)
