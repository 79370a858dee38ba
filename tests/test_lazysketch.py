"""LazySketch and PunctualSketch (docs/lazyhh.md §4–5, tests L6, L7, L14) and their dptop wrappers."""
import math

import numpy as np
import pytest
from scipy import stats

from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.workload import zipf_keys
from dptop.engine.core import registry
from dptop.engine.continual.gaussbm import HorizonExceeded
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.continual.lazysketch import LazySketch, PunctualSketch, default_depth
from dptop.engine.core.settings import Settings
from tests.naive_lazy import ref_lazy_pushes, ref_plain_sketch

SEED = 515


def stream(n, domain=200, seed=SEED):
    return zipf_keys(1.1, domain, n, seed)


@pytest.mark.parametrize("kind", ["cms", "cs"])
def test_noiseless_lazy_equals_plain_sketch_up_to_the_lag(kind):
    """L6: after every arrival, released cell + P == the plain CMS/CS cell of the same hashes, exactly;
    P per cell in [0, w] (CMS) or [-w, w] (CS); the CMS query lies in [plain - w, plain]."""
    w, d, n = 16, 3, 1500
    keys = stream(n)
    sk = LazySketch(n, 0.5, 1e-3, w, d, kind=kind, seed=SEED, noiseless=True)
    b, g = sk.buckets(keys)
    signs = g if kind == "cs" else None
    distinct = np.unique(keys, axis=0)
    plain = np.zeros((d, w), dtype=np.int64)
    for t in range(n):
        sk.update(keys[t:t + 1])
        plain[np.arange(d), b[t]] += 1 if signs is None else signs[t]
        if t % 250 == 0:
            assert np.array_equal(plain, ref_plain_sketch(b[:t + 1], None if signs is None else signs[:t + 1], w))
        pending = sk.pending()
        assert np.array_equal(sk.released_cells() + pending, plain), f"arrival {t}"
        lo = 0 if kind == "cms" else -w
        assert pending.min() >= lo and pending.max() <= w
        if kind == "cms" and t % 97 == 0:
            db, _ = sk.buckets(distinct)
            plain_est = plain[np.arange(d), db].min(axis=1)
            est = sk.estimates(distinct)
            assert np.all(est <= plain_est) and np.all(est >= plain_est - w)


@pytest.mark.parametrize("kind", ["cms", "cs"])
def test_every_column_pushed_once_per_w_arrivals_zeros_included(kind):
    """L6 / P3: column j has been pushed ceil((t - j) / w) times after t arrivals, whatever the data,
    and the tree contents equal the reference's window sums."""
    w, d, n = 7, 3, 200
    keys = np.repeat(stream(5), 40, axis=0)  # long runs of one key: many empty windows
    sk = LazySketch(n, 0.5, 1e-3, w, d, kind=kind, noiseless=True)
    sk.update(keys)
    expect = np.array([max(0, -(-(n - j) // w)) for j in range(w)])
    assert np.array_equal(sk.state.bm.upd, expect)
    b, g = sk.buckets(keys)
    pushes = ref_lazy_pushes(b, g if kind == "cs" else None, w)
    assert all(len(pushes[(0, j)]) == expect[j] for j in range(w))
    released = sk.released_cells()
    for (i, j), vals in pushes.items():
        assert released[i, j] == sum(vals)


def test_lazy_neighbours_differ_in_at_most_2d_pushes_by_one():
    """L7 (CMS): a substitution at a random position changes <= 2d (cell, push) pairs, each by exactly 1."""
    rng = np.random.default_rng(SEED)
    w, d, n = 11, 4, 400
    sk = LazySketch(n, 0.5, 1e-3, w, d, seed=SEED, noiseless=True)
    for _ in range(50):
        keys = stream(n, seed=int(rng.integers(1 << 30)))
        other = keys.copy()
        pos = int(rng.integers(n))
        other[pos] = keys_from_addresses([f"192.0.2.{rng.integers(1, 255)}"])[0]
        pa = ref_lazy_pushes(sk.buckets(keys)[0], None, w)
        pb = ref_lazy_pushes(sk.buckets(other)[0], None, w)
        diffs = [abs(x - y) for c in pa for x, y in zip(pa[c], pb[c]) if x != y]
        assert len(diffs) <= 2 * d and all(x == 1 for x in diffs)


def test_count_sketch_same_cell_opposite_signs_changes_by_two_so_m_is_4d():
    """L7 (CS): find two sources sharing a bucket with opposite signs in some row; substituting one for
    the other changes that cell's window sum by 2, which is why LazyCS uses m = 4d (docs/lazyhh.md §5.5, C8)."""
    w, d = 5, 3
    sk = LazySketch(100, 0.5, 1e-3, w, d, kind="cs", seed=SEED, noiseless=True)
    cand = keys_from_addresses([f"10.0.{i // 250}.{i % 250}" for i in range(2000)])
    b, g = sk.buckets(cand)
    x = cand[0]
    j = next(j for j in range(1, len(cand)) if b[j, 0] == b[0, 0] and g[j, 0] != g[0, 0])
    keys = np.stack([x] * 10)
    other = keys.copy()
    other[3] = cand[j]
    pa = ref_lazy_pushes(*sk.buckets(keys), w)
    pb = ref_lazy_pushes(*sk.buckets(other), w)
    assert max(abs(u - v) for c in pa for u, v in zip(pa[c], pb[c])) == 2
    cms = LazySketch(100, 0.5, 1e-3, w, d, kind="cms")
    assert sk.m == 4 * d and cms.m == 2 * d
    assert sk.sigma == pytest.approx(math.sqrt(2) * cms.sigma)


@pytest.mark.parametrize("kind", ["cms", "cs"])
def test_punctual_at_width_one_equals_lazy_and_punctual_has_no_lag(kind):
    """L14: at w = 1 Lazy and Punctual coincide (noiseless); Punctual equals the plain sketch exactly
    and pushes every cell at every arrival (P3)."""
    keys = stream(300)
    a = LazySketch(300, 0.5, 1e-3, 1, 3, kind=kind, seed=SEED, noiseless=True)
    b = PunctualSketch(300, 0.5, 1e-3, 1, 3, kind=kind, seed=SEED, noiseless=True)
    a.update(keys)
    b.update(keys)
    assert np.array_equal(a.released_cells(), b.released_cells())
    p = PunctualSketch(300, 0.5, 1e-3, 8, 3, kind=kind, seed=SEED, noiseless=True)
    p.update(keys)
    bk, g = p.buckets(keys)
    assert np.array_equal(p.released_cells(), ref_plain_sketch(bk, g if kind == "cs" else None, 8))
    assert np.all(p.state.bm.upd == 300)


def test_noise_error_within_spec_bound_on_repeated_runs():
    """§2.5 / §5.6 with noise on: over 30 independent runs of LazyCMS (T = 2^13, w = 32, d = 9),
    (a) every released cell at 8 check times is within E_noise(N, β) of its exact value (released + P
    = plain), and (b) for the 20 heaviest keys, -E_noise - w <= f^ - f <= e·t/w + E_noise. The run-level
    failure probability is <= β = 0.05 for (a) and <= β + 20·e^-d for (b); we require the failure
    count to pass a one-sided binomial test at alpha = 1e-3."""
    T, w, d, runs, beta = 2**13, 32, 9, 30, 0.05
    checks = np.linspace(T // 8, T, 8).astype(int)
    fail_cells = fail_query = 0
    for r in range(runs):
        keys = zipf_keys(1.1, 5000, T, SEED + r)
        sk = LazySketch(T, 0.5, 1e-3, w, d, seed=SEED + r)
        bound = sk.noise_error(d * w * len(checks), beta)
        b, _ = sk.buckets(keys)
        uniq, counts = np.unique(keys, axis=0, return_counts=True)
        top = np.argsort(-counts)[:20]
        bad_c = bad_q = False
        prev = 0
        for t in checks:
            sk.update(keys[prev:t])
            prev = t
            exact = ref_plain_sketch(b[:t], None, w) - sk.pending()
            bad_c |= bool(np.abs(sk.released_cells() - exact).max() > bound)
            f = np.array([np.sum(np.all(keys[:t] == uniq[i], axis=1)) for i in top])
            err = sk.estimates(uniq[top]) - f
            bad_q |= bool(err.min() < -bound - w or err.max() > math.e * t / w + bound)
        fail_cells += bad_c
        fail_query += bad_q
    assert stats.binomtest(fail_cells, runs, beta, alternative="greater").pvalue > 1e-3, fail_cells
    p_query = beta + 20 * math.exp(-d)
    assert stats.binomtest(fail_query, runs, p_query, alternative="greater").pvalue > 1e-3, fail_query


def test_sketch_validation():
    with pytest.raises(ValueError, match=r"epsilon \(1\) must be in \(0, 1\)"):
        LazySketch(100, 1.0, 1e-3, 8, 3)
    with pytest.raises(ValueError, match=r"depth \(4\) must be odd for Count Sketch"):
        LazySketch(100, 0.5, 1e-3, 8, 4, kind="cs")
    with pytest.raises(ValueError, match=r"kind \('cm'\) must be"):
        LazySketch(100, 0.5, 1e-3, 8, 3, kind="cm")
    with pytest.raises(ValueError, match=r"width \(0\) must be >= 1"):
        LazySketch(100, 0.5, 1e-3, 0, 3)
    with pytest.raises(ValueError, match="sketch memory .* exceeds"):
        PunctualSketch(2**40, 0.5, 1e-3, 100_000, 99)
    sk = LazySketch(10, 0.5, 1e-3, 4, 3)
    sk.update(stream(10))
    with pytest.raises(HorizonExceeded, match="exceed the horizon"):
        sk.update(stream(1))


def test_default_depth():
    assert default_depth(1000, 1e-3, odd=False) == math.ceil(math.log(2e6))
    assert default_depth(1000, 1e-3, odd=True) % 2 == 1


@pytest.mark.parametrize("name", ["lazy-cms", "lazy-cs", "punctual-cms", "punctual-cs"])
def test_algorithms_release_only_user_labels(name):
    """The registered frequency oracles: no labels -> empty items and a status saying why (P15);
    with --param query=... exactly those labels, with estimates; guarantee is continual observation
    under substitution; a seed makes the noise text say NOT private."""
    keys = stream(600)
    s = Settings(k=4, epsilon=0.5, delta=1e-3, extra={"width": 16, "depth": 3})
    alg = registry.make(name, s, PublicFacts.of(600))
    rels = alg.consume(KeyBatch(keys))
    assert len(rels) == 1 and rels[0].items == ()
    assert "query=" in rels[0].status.note and rels[0].status.packets_seen == 600
    g = alg.guarantee()
    assert g.neighbouring == "substitution of one packet's source address" and g.model == "continual observation"
    assert "NOT private" not in g.noise
    labels = "10.0.0.1,192.0.2.7"
    alg = registry.make(name, s.with_(seed=3, extra={**s.extra, "query": labels}), PublicFacts.of(600))
    alg.consume(KeyBatch(keys))
    rel = alg.finish()[-1]
    assert sorted(it.address for it in rel.items) == sorted(labels.split(","))
    assert "NOT private" in rel.guarantee.noise
    assert rel.status.horizon_reached is True


def test_algorithm_rejects_epsilon_one():
    with pytest.raises(ValueError, match=r"epsilon \(1\) must be in \(0, 1\)"):
        registry.make("lazy-cms", Settings(epsilon=1.0))


def test_rows_hash_as_cell_when_the_high_word_changes():
    """``row_buckets`` keeps the fingerprint's mix of the last high word: on keys whose high
    words alternate, repeat and return to 0 (IPv6 among IPv4), the cells counted are those of
    ``cell`` (the plain fingerprint), checked through released + pending == the plain CMS."""
    rng = np.random.default_rng(SEED)
    n, w, d = 600, 16, 5
    keys = rng.integers(0, 2**63, size=(n, 2)).astype(np.uint64)
    keys[rng.random(n) < 0.4, 0] = 0
    keys[100:120, 0] = keys[100, 0]  # a run of one high word
    sk = LazySketch(n, 0.5, 1e-3, w, d, seed=SEED, noiseless=True)
    b, _ = sk.buckets(keys)
    for s in range(0, n, 37):
        sk.update(keys[s:s + 37])
    assert np.array_equal(sk.released_cells() + sk.pending(), ref_plain_sketch(b, None, w))


def _spread(b, g, w):
    """Chi-square p-values of: each row's buckets, every pair of rows' joint buckets, and each
    row's (bucket, sign), against the uniform (independent) law; the smallest of them."""
    n, d = b.shape
    pvals = []
    for i in range(d):
        pvals.append(stats.chisquare(np.bincount(b[:, i], minlength=w)).pvalue)
        pvals.append(stats.chisquare(np.bincount(b[:, i] * 2 + (g[:, i] > 0), minlength=2 * w)).pvalue)
        for j in range(i + 1, d):
            pvals.append(stats.chisquare(np.bincount(b[:, i] * w + b[:, j], minlength=w * w)).pvalue)
    return min(pvals)


@pytest.mark.parametrize("keys", ["random", "consecutive IPv4"])
def test_row_hashes_spread_keys_evenly_and_independently(keys):
    """The rows (fingerprint, then a multiply-add per row) must act as independent uniform hashes
    (the CMS/CS collision bounds, docs/lazyhh.md §5.1): over 40 000 distinct keys, each row's buckets,
    every pair of rows jointly and each row's (bucket, sign) pass a chi-square test at
    p > 1e-4 (about 20 tests, seeded: a deterministic check). Rows made identical fail it."""
    rng = np.random.default_rng(SEED)
    n, w, d = 40_000, 16, 5
    if keys == "random":
        k = rng.integers(0, 2**63, size=(n, 2)).astype(np.uint64)
    else:
        k = np.zeros((n, 2), dtype=np.uint64)
        k[:, 1] = 0xC0A80000 + np.arange(n, dtype=np.uint64)  # 192.168.0.0 onwards
    sk = LazySketch(n, 0.5, 1e-3, w, d, kind="cs", seed=SEED)
    b, g = sk.buckets(k)
    assert _spread(b, g, w) > 1e-4
    sk.state.seeds[1], sk.state.seeds[d + 1] = sk.state.seeds[0], sk.state.seeds[d]  # row 1 = row 0
    b, g = sk.buckets(k)
    assert _spread(b, g, w) < 1e-12
