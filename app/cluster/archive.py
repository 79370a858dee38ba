"""Archive replay across machines: every capture file is one capture point.

``replay_archive(paths, names, settings, cluster)`` sends one task per file to Dask workers (or runs
them one after the other in this process when ``cluster`` is None: same results); each task opens
its file with ``dptop.capture.pcap.open_capture``, feeds a ``CapturePoint`` and ships back only the
summaries (``Shipment``), whose pickled size is recorded as the bytes shipped. The collector (this
process) merges them in file order and releases once: the merged exact counts, one merged release
list per algorithm (one release per epoch for the private ones) and per-file packet counts.
"""
from __future__ import annotations

import pickle
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from dptop.capture.pcap import open_capture
from dptop.cluster.connect import connect, describe
from dptop.cluster.merger import MergedResult, Merger
from dptop.cluster.plan import Plan, TimeGrid, new_master
from dptop.cluster.point import CapturePoint
from dptop.engine.core.settings import Settings

BATCH = 1 << 16


@dataclass(frozen=True)
class AgentReport:
    """One capture point (file): what it read and what it shipped."""

    name: str
    packets: int
    """Packet records read (IP or not)."""
    ip_packets: int
    skipped: dict
    warnings: tuple[str, ...]
    outside_grid: int
    epochs: int
    """Epoch summaries shipped."""
    bytes_shipped: int
    """Pickled size of everything the capture point sent to the collector."""
    epoch_bytes: int
    """The part of it that is per-epoch summaries (the rest: exact counts and baselines, once)."""
    seconds: float
    """Time the worker spent reading and summarising the file."""
    cpu_seconds: float
    """CPU time of that task's thread (the same work whatever the cluster; wall time also
    depends on how much of the machine the worker gets)."""

    @property
    def bytes_per_epoch(self) -> float:
        return self.epoch_bytes / max(self.epochs, 1)

    def to_json(self) -> dict:
        return {"path": self.name, "packets": self.packets, "ip_packets": self.ip_packets,
                "skipped": dict(self.skipped), "outside_grid": self.outside_grid, "epochs": self.epochs,
                "bytes_shipped": self.bytes_shipped, "epoch_bytes": self.epoch_bytes, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Shipment:
    """What one capture point sends: its report, whole-stream summaries and per-epoch summaries."""

    report: AgentReport
    whole: dict
    epochs: dict


def summarize_file(path: str, plan: Plan) -> Shipment:
    """A worker's task: read ``path`` with dptop's capture parser and summarise it by ``plan``."""
    t0, c0 = time.perf_counter(), time.thread_time()
    point = CapturePoint(plan)
    with open_capture(path) as reader:
        for batch in reader.batches(BATCH):
            point.feed(batch)
        stats = reader.stats
    epochs = {e: point.take_epoch(e) for e in point.open_epochs()}
    whole = point.take_whole()
    size, epoch_size = (len(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)) for x in ((whole, epochs), epochs))
    report = AgentReport(str(path), stats.packets, stats.ip_packets, dict(stats.skipped), tuple(stats.warnings),
                         point.counters.outside_grid, len(epochs), size, epoch_size, time.perf_counter() - t0,
                         time.thread_time() - c0)
    return Shipment(report, whole, epochs)


@dataclass(frozen=True)
class ArchiveResult(MergedResult):
    """``MergedResult`` of ``AgentReport``s plus where the replay ran and how long it took."""

    cluster: str = "in-process"
    seconds: float = 0.0

    def to_json(self, top: int = 10) -> dict:
        return {"cluster": self.cluster, "seconds": self.seconds, **super().to_json(top)}


def _run_tasks(client, paths: list[str], plan: Plan) -> list[Shipment]:
    if client is None:
        return [summarize_file(p, plan) for p in paths]
    run = uuid.uuid4().hex[:12]  # fresh keys: a repeated replay must never reuse a cached result
    futures = [client.submit(summarize_file, p, plan, pure=False, key=f"dptop-archive-{run}-{i}-{Path(p).name}")
               for i, p in enumerate(paths)]
    return client.gather(futures)


def replay_archive(paths, algorithm_names, settings: Settings, cluster=None,
                   grid: TimeGrid | None = None) -> ArchiveResult:
    """Replay capture files as capture points of one network and release their merge once.

    ``cluster``: None, "local:N", "tcp://HOST:PORT" or a ``distributed.Client``
    (``dptop.cluster.connect``). ``grid``: the public time grid when ``settings.epoch_seconds``
    is set (each packet goes to the cell of its own time stamp)."""
    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("paths: name at least one capture file")
    for p in paths:
        if not Path(p).is_file():
            raise ValueError(f"capture file {p!r} does not exist")
    plan = Plan(tuple(algorithm_names), settings, new_master(settings), agents=len(paths), grid=grid)
    t0 = time.perf_counter()
    with connect(cluster) as client:
        shipments = _run_tasks(client, paths, plan)
    merger = Merger(plan, paths)
    for path, ship in zip(paths, shipments):
        merger.add_whole(path, ship.whole)
        for epoch, summaries in ship.epochs.items():
            merger.add_epoch(path, epoch, summaries)
    merger.release_whole()
    for epoch in _epochs_to_release(plan, merger.pending_epochs()):
        merger.release_epoch(epoch, covered=paths)
    return ArchiveResult(tuple(s.report for s in shipments), merger.exact(), dict(merger.releases), plan,
                         describe(cluster), time.perf_counter() - t0)


def _epochs_to_release(plan: Plan, delivered: list[int]) -> list[int]:
    """Every grid cell (empty ones too: the number of releases must not depend on the data), every
    count epoch up to the last one any capture point reached, or the one whole-stream epoch."""
    if plan.epoch_mode == "grid":
        return list(range(plan.grid.cells))
    if plan.epoch_mode == "packets":
        return list(range(max(delivered, default=0) + 1))
    return [0]
