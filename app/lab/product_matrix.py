"""The product conformance matrix (``dptop audit --product``): every surface a private figure
leaves by × every private algorithm × key kind × weight × neighbour kind × range path. For each
cell both neighbouring captures go through the product several times (the ``x`` side and the
``y`` side, fresh noise each run) and every field a user can read is compared: a field that is
constant within each side and different between the sides tells the two captures apart in
every run (infinite privacy loss), unless the private view names it as a public fact (the
record count, the file's span: then the cell says which fact, never "private").

Surfaces: ``publish`` (``replay --publish``, the ``/releases`` JSON and the window's export
all build ``publish.publish_json``), ``metrics`` (``/metrics``: ``feed.metric_families`` of the
same view), ``capture`` (``capture --publish``: a live capture's path, clocks.LiveClock on an
injected wall clock, without a socket), ``lines`` (the lines ``capture`` prints while it runs,
dptop.releaselines, on the same path), ``timing`` (a paced replay's release instants as a scraper
sees them, on a quantum of half an epoch's wall time), ``top`` (a key switch in ``dptop top``: the
budget after a second session over the same file) and ``seeded`` (a ``--seed`` run must say NOT
private on every surface).

Each finding of the review that made this matrix is a broken variant (``BROKEN``) the matrix
must report: the release on a later packet's arrival (``arrival-release``), the data-chosen stop
(``count-stop``), a new ledger per key switch (``ledger-per-session``), seeded metrics without
their marker (``seeded-metrics``), spans with the exact count (``exact-spans``), ``capture``'s
running log with them (``exact-lines``) and a live continual algorithm whose output steps follow
the packet count instead of the public clock (``count-steps``).
"""
from __future__ import annotations

import io
import itertools
import re
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from dptop.capture.synth import write_pcap
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.monitor import publish
from dptop.monitor.config import CountingChoice, RunConfig, SourceSpec
from dptop.monitor.precheck import SourceFacts, read_facts
from dptop.monitor.session import Session
from dptop.monitor.states import State
from dptop.releaselines import ReleaseLines
from dptop.report import span_text
from dptop.lab.product_audit import view_features

T0 = 1_700_000_000 * 10**9
SECOND = 10**9
EPOCHS = 4
HEAVY = (0x0A00_0001, 0x0A00_0002, 0x0A00_0003)
LIGHT_HOST = 0x0B00_0007  # a light source whose packets one neighbour removes
QUIET_FROM = 2_500_000_000  # ns into the range: silence after it, where a packet added at the end falls
LATENESS_NS = 50_000_000  # a live cell closes this long after its end
LATE_PACKET = 3_600_000_000  # the packet added at the end: alone, late in a cell (the timing finding)
SURFACES = ("publish", "metrics", "capture", "lines", "timing", "top", "seeded")
STATEMENTS = ("top", "seeded")
"""Surfaces checked for a statement every run must make (the ledger's sequential cost, NOT
private), not for a difference between the sides."""
NEIGHBOURS = ("added-start", "added-middle", "added-end", "removed-start", "removed-middle", "removed-end",
              "substituted", "host-removed")
KEYS = ("src", "dst")
WEIGHTS = ("packets", "bytes")
PATHS = ("declared", "default")
ADDRESS_ONLY = ("hostdp-dst", "hostdp-src")


def private_algorithms() -> tuple[str, ...]:
    return tuple(n for n in registry.names() if registry.get(n).private)


@dataclass(frozen=True)
class Cell:
    surface: str
    algorithm: str
    key: str = "src"
    weight: str = "packets"
    neighbour: str = "removed-middle"
    path: str = "declared"

    def label(self) -> str:
        return f"{self.surface}/{self.algorithm}/{self.key}/{self.weight}/{self.neighbour}/{self.path}"


@dataclass
class Verdict:
    cell: Cell
    runs: int
    fields: tuple[str, ...]  # constant within each side, different between them
    facts: tuple[str, ...]  # public facts the view names whose values differ between the sides
    seconds: float
    error: str = ""

    @property
    def violation(self) -> bool:
        return bool(self.error) or (bool(self.fields) and not self.facts)

    def row(self) -> str:
        verdict = ("ERROR " + self.error if self.error else "VIOLATION" if self.violation else
                   f"named fact ({', '.join(self.facts)})" if self.fields else "no violation")
        shown = f" e.g. {self.fields[0]}" if self.fields and self.violation else ""
        return f"{self.cell.label():62s} {self.runs}x2 {self.seconds:6.1f}s  {verdict}{shown}"


def base_stream() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four seconds of traffic: three heavy sources far above any threshold, a light tail, one
    light host; sources, destinations (heavy ones mirrored) and stamps in time order."""
    rng = np.random.default_rng(17)
    n = EPOCHS * 300
    src = np.where(rng.random(n) < 0.8, np.array(HEAVY)[rng.integers(0, 3, n)],
                   0x0B00_0100 + rng.integers(0, 300, n)).astype(np.uint32)
    src[rng.choice(n, 6, replace=False)] = LIGHT_HOST
    dst = np.where(np.isin(src, HEAVY), src + 0x0100_0000, 0xC0A8_0001).astype(np.uint32)
    ts = T0 + 10**6 + np.sort(rng.integers(0, QUIET_FROM - 2 * 10**6, n))
    return src, dst, ts


def neighbour_pair(folder: Path, kind: str) -> tuple[Path, Path]:
    """The two captures of neighbour ``kind``: a light packet added or removed at the start, in
    the middle or at the end, one packet's source (and destination) substituted, or every packet
    of one light host removed."""
    src, dst, ts = base_stream()
    folder.mkdir(parents=True, exist_ok=True)

    def write(name, s, d, t):
        path = folder / f"{name}.pcap"
        write_pcap(path, s, t, d, np.full(len(s), 600))
        return path

    x = write("x", src, dst, ts)
    at = {"start": 0, "middle": len(ts) // 2, "end": len(ts) - 1}
    if kind.startswith("added"):
        where = kind.split("-")[1]
        i = at[where] + (where == "end")
        stamp = {"start": ts[0] - 10**5, "middle": ts[at["middle"]], "end": T0 + LATE_PACKET}[where]
        return x, write(kind, np.insert(src, i, 0x0B00_0FFF), np.insert(dst, i, 0xC0A8_0001), np.insert(ts, i, stamp))
    if kind.startswith("removed"):
        i = at[kind.split("-")[1]]
        i = i if not np.isin(src[i], HEAVY) else i + 1
        keep = np.arange(len(ts)) != i
        return x, write(kind, src[keep], dst[keep], ts[keep])
    if kind == "substituted":
        s, d = src.copy(), dst.copy()
        i = int(np.flatnonzero(~np.isin(src, HEAVY))[len(src) // 10])
        s[i], d[i] = 0x0B00_0EEE, 0xC0A8_0009
        return x, write(kind, s, d, ts)
    if kind == "host-removed":
        keep = src != LIGHT_HOST
        return x, write(kind, src[keep], dst[keep], ts[keep])
    raise ValueError(f"unknown neighbour kind {kind!r}")


def settings(cell: Cell, seed: int | None) -> Settings:
    extra = {"m": 8} if cell.algorithm in ADDRESS_ONLY else {}
    return Settings(k=4, k_tilde=16, epsilon=0.5, delta=1e-6, epoch_seconds=1.0, seed=seed, window=400,
                    extra=extra)


def config(cell: Cell, seed: int | None) -> RunConfig:
    return RunConfig((cell.algorithm,), settings(cell, seed), counting=CountingChoice(key=cell.key, weight=cell.weight))


def spec(cell: Cell, path: Path, speed: float | None = None) -> SourceSpec:
    declared = (T0, T0 + EPOCHS * SECOND) if cell.path == "declared" else None
    return SourceSpec("file", path=str(path), time_range=declared, speed=speed, lateness=0.05)


class Product:
    """The product as the matrix drives it; each broken variant overrides one step."""

    view = staticmethod(publish.publish_json)
    speed = 4.0  # the timing surface: 4 s of capture in 1 s of wall time

    def facts(self, source: SourceSpec, epoch_seconds: float | None) -> SourceFacts | None:
        """The facts handed to a session with ``source`` (None: the session reads them itself)."""
        return None

    def replay(self, cell: Cell, path: Path, seed: int | None, speed: float | None = None,
               ledger=None) -> Session:
        session = Session(config(cell, seed), record_packets=1 << 12, ledger=ledger)
        source = spec(cell, path, speed)
        session.open(source, self.facts(source, session.config.settings.epoch_seconds))
        if session.wait(120) is not State.FINISHED:
            session.close(5.0)
            raise RuntimeError(f"replay of {path.name} ended {session.state}: {session.error}")
        return session

    def metrics(self, view: dict) -> dict[str, float]:
        from dptop.feed import metric_families

        return {f"{s.name}{sorted(s.labels.items())}": s.value for f in metric_families(view) for s in f.samples}

    def features(self, cell: Cell, path: Path, seed: int | None) -> dict[str, float]:
        if cell.surface == "timing":
            return self.timing(cell, path, seed)
        if cell.surface in ("capture", "lines"):
            return self.capture(cell, path, seed)
        if cell.surface == "top":
            return self.key_switch(cell, path, seed)
        session = self.replay(cell, path, seed)
        try:
            view = self.view(session, "audit")
        finally:
            session.close(5.0)
        if cell.surface == "metrics":  # served beside /releases, whose view names the public facts
            return {**self.metrics(view), **stated_facts(view)}
        if cell.surface == "seeded":
            return seeded_features(view, self.metrics(view))
        return view_features(view)

    def key_switch(self, cell: Cell, path: Path, seed: int | None) -> dict[str, float]:
        """``k`` in ``dptop top``: a second session over the same file, on the next key; its
        budget must be the sequential cost of both readings."""
        first = self.replay(cell, path, seed)
        other = replace(cell, key="dst" if cell.key == "src" else "src")
        second = self.replay(other, path, seed, ledger=self.ledger_after(first))
        try:
            own = sum(alone(s) for s in (first, second))
            shown = (second.snapshot().budget or {}).get("epsilon", 0.0)
            return {"budget below the sequential cost of both readings": float(shown < own - 1e-9)}
        finally:
            first.close(5.0)
            second.close(5.0)

    @staticmethod
    def ledger_after(session: Session):
        return session.ledger

    @staticmethod
    def live_config(cell: Cell, seed: int | None) -> RunConfig:
        """The run a live capture's lanes are built from (its time epochs: the public clock)."""
        return config(cell, seed)

    stop_after: int | None = None  # a capture stopped at its N-th packet (refused: ``--count``)
    duration: int | None = EPOCHS  # the public stop (``--duration``, seconds); None: open-ended
    release_lines = staticmethod(ReleaseLines)  # what prints ``capture``'s running log

    def capture(self, cell: Cell, path: Path, seed: int | None, out: io.StringIO | None = None) -> dict[str, float]:
        """A live capture's path without a socket: the packets of ``path`` offered to the live
        clock (clocks.LiveClock) at the wall instants of their own stamps (an injected clock),
        every close at the session's tick, the stop at the end of the public duration; the
        private view as ``capture --publish`` writes it, or (surface ``lines``) the lines
        ``capture`` prints while it runs (dptop.releaselines, into ``out`` when given), each
        continual or window line waited for before the capture goes on, so that every close
        prints one."""
        from dptop.capture.pcap import open_capture
        from dptop.engine.core.clock import MAX_CELLS, TimeGrid
        from dptop.monitor.clocks import LiveClock

        now = [T0]
        end = None if self.duration is None else T0 + self.duration * SECOND
        session = Session(self.live_config(cell, seed), record_packets=1 << 12)
        session.spec = SourceSpec("live", iface="lo", lateness=LATENESS_NS / 1e9, duration=self.duration,
                                  count=self.stop_after)
        session.public["time_range"] = (T0, end)
        session.public_source = "the capture's wall clock"
        session.grid = TimeGrid(T0, SECOND, MAX_CELLS)
        session.fanout.live = True
        session.clock = LiveClock(session.grid, LATENESS_NS / 1e9, session.fanout, now_ns=lambda: now[0])
        session.truth.start()
        out = io.StringIO() if out is None else out
        lines = self.release_lines(session, out) if cell.surface == "lines" else None
        try:
            if not session._start_lanes():
                raise RuntimeError("the lanes did not start")
            printed(lines)

            def advance(to_ns: int) -> None:  # the session's ticks up to ``to_ns``: each close on time
                while (due := T0 + (session.cell + 1) * SECOND + LATENESS_NS) <= to_ns:
                    now[0] = due
                    session.clock.tick()
                    drain(session)
                    printed(lines)
                now[0] = max(now[0], to_ns)

            fed, stop_ns = 0, end
            with open_capture(path) as reader:
                for batch in reader.batches(1):
                    if self.stop_after is not None and fed >= self.stop_after:
                        stop_ns = now[0]
                        break
                    advance(int(batch.ts_ns[0]))
                    drain(session)  # a full queue would be a drop
                    session.clock(batch)
                    fed += len(batch)
            advance(now[0] if stop_ns is None else stop_ns)
            session.clock.tick(final=True)
            drain(session)
            printed(lines)
            for lane in session.lanes.values():
                if lane.worker is not None:
                    lane.worker.finish(60)
            session.truth.finish()
            if lines is not None:
                lines.update()  # the single releases the finish published
                return line_features(out.getvalue())
            return view_features(self.view(session, "audit"))
        finally:
            session.close(5.0)

    def timing(self, cell: Cell, path: Path, seed: int | None) -> dict[str, float]:
        """When the number of releases of a paced replay changes, relative to the first change, in
        halves of an epoch's wall time (what a scraper polling /metrics sees)."""
        session = Session(config(cell, seed), record_packets=1 << 12)
        source = spec(cell, path, self.speed)
        session.open(source, self.facts(source, session.config.settings.epoch_seconds))
        seen, instants = 0, []
        try:
            while not session.state.ended:
                n = len(session.releases(cell.algorithm))
                instants += [time.monotonic()] * (n - seen)
                seen = max(seen, n)
                time.sleep(0.002)
            n = len(session.releases(cell.algorithm))
            instants += [time.monotonic()] * (n - seen)
        finally:
            session.close(5.0)
        quantum = 1.0 / self.speed / 2
        return {f"release {i} instant": round((t - instants[0]) / quantum) for i, t in enumerate(instants)}


def alone(session: Session) -> float:
    """The per-packet ε of ``session``'s own releases, in a ledger of its own."""
    from dptop.monitor.ledger import Ledger

    ledger = Ledger()
    ledger.join(rereads=True)
    for lane in session.snapshot().lanes:
        if lane.algorithm is not None and lane.algorithm.guarantee is not None:
            ledger.record(lane.name, 1, lane.algorithm.guarantee, 1)
    return (ledger.to_json() or {}).get("epsilon", 0.0)


def drain(session: Session, timeout: float = 60.0) -> None:
    """Wait until every live lane took what it was offered (a full queue would be a drop)."""
    deadline = time.monotonic() + timeout
    while any(lane.worker.snapshot().queue_depth for lane in session.lanes.values() if lane.worker is not None):
        if time.monotonic() > deadline:
            raise RuntimeError("a lane did not drain its queue")
        time.sleep(0.001)


def printed(lines, timeout: float = 30.0) -> None:
    """Let ``lines`` see the session now and wait until it printed the line of every epoch close
    it saw (the first release each continual or window lane made after the close)."""
    if lines is None:
        return
    lines.update()
    deadline = time.monotonic() + timeout
    while lines.due:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no release after an epoch's close: {sorted(n for n, _ in lines.due)}")
        time.sleep(0.002)
        lines.update()


ITEMS = re.compile(r"(?:\S+ -?[\d,]+(?: · \S+ -?[\d,]+)*(?: \(\+\d+\))?|\(nothing above τ\))")
"""What a printed line (dptop.releaselines) ends with after ``: ``: its labels and estimates."""
HEAD = re.compile(r"^(?P<clock>\S+) (?P<name>\S+) (?P<where>.*?)(?:, τ (?P<threshold>-?[\d,.]+))?$")


def parse_line(line: str):
    """(clock, name, span, threshold, items) of a printed line; the items start after the first
    ``: `` whatever follows which is a list of labels and estimates (a span may hold ``: ``)."""
    at = -1
    while (at := line.find(": ", at + 1)) >= 0:
        head, items = HEAD.match(line[:at]), line[at + 2:]
        if head is not None and ITEMS.fullmatch(items):
            return head["clock"], head["name"], head["where"], head["threshold"], items
    return None


def line_features(text: str) -> dict[str, float]:
    """The lines ``capture`` printed as features: per algorithm the number of lines, per line its
    leading clock and span as a category, its threshold and each label's estimate as values."""
    out: dict[str, float] = {}
    count: dict[str, int] = {}
    for line in text.splitlines():
        parsed = parse_line(line)
        if parsed is None:
            out[f"unparsed={line}"] = 1.0
            continue
        clock, name, where, threshold, items = parsed
        i = count[name] = count.get(name, 0) + 1
        out[f"{name} line {i}: {clock} {where}"] = 1.0
        if threshold is not None:
            out[f"{name} line {i} threshold"] = float(threshold.replace(",", ""))
        for item in items.split(" · "):
            label, _, estimate = item.rpartition(" ")
            if label and estimate.lstrip("-").replace(",", "").isdigit():
                out[f"{name} line {i} item {label}"] = float(estimate.replace(",", ""))
    out.update({f"{name} lines": float(n) for name, n in count.items()})
    return out


def stated_facts(view: dict) -> dict[str, float]:
    """The public facts ``view`` names (its ``public_facts``), as features: what the feed serves at
    /releases beside /metrics, so that a series following a named fact is that fact's, not a leak."""
    return {k: v for k, v in view_features({"public_facts": view["public_facts"], "parameters": {}}).items()
            if k.startswith(".public_facts")}


def seeded_features(view: dict, metrics: dict[str, float]) -> dict[str, float]:
    """Whether every surface of a seeded run says NOT private: 1 per surface that does not."""
    unmarked = [k for k in metrics if "'private', 'false'" not in k and not k.startswith("dptop_not_private")]
    return {"view says private": float(view["private"]), "metrics series without NOT private": float(len(unmarked))}


def split_fields(xs: list[dict], ys: list[dict]) -> tuple[str, ...]:
    """Fields constant within each side (present in every run, one value) and different between
    the sides (or present on one side only, in every run of it)."""
    def constant(runs):
        keys = set.intersection(*(set(r) for r in runs))
        return {k: runs[0][k] for k in keys if all(r[k] == runs[0][k] for r in runs)}

    cx, cy = constant(xs), constant(ys)
    anywhere_x, anywhere_y = set().union(*xs), set().union(*ys)
    differ = {k for k in cx.keys() & cy.keys() if cx[k] != cy[k]}
    differ |= {k for k in cx.keys() - anywhere_y} | {k for k in cy.keys() - anywhere_x}
    return tuple(sorted(differ))


def named_facts(xs: list[dict], ys: list[dict]) -> tuple[str, ...]:
    """Public facts the view names whose values differ between the sides (by the fact's index in
    ``public_facts``, named by its ``name`` field)."""
    def facts(run):
        out: dict[str, set] = {}
        for k, v in run.items():
            if k.startswith(".public_facts["):
                out.setdefault(k.split("]")[0], set()).add((k, v))
        return out

    names = {}
    for run in xs + ys:
        for k in run:
            if k.startswith(".public_facts[") and ".name=" in k:
                names[k.split("]")[0]] = k.split(".name=")[1]
    fx, fy = [facts(r) for r in xs], [facts(r) for r in ys]
    return tuple(sorted({names.get(i, i) for i in names
                         if {frozenset(f.get(i, ())) for f in fx} != {frozenset(f.get(i, ())) for f in fy}}))


CONFIRM = 3
"""A split seen in ``runs`` runs per side is checked again over ``CONFIRM`` times as many: a field
the capture decides stays constant within each side and different between them; a noisy one that
happened to agree within each side (an epoch's label set, three runs of a coin that lands the
same way 0.9 of the time) does not."""


def run_cell(cell: Cell, runs: int = 3, product: Product | None = None, seed: int | None = None,
             confirm: int = CONFIRM) -> Verdict:
    """``cell``'s verdict over ``runs`` runs per side (``confirm`` times as many where it splits)."""
    product = product or Product()
    t0 = time.perf_counter()
    seeded = cell.surface == "seeded"
    with tempfile.TemporaryDirectory(prefix="dptop-matrix-") as folder:
        x, y = neighbour_pair(Path(folder), cell.neighbour)
        xs: list[dict] = []
        ys: list[dict] = []
        try:
            for more in (runs, (confirm - 1) * runs):
                xs += [product.features(cell, x, 7 if seeded else seed) for _ in range(more)]
                ys += [product.features(cell, y, 7 if seeded else seed) for _ in range(more)]
                if cell.surface in STATEMENTS or not more or not split_fields(xs, ys) or named_facts(xs, ys):
                    break
        except Exception as exc:  # noqa: BLE001 - a cell that cannot run is reported, not hidden
            return Verdict(cell, runs, (), (), time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
    if cell.surface in STATEMENTS:  # what every run must state, whatever the neighbour
        fields = tuple(sorted({k for r in xs + ys for k, v in r.items() if v}))
        return Verdict(cell, len(xs), fields, (), time.perf_counter() - t0)
    return Verdict(cell, len(xs), split_fields(xs, ys), named_facts(xs, ys), time.perf_counter() - t0)


def cells(quick: bool = False):
    """The whole matrix, or the quick slice the default suite runs."""
    if quick:
        yield from dict.fromkeys([Cell("publish", "dpss"), Cell("metrics", "dpmg", neighbour="substituted"),
                                  *(cell for _, cell in BROKEN.values())])
        return
    for surface, algorithm, key, weight, neighbour, path in itertools.product(
            SURFACES, private_algorithms(), KEYS, WEIGHTS, NEIGHBOURS, PATHS):
        if algorithm.startswith("ldp-") and (key != "src" or weight != "packets"):
            continue  # local DP reports source addresses, one report per packet
        yield Cell(surface, algorithm, key, weight, neighbour, path)


def run_matrix(selected, runs: int = 3, product: Product | None = None, progress=print) -> list[Verdict]:
    out = []
    for cell in selected:
        out.append(run_cell(cell, runs, product))
        if progress:
            progress(out[-1].row())
    return out


# ----- the broken variants: each finding of the review, one product step broken ---------------
class ArrivalRelease(Product):
    """Finding 2: releases when a later packet shows up, not on the public clock: the session is
    handed the file's facts without their grid (the time range and the canonical plan kept), so
    a paced replay has no public clock and an epoch closes when the next cell's first packet
    arrives."""

    def facts(self, source: SourceSpec, epoch_seconds: float | None) -> SourceFacts | None:
        if source.speed is None:  # an unpaced replay has no public clock to remove
            return None
        facts = read_facts(source.path, source.time_range, epoch_seconds, source.loop)
        return replace(facts, grid=None)


class CountStop(Product):
    """Finding 3: a capture stopped at its N-th packet, with no public stop besides (``--count N``
    alone: an open-ended range). N is the number of packets ``x`` holds before its third cell, so
    its N-th packet is the last of the second cell; with the first packet removed the N-th is the
    first of the third cell, which the stop then closes too: two releases against three."""

    duration = None

    @property
    def stop_after(self):
        ts = base_stream()[2]
        return int(np.searchsorted(ts, T0 + 2 * SECOND))


class LedgerPerSession(Product):
    """Finding 5: a key switch starts a new ledger."""

    @staticmethod
    def ledger_after(session):
        return None


class SeededMetrics(Product):
    """Finding 6: /metrics of a seeded run without the NOT-private marker."""

    def metrics(self, view):
        return {k.replace(", ('private', 'false')", ""): v for k, v in super().metrics(view).items()
                if not k.startswith("dptop_not_private")}


def _exact_spans(session, command):
    """The private view with each release's span as the engine made it (exact counts, stamps)."""
    view = publish.publish_json(session, command)
    for name, a in view["algorithms"].items():
        for out, rel in zip(a["releases"], [r for r in session.releases(name) if r.guarantee is not None]):
            out["span"] = {k: v for k, v in rel.span.to_json().items()}
    return view


class ExactSpans(Product):
    """Finding 8: spans carry the exact packet count and real packet stamps."""
    view = staticmethod(_exact_spans)


class _ExactLines(ReleaseLines):
    def epoch_line(self, lane, snap, cell):
        """The line as the engine's span says it: the packets seen so far, their stamps."""
        release = snap.latest
        thr = "" if release.threshold is None else f", τ {release.threshold:,.0f}"
        items = " · ".join(f"{it.address} {it.estimate:,.0f}" for it in release.items) or "(nothing above τ)"
        return f"00:00:00 {lane.name} {span_text(release.span.to_json(), self.units)}{thr}: {items}"


class ExactLines(Product):
    """Finding 8 on ``capture``'s running log: each continual or window line with the engine's
    span (the exact count of packets seen, the window's exact positions)."""
    release_lines = staticmethod(_ExactLines)


class CountSteps(Product):
    """Output steps driven by the packet count on a live capture: the lanes are built without
    the clock's epochs (the session's clock still ticks), so a continual algorithm computes and
    releases an output every k~ packets, and one packet more or less changes how many exist."""

    @staticmethod
    def live_config(cell, seed):
        run = config(cell, seed)
        return replace(run, settings=run.settings.with_(epoch_seconds=None))


BROKEN = {"arrival-release": (ArrivalRelease, Cell("timing", "dpss", neighbour="added-end")),
          "count-stop": (CountStop, Cell("capture", "dpss", neighbour="removed-start")),
          "ledger-per-session": (LedgerPerSession, Cell("top", "dpss")),
          "seeded-metrics": (SeededMetrics, Cell("seeded", "dpss")),
          "exact-spans": (ExactSpans, Cell("capture", "dpsw", neighbour="removed-start")),
          "exact-lines": (ExactLines, Cell("lines", "lazyhh", neighbour="removed-middle")),
          "count-steps": (CountSteps, Cell("capture", "lazyhh", neighbour="removed-start"))}
"""Each broken variant with the cell that must report it."""


def audit_product(quick: bool, runs: int = 3) -> int:
    """``dptop audit --product``: the matrix's table (one row per cell), then each broken variant
    on its cell; exit 1 when a real cell shows a violation or a broken variant goes unreported."""
    t0 = time.perf_counter()
    verdicts = run_matrix(cells(quick), runs)
    print("broken variants:")
    missed = []
    for name, (variant, cell) in BROKEN.items():
        v = run_cell(cell, runs, variant())
        print(f"  {name:20s} {v.row()}  {'caught' if v.violation else 'NOT CAUGHT'}", flush=True)
        if not v.violation:
            missed.append(name)
    bad = [v for v in verdicts if v.violation]
    print(f"{len(verdicts)} cells x {runs} runs per side: {len(bad)} violation(s); broken variants caught "
          f"{len(BROKEN) - len(missed)}/{len(BROKEN)}; {time.perf_counter() - t0:.0f} s")
    return 1 if bad or missed else 0
