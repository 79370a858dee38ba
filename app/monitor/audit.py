"""Product-path audit targets: neighbouring capture files replayed through a monitor ``Session``
exactly as a user's packets are (public clock, canonical order, runners, finish, the JSON), and
the whole JSON's private part (every release's span, bounds, labels and estimates, and the number
of releases) compared between the two files (engine/audit/statistics.py does the statistics).

Real path: ``product-epochs`` (dpss and dpmg on 1 s time epochs of a declared range). The pairs
are the failure classes of a hostile review: one packet added near an epoch boundary, one
stamped a year ahead (outside the range, so it is dropped: a removal), one re-stamped 1.5 s
ahead inside the range (a move between epochs: group privacy 2, which the claim states), and
the first packet removed. Each broken variant breaks one class and must be reported as VIOLATION:

* ``product-epochs-file-order``: the replay feeds the file in file order instead of the public
  clock's canonical order, so a packet stamped ahead closes epochs early and later packets of
  those epochs are dropped (the old running-maximum rule);
* ``product-epochs-data-grid``: the grid is anchored at the first packet's stamp, not the declared
  range, so one packet moves every boundary;
* ``product-exact-status``: a release carries an exact count (the epoch's packet count) next to
  the noisy figures.
"""
from __future__ import annotations

import math
import tempfile
from collections import namedtuple
from pathlib import Path

import numpy as np

from dptop.capture.synth import write_pcap
from dptop.engine.audit.cases import Target
from dptop.engine.audit.statistics import features_of
from dptop.engine.audit.streams import Pair
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.engine.single_release.dpss import DPSpaceSaving
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.result import session_json
from dptop.monitor.session import Session

T0 = 1_700_000_000 * 10**9
SECOND = 10**9
HEAVY = (0x0A00_0001, 0x0A00_0002)  # 10.0.0.1 and 10.0.0.2: far above the threshold in every epoch
Item = namedtuple("Item", "address estimate")


def base_stream(epochs: int = 4, per_epoch: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """``epochs`` seconds of traffic: two heavy sources and a tail of light ones, in time order."""
    rng = np.random.default_rng(7)
    n = epochs * per_epoch
    src = np.where(rng.random(n) < 0.8, np.array(HEAVY)[rng.integers(0, 2, n)],
                   0x0B00_0000 + rng.integers(0, 500, n)).astype(np.uint32)
    ts = T0 + 10**6 + np.sort(rng.integers(0, epochs * SECOND - 2 * 10**6, n))
    return src, ts


def neighbour_files(folder: Path) -> list[Pair]:
    """The product-path pairs as capture files (``Pair.x``/``x_prime`` are their paths)."""
    src, ts = base_stream()
    folder.mkdir(parents=True, exist_ok=True)

    def write(name, s, t):
        path = folder / f"{name}.pcap"
        write_pcap(path, s, t)
        return path

    x = write("x", src, ts)
    boundary = int(np.searchsorted(ts, T0 + 2 * SECOND)) - 1  # the last packet before a boundary
    added_src = np.insert(src, boundary, HEAVY[0])
    added_ts = np.insert(ts, boundary, ts[boundary])
    year = ts.copy()
    year[len(ts) // 3] += 365 * 86400 * SECOND
    ahead = ts.copy()
    ahead[len(ts) // 4] += 1_500_000_000
    return [
        Pair("one packet added at an epoch boundary", write("added", added_src, added_ts), x,
             "add/remove one packet"),
        Pair("one packet stamped a year ahead", x, write("year", src, year),
             "outside the declared range: dropped, i.e. removed"),
        Pair("one packet re-stamped 1.5 s ahead", x, write("ahead", src, ahead),
             "moved between epochs inside the range: two add/remove steps"),
        Pair("first packet removed", x, write("first", src[1:], ts[1:]), "add/remove one packet"),
    ]


def json_features(result: dict) -> dict[str, float]:
    """The private part of a session's JSON as audit features: per private algorithm the number
    of releases, their time bounds, and per release its labels, estimates and public status."""
    out: dict[str, float] = {}
    for name, a in result["algorithms"].items():
        if not a.get("private"):
            continue
        rels = a["releases"]
        out[f"{name} releases"] = float(len(rels))
        bounds = ";".join(f"{r['span'].get('t_start')}-{r['span'].get('t_end')}" for r in rels)
        out[f"{name} bounds {bounds}"] = 1.0
        for i, r in enumerate(rels):
            items = [Item(it["address"], it["estimate"]) for it in r["items"]]
            out.update(features_of(items, r.get("status"), prefix=f"{name} e{i} "))
            for key, value in (r.get("status") or {}).items():
                if isinstance(value, (int, float)) and key != "noisy_length":
                    out[f"{name} e{i} status {key}={value}"] = 1.0
    return out


class ProductTarget(Target):
    """``dpss`` and ``dpmg`` on 1 s epochs of a declared 4 s range, ε = 0.25, δ = 1e-6 per epoch."""

    name = "product-epochs"
    description = ("the product path: capture files replayed through a monitor session (public clock, "
                   "canonical order, runners, JSON), dpss + dpmg, 1 s epochs of a declared 4 s range; "
                   "claim (2ε, 2e^ε·δ) so that the re-stamp pair (two add/remove steps) is covered")
    algorithms = ("dpss", "dpmg")
    epsilon, delta = 0.25, 1e-6

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="dptop-audit-")

    def claimed(self):
        return 2 * self.epsilon, 2 * math.exp(self.epsilon) * self.delta

    def pairs(self):
        return neighbour_files(Path(self._dir.name))

    def settings(self, seed):
        return Settings(k=4, k_tilde=8, epsilon=self.epsilon, delta=self.delta, epoch_seconds=1.0, seed=seed)

    session_type = Session  # what replays the files (a broken variant swaps in its own)
    make = staticmethod(registry.make)  # what builds each algorithm

    def session(self, config: RunConfig) -> Session:
        return self.session_type(config, record_packets=1 << 12, make=self.make)

    def spec(self, path) -> SourceSpec:
        return SourceSpec("file", path=str(path), time_range=(T0, T0 + 4 * SECOND))

    def sample(self, path, runs, seed):
        out = []
        for r in range(runs):
            run_seed = None if seed is None else seed * 100_003 + r
            session = self.session(RunConfig(self.algorithms, self.settings(run_seed)))
            try:
                session.open(self.spec(path))
                if session.wait(60) != "finished":
                    raise RuntimeError(f"audit replay of {path} ended {session.state}: {session.error}")
                out.append(json_features(session_json(session, "audit", top=1)))
            finally:
                session.close(5.0)
        return out


class _FileOrderSession(Session):
    def _replay_grid(self):
        return None  # file order: the algorithms cut epochs by the stamps in arrival order


class FileOrderTarget(ProductTarget):
    name = "product-epochs-file-order"
    broken = True
    description = "BROKEN: the replay feeds file order, so a packet stamped ahead closes epochs early"
    session_type = _FileOrderSession


class _DataGridSession(Session):
    def _time_range(self, path, declared):
        from dptop.capture import epochorder

        first = epochorder.time_range(path)[0]
        return first, first + (declared[1] - declared[0])


class DataGridTarget(ProductTarget):
    name = "product-epochs-data-grid"
    broken = True
    description = "BROKEN: the epoch grid is anchored at the first packet instead of the declared range"
    session_type = _DataGridSession


class _ExactStatusDPSS(DPSpaceSaving):
    def _publish(self, state):
        items, threshold, n_noisy, status = super()._publish(state)
        return items, threshold, n_noisy, {**status, "packets": self._epoch.packets}


def _make_exact_status(name, settings):
    return _ExactStatusDPSS(settings) if name == "dpss" else registry.make(name, settings)


class ExactStatusTarget(ProductTarget):
    name = "product-exact-status"
    broken = True
    description = "BROKEN: each DPSS release carries its epoch's exact packet count"
    make = staticmethod(_make_exact_status)


PRODUCT_TARGETS = {t.name: t for t in (ProductTarget, FileOrderTarget, DataGridTarget, ExactStatusTarget)}
