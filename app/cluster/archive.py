"""Archive replay across machines: every capture file is one capture point.

``replay_archive(paths, names, settings, cluster)`` sends one task per file to Dask workers (or runs
them one after the other in this process when ``cluster`` is None: same results); each task opens
its file with ``dptop.capture.pcap.open_capture``, feeds a ``CapturePoint`` and ships back only the
summaries: one dptop.cluster.messages shipment, as bytes (its summaries' size is recorded as the
bytes shipped). The collector (this process) loads msgpack only from the network (a pickled result
is refused before it is loaded) and checks every field of a shipment before merging; it merges them
in file order and releases once: the merged exact counts, one merged release list per algorithm
(one release per epoch for the private ones) and per-file packet counts.

The run keeps what it can: a file that cannot be read is named, with why, among the ``missing``
capture points and the others are merged and released without it (each release names the points
it covers and those it does not). ``stop`` (a ``threading.Event``, set e.g. by a signal handler)
ends the run early: every task stops reading at its next batch and ships what it holds (its
report says ``cut_short``); a task that ships nothing within ``STOP_TIMEOUT_S`` is missing.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from dptop.capture.pcap import CaptureError, open_capture
from dptop.cluster.connect import check_cluster, connect, describe
from dptop.cluster.merger import MergedResult, Merger
from dptop.cluster.plan import Plan, TimeGrid, new_master
from dptop.cluster.point import CapturePoint
from dptop.cluster.messages import decode_shipment, encode_shipment
from dptop.cluster.wire import WireError, decode, encode
from dptop.engine.core.settings import Settings

BATCH = 1 << 16
STOP_TIMEOUT_S = 10.0
"""After a stop, how long the collector waits for the tasks' summaries of what they read."""
POLL_S = 0.1


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
    """Size of the summaries the capture point sent to the collector."""
    epoch_bytes: int
    """The part of it that is per-epoch summaries (the rest: exact counts and baselines, once)."""
    seconds: float
    """Time the worker spent reading and summarising the file."""
    cpu_seconds: float
    """CPU time of that task's thread (the same work whatever the cluster; wall time also
    depends on how much of the machine the worker gets)."""
    cut_short: bool = False
    """The run was stopped while this file was read: its summaries hold the packets read so far."""

    @property
    def bytes_per_epoch(self) -> float:
        return self.epoch_bytes / max(self.epochs, 1)

    def to_json(self) -> dict:
        return {"path": self.name, "packets": self.packets, "ip_packets": self.ip_packets,
                "skipped": dict(self.skipped), "outside_grid": self.outside_grid, "epochs": self.epochs,
                "bytes_shipped": self.bytes_shipped, "epoch_bytes": self.epoch_bytes, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "warnings": list(self.warnings), "cut_short": self.cut_short}


@dataclass(frozen=True)
class MissingPoint:
    """A capture point (file) that delivered nothing, and why."""

    name: str
    error: str

    def to_json(self) -> dict:
        return {"path": self.name, "error": self.error}


def summarize_file(path: str, plan: Plan, stop=None) -> bytes:
    """A worker's task: read ``path`` with dptop's capture parser and summarise it by ``plan``; a
    shipment as bytes (dptop.cluster.messages), also for a file that cannot be read (its error:
    returned, not raised: one line for the user, no worker traceback). ``stop``: a
    ``threading.Event`` or the name of a Dask ``Event``, checked between batches."""
    t0, c0 = time.perf_counter(), time.thread_time()
    point = CapturePoint(plan)
    stopped = _stop_check(stop)
    if stopped():
        return encode_shipment(None, error="not read: the run was stopped first")
    cut = False
    try:
        with open_capture(path) as reader:
            for batch in reader.batches(BATCH):
                point.feed(batch)
                if stopped():
                    cut = True
                    break
            stats = reader.stats
    except (CaptureError, OSError, MemoryError) as exc:
        return encode_shipment(None, error=str(exc) or type(exc).__name__)
    epochs = {e: encode(point.take_epoch(e)) for e in point.open_epochs()}
    report = {"packets": stats.packets, "ip_packets": stats.ip_packets,
              "skipped": {str(k): int(v) for k, v in stats.skipped.items()},
              "warnings": [str(w) for w in stats.warnings], "outside_grid": point.counters.outside_grid,
              "seconds": time.perf_counter() - t0, "cpu_seconds": time.thread_time() - c0, "cut_short": cut}
    return encode_shipment(report, encode(point.take_whole()), epochs)


def _stop_check(stop):
    if stop is None:
        return lambda: False
    if isinstance(stop, str):
        from distributed import Event

        event = Event(stop)
        return event.is_set
    return stop.is_set


@dataclass(frozen=True)
class ArchiveResult(MergedResult):
    """``MergedResult`` of ``AgentReport``s plus where the replay ran and how long it took."""

    cluster: str = "in-process"
    seconds: float = 0.0
    missing: tuple[MissingPoint, ...] = ()
    stopped: bool = False
    """Stopped early (a signal): the files read so far, each as far as it was read."""

    @property
    def partial(self) -> bool:
        return self.stopped or bool(self.missing)

    def to_json(self, top: int = 10) -> dict:
        return {"cluster": self.cluster, "seconds": self.seconds, "partial": self.partial,
                "missing": [m.to_json() for m in self.missing], **super().to_json(top)}


def _run_tasks(client, paths: list[str], plan: Plan, stop: threading.Event) -> dict:
    """Each path's shipment (bytes, as it arrived) or ``MissingPoint``, by path."""
    if client is None:
        return {p: MissingPoint(p, "not read: the run was stopped") if stop.is_set() else summarize_file(p, plan, stop)
                for p in paths}
    from distributed import Event

    run = uuid.uuid4().hex[:12]  # fresh keys: a repeated replay must never reuse a cached result
    event = Event(f"dptop-archive-stop-{run}", client=client)
    futures = {client.submit(summarize_file, p, plan, event.name, pure=False,
                             key=f"dptop-archive-{run}-{i}-{Path(p).name}"): p for i, p in enumerate(paths)}
    out, deadline = {}, None
    while futures:
        for future in [f for f in futures if f.status != "pending"]:
            path = futures.pop(future)
            out[path] = _result(path, future)
        if stop.is_set() and deadline is None:
            event.set()
            deadline = time.monotonic() + STOP_TIMEOUT_S
        if deadline is not None and time.monotonic() > deadline:
            for future, path in futures.items():
                future.cancel()
                out[path] = MissingPoint(path, f"no summaries within {STOP_TIMEOUT_S:g} s of the stop")
            break
        time.sleep(POLL_S)
    return out


def _result(path: str, future):
    """A finished task's bytes (the client loads msgpack only: a pickled result raises here,
    unloaded), or the ``MissingPoint`` of a task that failed or whose result could not be read."""
    try:
        if future.status == "finished":
            return future.result()
        return MissingPoint(path, f"its task {future.status}: {future.exception() if future.status == 'error' else ''}"
                            .rstrip(": "))
    except Exception as exc:  # Dask's protocol refusing a pickle is a TypeError; a lost worker an OSError
        return MissingPoint(path, f"its result could not be read, nothing of it merged "
                                  f"({type(exc).__name__}: {str(exc)[:160]})")


def check_archive(paths, algorithm_names, settings: Settings, cluster=None, grid: TimeGrid | None = None) -> Plan:
    """The run's ``Plan``, or ``ValueError`` naming what cannot run (before anything starts). A
    plain ``tcp://`` address beyond loopback is the caller's choice (the command line asks for
    ``--insecure``, dptop.cluster.connect)."""
    if not paths:
        raise ValueError("paths: name at least one capture file")
    check_cluster(cluster, insecure=True)
    return Plan(tuple(algorithm_names), settings, new_master(settings), agents=len(paths), grid=grid)


def replay_archive(paths, algorithm_names, settings: Settings, cluster=None,
                   grid: TimeGrid | None = None, stop: threading.Event | None = None, progress=None) -> ArchiveResult:
    """Replay capture files as capture points of one network and release their merge once.

    ``cluster``: None, "local:N", "tcp://HOST:PORT" or a ``distributed.Client``
    (``dptop.cluster.connect``). ``grid``: the public time grid when ``settings.epoch_seconds``
    is set (each packet goes to the cell of its own time stamp). Files that cannot be read are
    ``missing``; ``stop`` ends the run early with what was read (module docstring); ``progress``
    (a callable) hears when the workers are up and the files go out."""
    paths = [str(p) for p in paths]
    plan = check_archive(paths, algorithm_names, settings, cluster, grid)
    stop = stop or threading.Event()
    t0 = time.perf_counter()
    with connect(cluster) as client:
        if progress is not None:
            progress(f"reading {len(paths)} capture file(s) on {describe(cluster)}")
        delivered = _run_tasks(client, paths, plan, stop)
    received = {p: _receive(p, delivered[p], plan) for p in paths}
    covered = [p for p in paths if not isinstance(received[p], MissingPoint)]
    missing = tuple(received[p] for p in paths if p not in covered)
    reports = [received[p][0] for p in covered]
    merger = Merger(plan, paths)
    for path in covered:
        _, whole, epochs = received[path]
        merger.add_whole(path, whole)
        for epoch, summaries in epochs.items():
            merger.add_epoch(path, epoch, summaries)
    merger.release_whole()
    for epoch in _epochs_to_release(plan, merger.pending_epochs()):
        merger.release_epoch(epoch, covered=covered, missing=[m.name for m in missing])
    return ArchiveResult(tuple(reports), merger.exact(), dict(merger.releases), plan, describe(cluster),
                         time.perf_counter() - t0, missing, any(r.cut_short for r in reports))


def _receive(path: str, delivered, plan: Plan):
    """(report, whole, epochs) decoded from a shipment, or the ``MissingPoint`` of what is wrong with it."""
    if isinstance(delivered, MissingPoint):
        return delivered
    try:
        fields, whole_bytes, epoch_bytes, error = decode_shipment(delivered)
        if error is not None:
            return MissingPoint(path, error)
        whole = decode(whole_bytes)
        epochs = {e: decode(b) for e, b in epoch_bytes.items()}
        if plan.truth not in whole or not set(whole) <= plan.whole \
                or not all(set(s) <= set(plan.private) for s in epochs.values()) \
                or (plan.grid is not None and any(e >= plan.grid.cells for e in epochs)):
            raise WireError("summaries of algorithms or epochs this run does not take")
    except WireError as exc:
        return MissingPoint(path, f"its summaries were rejected, nothing of them merged: {exc}")
    epoch_size = sum(map(len, epoch_bytes.values()))
    report = AgentReport(path, fields["packets"], fields["ip_packets"], fields["skipped"], tuple(fields["warnings"]),
                         fields["outside_grid"], len(epochs), len(whole_bytes) + epoch_size, epoch_size,
                         float(fields["seconds"]), float(fields["cpu_seconds"]), fields["cut_short"])
    return report, whole, epochs


def _epochs_to_release(plan: Plan, delivered: list[int]) -> list[int]:
    """Every grid cell (empty ones too: the number of releases must not depend on the data), every
    count epoch up to the last one any capture point reached, or the one whole-stream epoch."""
    if plan.epoch_mode == "grid":
        return list(range(plan.grid.cells))
    if plan.epoch_mode == "packets":
        return list(range(max(delivered, default=0) + 1))
    return [0]
