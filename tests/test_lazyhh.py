"""LazyHH (docs/lazyhh.md §6–7, tests L5, L8–L13) and its horizon handling."""
import dataclasses
import json
import math

import numpy as np
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.workload import zipf_keys
from dptop.engine.core import registry
from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.continual.gaussbm import HorizonExceeded
from dptop.engine.continual.horizon import DEFAULT_HORIZON
from dptop.engine.core.keys import KeyBatch
from dptop.engine.continual.lazyhh import LazyHHInstance, LazyHHParams, delta_for, delta_tilde
from dptop.engine.continual.lazyhh_kernels import output_step
from dptop.engine.core.settings import Settings
from tests.naive_lazy import RefLazyHH

SEED = 6


def small_params(**kw):
    base = dict(k=4, k_tilde=16, epsilon=0.5, delta=1e-3, beta=5e-4, horizon=2**12)
    base.update(kw)
    return LazyHHParams.build(**base)


def test_delta_tilde_and_inverse():
    """L5: δ~ = 2δ(3/2 + e^ε + δ) ≈ 0.0063 at (0.5, 0.001); the inverse round-trips."""
    assert delta_tilde(0.5, 1e-3) == pytest.approx(0.0062994, rel=1e-4)
    for eps, dt in ((0.1, 1e-6), (0.5, 0.0063), (0.9, 1e-3)):
        assert delta_tilde(eps, delta_for(eps, dt)) == pytest.approx(dt, rel=1e-9)


def test_parameters_reproduce_spec_worked_example():
    """L5: docs/lazyhh.md §6.9, option A at 001's CAIDA point (T = 26.6e6, k = 128, k~ = 512, ε = 0.5, δ = 1e-3, β = δ/2)."""
    p = LazyHHParams.build(128, 512, 0.5, 1e-3, 5e-4, 26_600_000)
    assert (p.depth, p.width, p.height) == (27, 1392, 15)
    assert p.sigma == pytest.approx(215.0, abs=0.05)
    assert p.gamma == pytest.approx(6490, rel=5e-4)
    tau2 = 26.6e6 / 512 + (p.gamma + p.width) + 2 * (math.e * 26.6e6 / p.width + p.gamma)
    assert tau2 == pytest.approx(176_720, rel=5e-4)
    assert p.threshold(26_600_000) == pytest.approx(26.6e6 / 128 + 1)  # τ1 binds at the end
    b = LazyHHParams.build(128, 512, 0.5, 1e-3, 5e-4, 26_600_000, option="B")
    assert (b.width, b.height) == (512, 16) and b.gamma == pytest.approx(6807, rel=5e-4)
    assert p.tau1_binds_after() < 26.6e6 and b.tau1_binds_after() is None


@pytest.mark.parametrize("kw, match", [
    (dict(k_tilde=4), r"k~ \(4\) must be > k \(4\)"),
    (dict(epsilon=1.0), r"epsilon \(1\) must be in \(0, 1\)"),
    (dict(epsilon=0.0), r"epsilon \(0\) must be in \(0, 1\)"),
    (dict(delta=0.5), r"delta \(0.5\) must be in \(0, 0.5\)"),
    (dict(beta=1e-3), r"beta \(0.001\) must be in \(0, delta"),
    (dict(beta=0.0), r"beta \(0\) must be in \(0, delta"),
    (dict(horizon=15), r"horizon \(15\) must be >= k~ \(16\)"),
    (dict(option="C"), r"option \('C'\) must be"),
])
def test_validation(kw, match):
    """L13: clear errors naming the parameter, its value and the rule."""
    with pytest.raises(ValueError, match=match):
        small_params(**kw)


def test_algorithm_validation_through_settings():
    with pytest.raises(ValueError, match=r"k~ \(8\) must be > k \(8\)"):
        registry.make("lazyhh", Settings(k=8, k_tilde=8, epsilon=0.5, delta=1e-3))
    with pytest.raises(ValueError, match=r"horizon \(10\) must be >= 16"):
        registry.make("lazyhh", Settings(k=4, epsilon=0.5, delta=1e-3, horizon=10))
    with pytest.raises(ValueError, match=r"epsilon \(1\) must be in \(0, 1\)"):
        registry.make("lazyhh", Settings(k=4, epsilon=1.0, delta=1e-3))


def test_kernel_matches_plain_python_alg6_noiseless():
    """Against the reference (noiseless LazyCMS cells): identical candidate sets after every pruning and
    identical outputs (labels, estimates, τ) at every output time. γ is lowered so items pass τ."""
    n = 150 * 16
    p = dataclasses.replace(small_params(horizon=n), gamma=1.0)
    inst = LazyHHInstance(p, seed=SEED, noiseless=True)
    keys = zipf_keys(1.3, 300, n, SEED)
    buckets = {tuple(k): tuple(bb) for k, bb in zip(keys.tolist(), inst.sketch.buckets(keys)[0].tolist())}
    ref = RefLazyHH(p.k, p.k_tilde, p.width, p.depth, p.gamma, lambda key: buckets[key])
    released_any = False
    for t0 in range(0, n, p.k_tilde):
        chunk = keys[t0:t0 + p.k_tilde]
        inst.update(chunk)
        for key in chunk.tolist():
            ref.update(tuple(key))
        out_keys, vals, tau, t_out = inst.output()
        assert t_out == ref.t and tau == pytest.approx(ref.tau)
        got = sorted(((tuple(k), v) for k, v in zip(out_keys.tolist(), vals)), key=lambda r: (-r[1], r[0]))
        assert got == [(k, float(v)) for k, v in ref.output]
        assert [tuple(k) for k in inst._candidates().tolist()] == ref.cands
        released_any |= bool(got)
    assert released_any


def test_instance_state_is_one_block_in_tuple_order():
    """Every array of a LazyHH instance's state and its noise lanes lies in one block, in tuple
    order, each from a cache line of its own (the layout is the same in every process:
    ``dptop.engine.core.packing``); packing keeps shapes, dtypes, values and other fields."""
    from dptop.engine.core.packing import LINE, packed

    inst = LazyHHInstance(small_params(), seed=SEED)
    arrays = []

    def walk(t):
        for x in t:
            if isinstance(x, np.ndarray):
                arrays.append(x)
            elif isinstance(x, tuple):
                walk(x)

    walk((inst.state, inst.sketch.rng))
    starts = [a.ctypes.data for a in arrays]
    assert all(s % LINE == 0 for s in starts)
    assert all(b >= a + x.nbytes for a, b, x in zip(starts, starts[1:], arrays))
    assert starts[-1] + arrays[-1].nbytes - starts[0] <= sum(-(-x.nbytes // LINE) * LINE for x in arrays)
    assert inst.sketch.state is inst.state.sk
    state = (np.arange(3.0), (np.ones((2, 5), np.int16), 7))
    copy = packed(state)
    assert np.array_equal(copy[0], state[0]) and copy[1][0].dtype == np.int16 and copy[1][1] == 7
    assert np.array_equal(copy[1][0], state[1][0]) and copy[1][0].ctypes.data - copy[0].ctypes.data == LINE


def test_kth_smallest_matches_sorting_and_leaves_its_input():
    """PRUNE's cut (``kth_smallest``, branch-free partitions) against np.sort: random, tied,
    constant and sorted values, every k, sizes 1 to 1100; the input is never reordered."""
    from dptop.engine.core.jit import kernel
    from dptop.engine.core.topk import kth_smallest

    kth = kernel(lambda src, n, k, buf: kth_smallest(src, n, k, buf))
    rng = np.random.default_rng(SEED)
    for trial in range(4000):
        n = int(rng.integers(1, 40)) if trial % 2 else int(rng.integers(1, 1100))
        src = rng.normal(size=n + 3)
        if trial % 4 == 1:
            src = np.round(src * 2)  # many ties
        elif trial % 4 == 2:
            src[:] = 7.0
        elif trial % 4 == 3:
            src = np.sort(src)[::-1].copy()
        before = src.copy()
        k = int(rng.integers(0, n))
        assert kth(src, n, k, np.full(2 * n + 2, np.nan)) == np.sort(src[:n])[k]
        assert np.array_equal(src, before)


@pytest.mark.parametrize("noiseless", [False, True])
def test_output_stops_only_estimates_that_prune_and_tau_ignore(noiseless):
    """OUTPUT may stop a candidate's min over its rows early (past the first k~, once it is below
    the smallest of their estimates and not above τ). Against the full estimates of the released
    cells: before each output step, OUTPUT's values for the candidates then (up to 2k~ − 1) are
    exact for the first k~ and otherwise exact or between the estimate and both bounds, with τ
    above that smallest estimate and (noiseless, where estimates never fall below the counts)
    with a τ of 1.25 under it; some do stop. At each output step PRUNE keeps, and OUTPUT
    publishes, exactly what the full estimates give (k~ largest, ties to the lower index)."""
    p = dataclasses.replace(small_params(horizon=2**13), gamma=1.0)
    assert p.depth >= 9  # the stop is tested after every fourth row
    inst = LazyHHInstance(p, seed=SEED, noiseless=noiseless)
    st = inst.state
    keys = zipf_keys(1.5, 400, p.horizon, SEED + 2)
    stopped = published = 0
    for t0 in range(0, p.horizon, p.k_tilde):
        inst.update(keys[t0:t0 + p.k_tilde - 1])  # all but the output step's own arrival
        before = inst._candidates()
        n = len(before)
        full = inst.sketch.estimates(before)
        for t, gamma in ((inst.t, p.gamma), (1, -1e9)):  # τ(t), and τ = 1/k + 1; scratch values only
            output_step(st, t, float(p.k), np.int64(p.k_tilde), gamma)
            vals, tau = st.cand_val[:n], st.out_tau[0]
            assert np.array_equal(vals[:p.k_tilde], full[:p.k_tilde])
            early = vals != full
            if n > p.k_tilde:
                assert np.all(vals >= full)
                assert np.all(vals[early] < full[:p.k_tilde].min()) and np.all(vals[early] <= tau)
            stopped += int(early.sum())
        last = keys[t0 + p.k_tilde - 1:t0 + p.k_tilde]
        inst.update(last)
        if not (before == last).all(axis=1).any():
            before = np.concatenate([before, last])
        full = inst.sketch.estimates(before)
        _, released, tau, t_out = inst.output()
        assert t_out == t0 + p.k_tilde
        order = sorted(range(len(before)), key=lambda c: (-full[c], c))
        kept = sorted(order[:p.k_tilde])
        assert inst._candidates().tolist() == before[kept].tolist()
        assert sorted(released.tolist()) == sorted(v for v in full.tolist() if v > tau)
        published += len(released)
    assert stopped > 0 and published > 0


def test_schedule_and_candidate_invariants():
    """L8: H changes only at t ≡ 0 (mod k~); |C| <= 2k~ always and <= k~ right after pruning; H ⊆ C at
    output time; every released v > τ(t); releases are sorted by estimate then key."""
    p = dataclasses.replace(small_params(horizon=2000), gamma=2.0)
    inst = LazyHHInstance(p, seed=SEED)
    keys = zipf_keys(1.2, 400, 2000, SEED + 1)
    last = inst.output()
    for t in range(2000):
        before = {tuple(k) for k in inst._candidates().tolist()} | {tuple(keys[t])}
        inst.update(keys[t:t + 1])
        n_cand = len(inst._candidates())
        out = inst.output()
        assert n_cand <= 2 * p.k_tilde
        if (t + 1) % p.k_tilde:
            assert out[3] == last[3] and np.array_equal(out[0], last[0])
        else:
            assert out[3] == t + 1 and n_cand <= p.k_tilde
            assert {tuple(k) for k in out[0].tolist()} <= before
            assert np.all(out[1] > out[2]) and out[2] == pytest.approx(p.threshold(t + 1))
        last = out
    alg = registry.make("lazyhh", Settings(k=4, k_tilde=16, epsilon=0.5, delta=1e-3, horizon=2000, seed=SEED))
    rel = alg.consume(KeyBatch(keys))[-1]
    est = [it.estimate for it in rel.items]
    assert est == sorted(est, reverse=True)


@pytest.mark.parametrize("noiseless", [True, False])
def test_lemma10_non_candidates_are_light_whenever_event_B_holds(noiseless):
    """L9: at each output time, if every candidate's estimate is within [f - λ1, f + λ2] (event B),
    then every non-candidate y has f_t(y) <= t/k~ + λ1 + λ2. Must never fail. The noiseless run uses
    γ = 0, so the bound is tight enough to catch a wrong pruning rule; the noisy run uses the real γ."""
    for seed, skew in ((SEED, 1.1), (SEED + 1, 0.6), (SEED + 2, 1.5)):
        p = small_params(k=8, k_tilde=32, horizon=2**14)
        if noiseless:
            p = dataclasses.replace(p, gamma=0.0)
        inst = LazyHHInstance(p, seed=seed, noiseless=noiseless)
        keys = zipf_keys(skew, 3000, 2**14, seed)
        exact = ExactCounter()
        checked = 0
        for t0 in range(0, 2**14, p.k_tilde):
            chunk = keys[t0:t0 + p.k_tilde]
            inst.update(chunk)
            exact.add(chunk)
            t = inst.t
            lam1 = p.gamma + p.width
            lam2 = math.e * t / p.width + p.gamma
            cands = inst._candidates()
            vals = inst.state.cand_val[:len(cands)]
            f = np.array([exact.count_of(h, l) for h, l in cands.tolist()])
            if np.all(vals >= f - lam1) and np.all(vals <= f + lam2):
                cset = {tuple(c) for c in cands.tolist()}
                all_keys, counts = exact.items()
                heavy_outside = [c for k, c in zip(all_keys.tolist(), counts) if tuple(k) not in cset]
                assert max(heavy_outside, default=0) <= t / p.k_tilde + lam1 + lam2
                checked += 1
        assert checked > 0


def test_fixed_horizon_stops_visibly_and_update_past_it_raises():
    """L12 / §7.2: at T the instance stops; later packets are counted, not processed; the last output
    stays published with horizon_reached; update() past T raises HorizonExceeded."""
    s = Settings(k=4, k_tilde=16, epsilon=0.5, delta=1e-3, horizon=100)
    alg = registry.make("lazyhh", s)
    keys = zipf_keys(1.1, 50, 150, SEED)
    rels = alg.consume(KeyBatch(keys))
    assert rels[-1].span.end == 96  # last output step t = 96 (multiple of k~ = 16)
    st = alg.live().status
    assert st.horizon_reached and st.packets_seen == 100 and st.packets_after_horizon == 50
    assert st.packets_until_horizon == 0 and st.mode == "fixed horizon"
    assert alg.consume(KeyBatch(keys[:10])) == [] and alg.status().packets_after_horizon == 60
    fresh = registry.make("lazyhh", s)
    fresh.update(keys[:100])
    with pytest.raises(HorizonExceeded, match="fixed horizon T = 100 reached"):
        fresh.update(keys[100:101])


def test_restart_uses_a_fresh_instance_per_horizon():
    """L12 / §7.3: restart rolls over at exactly T arrivals to a new instance (new hash seeds, t = 0);
    spans carry the epoch index; the guarantee scope says so."""
    s = Settings(k=4, k_tilde=16, epsilon=0.5, delta=1e-3, horizon=64, restart=True)
    alg = registry.make("lazyhh", s)
    seeds0 = alg.instance.sketch.state.seeds.copy()
    rels = alg.consume(KeyBatch(zipf_keys(1.1, 50, 150, SEED)))
    assert [r.span.index for r in rels] == [0, 1, 2]  # latest output of each epoch in this batch
    assert rels[0].span.end == 64 and rels[1].span.start == 64 and rels[1].span.end == 128
    assert (rels[2].span.start, rels[2].span.end) == (128, 144)  # t = 16 in epoch 2
    assert alg.epoch == 2 and alg.t == 150 - 128
    assert not np.array_equal(seeds0, alg.instance.sketch.state.seeds)
    assert "each epoch" in alg.guarantee().scope and alg.status().mode == "restart per horizon"


def test_horizon_defaults():
    """T = the file's packet count for a replay (raised to k~ if shorter), else the default."""
    def mk(length=None, **kw):
        return registry.make("lazyhh", Settings(k=4, epsilon=0.5, delta=1e-3, **kw), PublicFacts.of(length))
    assert mk(5000).horizon == 5000
    assert mk(3).horizon == 16
    assert mk().horizon == DEFAULT_HORIZON
    assert mk(5000, horizon=777).horizon == 777


def test_guarantee_reports_delta_tilde_and_substitution():
    alg = registry.make("lazyhh", Settings(k=4, epsilon=0.5, delta=1e-3, horizon=1000))
    g = alg.guarantee()
    assert g.delta == pytest.approx(delta_tilde(0.5, 1e-3)) and g.epsilon == 0.5  # P10: δ~, not δ
    assert g.neighbouring == "substitution of one packet's source address" and g.model == "continual observation"
    assert "os.urandom" in g.noise
    seeded = registry.make("lazyhh", Settings(k=4, epsilon=0.5, delta=1e-3, horizon=1000, seed=1))
    assert "NOT private" in seeded.guarantee().noise


def test_cli_replay_short_capture_releases_nothing_and_reports_threshold(capsys, data_dir):
    """`dptop replay CAPTURE --algorithms lazyhh,lazy-cms --epsilon 0.5 --json -` on a real 896-packet
    capture: nothing is released, and the status shows the threshold and the packets seen."""
    from dptop.cli import main

    path = data_dir / "amp.TCP.syn.optionallyACK.optionallysamePort.pcapng"
    assert main(["replay", str(path), "--algorithms", "lazyhh,lazy-cms", "--epsilon", "0.5", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    hh = out["algorithms"]["lazyhh"]
    assert hh["releases"] and all(r["items"] == [] for r in hh["releases"])
    last = hh["releases"][-1]
    assert last["status"]["packets_seen"] == 896 and last["status"]["horizon"] == 896
    assert last["threshold"] > 896 and last["status"]["threshold"] > 896
    assert "suppression" in last["status"]["note"]
    cms = out["algorithms"]["lazy-cms"]
    assert cms["releases"][-1]["items"] == [] and cms["releases"][-1]["status"]["packets_seen"] == 896


@pytest.mark.slow
def test_utility_zipf_2_24():
    """Acceptance: Zipf 1.1 (domain 2^24), 2^24 arrivals, k = 128, k~ = 4k, ε = 0.5, δ = 1e-3, T = 2^24:
    at the end recall >= 0.9 and precision = 1.0 against the exact heavy hitters (count > t/k)."""
    n = 2**24
    keys = zipf_keys(1.1, 2**24, n, SEED)
    alg = registry.make("lazyhh", Settings(k=128, k_tilde=512, epsilon=0.5, delta=1e-3, horizon=n))
    for i in range(0, n, 1 << 16):
        alg.consume(KeyBatch(keys[i:i + (1 << 16)]))
    rel = alg.finish()[-1]
    exact = ExactCounter()
    exact.add(keys)
    all_keys, counts = exact.items()
    truth = {tuple(k) for k, c in zip(all_keys.tolist(), counts) if c > n / 128}
    got = {(it.hi, it.lo) for it in rel.items}
    recall = len(truth & got) / len(truth)
    precision = len(truth & got) / max(1, len(got))
    assert recall >= 0.9, f"recall {recall:.3f} < 0.9 (threshold t/k = {n / 128:.0f}, τ = {rel.threshold:.0f})"
    assert precision == 1.0, f"precision {precision:.3f} < 1 (threshold t/k = {n / 128:.0f})"


def _coupled_run(p, keys, seed, noiseless, gamma_b):
    """Outputs, candidate sets and event B (with γ = gamma_b, against exact counts) at every output time."""
    inst = LazyHHInstance(p, seed=seed, noiseless=noiseless)
    exact = ExactCounter()
    steps = []
    for t0 in range(0, len(keys), p.k_tilde):
        chunk = keys[t0:t0 + p.k_tilde]
        exact.add(chunk)
        # candidates before pruning = what OUTPUT queried: C_t
        inst.update(chunk[:-1])
        before = {tuple(c) for c in inst._candidates().tolist()} | {tuple(chunk[-1])}
        inst.update(chunk[-1:])
        t = inst.t
        lam1, lam2 = gamma_b + p.width, math.e * t / p.width + gamma_b
        cands = inst._candidates()
        vals = inst.state.cand_val[:len(cands)]
        f = np.array([exact.count_of(h, l) for h, l in cands.tolist()])
        b_holds = bool(np.all(vals >= f - lam1) and np.all(vals <= f + lam2))
        released = {tuple(k) for k in inst.output()[0].tolist()}
        steps.append((before, released, b_holds))
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("control", [False, True])
def test_suppression_with_coupled_neighbours(control):
    """L10: X and X' differ at one position (x_l replaced by a fresh label); both runs share hash seeds and
    noise. Wherever B and B' hold, no label of C_t Δ C'_t is released on either side (Lem 10–11; must never
    fail). Negative control (noiseless, B checked with γ = 0): with τ ≈ 1 (test hook: k = 1e12 and
    γ = -1e12 in the threshold), the same harness must see such releases."""
    base = small_params(k=4, k_tilde=16, horizon=2**12)
    p = dataclasses.replace(base, k=1e12, gamma=-1e12) if control else base
    gamma_b = 0.0 if control else base.gamma
    rng = np.random.default_rng(SEED)
    seen = bad_events = runs = 0
    for r in range(60 if control else 200):
        keys = zipf_keys(1.2, 400, 2**12, SEED + r)
        other = keys.copy()
        pos = int(rng.integers(2**11, 2**12 - 16))
        other[pos] = np.array([0, 0xFFFF_C000_0201 + r], dtype=np.uint64)  # fresh label (::ffff:192.0.2.x)
        a = _coupled_run(p, keys, SEED + r, control, gamma_b)
        b = _coupled_run(p, other, SEED + r, control, gamma_b)
        runs += 1
        bad_events += not all(s[2] for s in a + b)
        for (ca, ra, ba), (cb, rb, bb) in zip(a, b):
            if ba and bb:
                leaked = (ca ^ cb) & (ra | rb)
                seen += bool(leaked)
                if not control:
                    assert not leaked, f"run {r}: released set-difference labels {leaked}"
    if control:
        assert seen > 0, "negative control: the harness never saw a released C Δ C' label"
    else:
        beta = base.beta
        from scipy import stats
        assert stats.binomtest(bad_events, runs, 2 * beta, alternative="greater").pvalue > 1e-3


def test_a_horizon_from_the_file_counts_updates_when_weighted_by_bytes():
    """Weighted by bytes a packet is up to G updates: T from the file's packet count must be G times
    it, or the instance stops a fraction of the way into the file (1.3 s of a 30 s capture)."""
    from dptop.monitor.config import CountingChoice, RunConfig

    n, cap = 1000, 24
    config = RunConfig(("lazyhh",), Settings(k=4, epsilon=0.5, delta=1e-3),
                       counting=CountingChoice(weight="bytes", unit=64, cap=cap))
    alg = config.make("lazyhh", PublicFacts.of(n))
    assert alg.horizon == n * cap
    alg.consume(KeyBatch(np.repeat(zipf_keys(1.1, 50, n, SEED), cap, axis=0)))
    assert alg.status().packets_after_horizon == 0  # every update of the file inside the horizon
    assert alg.finish()[-1].span.end == n * cap
    assert any("times the 24 updates a packet may make" in f.why for f in alg.guarantee().facts)


def test_short_batches_draw_the_noise_of_their_arrivals_only():
    """Each chunk of a batch draws d normals an arrival, rounded up to whole blocks of lanes, and
    no more (a live capture hands over short batches; a whole chunk of draws per batch multiplied
    the noise drawn for a batch of 100 packets by 2.6): after batches of 1, 7, 300, 256, 5 and 640 arrivals the
    generator stands exactly where ``fill_normal`` of those counts leaves a twin state. The noise
    keeps its law: (noisy − noiseless release) of every cell, over σ·sqrt(popcount(pushes)), has
    variance 1 (two-sided chi-square, alpha = 1e-3) and mean 0 (|z| < 3.29)."""
    from scipy import stats

    from dptop.engine.continual.gaussbm import CHUNK
    from dptop.engine.privacy import bulknoise

    p = small_params()
    sizes = (1, 7, 300, 256, 5, 640)
    keys = zipf_keys(1.1, 200, sum(sizes), SEED + 9)
    noisy = LazyHHInstance(p, seed=SEED)
    exact = LazyHHInstance(p, seed=SEED, noiseless=True)
    twin = bulknoise.make_lanes(SEED)
    at = 0
    for size in sizes:
        noisy.update(keys[at:at + size])
        exact.update(keys[at:at + size])
        at += size
        for start in range(0, size, CHUNK):
            used = min(CHUNK, size - start) * p.depth
            bulknoise.fill_normal(twin, np.empty(-(-used // bulknoise.LANES) * bulknoise.LANES), 1.0)
        assert np.array_equal(noisy.sketch.rng[:4], twin[:4]), f"draws after a batch of {size}"
    pushes = noisy.state.sk.bm.upd
    nodes = np.array([bin(int(u)).count("1") for u in pushes], dtype=float)
    z = (noisy.state.sk.bm.pre - exact.state.sk.bm.pre) / (p.sigma * np.sqrt(nodes))[:, None]
    z = z[pushes > 0].ravel()
    n = z.size
    assert n >= 500
    stat = float(np.sum(z * z))
    assert stats.chi2.ppf(5e-4, n) <= stat <= stats.chi2.ppf(1 - 5e-4, n)
    assert abs(z.mean()) * math.sqrt(n) < 3.29
