"""Error-envelope heavy hitters over a DP CountMin / DP CountSketch (docs/dpss-eehh.md §5–§6).

A sketch with d rows and w columns gets discrete Laplace noise of scale b = 2d/ε_S in every cell,
drawn once at INIT (its final state is then ε_S-DP). Each arrival updates the sketch and evaluates
its own estimate; a tracked set keeps the k~ labels with the largest recorded estimates
[000 Alg 4]. The release [000 Alg 5, corrected in §6.2]:

1. ñ, n_hi as in §4.5; if n_hi > T_max nothing is released ("epoch too long": the union bound
   behind the envelope covers T_max arrivals only);
2. τ = max(ñ/k, n_hi/k~ + 2γ1(n_hi) + |γ2(n_hi)| + 1) — for CountMin the row-wise envelope of
   ``eehh_envelope`` (γ1(t) = λt/w + ψ1, γ2 = −ψ2); for CountSketch τ = max(ñ/k, n_hi/k~ +
   3(E_cs + ψ) + 1) with E_cs = 4·sqrt(F2_up/w) and F2_up = 2·median_r Σ_j cell² from the final
   noisy sketch (§6.4);
3. for each tracked label the **final** query v of the sketch (never the stale heap value, P6);
   released iff v > τ (strict).

Sizes: CountMin as ``eehh_envelope.cms_envelope`` (w = 64·k~ by default, d and (λ, q) for the
lowest threshold); CountSketch w = next power of two >= 3k~, odd d from
``eehh_envelope.cs_envelope_depth`` and ψ = b·ln(2/((1+α)q)) (the median's row-wise argument);
δ_run = δ_S/(1 + e^(ε_S)). The merged collector (merged.py) keeps §6.3's log2 depth at w = 2k~.
Default k~ = 4k (the paper's experiments). The share of the budget spent on the noisy length is
the one of ``LENGTH_SHARES`` with the lowest threshold at the public length (§4.5).

Row hashes are vector multiply-shift (strongly universal on 32-bit chunks of the 128-bit key), with
secret seeds drawn per instance from the same source as the noise (CSPRNG; P10). The CountSketch
envelope is not established (§6.4), so ``eehh-cs`` is marked experimental; ``eehh-cms`` is the
default sketch baseline.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.base import Footprint
from dptop.engine.single_release.eehh_envelope import cms_envelope, cs_envelope_depth, cs_psi, next_pow2
from dptop.engine.single_release.eehh_envelope import cms_threshold as envelope_threshold
from dptop.engine.single_release.length import (check_k_tilde, length_composed_cost, length_facts, length_slack,
                                                public_length, split_length_budget)
from dptop.engine.single_release.dpss import by_key
from dptop.engine.single_release.epochs import Epoched
from dptop.engine.core.hashtable import HOMES_CHUNK, delete_at, found, homes, probe_at, store
from dptop.engine.core.topk import select
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import KEY_DTYPE
from dptop.engine.core.registry import register
from dptop.engine.core.release import sorted_items
from dptop.engine.core.settings import PACKETS, check_delta, check_epsilon, check_positive_int
from dptop.engine.core.facts import NO_FACTS, PublicFact

DEFAULT_T_MAX = 1 << 26
"""Public per-epoch cap on arrivals when no public length (``--param t_max``, ``--epoch-packets``, the
replayed file's packet count, then named in the guarantee as an assumed fact) sets it."""
LENGTH_SHARES = (0.01, 0.02, 0.05, 0.1)
"""Shares of ε and δ tried for the noisy length; the one giving the lowest threshold at the public
length is used (measured in ``dptop bench --anchors``: F1 follows the threshold)."""
SCALE_DENOMINATOR = 1 << 20
SIZE, N = 0, 1  # meta[] fields
_LOW32 = np.uint64(0xFFFF_FFFF)
_S32 = np.uint64(32)
_S63 = np.uint64(63)


class EEState(NamedTuple):
    cells: np.ndarray  # int64[d, w]: noise from INIT plus counts
    hseed: np.ndarray  # uint64[d, 5]: bucket hash a0..a3, b
    sseed: np.ndarray  # uint64[d, 5]: sign hash (CountSketch); unused by CountMin
    seed_t: np.ndarray  # uint64[10, d]: hseed then sseed transposed, for the vectorised row loop
    shift: np.ndarray  # uint64[1]: 64 − log2(w)
    slot_hi: np.ndarray  # uint64[k~]
    slot_lo: np.ndarray
    slot_val: np.ndarray  # int64[k~]: estimate recorded at the label's last arrival
    meta: np.ndarray  # int64[2]: tracked size, n
    heap: np.ndarray  # int64[k~]: tracked slots, a binary min-heap by hkey
    hkey: np.ndarray  # int64[k~]: heap keys: slot_val of heap[i] (CountMin: a lower bound of it)
    hpos: np.ndarray  # int64[k~]: each slot's index in ``heap``
    home: np.ndarray  # int64[k~]: hash-table home position of each slot's label
    chunk: np.ndarray  # int64[HOMES_CHUNK]: scratch, home positions of the keys of a batch chunk
    scratch: np.ndarray  # int64[d]: per-row values for the median
    col: np.ndarray  # int64[d]: the current key's column in each row
    sign: np.ndarray  # int64[d]: its sign in each row (CountSketch; 1 for CountMin)
    tab: ht.Table  # label -> slot


def make_ee_state(cells: np.ndarray, hseed: np.ndarray, sseed: np.ndarray, slots: int) -> EEState:
    """A sketch over ``cells`` (d × w, w a power of two) with its row seeds and ``slots`` tracked labels."""
    d, w = cells.shape
    hseed = np.ascontiguousarray(hseed, np.uint64)
    sseed = np.ascontiguousarray(sseed, np.uint64)
    return EEState(cells, hseed, sseed, np.concatenate([hseed.T, sseed.T]).copy(),
                   np.array([64 - int(math.log2(w))], dtype=np.uint64),
                   np.zeros(slots, KEY_DTYPE), np.zeros(slots, KEY_DTYPE), np.zeros(slots, np.int64),
                   np.zeros(2, np.int64), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
                   np.zeros(slots, np.int64), np.zeros(slots, np.int64), np.zeros(HOMES_CHUNK, np.int64),
                   np.zeros(d, np.int64), np.zeros(d, np.int64), np.ones(d, np.int64), ht.make_table(4 * slots))


def ee_state_bytes(d: int, w: int, slots: int) -> int:
    """The bytes ``make_ee_state`` holds for a d × w sketch with ``slots`` tracked labels."""
    return 8 * d * (w + 5 + 5 + 10 + 3) + 8 + 56 * slots + 16 + 8 * HOMES_CHUNK + ht.table_bytes(4 * slots)


@inner
def _rows(seed_t, shift, hi, lo, col, sign, signed):
    """Column (and sign) of (hi, lo) in every row: vector multiply-shift over the four 32-bit
    chunks, top bits (sign: top bit of the second hash). One loop over rows, which the compiler
    vectorises (the coefficients are row-contiguous in ``seed_t``)."""
    h0, h1, l0, l1 = hi >> _S32, hi & _LOW32, lo >> _S32, lo & _LOW32
    a0, a1, a2, a3, b = seed_t[0], seed_t[1], seed_t[2], seed_t[3], seed_t[4]
    for r in range(len(col)):
        col[r] = np.int64((a0[r] * h0 + a1[r] * h1 + a2[r] * l0 + a3[r] * l1 + b[r]) >> shift)
    if signed:
        a0, a1, a2, a3, b = seed_t[5], seed_t[6], seed_t[7], seed_t[8], seed_t[9]
        for r in range(len(sign)):
            sign[r] = 1 - 2 * np.int64((a0[r] * h0 + a1[r] * h1 + a2[r] * l0 + a3[r] * l1 + b[r]) >> _S63)


@inner
def _add_and_estimate(cells, seed_t, shift, scratch, col, sign, hi, lo, signed, delta):
    """Add ``delta`` occurrences of (hi, lo) (0 = pure query) and return its estimate:
    min over rows (CountMin) or median of the signed cells (CountSketch, odd d)."""
    _rows(seed_t, shift, hi, lo, col, sign, signed)
    d = cells.shape[0]
    if signed:
        for r in range(d):
            cells[r, col[r]] += sign[r] * delta
            scratch[r] = sign[r] * cells[r, col[r]]
        return select(scratch, d // 2)
    est = cells[0, ix(col[0])] + delta
    cells[0, ix(col[0])] = est
    for r in range(1, d):
        v = cells[r, ix(col[r])] + delta
        cells[r, ix(col[r])] = v
        est = min(est, v)
    return est


@inner
def _sift_up(heap, hkey, hpos, i):
    s, v = heap[i], hkey[i]
    while i > 0:
        parent = (i - 1) // 2
        if hkey[parent] <= v:
            break
        heap[i], hkey[i] = heap[parent], hkey[parent]
        hpos[heap[i]] = i
        i = parent
    heap[i], hkey[i] = s, v
    hpos[s] = i


@inner
def _sift_down(heap, hkey, hpos, i, size):
    s, v = heap[i], hkey[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hkey[c + 1] < hkey[c]:
            c += 1
        if hkey[c] >= v:
            break
        heap[i], hkey[i] = heap[c], hkey[c]
        hpos[heap[i]] = i
        i = c
    heap[i], hkey[i] = s, v
    hpos[s] = i


@inner
def _rekey(heap, hkey, hpos, i, key, size):
    old = hkey[i]
    hkey[i] = key
    if key > old:
        _sift_down(heap, hkey, hpos, i, size)
    elif key < old:
        _sift_up(heap, hkey, hpos, i)


@inner
def _admit(tab_hi, tab_lo, tab_val, hashing, slot_hi, slot_lo, val, meta, heap, hkey, hpos, slot_home,
           p, hi, lo, h, est):
    """TRACK_UPDATE steps 3–5 for an untracked label at empty table position ``p``: take a free
    slot, or the slot of the smallest recorded estimate if ``est`` exceeds it."""
    size = meta[SIZE]
    if size < len(val):
        s = size
        meta[SIZE] = size + 1
        store(tab_hi, tab_lo, tab_val, p, hi, lo, s)
        val[s] = est
        heap[size], hkey[size] = s, est
        _sift_up(heap, hkey, hpos, size)
    else:
        while hkey[0] != val[heap[0]]:  # stale lower bound at the root (CountMin only)
            _rekey(heap, hkey, hpos, 0, val[heap[0]], size)
        if est <= hkey[0]:
            return
        s = heap[0]
        old_pos = probe_at(tab_hi, tab_lo, slot_home[s], slot_hi[s], slot_lo[s])
        store(tab_hi, tab_lo, tab_val, p, hi, lo, s)  # before the deletion, as in SpaceSaving
        delete_at(tab_hi, tab_lo, tab_val, hashing, old_pos)
        val[s] = est
        _rekey(heap, hkey, hpos, 0, est, size)
    slot_hi[s] = hi
    slot_lo[s] = lo
    slot_home[s] = h


@hot
def update_batch(st, keys, signed):
    """Sketch update and TRACK_UPDATE (docs/dpss-eehh.md §6.1) for every key of the batch: the k~
    labels with the largest recorded estimates, in an indexed binary min-heap (ties arbitrary, as
    §6.1 allows). CountMin estimates of a label only grow, so there the heap keys are lower bounds,
    refreshed when the minimum is needed; CountSketch rekeys at once. The common cases (a tracked
    label; an untracked one below the minimum) stay in this loop: helpers taking a dozen arrays
    cost their reference counting on every call."""
    cells, seed_t, shift, scratch, col, sign = st.cells, st.seed_t, st.shift[0], st.scratch, st.col, st.sign
    tab_hi, tab_lo, tab_val, hashing = st.tab
    val, meta, heap, hkey, hpos = st.slot_val, st.meta, st.heap, st.hkey, st.hpos
    kt = len(val)
    meta[N] += len(keys)
    home = st.chunk
    for i in range(len(keys)):
        if i % HOMES_CHUNK == 0:
            homes(keys, i, min(i + HOMES_CHUNK, len(keys)), hashing, home)
        hi = keys[i, 0]
        lo = keys[i, 1]
        est = _add_and_estimate(cells, seed_t, shift, scratch, col, sign, hi, lo, signed, np.int64(1))
        h = home[i % HOMES_CHUNK]
        p = probe_at(tab_hi, tab_lo, h, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            s = tab_val[p]
            val[s] = est
            if signed:
                _rekey(heap, hkey, hpos, hpos[s], est, meta[SIZE])
            continue
        if meta[SIZE] == kt and hkey[0] == val[heap[0]] and est <= hkey[0]:
            continue
        _admit(tab_hi, tab_lo, tab_val, hashing, st.slot_hi, st.slot_lo, val, meta, heap, hkey, hpos, st.home,
               p, hi, lo, h, est)


@kernel
def query_batch(st, keys, signed):
    """Final estimates of ``keys`` (no update)."""
    out = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        out[i] = _add_and_estimate(st.cells, st.seed_t, st.shift[0], st.scratch, st.col, st.sign, keys[i, 0],
                                   keys[i, 1], signed, np.int64(0))
    return out


def tracked(st: EEState) -> np.ndarray:
    """The tracked labels ``(m, 2)`` (their stale values are never released)."""
    m = int(st.meta[SIZE])
    return np.stack([st.slot_hi[:m], st.slot_lo[:m]], axis=1).copy()


def f2_upper(st: EEState) -> float:
    """F2_up = 2·median_r Σ_j cell[r][j]² of the final noisy sketch (§6.4 step 3)."""
    return 2.0 * float(np.median((st.cells.astype(np.float64) ** 2).sum(axis=1)))


class _EEHH(Epoched):
    """Shared release logic of the two sketch instantiations."""

    parameters = ("t_max",)

    signed = False
    length_shares = LENGTH_SHARES

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        self._configure(settings, facts)
        super().__init__(settings, facts, counting)

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """One sketch and its k~ tracked labels (the open epoch's), sized as ``_configure`` plans
        them from the parameters (no state is built)."""
        plan = cls.__new__(cls)
        plan._configure(settings, facts)
        return Footprint(ee_state_bytes(plan.depth, plan.width, plan.k_tilde),
                         f"k~ = {plan.k_tilde} (a {plan.depth} x {plan.width} sketch)")

    def _configure(self, settings, facts):
        """k~, the budget split and the sketch's depth and width (docs/dpss-eehh.md §4.5, §6)."""
        self.k, self.k_tilde = check_k_tilde(settings.k, settings.k_tilde or 4 * settings.k)
        self.epsilon, self.delta = check_epsilon(settings.epsilon), check_delta(settings.delta)
        self.settings_width = settings.extra.get("width")
        n_public, over = public_length(settings, facts)
        self.sized_by = length_facts(settings, facts) if n_public is not None else ()
        t_max = settings.extra.get("t_max")
        if t_max is not None:
            t_max = check_positive_int("t_max", t_max)
        choices = [self._plan(share, t_max, n_public) for share in self.length_shares]
        fits = [c for c in choices if t_max is None or c["need"] <= t_max]
        if not fits:
            need = min(c["need"] for c in choices)
            what = f"{over} of {n_public} packets" if n_public is not None else "any epoch, even of one packet"
            raise ValueError(f"t_max ({t_max}) is too small for {what}: the release needs "
                             f"t_max >= {need} (the length plus twice the noisy-length slack); "
                             f"use --param t_max={need} or more")
        self.length_share = min(fits, key=lambda c: c["tau"])["share"]
        self._plan(self.length_share, t_max, n_public)  # the chosen one sets the attributes last

    def _plan(self, share: float, t_max: int | None, n_public: int | None) -> dict:
        """Set the sizes for one share of the budget spent on ñ (docs/dpss-eehh.md §4.5); return the
        threshold at the public length (T_max less its slack when no length is public)."""
        self.eps_s, self.delta_s, self.eps_n, self.delta_n = split_length_budget(self.epsilon, self.delta, share)
        eps_s, slack = self.eps_s, length_slack(self.eps_n, self.delta_n)
        self.slack = slack
        need = (1 if n_public is None else n_public) + 2 * slack + 2
        self.t_max = t_max if t_max is not None else (DEFAULT_T_MAX if n_public is None else need)
        self.delta_run = eehh_run_delta(eps_s, self.delta_s)
        self.width, self.depth = self._size()
        # b = 2d/ε_S rounded *up* to a multiple of 2^-20 (exactly, from the float ε_S): a little
        # more noise than needed, as a fraction the vectorised exact sampler takes.
        exact = Fraction(2 * self.depth) / Fraction(eps_s)
        self.scale_exact = Fraction(math.ceil(exact * SCALE_DENOMINATOR), SCALE_DENOMINATOR)
        self.scale = float(self.scale_exact)
        assert self.scale_exact >= exact and self.scale >= sketch_scale(self.depth, eps_s)
        self.psi = self._psi()
        n = n_public if n_public is not None else max(1, self.t_max - 2 * slack - 2)
        return {"share": share, "need": need, "tau": self._threshold(None, n, n + slack + 1)}

    def cost(self):
        return length_composed_cost(self.eps_s, self.delta_s, self.eps_n, self.delta_n)

    def _new_state(self):
        d, w, kt = self.depth, self.width, self.k_tilde
        seeds = np.array([[self.noise.uniform_int(1 << 64) for _ in range(5)] for _ in range(2 * d)],
                         dtype=np.uint64)
        cells = self.noise.discrete_laplace_array(self.scale_exact, d * w).reshape(d, w)
        return make_ee_state(cells, seeds[:d].copy(), seeds[d:].copy(), kt)

    def _feed(self, state, keys):
        update_batch(state, keys, self.signed)

    def epoch_status(self):
        return {"t_max": self.t_max, "depth": self.depth, "width": self.width, "psi": self.psi}

    def assumed_facts(self):
        """The replayed file's packet count, when T_max, the depth, the width and the budget split
        were chosen from it: neighbours under add/remove differ in it, so every release names it."""
        return tuple(PublicFact(f.name, f.value, f.provenance, "T_max, the sketch's depth and width and the "
                                "budget split are sized from it; public under substitution of one packet's key")
                     for f in self.sized_by)

    def noisy_length(self, n: int) -> int:
        """ñ = n + DLap(ε_n) (§4.5 step 1); a hook for the audit's broken exact-n variant only."""
        return n + self.length_noise()

    def _publish(self, state):
        n = 0 if state is None else int(state.meta[N])
        n_noisy = self.noisy_length(n)
        n_hi = n_noisy + self.slack + 1
        status = {"noisy_length": n_noisy, "t_max": self.t_max, "depth": self.depth,
                  "width": self.width, "psi": self.psi, "k": self.k, "k_tilde": self.k_tilde}
        if n_hi > self.t_max:
            status["suppressed"] = (f"epoch too long: noisy length bound {n_hi} > t_max {self.t_max}; "
                                    f"nothing released (set a larger --param t_max=...)")
            return (), None, n_noisy, status
        if state is None:
            return (), self._threshold(None, n_noisy, n_hi), n_noisy, status
        labels = tracked(state)
        labels = labels[by_key(labels)]
        values = query_batch(state, labels, self.signed)
        tau = self._threshold(state, n_noisy, n_hi)
        keep = values > tau
        return sorted_items(labels[keep, 0], labels[keep, 1], values[keep]), tau, n_noisy, status


@register
class CountMinEEHH(_EEHH):
    """EEHH over a DP CountMin (the default sketch baseline), sized by the row-wise envelope of
    ``eehh_envelope`` (its docstring has the derivation)."""

    name = "eehh-cms"
    parameters = ("t_max", "width")

    def _size(self):
        self.envelope = cms_envelope(self.k_tilde, self.eps_s, self.delta_run, self.t_max,
                                     self.settings_width)
        return self.envelope.width, self.envelope.depth

    def _psi(self):
        return self.envelope.psi2(self.scale)

    def _threshold(self, state, n_noisy, n_hi):
        return envelope_threshold(n_noisy, n_hi, self.k, self.k_tilde, self.envelope, self.scale)

    def limit(self, n):
        """The final estimate is >= f + min_r Z_r (collisions only add), and the min of d cell
        noises stays above −b·ln(d/(0.05(1 + α))) w.p. >= 0.95 (union over rows); ñ stays below
        n + ln(20)/ε_n w.p. 0.95. Error: about n/w of collisions in the best row plus b."""
        n_noisy = n + math.ceil(math.log(20) / self.eps_n)
        tau = self._threshold(None, n_noisy, n_noisy + self.slack + 1)
        low = self.scale * math.log(self.depth / (0.05 * (1 + math.exp(-1 / self.scale))))
        return math.ceil(tau + low) + 1, n / self.width + self.scale

    def notes(self):
        env = self.envelope
        return (f"EEHH over DP CountMin (docs/dpss-eehh.md §6.2–§6.3, row-wise envelope): k={self.k}, "
                f"k~={self.k_tilde}, d={self.depth}, w={self.width}, cell noise discrete Laplace "
                f"b={self.scale:.4g}; γ1(t) = {env.lam:g}t/w + {env.psi1(self.scale):.4g}, "
                f"γ2 = −{self.psi:.4g}; T_max={self.t_max}; {self.length_share:g} of ε and δ on the "
                "noisy length; final-query release, corrected threshold",
                "proof caveat (§6.5): the tracked set depends on the same noise as the final estimates")


@register
class CountSketchEEHH(_EEHH):
    """EEHH over a DP CountSketch — EXPERIMENTAL: its error envelope is not established."""

    name = "eehh-cs"
    signed = True

    def _size(self):
        return next_pow2(3 * self.k_tilde), cs_envelope_depth(self.t_max, self.delta_run)

    def _psi(self):
        return cs_psi(self.scale)

    def _threshold(self, state, n_noisy, n_hi):
        f2 = 0.0 if state is None else f2_upper(state)
        return cs_threshold(n_noisy, n_hi, self.k, self.k_tilde, self.width, self.psi, f2)

    def notes(self):
        return ("EXPERIMENTAL: the CountSketch error envelope is not established (docs/dpss-eehh.md §6.4): "
                "its collision bound uses an F2 estimate from the data, outside 000's Thm 3; the "
                "(ε, δ) shown assumes the envelope holds",
                f"EEHH over DP CountSketch: k={self.k}, k~={self.k_tilde}, d={self.depth}, w={self.width}, "
                f"cell noise discrete Laplace b={self.scale:.4g}, ψ={self.psi:.4g}, T_max={self.t_max}")


# --- EEHH privacy map (docs/dpss-eehh.md §6.2–§6.4): pure functions of public parameters.

def eehh_run_delta(eps_s: float, delta_s: float) -> float:
    """δ_run = δ_S/(1 + e^(ε_S)): per-run failure budget with strict accounting (§6.3)."""
    return check_delta(delta_s) / (1.0 + math.exp(check_epsilon(eps_s)))


def _check_t_max(t_max: int) -> int:
    return check_positive_int("t_max", t_max)


def cms_depth(t_max: int, k_tilde: int, delta_run: float) -> int:
    """d = ⌈log2(2(T_max + k~)/δ_run)⌉ rows for width >= 2k~ (docs/dpss-eehh.md §6.3, D8)."""
    return math.ceil(math.log2(2.0 * (_check_t_max(t_max) + k_tilde) / delta_run))


def sketch_scale(depth: int, eps_s: float) -> float:
    """Cell noise scale b = 2d/ε_S (ℓ1 sensitivity 2d covers replace-one too; §6.3)."""
    return 2.0 * depth / check_epsilon(eps_s)


def sketch_psi(scale: float, depth: int, width: int, delta_run: float) -> float:
    """ψ with d·w·Pr[|Z| > ψ] <= δ_run/2 for discrete Laplace of scale b (§6.3 "Noise"):
    Pr[|Z| > ψ] <= (2/(1 + α))·e^(−ψ/b), so ψ = b·ln(2dw·(2/(1 + α))/δ_run)."""
    alpha = math.exp(-1.0 / scale)
    return scale * math.log(2.0 * depth * width * (2.0 / (1.0 + alpha)) / delta_run)


def cms_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, width: int, psi: float) -> float:
    """τ = max(ñ/k, n_hi/k~ + 2γ1(n_hi) + ψ + 1) with γ1(t) = 2t/w + ψ (§6.2, §6.3)."""
    gamma1 = 2.0 * n_hi / width + psi
    return max(n_noisy / k, n_hi / k_tilde + 2.0 * gamma1 + psi + 1.0)


def cs_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, width: int, psi: float,
                 f2_up: float) -> float:
    """τ = max(ñ/k, n_hi/k~ + 3(E_cs + ψ) + 1), E_cs = 4·sqrt(F2_up/w) (§6.4 steps 2 and 4)."""
    e_cs = 4.0 * math.sqrt(max(f2_up, 0.0) / width)
    return max(n_noisy / k, n_hi / k_tilde + 3.0 * (e_cs + psi) + 1.0)

