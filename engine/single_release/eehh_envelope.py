"""The error envelope of EEHH over a DP CountMin, row by row (docs/dpss-eehh.md §6.2–§6.3, a tighter
valid analysis than §6.3's table): pure functions of public parameters.

A sketch of d rows and w columns (w a power of two, strongly universal row hashes) carries discrete
Laplace noise Z of scale b = 2d/ε_S (α = e^(−1/b)) in every cell. The estimate of x at time t is
min_r (f_t(x) + coll_r + Z_r), coll_r >= 0 the count of other labels sharing x's cell in row r.

**Upper envelope γ1(t) = λt/w + ψ1.** A row overshoots when coll_r + Z_r > λt/w + ψ1, which needs
coll_r > λt/w (probability <= 1/λ: Markov, E[coll_r] <= t/w) or Z_r > ψ1 (probability <= q, with
ψ1 = b·ln(1/((1 + α)q)) since Pr[Z > ψ] <= α^ψ/(1 + α)). The min overshoots only if **every** row
does; rows have independent hashes and noise, so a query fails with probability <= p^d, p = 1/λ + q.
The noise in the upper envelope is therefore a few b, not b·ln(dw/δ) as in §6.3, whose union bound
runs over every cell.

**Lower envelope γ2 = −ψ2.** coll_r >= 0, so est − f >= min_r Z_r >= the smallest cell noise; all
d·w cells stay above −ψ2 except with probability <= d·w·α^ψ2/(1 + α) = δ_L, i.e.
ψ2 = b·ln(dw/((1 + α)·δ_L)). This is the only term that pays ln(1/δ).

**Union over queries.** A run makes at most T_max arrival queries and final queries of at most
T_max distinct labels (the tracked set depends on the hashes, so the union runs over every label
that arrived, not over k~ fixed ones): (2·T_max)·p^d <= δ_U, d = ⌈ln(2T_max/δ_U)/ln(1/p)⌉.
With δ_U = δ_L = δ_run/2 the envelope of one run fails with probability <= δ_run.

**Threshold** (§6.2 derivation unchanged): τ2 = n_hi/k~ + 2·γ1(n_hi) + ψ2 + 1, the large term ψ2
once instead of 3ψ. The free choices (λ, q) minimise τ2 at n = T_max for the width (default 64·k~,
next power of two): at k~ = 512, ε_S = 0.099, n = 2^21 this gives d = 12 and τ2 ≈ 14,600 where
§6.3's log2 depth (d = 44, w = 1024) needs 3ψ alone ≈ 69,000.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dptop.engine.core.settings import check_delta, check_epsilon, check_positive_int

WIDTH_PER_TRACKED = 64
"""Default columns per tracked label: w = next power of two >= 64·k~, at most ``MAX_WIDTH``.
Measured (``dptop bench --anchors``, k = 128, ε = 0.1, Zipf 1.1): F1 0.83 / 0.91 / 0.99 / 1.00 at
8 / 16 / 32 / 64 columns per tracked label; a wider row lets λ grow and the depth (and with it
the noise scale 2d/ε) shrink."""
MAX_WIDTH = 1 << 17
"""Cap on the default width (about a million cells at the depths that width gives)."""
LAMBDAS = (2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0)
"""Markov factors λ tried for the collision term λt/w."""
Q_SHARES = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01)
"""Noise share of the per-row failure: q = share/λ."""


@dataclass(frozen=True)
class CMSEnvelope:
    """One CountMin instantiation and its envelope: γ1(t) = lam·t/width + psi1, γ2 = −psi2."""

    width: int
    depth: int
    lam: float
    q: float
    t_max: int
    delta_run: float

    @property
    def row_failure(self) -> float:
        """p = 1/λ + q: probability that one row overshoots the upper envelope."""
        return 1.0 / self.lam + self.q

    def psi1(self, scale: float) -> float:
        """Noise part of γ1: Pr[Z > ψ1] <= q for DLap of scale b."""
        alpha = math.exp(-1.0 / scale)
        return scale * math.log(1.0 / ((1.0 + alpha) * self.q))

    def psi2(self, scale: float) -> float:
        """−γ2: every one of the d·w cells has Z >= −ψ2 except w.p. <= δ_run/2."""
        alpha = math.exp(-1.0 / scale)
        return scale * math.log(self.depth * self.width / ((1.0 + alpha) * self.delta_run / 2.0))

    def gamma1(self, t: float, scale: float) -> float:
        return self.lam * t / self.width + self.psi1(scale)

    def failure_bound(self, scale: float) -> float:
        """Upper bound on the envelope's failure probability in one run of <= T_max arrivals."""
        alpha = math.exp(-1.0 / scale)
        upper = 2.0 * self.t_max * self.row_failure ** self.depth
        lower = self.depth * self.width * math.exp(-self.psi2(scale) / scale) / (1.0 + alpha)
        return upper + lower


def cms_envelope_depth(t_max: int, delta_run: float, lam: float, q: float) -> int:
    """d = ⌈ln(2·T_max/δ_U)/ln(1/p)⌉ with δ_U = δ_run/2 and p = 1/λ + q."""
    p = 1.0 / lam + q
    if not 0.0 < p < 1.0:
        raise ValueError(f"row failure 1/λ + q ({p:g}) must be in (0, 1)")
    return max(1, math.ceil(math.log(2.0 * t_max / (delta_run / 2.0)) / math.log(1.0 / p)))


def cms_scale(depth: int, eps_s: float) -> float:
    """b = 2d/ε_S (ℓ1 sensitivity 2d, docs/dpss-eehh.md §6.3)."""
    return 2.0 * depth / check_epsilon(eps_s)


def cms_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, env: CMSEnvelope, scale: float) -> float:
    """τ = max(ñ/k, n_hi/k~ + 2γ1(n_hi) + ψ2 + 1) (§6.2 with the row-wise envelope)."""
    return max(n_noisy / k, n_hi / k_tilde + 2.0 * env.gamma1(n_hi, scale) + env.psi2(scale) + 1.0)


def cms_envelope(k_tilde: int, eps_s: float, delta_run: float, t_max: int,
                 width: int | None = None) -> CMSEnvelope:
    """The (λ, q) and depth minimising τ2 at n = T_max for ``width`` columns (default: next power of
    two >= 64·k~, at most ``MAX_WIDTH``; a given width is rounded up to a power of two); ties go
    to the shallower sketch."""
    k_tilde, t_max = check_positive_int("k~", k_tilde), check_positive_int("t_max", t_max)
    delta_run = check_delta(delta_run)
    width = (min(next_pow2(WIDTH_PER_TRACKED * k_tilde), MAX_WIDTH) if width is None
             else next_pow2(check_positive_int("width", width, 2)))
    best = None
    for lam in LAMBDAS:
        for share in Q_SHARES:
            env = CMSEnvelope(width, cms_envelope_depth(t_max, delta_run, lam, share / lam), lam, share / lam,
                              t_max, delta_run)
            scale = cms_scale(env.depth, eps_s)
            tau2 = t_max / k_tilde + 2.0 * env.gamma1(t_max, scale) + env.psi2(scale) + 1.0
            if best is None or (tau2, env.depth) < best[0]:
                best = ((tau2, env.depth), env)
    return best[1]


def next_pow2(x: int) -> int:
    return 1 << max(1, math.ceil(math.log2(x)))


# --- CountSketch (docs/dpss-eehh.md §6.4), the same row-wise argument for the median.

CS_Q = 1.0 / 64
"""Per-row noise failure of the CountSketch envelope: Pr[|Z| > ψ] <= q."""


def cs_envelope_depth(t_max: int, delta_run: float, q: float = CS_Q) -> int:
    """Odd d with 4·T_max·(2·sqrt(p(1 − p)))^d <= δ_run, p = 1/16 + q.

    A row's error is s·coll_r + s·Z_r; it leaves [−E_cs − ψ, E_cs + ψ] only if |coll_r| > E_cs
    (Chebyshev at E_cs = 4·sqrt(F2/w): 1/16) or |Z_r| > ψ (q). The median leaves the envelope on
    one side only if more than half of the rows do on that side (Chernoff: (2·sqrt(p(1 − p)))^d
    per side), and a run makes at most 2·T_max queries (arrivals, and final queries of at most
    T_max labels). §6.4's union bound over every cell (ψ = b·ln(2dw/δ_run)) is not needed."""
    t_max, delta_run = check_positive_int("t_max", t_max), check_delta(delta_run)
    p = 1.0 / 16 + q
    d = max(1, math.ceil(math.log(4.0 * t_max / delta_run) / -math.log(2.0 * math.sqrt(p * (1.0 - p)))))
    return d if d % 2 == 1 else d + 1


def cs_psi(scale: float, q: float = CS_Q) -> float:
    """ψ with Pr[|Z| > ψ] <= 2α^ψ/(1 + α) = q for DLap of scale b."""
    alpha = math.exp(-1.0 / scale)
    return scale * math.log(2.0 / ((1.0 + alpha) * q))
