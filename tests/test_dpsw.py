"""DPSW-Sketch core (engine/sliding_window/dpsw.py) against docs/dpsw-sketch.md §10 (T1-T8)."""
from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dptop.engine.core.keys import hash_key
from dptop.engine.core.workload import keys_of_ipv4
from dptop.engine.sliding_window.dpsw import Channel, DPSWSketch
from dptop.engine.sliding_window.dpsw_kernels import FAMILY_ANY, FAMILY_V4, FAMILY_V6, INGEST_BLOCK
from dptop.engine.privacy.measures import bun_steinke_rho, zcdp_epsilon
from dptop.engine.sliding_window.geometry import (PREFIX, SUFFIX, WHOLE, Geometry, PlanEntry, budgets, checkpoints,
                                                  expected_max_normal, position_costs, rho_from_epsilon_delta)

ALPHAS = ["1/10", "1/4", "1/3", "1/2", "2/3", "3/4", "9/10", "19/20", "99/100"]


def checkpoints_literal(L: int, alpha: Fraction) -> list[int]:
    """004 Alg 2 lines 1-8 as docs/dpsw-sketch.md §3.2 restates them (slow reference)."""
    I: list[int] = []
    for v in range(L, 0, -1):
        I.append(v)
        j = 0
        while j <= len(I) - 3:
            ks = [k for k in range(j + 1, len(I)) if I[k] >= (1 - alpha) * I[j]]
            if ks:
                k = max(ks)
                del I[j + 1:k]
            j += 1
    return I


def keys_of(values) -> np.ndarray:
    out = np.zeros((len(values), 2), dtype=np.uint64)
    out[:, 1] = np.asarray(values, dtype=np.uint64) + np.uint64(1)
    return out


# ---------------------------------------------------------------- T3: rho from (eps, delta)

@pytest.mark.parametrize("eps,delta,rho", [
    (0.1, 3.16e-11, 1.0319e-4), (0.5, 3.16e-11, 2.5587e-3), (1, 3.16e-11, 1.01319e-2),
    (2, 3.16e-11, 3.97342e-2), (1, 1e-6, 1.74689e-2), (1, 1e-9, 1.17812e-2)])
def test_rho_golden_values(eps, delta, rho):
    """§1.2's values are the Bun-Steinke calibration; the tight one (CKS20) allows more ρ."""
    bs = bun_steinke_rho(eps, delta)
    assert bs == pytest.approx(rho, rel=5e-5)
    assert bs + 2 * math.sqrt(bs * math.log(1 / delta)) == pytest.approx(eps, rel=1e-9)
    got = rho_from_epsilon_delta(eps, delta)
    assert got > bs and zcdp_epsilon(got, delta) == pytest.approx(eps, rel=1e-9)


def test_tight_rho_at_one_and_a_millionth():
    """ε = 1, δ = 1e-6: ρ 0.0175 -> 0.0244, every σ × √(0.0175/0.0244) = 0.847."""
    assert rho_from_epsilon_delta(1, 1e-6) == pytest.approx(0.0243560, rel=1e-5)
    assert math.sqrt(bun_steinke_rho(1, 1e-6) / rho_from_epsilon_delta(1, 1e-6)) == pytest.approx(0.8469, abs=1e-4)


def test_rho_stable_for_tiny_epsilon():
    assert rho_from_epsilon_delta(1e-6, 1e-9) == pytest.approx(1.20637353e-14, rel=1e-8)


def test_rho_rejects_bad_input():
    with pytest.raises(ValueError, match="epsilon"):
        rho_from_epsilon_delta(0.0, 1e-6)
    with pytest.raises(ValueError, match="delta"):
        rho_from_epsilon_delta(1.0, 1.0)


# ---------------------------------------------------------------- T1: checkpoints

@pytest.mark.parametrize("L,alpha,expected", [
    (32, "1/2", [32, 16, 8, 4, 2, 1]), (32, "3/4", [32, 8, 2, 1]),
    (1000, "1/2", [1000, 500, 250, 125, 63, 32, 16, 8, 4, 2, 1]), (1000, "3/4", [1000, 250, 63, 16, 4, 1]),
    (100000, 0.75, [100000, 25000, 6250, 1563, 391, 98, 25, 7, 2, 1]),
    (100000, "1/2", [100000, 50000, 25000, 12500, 6250, 3125, 1563, 782, 391, 196, 98, 49, 25, 13, 7, 4, 2, 1]),
    (100000, 0.9, [100000, 10000, 1000, 100, 10, 1]), (100000, 0.95, [100000, 5000, 250, 13, 1]),
    (100000, 0.99, [100000, 1000, 10, 1])])
def test_checkpoint_golden_lists(L, alpha, expected):
    I, Ip = checkpoints(L, alpha)
    assert list(I) == expected
    assert list(Ip) == [L - v + 1 for v in expected]


def closed_form_equals_literal_procedure(lengths):
    for alpha in ALPHAS:
        a = Fraction(alpha)
        for L in lengths:
            assert list(checkpoints(L, a)[0]) == checkpoints_literal(L, a), (L, alpha)


def test_closed_form_equals_literal_procedure():
    """Every length up to 40 and lengths next to powers of two and the top of the range; every
    length up to 300 in the slow run (the literal procedure is cubic in L)."""
    closed_form_equals_literal_procedure([*range(1, 41), 63, 64, 65, 100, 128, 129, 256, 257, 300])


@pytest.mark.slow
def test_closed_form_equals_literal_procedure_for_every_length_to_300():
    closed_form_equals_literal_procedure(range(1, 301))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_checkpoint_properties(alpha):
    a = Fraction(alpha)
    for L in (1, 2, 7, 32, 1000, 1024, 3163, 25000):
        I, _ = checkpoints(L, a)
        assert I[0] == L and I[-1] == 1
        assert all(x > y for x, y in zip(I, I[1:]))
        assert all(y >= (1 - a) * x or y == x - 1 for x, y in zip(I, I[1:]))  # closeness
        assert all(z < (1 - a) * x for x, z in zip(I, I[2:]))  # sparseness


def test_worked_example_geometry_and_sigmas():
    """§3.6: w = 1000, L = 32, α = 1/2; σ_j for ε = 1, δ = 1e-6, a = 3."""
    g = Geometry.make(1000, 32, "1/2")
    assert g.Ip == (1, 17, 25, 29, 31, 32) and g.K == 33
    rho = bun_steinke_rho(1, 1e-6)  # docs/dpsw-sketch.md §3.6 uses 004's Eq. 1 (§1.2)
    sk = DPSWSketch(g, [Channel(rho)], depth=3, width=64)
    sigmas = [15.13, 52.42, 74.13, 104.84, 148.26, 209.68]
    assert sk.sigmas() == pytest.approx(sigmas, abs=0.01)
    tight = DPSWSketch(g, [Channel(rho_from_epsilon_delta(1, 1e-6))], depth=3, width=64)
    assert tight.sigmas() == pytest.approx([s * 0.846896 for s in sigmas], rel=1e-3)


# ---------------------------------------------------------------- T2: budgets

def test_budgets_sum_to_at_most_rho():
    for alpha in ALPHAS:
        for L in (2, 32, 1000, 25000, 100000):
            I, Ip = checkpoints(L, alpha)
            r = budgets(1.0, alpha, len(I))
            assert r[0] + 2 * sum(r[1:]) <= 1 + 1e-12, (L, alpha)
            assert position_costs(I, Ip, r).max() <= 1 + 1e-12, (L, alpha)
    r = budgets(1.0, "3/4", checkpoints(100000, "3/4")[0].__len__())
    assert r[0] + 2 * sum(r[1:]) == pytest.approx(0.99531, abs=1e-5)
    r = budgets(1.0, "1/2", 6)
    assert r[0] + 2 * sum(r[1:]) == pytest.approx(0.9921875, abs=1e-12)


# ---------------------------------------------------------------- T7: plans and coverage

def test_worked_query_examples():
    """§4.3 (w = 1000, L = 32, α = 1/2); q is the 0-based index into I, so C_2 has q = 1."""
    g = Geometry.make(1000, 32, "1/2")
    p = g.plan(20)
    assert p.entries == (PlanEntry(PREFIX, 1, 1),) and p.covered == (1, 16)
    p = g.plan(40)
    assert p.entries == (PlanEntry(WHOLE, 1, 0), PlanEntry(PREFIX, 2, 2)) and p.covered == (1, 40)
    p = g.plan(1010)
    assert p.entries == (PlanEntry(WHOLE, 1, 0),) + tuple(PlanEntry(WHOLE, k, 0) for k in range(2, 32)) + (
        PlanEntry(PREFIX, 32, 1),)
    assert p.covered == (1, 1008)
    p = g.plan(1020)
    assert p.entries[0] == PlanEntry(SUFFIX, 1, 1) and p.entries[-1] == PlanEntry(PREFIX, 32, 1)
    assert p.covered == (17, 1008) and len(p.entries) == 32


@pytest.mark.parametrize("w,L,alpha", [(1000, 32, "1/2"), (1000, 100, "3/4"), (500, 64, "9/10"), (300, 300, "1/2")])
def test_plan_coverage_zero_noise(w, L, alpha):
    """T7 with σ ≈ 0 (ρ = 1e12, reachable only through the core class): estimates equal the exact
    counts of the covered range; misalignment within the closeness bounds; newest complete substream in."""
    g = Geometry.make(w, L, alpha)
    sk = DPSWSketch(g, [Channel(1e12)], depth=4, width=1024, seed=3)
    n = 4 * w + L // 3
    labels = np.array([(i // L) % 6 for i in range(n)])  # item = substream number mod 6 (no collisions)
    rng = np.random.default_rng(5)
    times = np.unique(np.concatenate([rng.integers(1, n, 60), [1, L, L + 1, w, w + 1, n]]))
    done = 0
    for t in times:
        sk.update(keys_of(labels[done:t]))
        done = t
        for rule in ("004", "noise-aware"):
            plan = sk.plan(rule, gamma=0.01)
            s = max(t - w + 1, 1)
            lo, hi = plan.covered
            if rule == "004":
                I = g.I
                x = next(e.q for e in plan.entries if e.k == -(-s // L)) if -(-s // L) < -(-t // L) else None
                assert s - lo < (float(g.alpha) * I[x] if x is not None else 1) + 1e-9 or s == lo
                c = t - (-(-t // L) - 1) * L
                y = plan.entries[-1].q
                assert t - hi == c - I[y] and (y == 0 or c - I[y] < float(g.alpha) * I[y - 1])
            assert hi >= (-(-t // L) - 1) * L or hi >= t  # newest complete substream included (D7)
            assert len(plan.entries) <= -(-w // L) + 1
            truth = Counter(labels[lo - 1:hi].tolist())
            est = sk.estimate(keys_of(range(6)), plan=plan, estimator="min")
            want = np.array([truth.get(v, 0) for v in range(6)], dtype=float)
            assert np.abs(est - want).max() < 0.05, (t, rule, plan.covered)


def test_single_repeated_item_returns_its_count():
    """w = 1000, 10 substreams, one address repeated: at substream ends the plan is exactly the window
    (the authors' C++ returns 900 here, docs/dpsw-sketch.md §8 D7). ε = 1, δ = 1e-6; tolerance 6 noise std."""
    g = Geometry.make(1000, 100, "3/4")
    rho = rho_from_epsilon_delta(1.0, 1e-6)
    sk = DPSWSketch(g, [Channel(rho)], depth=2, width=256)
    key = keys_of([7])
    for t in (1000, 2000, 2500):
        sk.update(np.repeat(key, t - sk.t, axis=0))
        for est in ("min", "sum-min"):
            plan = sk.plan()
            assert plan.covered == (t - 999, t)
            got = sk.estimate(key, plan=plan, estimator=est, debias=True)[0]
            tol = 6 * sk.noise_std(plan)
            assert abs(got - 1000) < tol, f"estimate {got:.1f} not within {tol:.1f} of 1000 at t={t} ({est})"


# ---------------------------------------------------------------- T5, T6: frozen rule, piecewise constant

@pytest.mark.parametrize("w,L,alpha,seed", [(200, 20, "1/2", 1), (300, 64, "3/4", 2), (150, 150, "2/3", 3),
                                            (1000, 100, "9/10", 4)])
def test_no_sketch_read_before_completion_or_written_after(w, L, alpha, seed):
    g = Geometry.make(w, L, alpha)
    sk = DPSWSketch(g, [Channel(0.5), Channel(0.5, prefix=120)], depth=3, width=128)
    sk.record_reads = True
    rng = np.random.default_rng(seed)
    read_state: dict[tuple, tuple[int, int]] = {}  # (sketch id, owner) -> (writes, last write) at read
    while sk.t < 6 * w:
        sk.update(keys_of(rng.integers(0, 50, int(rng.integers(1, L + 3)))))
        st = sk.state
        for (sid, owner), before in read_state.items():  # nothing written after a read
            if st.owner[sid] == owner:
                assert (st.writes[sid], st.last[sid]) == before, (sid, owner)
        for rule in ("004", "noise-aware"):
            sk.estimate(keys_of([1, 2, 3]), channel=int(rng.integers(0, 2)), plan=sk.plan(rule, gamma=0.05))
        for e, sid, writes, last, t in sk.reads:
            size = L if e.kind == WHOLE else g.I[e.q]
            end = (e.k - 1) * L + (g.I[e.q] if e.kind == PREFIX else L)
            assert writes == size and last == end <= t, (e, writes, last, t)  # complete when read
            read_state[(sid, e.k)] = (writes, last)
        sk.reads.clear()
    assert read_state


def test_reading_an_incomplete_sketch_raises():
    g = Geometry.make(100, 10, "1/2")
    sk = DPSWSketch(g, [Channel(1.0)], depth=2, width=64)
    sk.update(keys_of(range(25)))
    live = g.plan(25)._replace(entries=(PlanEntry(WHOLE, 3, 0),))  # substream 3 is still building
    with pytest.raises(RuntimeError, match="privacy invariant"):
        sk.estimate(keys_of([1]), plan=live)


def test_answers_constant_while_plan_unchanged():
    """T6: query after every item; bit-identical whenever PLAN(t) = PLAN(t-1) (noise on)."""
    g = Geometry.make(400, 40, "1/2")
    sk = DPSWSketch(g, [Channel(0.05)], depth=3, width=64)
    stream = np.random.default_rng(11).integers(0, 20, 1500)
    probe = keys_of(range(20))
    prev = {}
    same = changed = 0
    for i, v in enumerate(stream):
        sk.update(keys_of([v]))
        for rule in ("004", "noise-aware"):
            plan = sk.plan(rule, gamma=0.05)
            est = sk.estimate(probe, plan=plan)
            if rule in prev and prev[rule][0] == plan.entries:
                assert np.array_equal(est, prev[rule][1]), (i, rule)
                same += 1
            else:
                changed += 1
            prev[rule] = (plan.entries, est)
    assert same > 1000 and changed > 50


# ---------------------------------------------------------------- T4, T8: noise calibration, expiry

def test_noise_variance_matches_a_over_rho_j():
    """The noise of fresh suffix sketches (no item yet) is N(0, a/ρ_j). Tolerance on the sample variance
    5·sqrt(2/(n-1)) (about 1% for n = 2^19 cells); mean within 5σ/√n; KS p > 1e-3."""
    g = Geometry.make(16, 4, "1/2")  # I = [4, 2, 1]: at p = 1 the suffixes q = 1, 2 are untouched
    rhos = [0.3, 0.05]
    sk = DPSWSketch(g, [Channel(r) for r in rhos], depth=4, width=1 << 18, seed=2024)
    sk.update(keys_of([0]))
    st = sk.state
    arrays = []
    for ch, rho in enumerate(rhos):
        for q in (1, 2):
            sid = q  # slot 0: whole at id 0, suffix q at id q
            cells = sk.noise(ch, sid)
            n = len(cells)
            var = 4 / budgets(rho, "1/2", 3)[q]
            assert abs(cells.var(ddof=1) / var - 1) < 5 * math.sqrt(2 / (n - 1)), (ch, q)
            assert abs(cells.mean()) < 5 * math.sqrt(var / n)
            assert stats.kstest(cells / math.sqrt(var), "norm").pvalue > 1e-3
            arrays.append(cells[: 1 << 17])
    for i in range(len(arrays)):
        for j in range(i + 1, len(arrays)):
            assert abs(np.corrcoef(arrays[i], arrays[j])[0, 1]) < 5 / math.sqrt(len(arrays[i]))
    other = DPSWSketch(g, [Channel(0.3)], depth=4, width=1 << 18)
    other.update(keys_of([0]))
    assert not np.array_equal(other.noise(0, 1)[:1000], sk.noise(0, 1)[:1000])
    assert not st.cells[st.off[1]:st.off[1] + 1000].any()  # the cells hold counts only: noise is added by reads


def test_expiry_reuses_slots_with_fresh_noise_and_constant_memory():
    g = Geometry.make(100, 10, "1/2")
    sk = DPSWSketch(g, [Channel(0.1)], depth=2, width=256)
    nbytes = sk.state.cells.nbytes
    st = sk.state
    sid = 2  # slot 0, suffix q = 2: I = [10, 5, 3, 2, 1], I' = [1, 6, 8, 9, 10], untouched at p = 1
    o, n = st.off[sid], 2 * st.width[sid]
    sk.update(keys_of([1]))
    first = sk.noise(0, sid)  # substream 1, fresh
    st.cells[o:o + n] = 7  # stale content the reuse must clear
    sk.update(keys_of([1] * (g.K * g.L)))  # slot 0 reused by substream K + 1 at its first item
    assert st.owner[sid] == g.K + 1 and st.writes[sid] == 0
    assert not st.cells[o:o + n].any()
    assert not np.array_equal(first, sk.noise(0, sid))
    sk.update(keys_of(np.arange(10 * g.w) % 13))
    assert sk.state.cells.nbytes == nbytes
    owners = sorted(set(st.owner[: g.K * g.m].tolist()))
    assert len(owners) == g.K and owners[-1] == -(-sk.t // g.L)


def _range_counts(sk: DPSWSketch, history: np.ndarray, ch: int, sid: int) -> np.ndarray:
    """The cells PCMS ``sid`` of channel ``ch`` must count: the items of its own range written so
    far, of the channel's family, hashed as the channel hashes them (a plain Python reference)."""
    st = sk.state
    fam = sk.channels[ch].family
    wd, sh = int(st.width[sid]), int(st.shift[sid])
    out = np.zeros(sk.depth * wd)
    for hi, lo in history[st.start[sid] - 1:min(st.end[sid], sk.t)]:
        v4 = hi == 0 and int(lo) >> 32 == 0xFFFF
        if (fam == FAMILY_V4 and not v4) or (fam == FAMILY_V6 and v4):
            continue
        kh, kl = hi & st.mask[ch, 0], lo & st.mask[ch, 1]
        for r in range(sk.depth):
            out[r * wd + int(hash_key(kh, kl, st.seeds[ch, r]) >> np.uint64(sh))] += 1
    return out



def assert_every_range_counted(sk, history, channels: int, where) -> None:
    """Every owned PCMS of every channel holds exactly the counts of its own range of ``history``."""
    st = sk.state
    for ch in range(channels):
        for sid in range(len(st.owner)):
            if st.owner[sid] < 1:
                continue
            o, n = ch * st.geom[4] + st.off[sid], sk.depth * st.width[sid]
            assert np.array_equal(st.cells[o:o + n], _range_counts(sk, history, ch, sid)), (where, ch, sid)

def test_reused_sketches_hold_only_their_own_range_and_noise():
    """NEW_SUBSTREAM reuses the cells of an expired PCMS and clears them only when they hold
    counts (an item of the channel's family was written since the last reset). Substreams
    alternate IPv4-only, IPv6-only, mixed and empty stretches per family, and sketches are read at
    random times; after every batch each PCMS of every channel must hold exactly the counts of its
    own range (reads add the noise to a copy, never to the cells). A count left over from the
    expired instance (a reuse not cleared, or cleared on the wrong flag) or noise written back by a
    read fails it."""
    g = Geometry.make(48, 12, "1/2")
    chans = [Channel(0.5, FAMILY_V4, 104), Channel(0.5, FAMILY_V4, 128), Channel(0.5, FAMILY_V6, 64),
             Channel(0.5, FAMILY_ANY, 128)]
    sk = DPSWSketch(g, chans, depth=3, width=64, seed=9)
    rng = np.random.default_rng(17)
    v4 = keys_of_ipv4(rng.integers(0, 40, 4000).astype(np.uint32) * np.uint32(0x01010101))
    v6 = np.stack([rng.integers(1, 30, 4000).astype(np.uint64) << np.uint64(40),
                   rng.integers(0, 9, 4000).astype(np.uint64)], axis=1)
    history = np.zeros((0, 2), dtype=np.uint64)
    reads = 0
    for sub in range(6 * g.K):
        pick = [v4, v6, None, v4][sub % 4]
        if pick is None:
            batch = np.where(rng.random((g.L, 1)) < 0.5, v4[:g.L], v6[:g.L])
        else:
            batch = pick[rng.integers(0, 4000, g.L)]
        for part in np.array_split(batch, 3):
            sk.update(part)
            history = np.concatenate([history, part])
            if sk.t >= g.w and rng.random() < 0.5:
                sk.estimate(batch[:4], channel=int(rng.integers(0, len(chans))))
                reads += 1
            assert_every_range_counted(sk, history, len(chans), sub)
    assert reads > 5


def test_runs_longer_than_an_ingest_block_count_every_item_once():
    """A channel hashes ``INGEST_BLOCK`` keys at a time and then counts them row by row: runs of
    hundreds of positions between checkpoints (not a multiple of the block), mixed IPv4 and IPv6
    keys and batches that end inside a run still leave every PCMS of every channel with exactly
    the counts of its own range. A key counted twice, dropped at a block's end or hashed with the
    wrong high word fails it."""
    assert INGEST_BLOCK < 300
    g = Geometry.make(1800, 900, "1/2")
    chans = [Channel(0.5, FAMILY_V4, 104), Channel(0.5, FAMILY_V6, 64), Channel(0.5, FAMILY_ANY, 128)]
    sk = DPSWSketch(g, chans, depth=2, width=256, seed=4)
    rng = np.random.default_rng(8)
    v4 = keys_of_ipv4(rng.integers(0, 5000, 2900).astype(np.uint32) * np.uint32(0x00010101))
    v6 = np.stack([rng.integers(1, 4, 2900).astype(np.uint64) << np.uint64(40),
                   rng.integers(0, 300, 2900).astype(np.uint64)], axis=1)
    history = np.where(rng.random((2900, 1)) < 0.7, v4, v6)
    for a, b in ((0, 1333), (1333, 2900)):
        sk.update(history[a:b])
        assert_every_range_counted(sk, history[:b], len(chans), b)


def test_a_read_sees_counts_plus_the_instance_noise_the_same_on_every_read():
    """A read sees the exact counts of each frozen sketch plus that instance's noise: every estimate
    equals the sum of per-sketch row minima of cells + ``noise()`` (a plain Python reference), the
    cells keep the counts only, a second read sees the same values, and later items leave them alone."""
    g = Geometry.make(100, 10, "1/2")
    sk = DPSWSketch(g, [Channel(0.1)], depth=2, width=64, seed=5)
    stream = np.arange(3 * g.L) % 7
    sk.update(keys_of(stream))
    plan = sk.plan()
    ids = sk.plan_ids(plan)
    st = sk.state
    cells_before = st.cells.copy()
    keys = keys_of(range(7))
    before = sk.estimate(keys, plan=plan)
    assert np.array_equal(st.cells, cells_before)  # nothing written back
    want = np.zeros(len(keys))
    for sid in ids:
        o, wd, sh = st.off[sid], int(st.width[sid]), int(st.shift[sid])
        counts = st.cells[o:o + 2 * wd]
        assert counts.min() >= 0 and counts.sum() == 2 * st.writes[sid]  # +1s only, every item once per row
        vals = counts + sk.noise(0, sid)
        for i, (hi, lo) in enumerate(keys):
            want[i] += min(vals[r * wd + int(hash_key(hi, lo, st.seeds[0, r]) >> np.uint64(sh))] for r in range(2))
    assert np.array_equal(before, want)
    sk.update(keys_of(stream[: g.L // 2]))
    assert np.array_equal(sk.estimate(keys, plan=plan), before)


def test_seeded_output_does_not_depend_on_when_queries_ran():
    """The same seed gives the same final estimates whether or not the stream was queried on the way
    (each sketch instance draws from its own stream, whenever it is first read)."""
    g = Geometry.make(200, 10, "1/2")
    stream = keys_of(np.random.default_rng(3).integers(0, 50, 5 * g.w))
    quiet = DPSWSketch(g, [Channel(0.2)], depth=3, width=128, seed=11)
    busy = DPSWSketch(g, [Channel(0.2)], depth=3, width=128, seed=11)
    quiet.update(stream)
    for i in range(0, len(stream), 97):
        busy.update(stream[i:i + 97])
        if busy.t >= g.w:
            busy.estimate(keys_of(range(50)))
    assert np.array_equal(quiet.estimate(keys_of(range(50))), busy.estimate(keys_of(range(50))))


def test_expected_max_normal_constants():
    assert [round(expected_max_normal(a), 3) for a in (1, 2, 3, 4, 5)] == [0.0, 0.564, 0.847, 1.03, 1.163]


# ---------------------------------------------------------------- validation

def test_validation_messages():
    with pytest.raises(ValueError, match=r"substream length L \(200\) must be <= window \(100\)"):
        Geometry.make(100, 200, "1/2")
    with pytest.raises(ValueError, match=r"alpha \(1.5\) must be in \(0, 1\)"):
        Geometry.make(100, 10, 1.5)
    with pytest.raises(ValueError, match="alpha"):
        Geometry.make(100, 10, "abc")
    g = Geometry.make(100, 10, "1/2")
    with pytest.raises(ValueError, match=r"width \(100\) must be a power of two"):
        DPSWSketch(g, [Channel(1.0)], width=100)
    with pytest.raises(ValueError, match="channel rho"):
        DPSWSketch(g, [Channel(0.0)])
    with pytest.raises(ValueError, match=r"substream length L \(2147483648\) must be < 2\^31"):
        DPSWSketch(Geometry.make(1 << 32, 1 << 31, "1/2"), [Channel(1.0)])  # int32 cells: a count must fit
    with pytest.raises(ValueError, match="estimator"):
        DPSWSketch(g, [Channel(1.0)]).estimate(keys_of([1]), estimator="median")


def test_bulk_normal_sampler_distribution():
    """dptop.engine.privacy.bulknoise.fill_normal (ziggurat) on 2^21 draws, fixed seed: KS and 100-bin chi-square
    p > 1e-3; the share beyond the base strip r = 3.654 (the tail branch) within 5 sd of 2·Φ(−r)."""
    from dptop.engine.privacy.bulknoise import fill_normal, make_lanes
    out = np.empty(1 << 21)
    fill_normal(make_lanes(99), out, 1.0)
    assert stats.kstest(out, "norm").pvalue > 1e-3
    counts, _ = np.histogram(out, stats.norm.ppf(np.linspace(0, 1, 101)))
    assert stats.chisquare(counts).pvalue > 1e-3
    p = 2 * stats.norm.sf(3.6541528853610088)
    assert abs((np.abs(out) > 3.6541528853610088).mean() - p) < 5 * math.sqrt(p / len(out))
    scaled = np.empty(1 << 16)
    fill_normal(make_lanes(7), scaled, 3.0)
    assert abs(scaled.std() / 3.0 - 1) < 5 * math.sqrt(1 / (2 * len(scaled)))
