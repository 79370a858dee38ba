"""The row-wise CountMin envelope of EEHH (engine/single_release/eehh_envelope.py): exact values of
the privacy map and the failure probabilities it claims, measured on the real sketch (hashes, cell
noise) over many seeds."""
import math
from fractions import Fraction

import numpy as np
import pytest

from dptop.engine.core.settings import Settings
from dptop.engine.privacy.noise import NoiseSource, dlap_upper_tail
from dptop.engine.single_release.eehh import CountMinEEHH
from dptop.engine.single_release.eehh_envelope import CMSEnvelope, cms_envelope, cms_envelope_depth, cms_scale

LO = np.uint64(0xFFFF_0000_0000)


def _columns(hseed: np.ndarray, labels: np.ndarray, width: int) -> np.ndarray:
    """(d, n) columns of IPv4-mapped labels (hi = 0) under the sketch's multiply-shift rows."""
    lo = LO + labels.astype(np.uint64)
    l0, l1 = lo >> np.uint64(32), lo & np.uint64(0xFFFF_FFFF)
    shift = np.uint64(64 - int(math.log2(width)))
    with np.errstate(over="ignore"):
        h = hseed[:, 2:3] * l0 + hseed[:, 3:4] * l1 + hseed[:, 4:5]
    return (h >> shift).astype(np.int64)


def _running(cols: np.ndarray) -> np.ndarray:
    """For each row and arrival t: arrivals up to t (inclusive) in the same column."""
    out = np.empty_like(cols)
    for r, c in enumerate(cols):
        order = np.argsort(c, kind="stable")
        sc = c[order]
        start = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
        rank = np.arange(len(c)) - np.repeat(start, np.diff(np.r_[start, len(c)]))
        out[r, order] = rank + 1
    return out


def _per_arrival(stream: np.ndarray, hseed, cells) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row error coll_r + Z_r of every arrival query, the time t, and the running f_t."""
    d, w = cells.shape
    cols = _columns(hseed, stream, w)
    own = _running(stream[None, :])[0]
    err = _running(cols) - own[None, :] + cells[np.arange(d)[:, None], cols]
    return err, np.arange(1, len(stream) + 1), own


def test_depth_and_noise_terms_are_exact():
    env = cms_envelope(512, 0.99, 2.6e-7, 1 << 21)
    b = cms_scale(env.depth, 0.99)
    p = env.row_failure
    assert 2 * env.t_max * p ** env.depth <= env.delta_run / 2 < 2 * env.t_max * p ** (env.depth - 1)
    alpha = math.exp(-1 / b)
    # Pr[Z > ψ1] = Pr[Z >= ⌊ψ1⌋ + 1] <= q, and not far below it
    psi1 = env.psi1(b)
    assert dlap_upper_tail(math.floor(psi1) + 1, alpha) <= env.q < dlap_upper_tail(math.floor(psi1) - 1, alpha)
    psi2 = env.psi2(b)
    cells_tail = env.depth * env.width * dlap_upper_tail(math.floor(psi2) + 1, alpha)
    assert cells_tail <= env.delta_run / 2 < env.depth * env.width * dlap_upper_tail(math.floor(psi2) - 1, alpha)
    assert env.failure_bound(b) <= env.delta_run
    assert env.width == 32768  # next power of two >= 64·k~


def test_row_wise_threshold_beats_the_union_over_cells():
    """At k~ = 512, ε_S = 0.09, n = 2^21 the §6.3 log2 sketch pays 3ψ ≈ 66,000 in τ2; the row-wise
    envelope pays ψ2 once and a few b for γ1."""
    eps_s, drun, n = 0.09, 4.7e-7, 1 << 21
    env = cms_envelope(512, eps_s, drun, n)
    b = cms_scale(env.depth, eps_s)
    tau2 = n / 512 + 2 * env.gamma1(n, b) + env.psi2(b) + 1
    d_log2 = math.ceil(math.log2(2 * (n + 512) / drun))
    b_log2 = cms_scale(d_log2, eps_s)
    assert 3 * b_log2 * math.log(2 * d_log2 * 1024 / drun) > 60_000
    assert tau2 < 25_000 and env.depth <= 16


@pytest.mark.parametrize("lam,q", [(2.0, 0.5), (1.0, 0.1), (4.0, 0.8)])
def test_invalid_row_failure_is_refused(lam, q):
    with pytest.raises(ValueError, match="row failure"):
        cms_envelope_depth(1000, 1e-6, lam, q)


def test_noise_part_of_a_row_fails_at_rate_q():
    """The cell noise exceeds ψ1 at a rate within 10 % of q·(tail rounding): the exact sampler and
    ψ1's formula agree (a scale off by a factor 2 fails this)."""
    alg = CountMinEEHH(Settings(k=4, epsilon=1.0, delta=1e-6, extra={"t_max": 20_000}))
    env, b = alg.envelope, alg.scale
    psi1 = env.psi1(b)
    expected = dlap_upper_tail(math.floor(psi1) + 1, math.exp(-1 / b))
    noise = NoiseSource(7).discrete_laplace_array(alg.scale_exact, 400_000)
    rate = float(np.mean(noise > psi1))
    assert expected <= env.q
    assert rate == pytest.approx(expected, rel=0.1)


def test_rows_overshoot_at_most_at_rate_p_on_flat_traffic():
    """Per row and arrival query, coll_r + Z_r > λt/w + ψ1 happens at a rate <= p = 1/λ + q
    (Markov + the noise tail), measured on the real hashes and noise of 20 sketches over flat
    traffic; pairs of rows overshoot together at <= p² (independent rows)."""
    alg = CountMinEEHH(Settings(k=2, k_tilde=8, epsilon=1.0, delta=1e-6, seed=11, extra={"t_max": 20_000}))
    env, b = alg.envelope, alg.scale
    rng = np.random.default_rng(5)
    over, pairs, total, total_pairs = 0, 0, 0, 0
    for _ in range(20):
        st = alg._new_state()
        stream = rng.integers(0, 2000, 8000)
        err, t, _ = _per_arrival(stream, st.hseed, st.cells)
        bad = err > env.lam * t[None, :] / env.width + env.psi1(b)
        over += int(bad.sum())
        total += bad.size
        pairs += int((bad[0::2][: bad.shape[0] // 2] & bad[1::2][: bad.shape[0] // 2]).sum())
        total_pairs += (bad.shape[0] // 2) * bad.shape[1]
    p = env.row_failure
    assert over / total <= p
    assert pairs / total_pairs <= p * p


def test_whole_envelope_fails_within_its_budget():
    """A design with a large budget (δ_run = 0.4, a few rows of 64 columns) so that failures are
    visible: over 300 runs (fresh multiply-shift seeds and exact cell noise) on a Zipf stream, the
    share of runs where some arrival or final query leaves [f − ψ2, f + γ1(t)] stays below the
    claimed bound."""
    lam, q = 16.0, 0.01
    env = CMSEnvelope(64, cms_envelope_depth(3000, 0.4, lam, q), lam, q, 3000, 0.4)
    d = env.depth
    scale = Fraction(4)
    b = float(scale)
    bound = env.failure_bound(b)
    rng = np.random.default_rng(9)
    noise = NoiseSource(13)
    failures = 0
    runs = 300
    for _ in range(runs):
        hseed = rng.integers(0, 2**63, size=(d, 5), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        cells = noise.discrete_laplace_array(scale, d * env.width).reshape(d, env.width)
        stream = np.minimum(rng.zipf(1.2, 3000), 5000)
        err, t, _ = _per_arrival(stream, hseed, cells)
        est_err = err.min(axis=0)
        up = np.any(est_err > env.gamma1(t, b))
        # final queries: every label that arrived, at T
        labels, f = np.unique(stream, return_counts=True)
        cols = _columns(hseed, labels, env.width)
        totals = np.stack([np.bincount(c, minlength=env.width) for c in _columns(hseed, stream, env.width)])
        rows = np.arange(d)[:, None]
        final = (totals[rows, cols] + cells[rows, cols]).min(axis=0) - f
        up = up or np.any(final > env.gamma1(len(stream), b))
        low = np.any(cells < -env.psi2(b))
        failures += bool(up or low)
    assert 0.0 < bound <= 0.4
    # one-sided binomial bound: mean + 3 sd
    assert failures / runs <= bound + 3 * math.sqrt(bound * (1 - bound) / runs)
