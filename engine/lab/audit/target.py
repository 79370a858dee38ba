"""What an audited mechanism gives the auditor (dptop.engine.lab.audit.cases): ``Target``, the
claimed (ε, δ), neighbour pairs and a sampler of output records; ``EpochedTarget`` for the
single-release mechanisms (one whole-stream epoch per run); and the known-answer target,
``LaplaceCount``, whose privacy loss is exactly ε (the auditor's own calibration).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from dptop.engine.lab.audit.broken import WeakNoise
from dptop.engine.lab.audit.events import features_of
from dptop.engine.lab.audit.streams import Pair, stream
from dptop.engine.privacy.noise import NoiseSource
from dptop.engine.core.settings import Settings
from dptop.engine.single_release.dpss import DPSpaceSaving


class Target:
    """A mechanism under audit: claimed (ε, δ), neighbour pairs, and a sampler of output records."""

    name = ""
    broken = False
    description = ""

    def claimed(self) -> tuple[float, float]:
        raise NotImplementedError

    def pairs(self) -> list[Pair]:
        raise NotImplementedError

    def sample(self, keys: np.ndarray, runs: int, seed: int | None) -> list[dict]:
        raise NotImplementedError

    def structure(self, pair: Pair) -> list[str]:
        """White-box check of the proof's premise on ``pair`` (none by default)."""
        return []


class EpochedTarget(Target):
    """A single-release mechanism (DPSS, DP-MG, EEHH): one whole-stream epoch per run."""

    cls = DPSpaceSaving
    weak = False
    fresh_state = False  # True: randomness at creation (EEHH), rebuild the state every run

    def settings(self) -> Settings:
        raise NotImplementedError

    def make(self, seed):
        mech = self.cls(self.settings().with_(seed=seed))
        if self.weak:
            mech.noise = WeakNoise(seed)
        return mech

    def claimed(self):
        g = self.cls(self.settings()).guarantee()
        return g.epsilon, g.delta or 0.0

    def sample(self, keys, runs, seed):
        mech = self.make(seed)
        out = []
        state = None
        for _ in range(runs):
            if state is None or self.fresh_state:
                state = mech._new_state()
                mech._feed(state, keys)
            items, _, _, status = mech._publish(state)  # fresh release noise on every call
            out.append(features_of(items, status))
        return out


class LaplaceCount(Target):
    """The known-answer mechanism: the stream length plus discrete Laplace(1/ε) noise (dptop.engine.privacy.noise).
    Its privacy loss is exactly ε: the event {output >= n} has probability 1/(1+α) on the longer
    stream and α/(1+α) on the shorter (α = e^−ε)."""

    name = "laplace-count"
    description = "packet count + discrete Laplace(1/ε), ε=1 (exact privacy loss ε)"
    epsilon = 1.0
    factor = 1

    def claimed(self):
        return self.epsilon, 0.0

    def pairs(self):
        return [Pair("one packet more", stream([1] * 10), stream([1] * 9), "count sensitivity 1")]

    def sample(self, keys, runs, seed):
        noise = NoiseSource(seed)
        eps = Fraction(self.epsilon) * self.factor
        return [{"count": float(len(keys) + noise.dlap(eps))} for _ in range(runs)]


class LaplaceSmallNoise(LaplaceCount):
    name = "laplace-small-noise"
    broken = True
    factor = 2
    description = "packet count + discrete Laplace noise 2x too small (privacy loss 2ε)"
