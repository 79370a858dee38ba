"""Live capture points: ``dptop agent`` and the tasks a collector runs on it.

``serve_agent`` runs a Dask worker in this process, connected to the collector's scheduler, named
after the capture point (over TLS: its certificate's CN) and carrying the resource ``dptop-agent``
and an ``AgentPlugin`` that holds its interface and its capture point. When the worker loses the
scheduler, the agent says so and rejoins with the same plugin: the capture goes on across the gap.

The collector drives everything; an agent never sends on its own:

* ``start_point(plan, run, first_cell)`` (pinned to the agent) opens the capture into a
  ``CapturePoint`` of the run; a capture point of another run (a collector that died) ends at once;
  the same run goes on (a collector that rejoined after losing the scheduler);
* ``pull_point(run, now_ns, through, final)`` (pinned, every ``PULL_S``) returns a
  dptop.cluster.messages ``PointReport`` as bytes: counters, the exact counts since the last pull
  (only when the run asked for the exact baseline), and the summaries of every cell up to
  ``through``. The final pull stops the capture and adds the whole-stream baselines.

Cells are the collector's: each pull carries the collector's clock, and the agent puts a packet in
the cell of its own time stamp shifted by the latest difference of the two clocks, so a skewed
agent clock moves no packet to another cell. The lease is this agent's own monotonic clock: a
capture point that hears no pull for ``LEASE_S`` (its collector died) stops. Only summaries leave
the capture point, never packets, and only as task results (never in the scheduler's event log).
"""
from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

from distributed import WorkerPlugin, get_worker

from dptop.capture.live import LiveCapture
from dptop.cluster.messages import PointReport, encode_report
from dptop.cluster.plan import Plan
from dptop.cluster.point import CapturePoint
from dptop.cluster.wire import encode
from dptop.engine.baselines.merge import CountSummary
from dptop.engine.core.keys import KeyBatch

AGENT_RESOURCE = "dptop-agent"
PLUGIN = "dptop-agent"
PULL_S = 0.5
GRACE_S = 0.3
"""A cell is pulled this long after its end (packets still in the capture's buffers)."""
LEASE_S = 15.0
BUSY_WAIT_S = 0.2
"""A pull waits this long for a batch being summarized, then answers with counters only."""
REJOIN_S = 2.0


class AgentPlugin(WorkerPlugin):
    """What a capture point's worker knows about itself: interface, capture filter, its clock, and
    the capture point of the collector's run (kept across a lost scheduler)."""

    name = PLUGIN

    def __init__(self, iface: str, bpf: str | None = None, clock=time.time_ns):
        self.iface = iface
        self.bpf = bpf
        self.clock = clock
        self.session: PointSession | None = None
        self.lock = threading.Lock()

    def open(self, sink):
        """The capture feeding ``sink`` (``LiveCapture``: a ``Source`` with start, stop, join, stats)."""
        return LiveCapture(self.iface, sink, bpf=self.bpf)

    def start(self, plan: Plan, run: str, first_cell: int) -> bytes:
        with self.lock:
            if self.session is None or self.session.run != run:
                if self.session is not None:
                    self.session.stop()  # a collector that died: its successor's run replaces it
                self.session = PointSession(self, plan, run, first_cell)
            return self.session.pull(None, -1, False)

    def pull(self, run: str, now_ns: int, through: int, final: bool) -> bytes:
        session = self.session
        if session is None or session.run != run:
            return encode_report(PointReport(run, "unknown", self.iface))
        return session.pull(now_ns, through, final)


class PointSession:
    """One run's capture point on an agent: the capture thread, the summaries, what was shipped."""

    def __init__(self, plugin: AgentPlugin, plan: Plan, run: str, first_cell: int):
        self.plugin, self.plan, self.run = plugin, plan, run
        self.point = CapturePoint(plan)
        self.lock = threading.Lock()
        self.first_cell = first_cell
        self.through = first_cell - 1 if plan.grid is not None else -1
        self.offset_ns = 0
        self.pulled = time.monotonic()
        self.state = "starting"
        self.error: str | None = None
        self.capture = None
        self.late_before = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"dptop-point-{run}", daemon=True)
        self._thread.start()

    def _sink(self, batch: KeyBatch) -> bool:
        if self.plan.grid is not None and self.offset_ns and len(batch):
            batch = KeyBatch(batch.keys, batch.ts_ns + self.offset_ns)  # the collector's clock
        with self.lock:
            self.point.feed(batch)
        return True

    def _run(self) -> None:
        try:
            self.capture = self.plugin.open(self._sink)
            self.capture.start()
            self.state = "running"
            while not self._stop.wait(PULL_S / 2):
                if time.monotonic() - self.pulled > LEASE_S:
                    self.error = f"no pull from the collector for {LEASE_S:g} s: it is gone"
                    break
                if self.capture.stats().finished:
                    self.error = self.capture.stats().error or "the capture ended"
                    break
        except Exception as exc:  # the capture could not open (reported in the next pull)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if self.capture is not None:
                self.capture.stop()
                self.capture.join(5)
            if self.state != "finished":
                self.state = "stopped"

    def stop(self) -> None:
        self._stop.set()

    def pull(self, now_ns: int | None, through: int, final: bool) -> bytes:
        self.pulled = time.monotonic()
        if now_ns is not None:
            self.offset_ns = now_ns - self.plugin.clock()
        if final:
            self.stop()
            self._thread.join(10)
        epochs, exact, whole = {}, None, None
        if self.lock.acquire(timeout=-1 if final else BUSY_WAIT_S):
            try:
                epochs = self._take_epochs(through, final)
                exact = self._take_exact()
                if final:
                    whole = self.point.take_whole()
                    if self.plan.truth not in self.plan.names:
                        whole[self.plan.truth] = CountSummary.empty()
                    whole, exact = encode(whole), None
                    self.state = "finished"
            finally:
                self.lock.release()
        stats = self.capture.stats() if self.capture is not None else None
        c = self.point.counters
        return encode_report(PointReport(
            self.run, self.state, self.plugin.iface, getattr(stats, "packets", 0), c.ip_packets,
            getattr(stats, "kernel_drops", 0), getattr(stats, "queue_drops", 0), c.late + self.late_before,
            c.outside_grid, self.through, self.error, epochs, exact, whole))

    def _take_epochs(self, through: int, final: bool) -> dict:
        """The summaries of every cell after the last shipped up to ``through`` (empty cells too),
        or of the one whole-stream epoch in the final pull; cells before this point joined are late."""
        if self.plan.grid is None:
            return {0: encode(self.point.take_epoch(0))} if final and self.plan.private else {}
        for cell in [e for e in self.point.open_epochs() if e < self.first_cell]:
            self.late_before += max((s.n for s in self.point.take_epoch(cell).values()), default=0)
        out = {}
        for cell in range(max(self.through + 1, self.first_cell), through + 1):
            out[cell] = encode(self.point.take_epoch(cell))
        self.through = max(self.through, through)
        return out

    def _take_exact(self) -> bytes | None:
        delta = self.point.take_exact()
        return encode({self.plan.truth: delta}) if self.plan.truth in self.plan.names else None


def start_point(plan: Plan, run: str, first_cell: int) -> bytes:
    """The collector's task that opens this agent's capture point of ``run`` (module docstring)."""
    return get_worker().plugins[PLUGIN].start(plan, run, first_cell)


def pull_point(run: str, now_ns: int, through: int, final: bool) -> bytes:
    """The collector's pull (module docstring): a ``PointReport`` as bytes."""
    return get_worker().plugins[PLUGIN].pull(run, now_ns, through, final)


def default_name(iface: str) -> str:
    return f"{socket.gethostname()}:{iface}"


def agent_name(scheduler: str, iface: str, name: str | None) -> str:
    """The agent's name: over TLS its certificate's CN (``--name``, if given, must be it)."""
    import dask

    from dptop.cluster.connect import certificate_name

    tls = scheduler.startswith("tls://")
    cn = certificate_name(dask.config.get("distributed.comm.tls.worker.cert", None)) if tls else None
    if cn is not None and name is not None and name != cn:
        raise ValueError(f"--name {name!r}: over TLS an agent is named by its certificate (CN={cn!r})")
    return cn or name or default_name(iface)


def serve_agent(scheduler: str, plugin: AgentPlugin, name: str, say=print, stop: threading.Event | None = None,
                security=None) -> None:
    """``dptop agent``: join ``scheduler`` as capture point ``name`` until ``stop`` is set (or
    forever); a lost scheduler is said and rejoined, the capture point kept. ``security``: a Dask
    ``Security`` (default: from Dask's configuration)."""
    from distributed import Security, Worker

    from dptop.cluster.connect import check_reachable

    security = security or Security()
    check_reachable(scheduler, "worker", security)  # a refused certificate is one line, before any worker starts
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # the agent says what matters itself
    stop = stop or threading.Event()

    async def once(lost):
        async with Worker(scheduler, name=name, nthreads=1, resources={AGENT_RESOURCE: 1}, plugins={plugin},
                          dashboard=False, security=security) as worker:
            say(f"dptop agent {name}: joined {scheduler}" if lost is None else
                f"dptop agent {name}: rejoined {scheduler} after {time.monotonic() - lost:.1f} s without it")
            while worker.status.name in ("running", "paused") and not stop.is_set():
                await asyncio.sleep(0.1)
        return True

    lost, joined = None, False
    while not stop.is_set():
        try:
            joined = asyncio.run(once(lost))
            lost = None
        except (OSError, asyncio.TimeoutError) as exc:
            if not joined:
                raise ConnectionError(f"cannot join {scheduler}: {exc}") from None
        if stop.is_set():
            return
        if lost is None:
            say(f"dptop agent {name}: lost the scheduler {scheduler}; capturing on and rejoining")
            lost = time.monotonic()
        stop.wait(REJOIN_S)
