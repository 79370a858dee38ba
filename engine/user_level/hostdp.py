"""Popular hosts under user-level privacy: ``hostdp-dst`` and ``hostdp-src`` (paper 002 §8,
docs/host-level.md), with the exact baselines ``exact-clients`` and ``exact-servers``.

``hostdp-dst`` answers "which servers are contacted by the most clients?" while hiding whether a
given client contacted a given server: the user is the **source** host, the items its distinct
**destinations**. ``hostdp-src`` is the reverse (items: sources; user: the destination host).

Per public epoch (``--epoch-seconds``, or the whole stream; the Epoched bookkeeping): each user's
distinct items, capped at the public ``m`` (``--param m=...``) before sketching
(``usersets.UserSets``); when the epoch closes, the sets go user by user, in order of first
appearance, into the release mechanism, which is released once with fresh noise, the budget
spent first:

* ``variant=pamg`` (default): PAMG with k counters [002 Alg 4] released by GSHM with l = k and
  discrete Gaussian noise (gshm.py). Its sensitivity does not grow with m.
* ``variant=mg-dup``: the users' sets flattened into one stream and released by DP Misra-Gries
  Mode A (``dpmg``) at ε/m and δ/(m·e^ε) [002 §8 Lemma 2, Cor 3]: group privacy over the m
  elements of one user; it allows duplicates and pays a factor m in noise and threshold.

Guarantee: (ε, δ)-DP per user per epoch: neighbouring epochs differ by the packets one host sends
(hostdp-dst; receives, hostdp-src); replies to it belong to the other end's set. The ledger states
what one packet pays for it (``units.per_packet``) and a host's cost over the session's epochs. A user is one host in one epoch: epochs are disjoint, so each (host, epoch) lies in
exactly one release (parallel composition); a host active in E epochs is covered by E releases.
Count-based epochs are refused: removing one host shifts their boundaries.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.registry import register
from dptop.engine.core.release import MODEL_SINGLE, Release, sorted_items
from dptop.engine.core.settings import PACKETS, Settings, check_delta, check_epsilon, check_positive_int
from dptop.engine.privacy.discrete_gaussian import DiscreteGaussian
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import ApproxDP
from dptop.engine.privacy.units import Unit, UnitKind
from dptop.engine.single_release.dpmg import DPMisraGries
from dptop.engine.single_release.epochs import Epoched
from dptop.engine.user_level.clients import ClientPrefixes, client_pairs
from dptop.engine.user_level.gshm import gshm_parameters, gshm_release, thm12_error
from dptop.engine.user_level.pamg import PAMG, state_bytes
from dptop.engine.user_level.usersets import UserSets
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import EpochStatus, ReleaseStatus, optional

DEFAULT_M = 8
VARIANTS = ("pamg", "mg-dup")


def mg_dup_cost(epsilon: float, delta: float, m: int) -> ApproxDP:
    """Per-element (ε/m, δ/(m·e^ε)) that gives (ε, δ) for users of at most m elements [002 Lemma 2]."""
    epsilon, delta, m = check_epsilon(epsilon), check_delta(delta), check_positive_int("m", m)
    return ApproxDP(epsilon / m, delta / (m * math.exp(epsilon)))


def host_pairs(batch: KeyBatch, item_field: str, who: str) -> np.ndarray:
    """``(n, 4)`` rows (user hi, user lo, item hi, item lo) of a batch; the item is the packet's
    ``item_field`` ("dst" or "src") and the user the other end."""
    if batch.dst is None:
        raise ValueError(f"{who} needs the packet destination, but this KeyBatch has no dst "
                         f"(KeyBatch.dst is None: the capture source did not provide it)")
    users, items = (batch.keys, batch.dst) if item_field == "dst" else (batch.dst, batch.keys)
    return np.concatenate([users, items], axis=1)


def _as_pairs(keys, item_field: str, who: str) -> np.ndarray:
    if isinstance(keys, KeyBatch):
        return host_pairs(keys, item_field, who)
    if keys.ndim != 2 or keys.shape[1] != 4:
        raise ValueError(f"{who} needs (user, item) pairs: give it KeyBatches with dst, not bare source keys")
    return keys


def _warm_batch() -> KeyBatch:
    """Synthetic pairs for compiling the kernels (no real data, no privacy cost)."""
    keys = np.zeros((64, 2), dtype=np.uint64)
    keys[:, 1] = 0xFFFF_0A00_0000 + np.arange(64, dtype=np.uint64) % 7
    dst = keys.copy()
    dst[:, 1] += np.arange(64, dtype=np.uint64) % 5
    return KeyBatch(keys, dst=dst)


class _PairBatch:
    """What ``Epoched.consume`` reads (``keys``, ``ts_ns``, ``epoch``, ``len``), with ``(n, 4)`` pair rows."""

    __slots__ = ("keys", "ts_ns", "epoch")

    def __init__(self, keys: np.ndarray, ts_ns: np.ndarray, epoch: int | None = None):
        self.keys, self.ts_ns, self.epoch = keys, ts_ns, epoch

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True, kw_only=True)
class HostStatus(EpochStatus):
    """The open epoch of a host-level mechanism: its sizing (``m`` pairs a user keeps, the
    ``variant``, τ) and the epoch's users, those capped at m and the packets of the pairs beyond
    it; with declared ``clients``, the packets with no client end or clients at both ends."""

    m: int
    variant: str
    threshold: float
    users_in_epoch: int
    capped_users: int
    over_cap_packets: int
    clients: str | None = optional()
    packets_without_one_client_end: int | None = optional()


@dataclass(frozen=True, kw_only=True)
class HostFigures(ReleaseStatus):
    """What one host-level release states beside its items: the ``variant``, k, ``m`` and, per
    variant, its noise figure and τ (``HostSketchFigures``, ``HostFlatFigures``)."""

    variant: str
    k: int
    m: int


@dataclass(frozen=True, kw_only=True)
class HostSketchFigures(HostFigures):
    """A GSHM release of a PAMG sketch: the Gaussian noise's σ and τ."""

    sigma: float
    tau: float


@dataclass(frozen=True, kw_only=True)
class HostFlatFigures(HostFigures):
    """A release of the flat mechanism over the epoch's distinct pairs: their noisy count and τ."""

    noisy_pairs: int | None
    tau: float


@dataclass(frozen=True, kw_only=True)
class PairCountFigures(ReleaseStatus):
    """What the exact host-level baseline states beside its items: its ``users`` and ``pairs``
    (NOT private)."""

    users: int
    pairs: int


@register
class HostDPDst(Epoched):
    """Servers contacted by the most clients; (ε, δ)-DP per client host per epoch (PAMG + GSHM)."""

    name = "hostdp-dst"
    address_keys = True
    host_pairs = True
    parameters = ("m", "variant", "clients")
    item_field = "dst"
    unit = Unit(UnitKind.HOST, host="the packets one host sends in the epoch")
    user_words = "sending host"
    repeats_free = True
    """A packet repeated by its byte weight adds no distinct pair: bytes need no calibration."""

    def __init__(self, settings: Settings, facts=NO_FACTS, counting=PACKETS):
        self.k = check_positive_int("k", settings.k)
        self.m = check_positive_int("m", settings.extra.get("m", DEFAULT_M))
        self.variant = str(settings.extra.get("variant", "pamg"))
        if self.variant not in VARIANTS:
            raise ValueError(f"variant ({self.variant!r}) must be one of {', '.join(VARIANTS)}")
        self.epsilon, self.delta = check_epsilon(settings.epsilon), check_delta(settings.delta)
        if settings.epoch_packets is not None:
            raise ValueError(f"epoch_packets ({settings.epoch_packets}) cannot be used with {self.name}: removing one "
                             f"host shifts count-based epoch boundaries; use epoch_seconds")
        if self.variant == "pamg":
            self.params = gshm_parameters(self.epsilon, self.delta, self.k)
        else:
            c = mg_dup_cost(self.epsilon, self.delta, self.m)
            self.flat = DPMisraGries(Settings(k=self.k, k_tilde=settings.k_tilde, epsilon=c.epsilon,
                                              delta=c.delta, seed=settings.seed))
        clients = settings.extra.get("clients")
        self.clients = None if clients in (None, "") else ClientPrefixes.parse(clients)
        if self.clients is not None:
            if self.item_field != "dst":
                raise ValueError(f"clients: {self.name} counts sources per receiving host; declare clients "
                                 f"on hostdp-dst (servers contacted by the most clients)")
            self.unit = Unit(UnitKind.HOST, host="one client host, all its packets in the epoch")
            self.user_words = "client host"
        self.unprotected = 0  # packets with no client end or clients at both ends (dropped)
        super().__init__(settings, facts, counting)
        if self.variant == "pamg":
            self.noise = DiscreteGaussian(settings.seed)

    # --- privacy map and a-priori helpers --------------------------------------------------------
    def cost(self) -> ApproxDP:
        return ApproxDP(self.epsilon, self.delta)

    def threshold(self) -> int:
        """Keep a noisy count when it is >= this, before any data is seen."""
        return self.params.threshold if self.variant == "pamg" else self.flat.tau

    def error_bound(self, elements: int) -> tuple[float, float]:
        """PAMG + GSHM: (below, above) of 002 Thm 12 for ``elements`` = M distinct pairs (w.p. >= 1 − 2δ)."""
        if self.variant != "pamg":
            raise ValueError(f"error_bound is 002 Thm 12, for variant pamg (this is {self.variant})")
        return thm12_error(elements, self.k, self.params.tau)

    def guarantee(self, span=None, extra_notes: tuple[str, ...] = ()) -> Guarantee:
        return Guarantee(MODEL_SINGLE, self.cost(), unit=self.unit, scope=self._scope(span),
                         noise=self.noise.label, seeded=self.noise.seeded, notes=(*self.notes(), *extra_notes))

    def notes(self) -> tuple[str, ...]:
        head = f"(ε={self.epsilon:g}, δ={self.delta:.3g})-DP per {self.user_words} per epoch (all its packets)"
        cap = (f"each {self.user_words}'s first m={self.m} distinct {'destinations' if self.item_field == 'dst' else 'sources'} "
               f"in the epoch are kept before sketching; packets of further pairs are dropped (status: over_cap_packets)")
        if self.variant == "pamg":
            p = self.params
            mech = (f"PAMG (002 Alg 4, k={self.k} counters, one decrement per host) released by GSHM with discrete "
                    f"Gaussian noise σ={p.sigma:.4g} and keep >= {p.threshold} (002 Thm 5, discrete form: "
                    f"δ <= {p.delta_discrete:.3g})")
        else:
            mech = (f"Misra-Gries on the flattened sets, DP-MG Mode A at ε/m={self.flat.epsilon:.4g}, "
                    f"δ/(m·e^ε)={self.flat.delta:.3g} (002 §8 Lemma 2): keep >= {self.flat.tau}")
        return head, mech, cap

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """The epoch's user sets at their starting size (they grow with the hosts of the traffic)
        and the release's sketch: PAMG of k + m counters, or (mg-dup) the flat DP-MG's k~ counters
        twice (its running instance and the one each release fills)."""
        m = int(settings.extra.get("m", DEFAULT_M))
        if settings.extra.get("variant", "pamg") == "pamg":
            return Footprint(UserSets.nbytes() + state_bytes(settings.k, m), f"k + m = {settings.k} + {m}")
        flat = DPMisraGries.footprint(Settings(k=settings.k, k_tilde=settings.k_tilde))
        return Footprint(UserSets.nbytes() + 2 * flat.nbytes, flat.sized_by)

    # --- Epoched hooks ---------------------------------------------------------------------------
    def _new_state(self):
        return UserSets(self.m)

    def _feed(self, state, keys):
        state.add(keys[:, :2], keys[:, 2:])

    def sketch(self, state) -> tuple[np.ndarray, np.ndarray]:
        """PAMG over the epoch's user sets, users in order of first appearance: (keys, counters)."""
        pamg = PAMG(self.k, self.m)
        pamg.update(*state.sets())
        return pamg.items()

    def release_sketch(self, keys: np.ndarray, counts: np.ndarray):
        """GSHM on a PAMG snapshot (fresh noise on every call): ``_publish``'s tuple."""
        status = HostSketchFigures(variant=self.variant, k=self.k, m=self.m, sigma=self.params.sigma,
                                   tau=self.params.tau)
        kept, noisy = gshm_release(keys, counts, self.params, self.noise)
        # Integer estimates: "v >= 1 + τ" is "v > τ", the threshold in Release's sense.
        return sorted_items(kept[:, 0], kept[:, 1], noisy), float(self.params.tau), None, status

    def _publish(self, state):
        if self.variant == "mg-dup":
            return self._publish_flat(state)
        if state is None or state.pairs == 0:
            return self.release_sketch(np.zeros((0, 2), np.uint64), np.zeros(0, np.int64))
        return self.release_sketch(*self.sketch(state))

    def _publish_flat(self, state):
        flat_state = self.flat._new_state()
        if state is not None and state.pairs:
            self.flat._feed(flat_state, state.sets()[0])
        items, threshold, n_noisy, _ = self.flat._publish(flat_state)
        status = HostFlatFigures(variant=self.variant, k=self.k, m=self.m, noisy_pairs=n_noisy, tau=self.flat.tau)
        return items, threshold, None, status

    def epoch_status(self, **epoch) -> HostStatus:
        """Operational facts of the open epoch (exact, like packets_in_epoch; never released)."""
        sets = self._epoch.state
        clients = self.clients is not None
        return HostStatus(**epoch, m=self.m, variant=self.variant, threshold=self.threshold(),
                          users_in_epoch=0 if sets is None else sets.users,
                          capped_users=0 if sets is None else sets.capped_users,
                          over_cap_packets=0 if sets is None else sets.over_cap_packets,
                          clients=self.clients.text if clients else None,
                          packets_without_one_client_end=self.unprotected if clients else None)

    # --- batches carry pairs ---------------------------------------------------------------------
    def _pairs(self, batch: KeyBatch) -> _PairBatch:
        """The batch as (user, item) pairs: each packet's sender, or with declared clients its
        client end in both directions (engine/user_level/clients.py)."""
        pairs = host_pairs(batch, self.item_field, self.name)
        if self.clients is None:
            return _PairBatch(pairs, batch.ts_ns, batch.epoch)
        pairs, kept = client_pairs(pairs[:, :2], pairs[:, 2:], self.clients)
        self.unprotected += int(len(kept) - kept.sum())
        return _PairBatch(pairs, batch.ts_ns[kept], batch.epoch)

    def update(self, keys) -> None:
        super().update(self._pairs(keys).keys if isinstance(keys, KeyBatch) else _as_pairs(keys, self.item_field,
                                                                                          self.name))

    def consume(self, batch: KeyBatch) -> list[Release]:
        return super().consume(self._pairs(batch))

    def warm_up(self) -> None:
        scratch = type(self)(self.settings, self.facts, self.counting)
        scratch.consume(_warm_batch())
        scratch.release()


@register
class HostDPSrc(HostDPDst):
    """Clients contacting the most servers; (ε, δ)-DP per destination host per epoch (PAMG + GSHM)."""

    name = "hostdp-src"
    item_field = "src"
    unit = Unit(UnitKind.HOST, host="the packets one host receives in the epoch")
    user_words = "receiving host"


@register
class ExactClients(Algorithm):
    """Exact distinct clients per destination (non-private; the truth beside hostdp-dst)."""

    address_keys = True
    host_pairs = True
    name = "exact-clients"
    parameters = ("top",)
    item_field = "dst"

    def __init__(self, settings: Settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.sets = UserSets(None)

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """The sets at their starting size: exact sets grow with the host pairs of the traffic,
        which no parameter bounds (a non-private baseline, beside the private ones)."""
        return Footprint(UserSets.nbytes(), "the distinct host pairs seen (grows with them)")

    def update(self, keys) -> None:
        pairs = _as_pairs(keys, self.item_field, self.name)
        self.sets.add(pairs[:, :2], pairs[:, 2:])

    def consume(self, batch: KeyBatch) -> list[Release]:
        self.update(host_pairs(batch, self.item_field, self.name))
        self.packets += len(batch)
        return []

    def release(self) -> Release:
        keys, counts = self.sets.item_counts()
        n = int(self.settings.extra.get("top", self.settings.k))
        return Release(self.name, self.span(), sorted_items(keys[:, 0], keys[:, 1], counts, limit=n or None),
                       status=PairCountFigures(users=self.sets.users, pairs=self.sets.pairs))

    def reset(self) -> None:
        self.sets = UserSets(None)
        self.packets = 0

    def warm_up(self) -> None:
        type(self)(self.settings, self.facts, self.counting).consume(_warm_batch())


@register
class ExactServers(ExactClients):
    """Exact distinct destinations per source (non-private; the truth beside hostdp-src)."""

    name = "exact-servers"
    item_field = "src"
