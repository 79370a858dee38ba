"""The live collector: pulls what ``dptop agent`` capture points summarized and releases once per epoch.

``Collector(scheduler, names, settings)`` connects to the Dask scheduler with a client that loads
msgpack only, claims the scheduler (a second collector while this one is connected is refused; one
whose predecessor's client is gone, e.g. after ``kill -9``, takes over at once), and starts one
capture point (dptop.cluster.live) on every worker that carries the ``dptop-agent`` resource,
those that join later too. Over TLS a worker is admitted only when its name is the CN of the
certificate the scheduler saw it present; others are refused and named (``refused()``).

Every ``PULL_S`` the collector pulls each capture point: the answer (a dptop.cluster.messages
``PointReport``) is checked field by field before anything of it is merged; a malformed answer
fails that agent with one line and harms nobody else. Nothing travels in the scheduler's event
log, which every client can read.

Epochs are the collector's: the public grid of ``settings.epoch_seconds`` cells aligned to the Unix
epoch on the collector's clock, from the cell it starts in (without it the whole run is one epoch);
a cell is pulled ``GRACE_S`` after its end, and released once every agent that should cover it has
delivered it or is gone. An agent is **lost** when its worker leaves, or when no answer came for
``lost_after`` seconds (the collector's monotonic clock); a lost agent that returns is re-admitted.
A lost scheduler is a **gap**: nothing is declared lost meanwhile, the client reconnects (up to
``RECONNECT_S``), the agents rejoin and go on, and the gap is named. ``stop()`` pulls every agent a
last time and returns a ``MergedResult``.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace

from dptop.cluster.agents import SILENT, AdmittedPoint, AgentStatus, pullable
from dptop.cluster.answers import check_report
from dptop.cluster.connect import DESERIALIZERS, check_reachable
from dptop.cluster.coverage import epoch_cover, final_cover
from dptop.cluster.live import AGENT_RESOURCE, GRACE_S, LEASE_S, PULL_S, pull_point, start_point
from dptop.cluster.merger import MergedResult, Merger
from dptop.cluster.messages import PointReport, decode_report
from dptop.cluster.plan import Plan, TimeGrid, new_master
from dptop.cluster.scheduler_claim import SchedulerTaken, scheduler_side
from dptop.cluster.wire import WireError
from dptop.engine.baselines.merge import CountSummary
from dptop.engine.core.clock import MAX_CELLS

TICK_S = 0.1
SCAN_S = 0.5
START_TIMEOUT_S = 60.0
"""An agent may take this long to answer its first pull (imports, opening the capture)."""
RECONNECT_S = LEASE_S
"""How long a lost scheduler may stay away: agents keep their capture points as long."""
REJOIN_S = 10.0
"""After a gap, how long the agents have to rejoin before one is lost."""


class Collector:
    """``expect``: names of the agents the run is for; epochs wait for them until ``expect_timeout``
    seconds after the start, then those that never joined are named missing (state "missing").
    ``clock``: the collector's wall clock in ns (the epochs' clock; tests inject one)."""

    def __init__(self, scheduler, names, settings, max_agents: int = 64, lost_after: float = 2.0,
                 expect=(), expect_timeout: float = START_TIMEOUT_S, clock=time.time_ns):
        if settings.epoch_packets is not None:
            raise ValueError(f"epoch_packets ({settings.epoch_packets}): live agents count at different "
                             f"rates, so live cluster epochs are time epochs (--epoch-seconds)")
        self.clock = clock
        grid = None
        if settings.epoch_seconds is not None:
            epoch_ns = round(settings.epoch_seconds * 1e9)
            grid = TimeGrid(clock() // epoch_ns * epoch_ns, epoch_ns, MAX_CELLS)
        self.plan = Plan(tuple(names), settings, new_master(settings), agents=max_agents, grid=grid)
        self.lost_after = float(lost_after)
        self.expected = tuple(dict.fromkeys(expect))
        self.expect_timeout = float(expect_timeout)
        self._expect_until = None
        self.run = uuid.uuid4().hex[:12]
        self._scheduler = scheduler
        self._client = None
        self._own_client = False
        self._lock = threading.Lock()
        self._agents: dict[str, AgentStatus] = {}
        self._points: dict[str, AdmittedPoint] = {}
        self._refused: dict[str, str] = {}
        self._merger = Merger(self.plan, [])
        self._next_cell = 0
        self._final_through: int | None = None
        self.gaps: list[dict] = []
        """Each time the scheduler was lost: ``start`` (Unix seconds) and ``seconds`` away."""
        self._gap_start: float | None = None
        self._rejoin_until = 0.0
        self.fatal: str | None = None
        """Why the run cannot go on (the scheduler stayed away), else None."""
        self._stopping = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._claim, self._release, self._peer_names = scheduler_side()

    # ----- control -------------------------------------------------------------------------
    def start(self) -> "Collector":
        from distributed import Client

        if isinstance(self._scheduler, str):
            check_reachable(self._scheduler, role="client")
            self._client = Client(self._scheduler, timeout=f"{RECONNECT_S:g}s", deserializers=DESERIALIZERS)
            self._own_client = True
        else:
            self._client = self._scheduler
        try:
            self._take_scheduler()
        except SchedulerTaken:
            if self._own_client:
                self._client.close()
            raise
        self._expect_until = time.monotonic() + self.expect_timeout
        self._thread = threading.Thread(target=self._loop, name="dptop-collector", daemon=True)
        self._thread.start()
        return self

    def _take_scheduler(self) -> None:
        held = self._client.run_on_scheduler(self._claim, holder=self._client.id, run=self.run)
        if held is not None:
            raise SchedulerTaken(f"another collector (run {str(held[1])[:12]}) is connected to this scheduler; "
                               f"one collector per scheduler")

    def wait_for_expected(self, poll: float = TICK_S, stop: threading.Event | None = None) -> list[str]:
        """Block until every expected agent has joined or the expect timeout passed (or ``stop``
        is set); the names still missing."""
        stop = stop or threading.Event()
        while True:
            missing = self.not_joined()
            if not missing or time.monotonic() >= self._expect_until or self.fatal or stop.is_set():
                return missing
            stop.wait(poll)

    def not_joined(self) -> list[str]:
        with self._lock:
            return [n for n in self.expected if n not in self._agents]

    def stop(self, timeout: float = 10.0) -> MergedResult:
        """Pull every agent a last time (up to ``timeout``), release the rest and return the result."""
        self._closing.set()
        with self._lock:
            self._final_through = self._current_cell()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.fatal and any(map(pullable, self.status())):
            time.sleep(TICK_S)
        self._stopping.set()
        self._thread.join()
        with self._lock:
            for name, a in self._agents.items():
                if pullable(a):
                    self._agents[name] = replace(a, state="lost", error=self.fatal or
                                                 "no final summaries before the stop timeout")
            for name in self.expected:
                if name not in self._agents:
                    self._agents[name] = AgentStatus(name, "", state="missing", error="never joined the scheduler")
                    self._merger.add_agent(name)
            self._release_due(final=True)
            self._merger.release_whole(gone=[n for n, a in self._agents.items() if a.gone])
            result = MergedResult(tuple(self._agents.values()), self._merger.exact(),
                                  {n: list(r) for n, r in self._merger.releases.items()}, self.plan)
        for p in self._points.values():
            if p.future is not None:
                p.future.release()
        try:
            if self._client.status == "running":
                self._client.run_on_scheduler(self._release, holder=self._client.id)
        except (OSError, TimeoutError):  # the scheduler is gone: so is the claim
            pass
        if self._own_client:
            self._client.close()
        return result

    # ----- snapshots (any thread) -----------------------------------------------------------
    def status(self) -> list[AgentStatus]:
        with self._lock:
            return list(self._agents.values())

    def refused(self) -> dict[str, str]:
        """Workers refused as agents (address -> why): their names are not their certificates'."""
        with self._lock:
            return dict(self._refused)

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
            try:
                if self._connected():
                    now = time.monotonic()
                    if now - last_scan >= SCAN_S:
                        last_scan = now
                        self._scan_workers()
                    self._exchange()
            except SchedulerTaken as exc:  # another collector took the scheduler during a gap
                self.fatal = str(exc)
            except (OSError, TimeoutError, AttributeError) as exc:  # the scheduler went during a call
                if self._client.status == "running" and self._gap_start is None:
                    self.fatal = f"the scheduler failed a call: {type(exc).__name__}: {exc}"
            except Exception as exc:  # noqa: BLE001 - the run ends said, with its JSON, never frozen
                self.fatal = f"internal error in the collector: {exc!r}"
            with self._lock:
                self._mark_lost()
                self._release_due(final=False)
            if self.fatal:
                return
            self._stopping.wait(TICK_S)

    def _connected(self) -> bool:
        """Whether the scheduler is there; opens and closes a gap (and claims the scheduler again)."""
        status = self._client.status
        if status == "running" and self._gap_start is None:
            return True
        now = time.time()
        if status == "running":
            self._take_scheduler()
            with self._lock:
                self.gaps.append({"start": self._gap_start, "seconds": round(now - self._gap_start, 3)})
                self._gap_start = None
                self._rejoin_until = time.monotonic() + REJOIN_S
                for name, p in self._points.items():  # their futures died with the scheduler
                    p.future = None
                    a = self._agents[name]
                    self._agents[name] = replace(a, seen=time.monotonic())
            return True
        if status in ("closing", "closed"):
            self.fatal = f"lost the scheduler for more than {RECONNECT_S:g} s"
        elif self._gap_start is None:
            self._gap_start = now
        return False

    def _current_cell(self) -> int:
        grid = self.plan.grid
        return 0 if grid is None else min(max(0, (self.clock() - grid.start_ns) // grid.epoch_ns), grid.cells - 1)

    def _due_cell(self) -> int:
        """The last cell whose end (plus the agents' grace) has passed on the collector's clock."""
        grid = self.plan.grid
        if self._final_through is not None:
            return self._final_through
        if grid is None:
            return -1
        return min((self.clock() - grid.start_ns - int(GRACE_S * 1e9)) // grid.epoch_ns - 1, grid.cells - 1)

    def _scan_workers(self) -> None:
        workers = self._client.scheduler_info(n_workers=-1)["workers"]
        agents = {addr: str(w.get("name")) for addr, w in workers.items()
                  if (w.get("resources") or {}).get(AGENT_RESOURCE)}
        names = self._client.run_on_scheduler(self._peer_names) if any(a.startswith("tls://") for a in agents) else {}
        starts = []
        rejoining = time.monotonic() < self._rejoin_until
        with self._lock:
            for name, a in list(self._agents.items()):
                if a.state in ("starting", "running") and self._points[name].address not in agents and not rejoining:
                    self._agents[name] = replace(a, state="lost", error="its worker left the scheduler")
            known = {p.address for p in self._points.values()}
            for address, name in agents.items():
                if address in known or address in self._refused or self._closing.is_set():
                    continue
                if address.startswith("tls://") and names.get(address) != name:
                    self._refused[address] = (f"worker {name[:40]!r} at {address} refused: its certificate names "
                                              f"{names.get(address)!r}; an agent is named by its certificate")
                    continue
                a, p = self._agents.get(name), self._points.get(name)
                if a is not None and (a.state in ("starting", "running") and p.address in agents
                                      or (a.error or "").startswith("rejected")):
                    continue  # the name is taken by a live agent, or rejected for the run
                starts.append(self._admit(name, address))
        for name, p, first in starts:
            p.future = self._client.submit(start_point, self.plan, self.run, first, workers=[p.address],
                                           allow_other_workers=False, pure=False,
                                           key=f"dptop-start-{self.run}-{name}-{p.seq}")
            p.sent = time.monotonic()

    def _admit(self, name: str, address: str):
        """A new agent, or a lost one back (its record, and cells, kept)."""
        first = max(self._current_cell(), self._next_cell)
        p = self._points.get(name)
        if p is None:
            p = self._points[name] = AdmittedPoint(address, first, first - 1, first - 1)
            self._merger.add_agent(name)
            self._merger.agents.sort()  # merges in name order, whatever order the agents joined in
        p.address, p.future, p.seq, p.asked = address, None, p.seq + 1, max(p.asked, first - 1)
        old = self._agents.get(name)
        self._agents[name] = AgentStatus(name, address, state="starting", seen=time.monotonic(), first_cell=p.first_cell,
                                         packets=old.packets if old else 0, ip_packets=old.ip_packets if old else 0)
        return name, p, first

    def _exchange(self) -> None:
        """Read every answer that came, and pull every agent whose pull is due."""
        for name, p in list(self._points.items()):
            if p.future is not None and p.future.done():
                future, p.future = p.future, None
                self._answer(name, p, future)
            if p.future is not None or not pullable(self._agents[name]) or p.final:
                continue
            final = self._final_through is not None
            if time.monotonic() - p.sent < PULL_S and not final:
                continue
            through = max(p.through, self._due_cell())
            p.asked, p.seq, p.sent, p.final = max(p.asked, through), p.seq + 1, time.monotonic(), final
            p.future = self._client.submit(pull_point, self.run, self.clock(), through, final, workers=[p.address],
                                           allow_other_workers=False, pure=False,
                                           key=f"dptop-pull-{self.run}-{name}-{p.seq}")

    def _answer(self, name: str, p: AdmittedPoint, future) -> None:
        if future.status != "finished":  # the worker left, or the task failed: the silence timer decides
            p.final = False
            return
        try:
            data = future.result()  # msgpack only: a pickled answer is refused here, never loaded
        except Exception as exc:
            return self._reject(name, f"its answer could not be read ({type(exc).__name__}: {str(exc)[:120]})")
        finally:
            future.release()
        try:
            report = decode_report(data)
            parts = check_report(self.plan, self.run, p, report)
        except WireError as exc:
            return self._reject(name, str(exc))
        with self._lock:
            self._apply(name, p, report, *parts)

    def _apply(self, name, p, r: PointReport, epochs, exact, whole) -> None:
        a = self._agents[name]
        if r.state == "unknown":  # the agent restarted and lost its capture point: open it again
            first = max(self._current_cell(), self._next_cell, p.through + 1)
            p.dropped.update(range(p.through + 1, first))
            p.through = p.asked = first - 1
            p.seq += 1
            p.future = self._client.submit(start_point, self.plan, self.run, first, workers=[p.address],
                                           allow_other_workers=False, pure=False,
                                           key=f"dptop-start-{self.run}-{name}-{p.seq}")
            return
        if self.plan.grid is not None:
            p.dropped.update(range(p.through + 1, min(epochs, default=r.through + 1)))
            p.through = r.through
        late = 0
        for cell, summaries in epochs.items():
            if self.plan.grid is not None and cell < self._next_cell:
                late += max((s.n for s in summaries.values()), default=0)  # released already: not merged
            else:
                self._merger.add_epoch(name, cell, summaries)
        if exact is not None:
            self._merger.add_exact(name, exact)
        if whole is not None:
            self._merger.add_whole(name, whole)
        now = time.monotonic()
        dt = now - a.seen if a.state == "running" else 0.0
        state = {"starting": "starting", "running": "running", "finished": "finished"}.get(r.state, "failed")
        if whole is None and state == "finished":
            state = "running"
        self._agents[name] = replace(
            a, iface=r.iface, state=state, packets=r.packets, ip_packets=r.ip_packets,
            packets_per_second=(r.packets - a.packets) / dt if dt > 0 and state == "running" else 0.0,
            kernel_drops=r.kernel_drops, queue_drops=r.queue_drops, late=r.late + late, seen=now,
            last_cell=p.through if self.plan.grid is not None else None,
            error=r.error if state != "failed" else f"its capture stopped: {r.error or 'no reason given'}")

    def _reject(self, name: str, why: str) -> None:
        """A malformed answer fails its agent for the rest of the run (one line); nothing of that
        answer is merged, and no other agent is touched."""
        with self._lock:
            self._agents[name] = replace(self._agents[name], state="failed", error=f"rejected: {why}")

    def _mark_lost(self) -> None:
        if self._gap_start is not None or time.monotonic() < self._rejoin_until:
            return  # the scheduler is away, or was: silence says nothing about the agents
        now = time.monotonic()
        for name, a in self._agents.items():
            silent = now - a.seen
            if (a.state == "running" and silent > self.lost_after) or (a.state == "starting" and silent > START_TIMEOUT_S):
                self._agents[name] = replace(a, state="lost", error=f"{SILENT} for {silent:.1f} s")

    def _release_due(self, final: bool) -> None:
        if self.plan.grid is None:
            if final:
                self._merger.release_epoch(0, *self._cover(0, final=True))
            return
        last = self._due_cell()
        while self._next_cell <= last:
            covered, missing = self._cover(self._next_cell, final)
            if covered is None:
                return
            self._merger.release_epoch(self._next_cell, covered, missing)
            self._next_cell += 1

    def _cover(self, cell: int, final: bool):
        cover = final_cover if final else epoch_cover
        return cover(cell, self._merger, self._agents, self._points, self.expected, self._expect_until)
