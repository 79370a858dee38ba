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
default sketch baseline. The sketch's numba state and kernels are in ``eehh_kernels``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from dptop.engine.core.base import Footprint
from dptop.engine.single_release.eehh_envelope import cms_envelope, cs_envelope_depth, cs_psi, next_pow2
from dptop.engine.single_release.eehh_envelope import cms_threshold as envelope_threshold
from dptop.engine.single_release.eehh_kernels import (N, ee_state_bytes, f2_upper, make_ee_state, query_batch,
                                                      tracked, update_batch)
from dptop.engine.single_release.length import (check_k_tilde, length_composed_cost, length_facts, length_slack,
                                                public_length, split_length_budget)
from dptop.engine.single_release.dpss import by_key
from dptop.engine.single_release.epochs import Epoched
from dptop.engine.core.registry import register
from dptop.engine.core.release import sorted_items
from dptop.engine.core.settings import PACKETS, check_delta, check_epsilon, check_positive_int
from dptop.engine.core.facts import NO_FACTS, PublicFact
from dptop.engine.core.status import EpochStatus, ReleaseStatus, optional

DEFAULT_T_MAX = 1 << 26
"""Public per-epoch cap on arrivals when no public length (``--param t_max``, ``--epoch-packets``, the
replayed file's packet count, then named in the guarantee as an assumed fact) sets it."""
LENGTH_SHARES = (0.01, 0.02, 0.05, 0.1)
"""Shares of ε and δ tried for the noisy length; the one giving the lowest threshold at the public
length is used (measured in ``dptop bench --anchors``: F1 follows the threshold)."""
SCALE_DENOMINATOR = 1 << 20


@dataclass(frozen=True, kw_only=True)
class EEHHStatus(EpochStatus):
    """The open epoch and the sketch's public sizing: the arrival cap ``t_max``, ``depth`` x
    ``width`` and the envelope's ψ."""

    t_max: int
    depth: int
    width: int
    psi: float


@dataclass(frozen=True, kw_only=True)
class EEHHFigures(ReleaseStatus):
    """What one EEHH release states beside its items: the noisy epoch length, the sketch's public
    sizing, k and k~, and ``suppressed`` when the epoch was too long for ``t_max``."""

    noisy_length: int
    t_max: int
    depth: int
    width: int
    psi: float
    k: int
    k_tilde: int
    suppressed: str = optional("")


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

    def epoch_status(self, **epoch):
        return EEHHStatus(**epoch, t_max=self.t_max, depth=self.depth, width=self.width, psi=self.psi)

    def assumed_facts(self):
        """The replayed file's packet count, when T_max, the depth, the width and the budget split
        were chosen from it: neighbours under add/remove differ in it, so every release names it."""
        return tuple(PublicFact(f.name, f.value, f.provenance, "T_max, the sketch's depth and width and the "
                                "budget split are sized from it; public under substitution of one packet's key")
                     for f in self.sized_by)

    def _publish(self, state):
        n = 0 if state is None else int(state.meta[N])
        n_noisy = n + self.length_noise()  # ñ = n + DLap(ε_n) (§4.5 step 1)
        n_hi = n_noisy + self.slack + 1
        status = EEHHFigures(noisy_length=n_noisy, t_max=self.t_max, depth=self.depth, width=self.width,
                             psi=self.psi, k=self.k, k_tilde=self.k_tilde)
        if n_hi > self.t_max:
            status = replace(status, suppressed=(f"epoch too long: noisy length bound {n_hi} > t_max {self.t_max}; "
                                                 f"nothing released (set a larger --param t_max=...)"))
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

