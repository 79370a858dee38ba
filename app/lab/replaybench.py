"""The end-to-end bench (``dptop bench --only replay``): what a user gets from ``dptop replay``.

Start-up first (``startup``): the wall time of a whole ``dptop replay`` of the bundled demo
capture with the default algorithms (warm kernel cache), of the monitor window from process
launch until it is shown, and (full runs only) of ``dptop compile`` into an empty cache: the
cold compile a first install pays once.

A synthetic Zipf(1.1) capture (2^24 packets, 2^22 with ``quick``) is replayed through a monitor
session, as the CLI does, with ``exact`` only, the private trio with ``exact``, and every default
algorithm; the parser alone reads the same file for the ratio. Contenders alternate (ABCD ABCD
ABCD) and each figure is the median of the repetitions, measured per wall second of the replay
(start-up excluded: from the first packet to the end) and per CPU-second of the whole process.
Each row and progress line carries the 1-minute load average when its runs ended (``load``).

``lanes`` splits the default set's replay CPU: per lane, the CPU-seconds inside its algorithm
during the session (``Worker.busy``) beside the same algorithm alone on the same batches (its
class, settings and public facts, one thread, nothing else running in it), and the rest of the
session's CPU (parser, fan-out, ground truth, queues, threads, kernel loading) as one row.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dptop.capture.pcap import open_capture
from dptop.capture.synth import write_zipf_pcap
from dptop.engine.lab.bench.load import load_average
from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import Session
from dptop.monitor.sources import REPLAY_BATCH
from dptop.monitor.states import State
from dptop.resources import DEMO_CAPTURE
from dptop.runargs import DEFAULT_ALGORITHMS

CONTENDERS = {
    "exact": ("exact",),
    "private trio + exact": ("dpss", "lazyhh", "dpsw", "exact"),
    "all defaults": DEFAULT_ALGORITHMS,
}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def parse_only(path) -> tuple[int, float, float]:
    """(packets, wall s, CPU s) of reading every key batch of ``path``."""
    w0, c0, n = time.perf_counter(), _cpu(), 0
    with open_capture(path) as reader:
        for batch in reader.batches(1 << 16):
            n += len(batch)
    return n, time.perf_counter() - w0, _cpu() - c0


def replay(path, names) -> tuple[int, float, float]:
    """(packets, wall s from the first packet to the end, CPU s of the whole replay)."""
    session = Session(RunConfig(names, Settings()))
    c0 = _cpu()
    session.open(SourceSpec("file", path=str(path)))
    while session.state is State.STARTING:
        time.sleep(0.001)
    w0 = time.perf_counter()
    state = session.wait()
    wall = time.perf_counter() - w0
    packets = session.snapshot().truth_packets
    session.close(5.0)
    if state is not State.FINISHED:
        raise RuntimeError(f"replay bench ended {state}: {session.error}")
    return packets, wall, _cpu() - c0


def _lane_split(path, names) -> tuple[float, dict[str, float], dict[str, float]]:
    """(session CPU s, CPU s inside each lane's algorithm, CPU s of each algorithm alone) of one
    replay of ``path`` with ``names``; alone: a fresh instance of the lane's class with its
    settings and facts consumes the file's batches (``REPLAY_BATCH``) on this thread."""
    session = Session(RunConfig(names, Settings()))
    c0 = _cpu()
    session.open(SourceSpec("file", path=str(path)))
    state = session.wait()
    lanes = dict(session.lanes)
    busy = {name: lane.worker.busy for name, lane in lanes.items()}
    session.close(5.0)
    total = _cpu() - c0
    if state is not State.FINISHED:
        raise RuntimeError(f"replay bench ended {state}: {session.error}")
    with open_capture(path) as reader:
        batches = list(reader.batches(REPLAY_BATCH))
    alone = {}
    for name, lane in lanes.items():
        used = lane.worker.algorithm
        algorithm = type(used)(lane.settings, used.facts, used.counting)
        algorithm.warm_up()
        t0 = time.thread_time()
        for batch in batches:
            algorithm.consume(batch)
        algorithm.finish()
        alone[name] = time.thread_time() - t0
    return total, busy, alone


def lanes(quick: bool = False, repeats: int = 3, progress=print, length: int | None = None) -> list[dict]:
    """Per lane of the default set: median CPU-seconds inside its algorithm in the session, alone,
    and their ratio; then the session's CPU outside every lane's algorithm (the same Zipf file as
    ``run``; ``length`` packets instead when given)."""
    length = length or 1 << (22 if quick else 24)
    with tempfile.TemporaryDirectory(prefix="dptop-bench-") as tmp:
        path = Path(tmp) / "zipf.pcap"
        write_zipf_pcap(path, 1.1, 1 << 20, length, seed=11, rate_pps=1_000_000)
        _lane_split(path, DEFAULT_ALGORITHMS)  # warm
        runs = [_lane_split(path, DEFAULT_ALGORITHMS) for _ in range(repeats)]
    load = load_average()
    rows = []
    for name in DEFAULT_ALGORITHMS:
        inside = statistics.median(r[1][name] for r in runs)
        alone = statistics.median(r[2][name] for r in runs)
        rows.append({"bench": "replay lanes", "part": name, "packets": length, "cpu_s": inside,
                     "alone_cpu_s": alone, "ns_per_packet": inside / length * 1e9,
                     "vs_alone": inside / alone if alone else None, "load": load})
    rest = statistics.median(r[0] - sum(r[1].values()) for r in runs)
    rows.append({"bench": "replay lanes", "part": "outside the algorithms", "packets": length, "cpu_s": rest,
                 "alone_cpu_s": None, "ns_per_packet": rest / length * 1e9, "vs_alone": None, "load": load})
    if progress:
        for r in rows:
            alone = "" if r["alone_cpu_s"] is None else f", alone {r['alone_cpu_s']:.3f} s ({r['vs_alone']:.2f}x)"
            progress(f"replay lane {r['part']:22s} {r['cpu_s']:.3f} CPU-s, {r['ns_per_packet']:5.0f} ns/packet"
                     f"{alone}, load {r['load']:.2f}")
    return rows


STARTUP_TARGETS = {"first CLI result": 1.5, "first window": 3.0, "cold compile": None}
"""Seconds (warm kernel cache) the start-up rows are held to; the cold compile is quoted, not held."""


def _wall(command: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=900)
    return time.perf_counter() - t0


def _window_seconds() -> float | None:
    """Seconds from launching ``python -m dptop.gui.launch --time-to-window`` to its window shown;
    None without Qt. Offscreen when there is no display."""
    env = dict(os.environ)
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        env["QT_QPA_PLATFORM"] = "offscreen"
    out = subprocess.run([sys.executable, "-m", "dptop.gui.launch", "--time-to-window", repr(time.time())],
                         capture_output=True, text=True, env=env, timeout=300)
    try:
        return float(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None


def startup(quick: bool = False, repeats: int = 3, progress=print) -> list[dict]:
    """Start-up rows: medians of ``repeats`` runs after one warm-up run."""
    cli = [sys.executable, "-m", "dptop", "replay", str(DEMO_CAPTURE), "--json", os.devnull]
    measured = {"first CLI result": lambda: _wall(cli), "first window": _window_seconds}
    rows = []
    for what, measure in measured.items():
        measure()  # warm: kernel cache and page cache
        samples = [measure() for _ in range(repeats)]
        seconds = None if None in samples else statistics.median(samples)
        rows.append({"bench": "startup", "what": what, "seconds": seconds, "target_s": STARTUP_TARGETS[what],
                     "load": load_average()})
    if not quick:
        with tempfile.TemporaryDirectory(prefix="dptop-cold-") as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            rows.append({"bench": "startup", "what": "cold compile",
                         "seconds": _wall([sys.executable, "-m", "dptop", "compile"], env), "target_s": None,
                         "load": load_average()})
    if progress:
        for r in rows:
            shown = "n/a (no Qt)" if r["seconds"] is None else f"{r['seconds']:.2f} s"
            target = "" if r["target_s"] is None else f" (target < {r['target_s']:g} s)"
            progress(f"startup {r['what']:18s} {shown}{target}  load {r['load']:.2f}")
    return rows


def run(quick: bool = False, repeats: int = 3, progress=print) -> list[dict]:
    length = 1 << (22 if quick else 24)
    with tempfile.TemporaryDirectory(prefix="dptop-bench-") as tmp:
        path = Path(tmp) / "zipf.pcap"
        write_zipf_pcap(path, 1.1, 1 << 20, length, seed=11, rate_pps=1_000_000)
        contenders = {"parser alone": None, **CONTENDERS}
        for names in CONTENDERS.values():  # warm: kernels loaded, page cache filled
            replay(path, names)
        samples: dict[str, list[tuple]] = {k: [] for k in contenders}
        for _ in range(repeats):
            for name, names in contenders.items():
                samples[name].append(parse_only(path) if names is None else replay(path, names))
    load = load_average()
    rows = []
    for name, runs in samples.items():
        packets = runs[0][0]
        wall = statistics.median(r[1] for r in runs)
        cpu = statistics.median(r[2] for r in runs)
        rows.append({"bench": "replay", "contender": name, "packets": packets, "wall_s": wall, "cpu_s": cpu,
                     "packets_per_wall_second": packets / wall, "packets_per_cpu_second": packets / cpu,
                     "load": load})
    parser = rows[0]
    for row in rows:
        row["wall_vs_parser"] = parser["wall_s"] / row["wall_s"]
    if progress:
        for r in rows:
            progress(f"replay {r['contender']:22s} {r['packets_per_wall_second'] / 1e6:6.2f}M packets/s wall, "
                     f"{r['packets_per_cpu_second'] / 1e6:6.2f}M per CPU-s, {r['wall_vs_parser']:.2f} of the parser's "
                     f"wall rate, load {r['load']:.2f}")
    return rows
