"""Deliberately broken building blocks: each breaks one premise of a privacy proof so the audit
must report a VIOLATION for the target built on it (never copies of the real classes)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from dptop.engine.continual.lazyhh import LazyHH, LazyHHInstance
from dptop.engine.single_release.dpss import DPSpaceSaving, dpss_threshold
from dptop.engine.single_release.eehh import CountMinEEHH
from dptop.engine.sliding_window.dpsw import DPSWSketch
from dptop.engine.sliding_window.geometry import WHOLE, Plan, PlanEntry
from dptop.engine.sliding_window.dpsw_hh import DPSWHeavyHitters
from dptop.engine.privacy.noise import NoiseSource
from dptop.engine.baselines.spacesaving import make_state, update_batch
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.settings import PACKETS
from dptop.engine.core.status import NO_FIGURES

NOISE_FACTOR = 4
"""How much too small the noise of the ``*-small-noise`` variants is (scale / NOISE_FACTOR)."""


class WeakNoise(NoiseSource):
    """Discrete Laplace with its scale divided by ``factor``: ε·factor instead of ε (broken)."""

    def __init__(self, seed: int | None, factor: int = NOISE_FACTOR):
        super().__init__(seed)
        self.factor = Fraction(factor)

    def discrete_laplace(self, scale) -> int:
        return super().discrete_laplace(Fraction(scale) / self.factor)

    def discrete_laplace_batch(self, scale, size: int):
        return super().discrete_laplace_batch(Fraction(scale) / self.factor, size)


class ExactLengthDPSS(DPSpaceSaving):
    """Broken DPSS: τ = max(n/k − γ, n/k~ + 1 + γ) with the exact n (000's Alg 3; §4.5 gap)."""

    def length_noise(self) -> int:
        return 0  # ñ = n

    def threshold(self, n_noisy: int) -> float:
        return dpss_threshold(n_noisy, n_noisy, self.k, self.k_tilde, self.gamma, self.margin)

    def _publish(self, state):
        """As 000's Alg 3: n itself is not published (only the threshold gap is under audit), so the
        release states no figures."""
        items, tau, n, _ = super()._publish(state)
        return items, tau, n, NO_FIGURES


class ExactLengthEEHH(CountMinEEHH):
    """Broken EEHH: the thresholds use the exact n (n_hi = n; §4.5 gap, P3)."""

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.slack = -1

    def length_noise(self) -> int:
        return 0  # ñ = n

    def _publish(self, state):
        items, tau, n, _ = super()._publish(state)
        return items, tau, n, NO_FIGURES  # n is not published: no figures


class EntryTimeSpaceSaving:
    """Broken SpaceSaving (plain Python): among the minimum counters evict the most recently
    *inserted* item — recency is not refreshed on increments (docs/dpss-eehh.md §2.5)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.count: dict[tuple[int, int], int] = {}
        self.entered: dict[tuple[int, int], int] = {}
        self.t = 0

    def update(self, keys: np.ndarray) -> None:
        for hi, lo in keys.tolist():
            x = (hi, lo)
            if x in self.count:
                self.count[x] += 1
            else:
                m = 0
                if len(self.count) == self.capacity:
                    m = min(self.count.values())
                    victim = max((a for a, c in self.count.items() if c == m), key=self.entered.__getitem__)
                    del self.count[victim]
                self.count[x] = m + 1
                self.entered[x] = self.t
            self.t += 1

    def as_state(self):
        """A real SpaceSaving state with this summary's (T, C, n): each tracked key fed C times
        (at most k~ keys, so no evictions; Σ C = n holds for SpaceSaving)."""
        st = make_state(self.capacity)
        keys = [k for k, c in self.count.items() for _ in range(c)]
        if keys:
            update_batch(st, np.array(keys, dtype=np.uint64).reshape(-1, 2))
        return st


class EntryTimeDPSS(DPSpaceSaving):
    """Broken DPSS: the real release over ``EntryTimeSpaceSaving``."""

    def _new_state(self):
        return EntryTimeSpaceSaving(self.k_tilde)

    def _feed(self, state, keys):
        state.update(keys)

    def _publish(self, state):
        return super()._publish(None if state is None else state.as_state())


class EarlyReadSketch(DPSWSketch):
    """Broken DPSW sketch: the plan reads the *open* substream's whole sketch C_1 (still being
    written), and ``plan_ids`` no longer checks that every read sketch is frozen (§9 P1)."""

    def plan(self, rule="004", gamma=0.0, channel=0, t=None) -> Plan:
        p = super().plan(rule, gamma, channel, t)
        L = self.geometry.L
        if p.t <= 0 or p.t % L == 0:
            return p
        open_k = -(-p.t // L)
        entries = tuple(e for e in p.entries if e.k != open_k) + (PlanEntry(WHOLE, open_k, 0),)
        return Plan(p.t, entries, (p.covered[0], p.t))

    def plan_ids(self, plan: Plan) -> np.ndarray:
        return np.array([self.sketch_id(e) for e in plan.entries], dtype=np.int64)


class EarlyReadDPSW(DPSWHeavyHitters):
    """Broken DPSW heavy hitters over ``EarlyReadSketch``."""

    def reset(self):
        super().reset()
        self.sketch = EarlyReadSketch(self.geometry, self._channels(), self.depth, self.width,
                                      self.settings.seed)


class NoiselessLazyHH(LazyHH):
    """Broken LazyHH: its sketch's Gaussian tree noise switched off (docs/lazyhh.md §6.7: the estimates
    then move by the substituted packet's 1, with nothing to hide it)."""

    def _new_instance(self):
        seed = None if self.settings.seed is None else self.settings.seed + self.epoch
        return LazyHHInstance(self.params, seed=seed, noiseless=True)
