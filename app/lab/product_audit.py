"""Product-path audit targets: neighbouring capture files replayed through a monitor session
exactly as a user's packets are (public clock, canonical order, runners, finish, the JSON), and
every field of the private view (``--publish``: releases, spans, guarantees, budget, public
facts) compared between the two files (engine/lab/audit/statistics.py does the statistics).

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
* ``product-exact-status``: the view carries each release's status with an exact count (the
  epoch's packet count) next to the noisy figures.

Each variant breaks the product from outside, through what any caller of a session passes (the
source's spec, the facts read of it) or by rewriting the view it reads: the product keeps no hook
for the lab.
"""
from __future__ import annotations

import tempfile
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import numpy as np

from dptop.capture import epochorder
from dptop.capture.synth import write_pcap
from dptop.engine.lab.audit.events import features_of
from dptop.engine.lab.audit.streams import Pair
from dptop.engine.lab.audit.target import Target
from dptop.engine.core.settings import Settings
from dptop.monitor.config import CountingChoice, RunConfig, SourceSpec
from dptop.engine.privacy.measures import ApproxDP, group
from dptop.monitor.precheck import SourceFacts, read_facts
from dptop.monitor.publish import publish_json
from dptop.monitor.sources import cell_counts
from dptop.monitor.stepped import SteppedSession
from dptop.monitor.states import State

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


def view_features(view: dict) -> dict[str, float]:
    """Every field of the private view (``dptop.monitor.publish``: what a user reads) as audit
    features: per release its labels and estimates (``features_of``), every other field by its path,
    numbers as values and anything else as a category (``path=value``)."""
    out: dict[str, float] = {}

    def walk(value, path):
        if isinstance(value, dict):
            if "items" in value and "span" in value:  # a release
                items = [Item(it["address"], it["estimate"]) for it in value["items"]]
                out.update(features_of(items, (value.get("status") or {}).get("noisy_length"), prefix=f"{path} "))
                value = {k: v for k, v in value.items() if k != "items"}
            for key, sub in value.items():
                walk(sub, f"{path}.{key}")
        elif isinstance(value, list):
            out[f"{path} length"] = float(len(value))
            for i, sub in enumerate(value):
                walk(sub, f"{path}[{i}]")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[path] = float(value)
        else:
            out[f"{path}={value}"] = 1.0

    walk({k: v for k, v in view.items() if k != "parameters"}, "")
    walk({k: v for k, v in view["parameters"].items() if k != "seed"}, ".parameters")  # seeds: the audit's own
    return out


class ProductTarget(Target):
    """``dpss`` and ``dpmg`` on 1 s epochs of a declared 4 s range, ε = 0.25, δ = 1e-6 per epoch."""

    name = "product-epochs"
    description = ("the product path: capture files replayed through a monitor session (public clock, "
                   "canonical order, runners, JSON), dpss + dpmg, 1 s epochs of a declared 4 s range; "
                   "claim (2ε, (1+e^ε)·δ) so that the re-stamp pair (two add/remove steps) is covered")
    algorithms = ("dpss", "dpmg")
    epsilon, delta = 0.25, 1e-6

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="dptop-audit-")

    def claimed(self):
        pair = group(ApproxDP(self.epsilon, self.delta), 2)  # the re-stamp pair: two add/remove steps
        return pair.epsilon, pair.delta

    def pairs(self):
        return neighbour_files(Path(self._dir.name))

    def settings(self, seed):
        return Settings(k=4, k_tilde=8, epsilon=self.epsilon, delta=self.delta, epoch_seconds=1.0, seed=seed)

    view = staticmethod(publish_json)  # what a user reads
    counting = CountingChoice()  # what a packet counts as

    def session(self, config: RunConfig) -> SteppedSession:
        """The session each run replays a file through: the product's, driven in this thread
        (dptop.monitor.stepped: the threaded session's releases and private view)."""
        return SteppedSession(config, record_packets=1 << 12)

    def spec(self, path) -> SourceSpec:
        return SourceSpec("file", path=str(path), time_range=(T0, T0 + 4 * SECOND))

    def facts(self, spec: SourceSpec, epoch_seconds: float) -> SourceFacts | None:
        """The facts handed to the session with the spec (None: the session reads them itself)."""
        return None

    def sample(self, path, runs, seed):
        out = []
        for r in range(runs):
            run_seed = None if seed is None else seed * 100_003 + r
            session = self.session(RunConfig(self.algorithms, self.settings(run_seed), counting=self.counting))
            try:
                spec = self.spec(path)
                session.open(spec, self.facts(spec, session.config.settings.epoch_seconds))
                if session.replay() is not State.FINISHED:
                    raise RuntimeError(f"audit replay of {path} ended {session.state}: {session.error}")
                out.append(view_features(self.view(session, "audit")))
            finally:
                session.close(5.0)
        return out


class FileOrderTarget(ProductTarget):
    name = "product-epochs-file-order"
    broken = True
    description = "BROKEN: the replay feeds file order, so a packet stamped ahead closes epochs early"

    def facts(self, spec, epoch_seconds):
        """The file's facts without their plan: the replay reads the file in file order and the
        algorithms cut epochs by the stamps in arrival order."""
        return replace(read_facts(spec.path, spec.time_range, epoch_seconds, spec.loop), plan=None)


class DataGridTarget(ProductTarget):
    name = "product-epochs-data-grid"
    broken = True
    description = "BROKEN: the epoch grid is anchored at the first packet instead of the declared range"

    def spec(self, path):
        """The declared range's length, started at the file's first stamp."""
        first = epochorder.time_range(path)[0]
        return SourceSpec("file", path=str(path), time_range=(first, first + 4 * SECOND))


def _view_with_status(session, command):
    """The private view as the old export wrote it, each release with its status, and each DPSS
    release's status with its epoch's exact packet count (the cell's packets in the file)."""
    view = publish_json(session, command)
    per_cell = cell_counts(session.spec.path, session.grid)
    for name, a in view["algorithms"].items():
        for out, rel in zip(a["releases"], [r for r in session.releases(name) if r.guarantee is not None]):
            out["status"] = rel.status.to_json()
            if name == "dpss" and rel.span.t_start is not None and rel.span.t_end is not None:
                middle = np.array([round((rel.span.t_start + rel.span.t_end) / 2 * 1e9)], np.int64)
                cell = int(session.grid.cell_of(middle)[0])
                out["status"]["packets"] = int(per_cell[cell]) if 0 <= cell < len(per_cell) else 0
    return view


class ExactStatusTarget(ProductTarget):
    name = "product-exact-status"
    broken = True
    description = "BROKEN: the private view carries each DPSS release's status with its epoch's exact packet count"
    view = staticmethod(_view_with_status)


PRODUCT_TARGETS = {t.name: t for t in (ProductTarget, FileOrderTarget, DataGridTarget, ExactStatusTarget)}
