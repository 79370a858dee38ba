"""GaussBM (docs/lazyhh.md §2–3, tests L1–L5): tree exactness, merge rule, sensitivity, noise law."""
import math

import numpy as np
import pytest
from scipy import stats

from dptop.engine.privacy import bulknoise
from dptop.engine.continual.gaussbm import (GaussBM, HorizonExceeded, gaussbm_sigma,
                            noise_bound, tree_height)
from tests.naive_lazy import RefTree

SEED = 20240605


def popcount(u: int) -> int:
    return bin(u).count("1")


def test_tree_height_and_sigma_formula():
    assert [tree_height(t) for t in (1, 2, 3, 4, 7, 8, 2**12 - 1, 2**12)] == [1, 2, 2, 3, 3, 4, 12, 13]
    # σ = (1/ε)·sqrt(2·h·m·ln(1.25/δ)) — Alg 1 with the factor 2 (C3)
    assert gaussbm_sigma(12, 0.5, 1e-3, 46) == pytest.approx(2 * math.sqrt(2 * 12 * 46 * math.log(1250)), rel=1e-12)
    # E_noise = σ·sqrt(2h·ln(2N/β)) (§2.5, C4)
    assert noise_bound(3.0, 10, 1000, 0.01) == pytest.approx(3.0 * math.sqrt(20 * math.log(2e5)), rel=1e-12)


@pytest.mark.parametrize("eps", [0.0, -0.1, 1.0, 2.5, float("nan")])
def test_epsilon_must_be_below_one(eps):
    with pytest.raises(ValueError, match=r"epsilon .* must be in \(0, 1\)"):
        GaussBM(100, eps, 1e-3)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-3])
def test_delta_range(delta):
    with pytest.raises(ValueError, match=r"delta .* must be in \(0, 1\)"):
        GaussBM(100, 0.5, delta)


def test_noiseless_equals_prefix_sums_at_every_step():
    """L1: σ = 0, increments in {-1, 0, 1, 5}, T = 2^12 - 1: release == exact prefix after every update;
    update number 2^H - 1 is accepted and the next one raises."""
    rng = np.random.default_rng(SEED)
    T = 2**12 - 1
    g = GaussBM(T, 0.5, 1e-3, m=4, shape=(2, 3), noiseless=True, seed=SEED)
    assert g.capacity == T
    incs = rng.choice(np.array([-1, 0, 1, 5]), size=(T, 2, 3))
    prefix = np.zeros((2, 3), dtype=np.int64)
    for s in range(T):
        g.update(incs[s])
        prefix += incs[s]
        assert np.array_equal(g.release(), prefix), f"step {s + 1}"
    with pytest.raises(HorizonExceeded, match="exceed the horizon"):
        g.update(incs[0])
    assert np.array_equal(g.release(), prefix)


def test_merge_rule_matches_binary_counter_reference():
    """L2: the kernel's exact node sums equal Alg 1 (own 0-based index, C1) level by level; the occupied
    levels are the set bits of u and every node covers an aligned dyadic interval."""
    rng = np.random.default_rng(SEED + 1)
    T = 300
    H = tree_height(T)
    g = GaussBM(T, 0.5, 1e-3, shape=(1, 1), noiseless=True)
    ref = RefTree(H, noise=lambda: 0.0)
    for u in range(1, T + 1):
        c = int(rng.choice([-1, 0, 1, 5]))
        g.update(np.array([[c]]))
        ref.push(c)
        assert list(g.state.ex[:, 0, 0]) == ref.ex, f"after {u} updates"
        assert ref.occupied() == [b for b in range(H) if (u >> b) & 1]
        assert g.release()[0, 0] == ref.query()
    for lo, hi, _ in ref.nodes:
        length = hi - lo + 1
        assert length & (length - 1) == 0 and (lo - 1) % length == 0, (lo, hi)


def test_sensitivity_at_most_h_nodes_each_by_one():
    """L3: +1 at one update changes <= H of all nodes ever created, each by exactly 1; for m counters
    changed this way the l2 distance over all nodes is <= sqrt(m·H)."""
    rng = np.random.default_rng(SEED + 2)
    T, m = 500, 7
    H = tree_height(T)
    sq = 0
    for _ in range(m):
        incs = rng.choice([0, 1, 5], size=T)
        other = incs.copy()
        other[rng.integers(T)] += 1
        a, b = RefTree(H, lambda: 0.0), RefTree(H, lambda: 0.0)
        for x, y in zip(incs, other):
            a.push(int(x))
            b.push(int(y))
        diffs = [nb[2] - na[2] for na, nb in zip(a.nodes, b.nodes)]
        assert [n[:2] for n in a.nodes] == [n[:2] for n in b.nodes]  # same tree schedule
        changed = [x for x in diffs if x]
        assert 1 <= len(changed) <= H and all(x == 1 for x in changed)
        sq += len(changed)
    assert math.sqrt(sq) <= math.sqrt(m * H)


def _errors_by_step(g: GaussBM, steps: int, rng) -> np.ndarray:
    shape = g.state.pre.shape[::-1]
    prefix = np.zeros(shape, dtype=np.int64)
    out = np.empty((steps,) + shape)
    for s in range(steps):
        inc = rng.integers(-2, 6, size=shape)
        g.update(inc)
        prefix += inc
        out[s] = g.release() - prefix
    return out


def _variance_ok(err: np.ndarray, expected_var: float, alpha: float) -> bool:
    """Two-sided chi-square test (known mean 0) of Var(err) == expected_var at level alpha."""
    n = err.size
    stat = float(np.sum(err * err)) / expected_var
    lo, hi = stats.chi2.ppf(alpha / 2, n), stats.chi2.ppf(1 - alpha / 2, n)
    return lo <= stat <= hi


def test_noise_variance_is_popcount_sigma_squared_at_every_step():
    """L4: 2·10^4 counters, T = 100: Var(release - exact) after u updates equals popcount(u)·σ²
    (chi-square, family-wise alpha = 1e-3 over the 100 steps, Bonferroni), mean 0, and a merged node's
    noise is uncorrelated with its children's (|rho| < 0.05)."""
    rng = np.random.default_rng(SEED + 3)
    T = 100
    g = GaussBM(T, 0.5, 1e-3, m=3, shape=(200, 100), seed=SEED)
    err = _errors_by_step(g, T, rng)
    sigma2 = g.sigma ** 2
    alpha = 1e-3 / T
    for u in range(1, T + 1):
        e = err[u - 1]
        assert _variance_ok(e, popcount(u) * sigma2, alpha), f"u={u}: var/σ² = {e.var() / sigma2:.3f}, want {popcount(u)}"
        z = e.mean() / math.sqrt(popcount(u) * sigma2 / e.size)
        assert abs(z) < stats.norm.isf(alpha / 2), f"u={u}: mean {e.mean():.3f}"
    # u=1 is the leaf; u=2 is the fresh node over [1,2] that merged it; u=4 merged [1,2] and [3]
    for a, b in ((1, 2), (2, 4), (3, 4), (8, 16)):
        rho = np.corrcoef(err[a - 1].ravel(), err[b - 1].ravel())[0, 1]
        assert abs(rho) < 0.05, f"corr(err@{a}, err@{b}) = {rho:.3f}"


def test_variance_check_catches_reused_children_noise():
    """L4 negative control: summing the children's noisy values (P12) makes the error at u = 2^k grow
    like 2^k·σ²; the same chi-square check must reject it, and accept the correct reference."""
    rng = np.random.default_rng(SEED + 4)
    n, T, sigma = 1000, 64, 1.0
    errs = {}
    for reuse in (False, True):
        trees = [RefTree(tree_height(T), lambda: rng.normal(0.0, sigma), reuse_children=reuse) for _ in range(n)]
        for t in trees:
            for _ in range(T):
                t.push(1)
        errs[reuse] = np.array([t.query() - T for t in trees])
    assert _variance_ok(errs[False], popcount(T) * sigma**2, 1e-3)
    assert not _variance_ok(errs[True], popcount(T) * sigma**2, 1e-3)


def test_ziggurat_normals_match_standard_normal():
    """The bulk noise sampler: KS test against N(0, 1) and the tail mass beyond R and 4.5 (alpha
    1e-3), on a length that ends in a partial block of lanes (the part drawn from lane 0 alone)."""
    out = np.empty(2_000_000 + bulknoise.LANES // 2)
    bulknoise.fill_normal(bulknoise.make_lanes(SEED), out, 1.0)
    assert stats.kstest(out, "norm").pvalue > 1e-3
    for cut in (bulknoise._ZIG_R, 4.5):
        p = 2 * stats.norm.sf(cut)
        hits = int(np.sum(np.abs(out) > cut))
        assert stats.binomtest(hits, out.size, p).pvalue > 1e-3, (cut, hits, p * out.size)


def test_ziggurat_layers_close_and_rarely_reject():
    """The 1024 layers of equal area v close: from the base strip's edge r, Marsaglia-Tsang's
    recurrence x_{i-1} = f^-1(v / x_i + f(x_i)) reaches the top, f(0) = 1, after the last layer
    (a wrong r or v misses it by orders of magnitude more than the 1e-9 allowed); and the
    rectangle test accepts all but 0.3-0.5 % of proposals."""
    r, v = bulknoise._ZIG_R, bulknoise._ZIG_V
    f = lambda x: math.exp(-0.5 * x * x)  # noqa: E731
    assert v == pytest.approx(r * f(r) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2)), rel=1e-12)
    x = r
    for _ in range((1 << bulknoise.ZIG_BITS) - 2):
        x = math.sqrt(-2.0 * math.log(v / x + f(x)))
    assert abs(v / x + f(x) - 1.0) < 1e-9
    rejected = 1.0 - float(np.mean(bulknoise._ZIG_KI.astype(float))) / 2.0**52
    assert 0.003 < rejected < 0.005


def test_lane_streams_are_uncorrelated():
    """The LANES interleaved streams: draws one apart (neighbouring lanes) and LANES apart (the
    same lane, next block) are uncorrelated (|rho| < 5 sigma of the estimate)."""
    out = np.empty(1 << 20)
    bulknoise.fill_normal(bulknoise.make_lanes(SEED + 9), out, 1.0)
    bound = 5 / np.sqrt(out.size)
    for lag in (1, bulknoise.LANES - 1, bulknoise.LANES):
        assert abs(np.corrcoef(out[:-lag], out[lag:])[0, 1]) < bound, lag


def test_seeded_runs_repeat_and_os_seeded_runs_differ():
    a, b = (GaussBM(10, 0.5, 1e-3, shape=(2, 2), seed=7) for _ in range(2))
    c = GaussBM(10, 0.5, 1e-3, shape=(2, 2))
    for g in (a, b, c):
        g.update(np.ones((3, 2, 2), dtype=np.int64))
    assert np.array_equal(a.release(), b.release())
    assert not np.array_equal(a.release(), c.release())
