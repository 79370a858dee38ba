"""Audit targets for user-level privacy (docs/host-level.md, paper 002 §8): neighbouring streams
that differ in one **whole client** (all its packets in the epoch), for ``hostdp-dst``.

Each pair X, X' is a packet stream (``KeyBatch`` with ``dst``) in which X has one client more.
The pairs hit the cases of 002 Lemma 9 and the construction of Lemma 7 (docs/host-level.md §3):

* **+1 on m stored counters** (Lemma 9 case 1): k servers sit just below the threshold and the
  extra client contacts all of them;
* **one more decrement** (Lemma 9 case 2): the extra client brings m new servers, which makes
  PAMG decrement every counter once;
* **Lemma 7**: k clients cycle through k servers m at a time, a client with m new servers empties
  the sketch, then clients that contact one fresh server x. Plain Misra-Gries (one decrement per
  *element*) ends with x's counter m apart on the two streams; PAMG with 1 apart.

Targets (registered in ``dptop.engine.lab.audit.cases.TARGETS``):

* ``hostdp-dst``: the real mechanism (PAMG + GSHM with discrete Gaussian noise).
* ``hostdp-per-element``: broken, PAMG decrementing once per element (every element fed as its
  own set) under the same GSHM noise: Lemma 9 fails, the audit must report a VIOLATION.

The user sets and the sketch are deterministic functions of the stream, so each side builds the
sketch once and draws only the GSHM noise per run (``HostDPDst.release_sketch``: fresh noise on
every call, exactly the law of a fresh run). The white-box check tests Lemma 9 on the two sketches.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.lab.audit.events import features_of
from dptop.engine.lab.audit.streams import Pair, label
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings
from dptop.engine.user_level.hostdp import HostDPDst
from dptop.engine.user_level.pamg import PAMG

CLIENT_BASE = 40_000
"""Client i is the audit label ``CLIENT_BASE + i`` (servers use small labels)."""


def host_stream(sets: list[list[int]], without: int | None = None) -> KeyBatch:
    """One packet per (client i, server s) for ``sets[i]``, clients in order, as a KeyBatch;
    ``without``: the same stream with client ``without`` (all its packets) removed."""
    rows = [(i, s) for i, servers in enumerate(sets) if i != without for s in servers]
    src = [label(CLIENT_BASE + i) for i, _ in rows]
    dst = [label(s) for _, s in rows]
    return KeyBatch(np.array(src, dtype=np.uint64).reshape(-1, 2), dst=np.array(dst, dtype=np.uint64).reshape(-1, 2))


def whole_client_pair(name: str, sets: list[list[int]], client: int, note: str) -> Pair:
    """X = ``sets``, X' = the same without ``client``."""
    return Pair(name, host_stream(sets), host_stream(sets, without=client), note)


def lemma9_violations(c: dict, cp: dict) -> list[str]:
    """002 Lemma 9 for sketches c (with the extra user) and cp (without): T' ⊆ T with
    c − c' ∈ {0, 1}, or T ⊆ T' with c' − c ∈ {0, 1}."""
    keys = set(c) | set(cp)
    diff = {x: c.get(x, 0) - cp.get(x, 0) for x in keys}
    case1 = set(cp) <= set(c) and all(d in (0, 1) for d in diff.values())
    case2 = set(c) <= set(cp) and all(d in (0, -1) for d in diff.values())
    if case1 or case2:
        return []
    worst = max(diff.values(), key=abs)
    return [f"Lemma 9 fails: {len(set(c) ^ set(cp))} keys on one side only, counter differences "
            f"{sorted(set(diff.values()))} (largest {worst:+d})"]


class PerElementHostDP(HostDPDst):
    """Broken: the sketch decrements once per *element* (each element its own set), not once per
    user, so one client can move a counter by m [002 Lemma 7]; the GSHM release is unchanged."""

    def sketch(self, state):
        items = state.sets()[0]
        pamg = PAMG(self.k, self.m)
        pamg.update(items, np.arange(len(items) + 1, dtype=np.int64))
        return pamg.items()


class HostDPTarget:
    """``hostdp-dst`` with k = m = 128, ε = 1, δ = 1e-6 over the pairs of the module docstring."""

    name = "hostdp-dst"
    broken = False
    description = ("hostdp-dst: PAMG + GSHM (discrete Gaussian), k=m=128, ε=1, δ=1e-6; neighbours differ "
                   "in one whole client (002 Lemma 9 cases and the Lemma 7 construction)")
    cls = HostDPDst
    k = m = 128

    def settings(self, seed=None) -> Settings:
        return Settings(k=self.k, epsilon=1.0, delta=1e-6, seed=seed, extra={"m": self.m})

    def claimed(self) -> tuple[float, float]:
        g = self.cls(self.settings()).guarantee()
        return g.epsilon, g.delta

    def pairs(self) -> list[Pair]:
        k, m = self.k, self.m
        bar = self.cls(self.settings()).threshold()  # keep when the noisy count is >= bar
        base = [list(range(1, k + 1))] * (bar - 1)  # k servers, each at bar − 1 clients
        extra = list(range(1, m + 1))
        fresh = list(range(k + 1, k + m + 1))
        cycle = [[1 + (i * m + t) % k for t in range(m)] for i in range(k)]  # each server m times
        x = 5_000
        tail = [[x]] * (bar + m // 2)  # x ends at bar + m/2 − m on X' under plain MG
        return [
            whole_client_pair("client adds 1 to m stored counters (Lemma 9 case 1)", base + [extra], len(base),
                              "002 Lemma 9: T' ⊆ T, m counters +1, no decrement"),
            whole_client_pair("client forces one more decrement (Lemma 9 case 2)", base + [fresh], len(base),
                              "002 Lemma 9: T ⊆ T', every counter 1 lower on X"),
            whole_client_pair(f"Lemma 7 construction (x = {x})", cycle + [fresh] + tail, len(cycle),
                              "002 Lemma 7: plain MG ends with x's counter m apart"),
        ]

    def _sketch(self, keys: KeyBatch, seed=None):
        """The mechanism and its sketch of ``keys`` (deterministic: built once, noised per run)."""
        mech = self.cls(self.settings(seed))
        mech.update(keys)
        return mech, mech.sketch(mech._epoch.state)

    def sample(self, keys: KeyBatch, runs: int, seed: int | None) -> list[dict]:
        mech, sketch = self._sketch(keys, seed)
        out = []
        for _ in range(runs):
            items, _, _, status = mech.release_sketch(*sketch)
            out.append(features_of(items, status))
        return out

    def structure(self, pair: Pair) -> list[str]:
        sides = [self._sketch(keys)[1] for keys in (pair.x, pair.x_prime)]
        return lemma9_violations(*({tuple(x): int(v) for x, v in zip(k.tolist(), c.tolist())} for k, c in sides))


class PerElementTarget(HostDPTarget):
    name = "hostdp-per-element"
    broken = True
    cls = PerElementHostDP
    description = "hostdp-dst whose sketch decrements once per element, not once per client (002 Lemma 7)"


USER_LEVEL_TARGETS = (HostDPTarget, PerElementTarget)
