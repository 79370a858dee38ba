"""Live capture points: ``dptop agent`` and the long-running Dask task it hosts.

``serve_agent`` runs a Dask worker in this process, connected to the collector's scheduler, named
after the capture point and carrying the resource ``dptop-agent`` and an ``AgentPlugin`` that holds
its interface. A collector pins ``run_capture_point`` to that worker (``workers=[address]``,
``resources={"dptop-agent": 1}``); the task captures with ``dptop.capture.live.LiveCapture`` into a
``CapturePoint`` and ships, as scheduler events on the run's topic (msgpack dicts, summaries as bytes of dptop.cluster.wire):

* ``beat`` every ``HEARTBEAT_S``: packet counters, drops and the exact-count delta since the last one
  (empty while a batch is still being summarized: a beat never waits for the summarizers);
* ``epoch`` when a time epoch's cell is over (plus ``GRACE_S`` for packets still in flight), and for
  the whole-stream epoch at the end;
* ``done`` at the end, with the whole-stream baselines.

The task ends when the collector sets the run's stop ``Event``, or when the collector's lease (a
``Variable`` it refreshes) is older than ``LEASE_S`` (the collector died). Only summaries leave the
capture point, never packets.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

from distributed import Event, Variable, WorkerPlugin, get_worker, secede

from dptop.capture.live import LiveCapture
from dptop.cluster.plan import Plan
from dptop.cluster.point import CapturePoint
from dptop.cluster.wire import encode
from dptop.engine.baselines.merge import CountSummary

AGENT_RESOURCE = "dptop-agent"
PLUGIN = "dptop-agent"
HEARTBEAT_S = 0.5
GRACE_S = 0.3
LEASE_S = 15.0


def topic(run: str) -> str:
    return f"dptop-{run}"


def stop_event(run: str) -> str:
    return f"dptop-{run}-stop"


def lease_variable(run: str) -> str:
    return f"dptop-{run}-lease"


class AgentPlugin(WorkerPlugin):
    """What a capture point's worker knows about itself: interface and capture filter."""

    name = PLUGIN

    def __init__(self, iface: str, bpf: str | None = None):
        self.iface = iface
        self.bpf = bpf


def default_name(iface: str) -> str:
    return f"{socket.gethostname()}:{iface}"


def check_capture(iface: str, bpf: str | None) -> None:
    """Open and close the capture now, so a bad interface, filter or missing permission is one
    clear error before the agent joins the cluster."""
    LiveCapture(iface, lambda batch: True, bpf=bpf).stop()


def serve_agent(scheduler: str, iface: str, name: str | None = None, bpf: str | None = None) -> None:
    """``dptop agent``: join ``scheduler`` as capture point ``name`` on ``iface`` until stopped."""
    from distributed import Worker

    check_capture(iface, bpf)
    logging.getLogger("distributed").setLevel(logging.WARNING)  # the agent prints its own lines

    async def run():
        async with Worker(scheduler, name=name or default_name(iface), nthreads=1,
                          resources={AGENT_RESOURCE: 1}, plugins={AgentPlugin(iface, bpf)},
                          dashboard=False) as worker:
            await worker.finished()

    asyncio.run(run())


def _ship(worker, run: str, kind: str, **fields) -> None:
    worker.log_event(topic(run), {"kind": kind, "agent": worker.name, "run": run, "time": time.time(), **fields})


def cell_now(grid) -> int:
    """The grid cell the clock is in now (the first one before the grid starts)."""
    return max(0, (time.time_ns() - grid.start_ns) // grid.epoch_ns)


def _shipped_at(grid, cell: int) -> float:
    """When a capture point ships ``cell``: its end plus ``GRACE_S`` (ns since the Unix epoch)."""
    return grid.start_ns + (cell + 1) * grid.epoch_ns + GRACE_S * 1e9


def run_capture_point(plan: Plan, run: str) -> dict:
    """The long-running task on an agent's worker (see the module docstring). Returns its final
    counters."""
    worker = get_worker()
    plugin = worker.plugins[PLUGIN]
    secede()  # a capture point runs for as long as the collector wants; free the worker's slot
    stop, lease = Event(stop_event(run)), Variable(lease_variable(run))
    point = CapturePoint(plan)
    lock = threading.Lock()

    def sink(batch):
        with lock:
            point.feed(batch)
        return True

    capture = LiveCapture(plugin.iface, sink, bpf=plugin.bpf)
    grid = plan.grid
    next_cell = first_cell = None if grid is None else cell_now(grid)
    capture.start()
    try:
        while not stop.is_set() and not capture.stats().finished:
            if time.time() - lease.get(timeout=5) > LEASE_S:
                break
            delta, due = CountSummary.empty(), []
            # a batch may hold the lock for seconds (a kernel's first use compiles it): the beat says
            # this capture point is alive all the same, its counts and epochs go with a later one
            if lock.acquire(timeout=HEARTBEAT_S / 2):
                try:
                    delta = point.take_exact()
                    while grid is not None and time.time_ns() >= _shipped_at(grid, next_cell):
                        due.append((next_cell, point.take_epoch(next_cell)))
                        next_cell += 1
                finally:
                    lock.release()
            st = capture.stats()
            _ship(worker, run, "beat", iface=plugin.iface, first_cell=first_cell, packets=st.packets,
                  ip_packets=st.ip_packets, kernel_drops=st.kernel_drops, queue_drops=st.queue_drops,
                  late=point.counters.late, outside_grid=point.counters.outside_grid,
                  error=st.error, exact=encode({"exact": delta}))
            for epoch, summaries in due:
                _ship(worker, run, "epoch", epoch=epoch, summaries=encode(summaries))
            time.sleep(HEARTBEAT_S)
    finally:
        capture.stop()
        capture.join(5)
    last = 0 if grid is None else max(next_cell, min(cell_now(grid), grid.cells - 1))
    with lock:  # the open (partial) cells, or the whole-stream epoch
        for epoch in range(0 if grid is None else next_cell, last + 1):
            _ship(worker, run, "epoch", epoch=epoch, summaries=encode(point.take_epoch(epoch)))
        whole = point.take_whole()
    st = capture.stats()
    final = {"packets": st.packets, "ip_packets": st.ip_packets, "kernel_drops": st.kernel_drops,
             "late": point.counters.late, "last_cell": last}
    _ship(worker, run, "done", whole=encode(whole), **final)
    return final
