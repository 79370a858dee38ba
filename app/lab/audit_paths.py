"""More product-path audit targets (app/lab/product_audit.py's ``ProductTarget``): the default paths
a hostile review found misstated, each with a broken variant the audit must report.

* ``product-bytes``: dpss counting bytes (units of 64 B, at most G = 24 per packet), calibrated
  per update so (ε, δ) holds per packet; pairs: one heavy packet's length changed from 1500 B to
  64 B (24 -> 1 units: a removal and an addition, claimed as a group of 2) and one 1500 B packet
  added. Broken ``product-bytes-uncalibrated``: each update spends the full ε (the old bytes
  mode), so one packet moves a count by 24 units under a per-packet claim.
* ``product-dst``: dpss counting destinations; pairs: one packet's destination changed, one
  packet added.
* ``product-epochs-file-span``: the product path's time epochs without a declared range: the
  grid is the file's span, an assumed public fact named in every release (NOT covered: a packet
  before the first or after the last stamp moves it, which ``product-epochs-data-grid`` shows);
  pairs that keep the first and last stamps, the stamp a year ahead included (dropped as corrupt).
* ``product-hostdp-clients``: hostdp-dst with declared clients; pair: one client with 400 servers
  and their replies added within one epoch (one client host, all its packets in the epoch).
  Broken ``product-hostdp-senders``: without the declaration a packet belongs to its sender, so
  the replies make the client an item of 400 servers' sets, under the same client-host claim.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dptop.capture.synth import write_pcap
from dptop.engine.lab.audit.streams import Pair
from dptop.engine.core.settings import Settings
from dptop.engine.privacy.measures import ApproxDP, calibrate_group, group
from dptop.lab.product_audit import HEAVY, SECOND, T0, ProductTarget, base_stream, neighbour_files
from dptop.monitor.config import CountingChoice, SourceSpec

SERVER = 0xC0A8_0001  # write_pcap's default destination
CLIENT_NET, BUSY = "172.16.0.0/24", 0xAC10_0063  # 172.16.0.99


def _write(folder: Path, name: str, src, ts, dst=SERVER, wire=34) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pcap"
    write_pcap(path, np.asarray(src, np.uint32), np.asarray(ts, np.int64), dst, wire)
    return path


class BytesTarget(ProductTarget):
    name = "product-bytes"
    description = ("the product path counting bytes (units of 64 B, at most 24 per packet): dpss calibrated per "
                   "update so (ε, δ) holds per packet; claim (2ε, (1+e^ε)·δ) for a length change (two steps)")
    algorithms = ("dpss",)
    counting = CountingChoice(weight="bytes", unit=64, cap=24)

    def pairs(self):
        src, ts = base_stream()
        folder = Path(self._dir.name)
        wire = np.full(len(src), 1500)  # 24 units a packet: heavy sources far above the threshold
        shorter = wire.copy()
        shorter[int(np.flatnonzero(src == HEAVY[0])[len(src) // 4])] = 64
        x = _write(folder, "x", src, ts, wire=wire)
        at = len(src) // 3
        return [Pair("one heavy packet's length changed 1500 B -> 64 B", x,
                     _write(folder, "short", src, ts, wire=shorter), "a removal and an addition of one packet"),
                Pair("one 1500 B packet added", _write(folder, "added", np.insert(src, at, HEAVY[0]),
                                                       np.insert(ts, at, ts[at]), wire=np.insert(wire, at, 1500)), x,
                     "add/remove one packet")]


class UncalibratedBytesTarget(BytesTarget):
    name = "product-bytes-uncalibrated"
    broken = True
    description = "BROKEN: bytes counted with the full ε per update while the claim is per packet"

    def settings(self, seed):
        """The old bytes mode, every update spending the per-packet ε (with the calibrated δ): the
        session is asked for that cost's group over G updates, which its calibration turns back
        into it (``calibrate_group`` inverts ``group``)."""
        s = super().settings(seed)
        per_update = ApproxDP(s.epsilon, calibrate_group(ApproxDP(s.epsilon, s.delta), self.counting.cap).delta)
        asked = group(per_update, self.counting.cap)
        return s.with_(epsilon=asked.epsilon, delta=asked.delta)


class DestinationTarget(ProductTarget):
    name = "product-dst"
    description = "the product path counting destinations (--key dst): dpss; claim (2ε, (1+e^ε)·δ)"
    algorithms = ("dpss",)
    counting = CountingChoice(key="dst")

    def pairs(self):
        src, ts = base_stream()
        folder = Path(self._dir.name)
        dst = np.where(src == HEAVY[0], HEAVY[1], src).astype(np.uint32)  # heavy destinations
        moved = dst.copy()
        moved[len(dst) // 2] = 0x0B00_0FFF
        sender = np.full(len(dst) + 1, 0xC0A8_0002, np.uint32)  # one sender: only destinations vary
        x = _write(folder, "x", sender[1:], ts, dst=dst)
        at = len(dst) // 3
        return [Pair("one packet's destination changed", x, _write(folder, "moved", sender[1:], ts, dst=moved),
                     "substitution of one packet's destination address"),
                Pair("one packet added", _write(folder, "added", sender, np.insert(ts, at, ts[at]),
                                                dst=np.insert(dst, at, HEAVY[0])), x, "add/remove one packet")]


class FileSpanTarget(ProductTarget):
    name = "product-epochs-file-span"
    description = ("the product path's time epochs without a declared range (the file's span, named as an assumed "
                   "public fact): dpss + dpmg, 1 s epochs; pairs that keep the first and last stamps")

    def pairs(self):
        return [p for p in neighbour_files(Path(self._dir.name)) if p.name != "first packet removed"]

    def spec(self, path) -> SourceSpec:
        return SourceSpec("file", path=str(path))


class ClientsTarget(ProductTarget):
    name = "product-hostdp-clients"
    description = ("the product path with declared client hosts: hostdp-dst, 1 s epochs of a declared 4 s range, "
                   "clients 172.16.0.0/24; claim (ε, δ) per client host per epoch, its replies included")
    algorithms = ("hostdp-dst",)
    epsilon, delta = 1.0, 1e-6
    clients = CLIENT_NET

    def claimed(self):
        return self.epsilon, self.delta

    def settings(self, seed):
        extra = {"m": 8} if self.clients is None else {"m": 8, "clients": self.clients}
        return Settings(k=16, epsilon=self.epsilon, delta=self.delta, epoch_seconds=1.0, seed=seed, extra=extra)

    def pairs(self):
        rng = np.random.default_rng(11)
        n = 4000
        clients = (0xAC10_0000 + rng.integers(1, 200, n)).astype(np.uint32)  # 172.16.0.1-199 (not .99)
        clients[clients == BUSY] += 1
        servers = (0xC633_6400 + rng.integers(0, 6, n)).astype(np.uint32)  # 198.51.100.0-5: popular
        ts = T0 + 10**6 + np.sort(rng.integers(0, 4 * SECOND - 2 * 10**6, n))
        folder = Path(self._dir.name)
        x = _write(folder, "x", clients, ts, dst=servers)
        far = (0xCB00_7100 + np.arange(400)).astype(np.uint32)  # 203.0.113.0 + i: the busy client's servers
        t_busy = T0 + SECOND + 10**6 + np.arange(800) * 10**5  # all within the second epoch
        src = np.concatenate([clients, np.full(400, BUSY, np.uint32), far])  # requests, then the replies
        dst = np.concatenate([servers, far, np.full(400, BUSY, np.uint32)])
        t = np.concatenate([ts, t_busy])
        order = np.argsort(t, kind="stable")
        busy = _write(folder, "busy", src[order], t[order], dst=dst[order])
        return [Pair("one client with 400 servers and their replies added", busy, x,
                     "add/remove one client host with all its packets in one epoch")]


class SendersTarget(ClientsTarget):
    name = "product-hostdp-senders"
    broken = True
    description = "BROKEN: no declared clients (a packet is its sender's) under the client-host claim"
    clients = None


PATH_TARGETS = {t.name: t for t in (BytesTarget, UncalibratedBytesTarget, DestinationTarget, FileSpanTarget,
                                    ClientsTarget, SendersTarget)}
