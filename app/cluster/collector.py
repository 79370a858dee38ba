"""The live collector: merges what ``dptop agent`` capture points ship and releases once per epoch.

``Collector(scheduler, names, settings)`` connects to the Dask scheduler, pins one
``run_capture_point`` task to every worker that carries the ``dptop-agent`` resource (agents that
join later too), and follows the run's event topic. ``status()`` is an immutable per-agent snapshot
for a display: state, packets, packets/s, drops. An agent whose worker left the scheduler, whose
task failed, or that sent nothing for ``lost_after`` seconds (default 2 s; agents beat every 0.5 s)
is **lost**. A time epoch is released once every agent expected in it has delivered it or is lost;
the release names the agents it covers and those it does not (dptop.cluster.merger), so a lost
agent's epoch data is never claimed. ``stop()`` ends the run and returns a ``MergedResult``.

Time epochs (``settings.epoch_seconds``) use the public grid of cells of that length aligned to the
Unix epoch, from the cell the collector starts in; without it the whole run is one epoch.
"""
from __future__ import annotations

import queue
import threading
import time
import uuid
from dataclasses import dataclass, replace

from dptop.cluster.live import (AGENT_RESOURCE, GRACE_S, cell_now, lease_variable, run_capture_point, stop_event,
                                topic)
from dptop.cluster.merger import MergedResult, Merger
from dptop.cluster.plan import Plan, TimeGrid, new_master
from dptop.cluster.wire import WireError, decode
from dptop.engine.baselines.merge import CountSummary
from dptop.engine.core.clock import MAX_CELLS

TICK_S = 0.1
SCAN_S = 0.5
START_TIMEOUT_S = 60.0
"""An agent's task may take this long to send its first beat (imports, opening the capture)."""


@dataclass(frozen=True)
class AgentStatus:
    name: str
    address: str
    iface: str = ""
    state: str = "starting"
    """starting, running, lost, failed, finished, or missing (expected, never joined)."""
    packets: int = 0
    ip_packets: int = 0
    packets_per_second: float = 0.0
    kernel_drops: int = 0
    queue_drops: int = 0
    late: int = 0
    """Packets that arrived after their epoch was shipped (counted, not merged)."""
    seen: float = 0.0
    """time.monotonic() of the last message."""
    first_cell: int | None = None
    last_cell: int | None = None
    error: str | None = None

    @property
    def gone(self) -> bool:
        return self.state in ("lost", "failed", "missing")

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "seen"}


class Collector:
    """``expect``: names of the agents the run is for; epochs wait for them until ``expect_timeout``
    seconds after the start, then those that never joined are named missing (state "missing")."""

    def __init__(self, scheduler, names, settings, max_agents: int = 64, lost_after: float = 2.0,
                 expect=(), expect_timeout: float = START_TIMEOUT_S):
        if settings.epoch_packets is not None:
            raise ValueError(f"epoch_packets ({settings.epoch_packets}): live agents count at different "
                             f"rates, so live cluster epochs are time epochs (--epoch-seconds)")
        grid = None
        if settings.epoch_seconds is not None:
            epoch_ns = round(settings.epoch_seconds * 1e9)
            grid = TimeGrid(time.time_ns() // epoch_ns * epoch_ns, epoch_ns, MAX_CELLS)
        self.plan = Plan(tuple(names), settings, new_master(settings), agents=max_agents, grid=grid)
        self.lost_after = float(lost_after)
        self.expected = tuple(dict.fromkeys(expect))
        self.expect_timeout = float(expect_timeout)
        self._expect_until = None
        self.run = uuid.uuid4().hex[:12]
        self._scheduler = scheduler
        self._client = None
        self._own_client = False
        self._inbox: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._agents: dict[str, AgentStatus] = {}
        self._futures: dict[str, object] = {}
        self._pinned: dict[str, int] = {}
        """The cell each agent's task was pinned in: before its first beat names its first cell, an
        epoch from this one on waits for it (it may be capturing already)."""
        self._merger = Merger(self.plan, [])
        self._rejected: set[str] = set()
        self._next_cell = 0
        self._stopping = threading.Event()  # the collector thread ends
        self._closing = threading.Event()  # no new agents: the run is stopping
        self._thread: threading.Thread | None = None

    # ----- control -------------------------------------------------------------------------
    def start(self) -> "Collector":
        from distributed import Client, Event, Variable

        if isinstance(self._scheduler, str):
            self._client, self._own_client = Client(self._scheduler, timeout="10s"), True
        else:
            self._client = self._scheduler
        self._client.subscribe_topic(topic(self.run), lambda event: self._inbox.put(event[1]))
        self._stop = Event(stop_event(self.run), client=self._client)
        self._lease = Variable(lease_variable(self.run), client=self._client)
        self._lease.set(time.time())
        self._expect_until = time.monotonic() + self.expect_timeout
        self._thread = threading.Thread(target=self._loop, name="dptop-collector", daemon=True)
        self._thread.start()
        return self

    def wait_for_expected(self, poll: float = TICK_S) -> list[str]:
        """Block until every expected agent has joined or the expect timeout passed; the names
        still missing."""
        while True:
            missing = self.not_joined()
            if not missing or time.monotonic() >= self._expect_until:
                return missing
            time.sleep(poll)

    def not_joined(self) -> list[str]:
        with self._lock:
            return [n for n in self.expected if n not in self._agents]

    def stop(self, timeout: float = 10.0) -> MergedResult:
        """Stop every agent's task, wait up to ``timeout`` for their last summaries, release the rest."""
        self._closing.set()
        self._stop.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(a.state in ("starting", "running") for a in self.status()):
            time.sleep(TICK_S)
        self._stopping.set()
        self._thread.join()
        with self._lock:
            self._drain()
            for name, a in self._agents.items():
                if a.state in ("starting", "running"):
                    self._agents[name] = replace(a, state="lost", error="no final summaries before the stop timeout")
            for name in self.expected:
                if name not in self._agents:
                    self._agents[name] = AgentStatus(name, "", state="missing", error="never joined the scheduler")
                    self._merger.add_agent(name)
            self._release_due(final=True)
            self._merger.release_whole(gone=[n for n, a in self._agents.items() if a.gone])
            result = MergedResult(tuple(self._agents.values()), self._merger.exact(),
                                {n: list(r) for n, r in self._merger.releases.items()}, self.plan)
        self._client.unsubscribe_topic(topic(self.run))
        for f in self._futures.values():
            f.release()
        if self._own_client:
            self._client.close()
        return result

    # ----- snapshots (any thread) -----------------------------------------------------------
    def status(self) -> list[AgentStatus]:
        with self._lock:
            return list(self._agents.values())

    def exact(self) -> CountSummary:
        with self._lock:
            return self._merger.exact()

    def releases(self) -> dict:
        with self._lock:
            return {n: list(r) for n, r in self._merger.releases.items()}

    # ----- the collector thread ------------------------------------------------------------
    def _loop(self) -> None:
        last_scan = 0.0
        while not self._stopping.is_set():
            now = time.monotonic()
            if now - last_scan >= SCAN_S:
                last_scan = now
                self._lease.set(time.time())
                self._scan_workers()
            with self._lock:
                self._drain()
                self._mark_lost()
                self._release_due(final=False)
            self._stopping.wait(TICK_S)

    def _scan_workers(self) -> None:
        workers = self._client.scheduler_info()["workers"]
        agents = {str(w.get("name")): addr for addr, w in workers.items()
                  if w.get("resources", {}).get(AGENT_RESOURCE)}
        with self._lock:
            for name, a in list(self._agents.items()):
                if a.state in ("starting", "running") and name not in agents:
                    self._agents[name] = replace(a, state="lost", error="its worker left the scheduler")
                future = self._futures.get(name)
                if future is not None and future.status == "error" and a.state != "failed":
                    self._agents[name] = replace(a, state="failed", error=repr(future.exception()))
            new = [(n, addr) for n, addr in agents.items() if n not in self._agents and not self._closing.is_set()]
            for name, addr in new:
                self._agents[name] = AgentStatus(name, addr, seen=time.monotonic())
                self._pinned[name] = 0 if self.plan.grid is None else cell_now(self.plan.grid)
                self._merger.add_agent(name)
        for name, addr in new:
            self._futures[name] = self._client.submit(
                run_capture_point, self.plan, self.run, workers=[addr], allow_other_workers=False,
                resources={AGENT_RESOURCE: 1}, pure=False, key=f"dptop-agent-{self.run}-{name}")

    def _drain(self) -> None:
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return
            self._handle(msg)

    def _handle(self, msg) -> None:
        """One message of the run's topic. Summaries arrive as bytes of dptop.cluster.wire; a
        message that is not well formed fails its agent with one line and merges nothing from it."""
        name = msg.get("agent") if isinstance(msg, dict) else None
        if not isinstance(name, str):
            return  # not a capture point's message
        a = self._agents.get(name) or AgentStatus(name, "")
        if name in self._rejected:
            return
        try:
            a = self._apply(name, a, msg)
        except (WireError, KeyError, TypeError, ValueError) as exc:
            why = str(exc) if isinstance(exc, WireError) else f"malformed {msg.get('kind')!r} message ({exc!r})"
            self._rejected.add(name)
            a = replace(a, state="failed", error=f"rejected, nothing of it merged: {why}")
        self._agents[name] = replace(a, seen=time.monotonic())

    def _apply(self, name: str, a: AgentStatus, msg: dict) -> AgentStatus:
        kind = msg["kind"]
        if kind == "beat":
            (exact,) = self._summaries(msg["exact"], {"exact"}, need={"exact"}).values()
            dt = time.monotonic() - a.seen if a.state == "running" else 0.0
            rate = (msg["packets"] - a.packets) / dt if dt > 0 else a.packets_per_second
            a = replace(a, iface=msg["iface"], state="running", packets=msg["packets"], ip_packets=msg["ip_packets"],
                        packets_per_second=rate, kernel_drops=msg["kernel_drops"], queue_drops=msg["queue_drops"],
                        late=msg["late"], first_cell=msg["first_cell"], error=msg["error"])
            self._merger.add_exact(name, exact)
        elif kind == "epoch":
            summaries = self._summaries(msg["summaries"], set(self.plan.private))
            if msg["epoch"] >= self._next_cell or self.plan.grid is None:
                self._merger.add_epoch(name, msg["epoch"], summaries)
        elif kind == "done":
            whole = self._summaries(msg["whole"], self.plan.whole, need={"exact"})
            a = replace(a, state="finished", packets=msg["packets"], ip_packets=msg["ip_packets"],
                        kernel_drops=msg["kernel_drops"], late=msg["late"], last_cell=msg["last_cell"],
                        packets_per_second=0.0)
            self._merger.add_whole(name, whole)
        else:
            raise ValueError(f"unknown kind {kind!r}")
        return a

    @staticmethod
    def _summaries(payload, allowed: set, need: set = frozenset()) -> dict:
        """The decoded summaries of ``payload``: only the ``allowed`` algorithms, the ``need`` ones present."""
        summaries = decode(payload)
        if not set(need) <= set(summaries) <= allowed:
            raise WireError(f"summaries of {', '.join(sorted(summaries)) or 'nothing'}; this run takes "
                            f"{', '.join(sorted(allowed)) or 'none'}" + (f" and needs {', '.join(sorted(need))}" if need else ""))
        return summaries

    def _mark_lost(self) -> None:
        now = time.monotonic()
        for name, a in self._agents.items():
            silent = now - a.seen
            if (a.state == "running" and silent > self.lost_after) or (a.state == "starting" and silent > START_TIMEOUT_S):
                self._agents[name] = replace(a, state="lost", error=f"silent for {silent:.1f} s")

    def _expected(self, cell: int) -> tuple[list[str], list[str]]:
        """(covered, missing) of ``cell``: every agent that delivered it, and the lost or failed ones
        that should have and did not, and the expected ones that never joined (an epoch waits for
        those until the expect timeout). An agent still starting or running that has not delivered
        it (slow, not lost) -> not ready."""
        delivered = self._merger.delivered(cell)
        missing = []
        for name, a in self._agents.items():
            if a.state == "missing":
                missing.append(name)
                continue
            first = a.first_cell if a.first_cell is not None else self._pinned.get(name, 0)
            if name in delivered or first > cell:
                continue
            if a.state == "finished" and a.last_cell is not None and a.last_cell < cell:
                continue
            if not a.gone:
                return None, None  # still to come
            missing.append(name)
        absent = [n for n in self.expected if n not in self._agents]
        if absent and time.monotonic() < self._expect_until:
            return None, None  # an expected agent may still join
        return sorted(delivered), missing + absent

    def _release_due(self, final: bool) -> None:
        grid = self.plan.grid
        if grid is None:
            if final:
                lost = [n for n, a in self._agents.items() if a.gone and n not in self._merger.delivered(0)]
                self._merger.release_epoch(0, self._merger.delivered(0), lost)
            return
        if final:  # up to the cell the run stopped in (agents shipped it partial)
            last = max([(time.time_ns() - grid.start_ns) // grid.epoch_ns]
                       + [a.last_cell for a in self._agents.values() if a.last_cell is not None])
        else:  # cells whose end (plus the agents' grace) has passed
            last = (time.time_ns() - grid.start_ns - int(GRACE_S * 1e9)) // grid.epoch_ns - 1
        while self._next_cell <= min(last, grid.cells - 1):
            covered, missing = self._expected(self._next_cell)
            if covered is None:
                return
            self._merger.release_epoch(self._next_cell, covered, missing)
            self._next_cell += 1

