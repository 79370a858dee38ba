"""The live soak: ``dptop capture``'s session with the default algorithms on ``lo`` while a paced
sender (dptop.capture.lab.paced, its own process) sends 20,000 packets/s from 127.0.0.x sources;
resident memory, threads and drops are sampled every ``every`` seconds (a minute by default).
The first minutes fill bounded buffers (each algorithm's release history of 4,096, the truth's
recording), so growth is measured after ``WARM_UP_MINUTES``; a shorter run reports none.

The day-long target: after the first five minutes RSS grows by at most ``GROWTH_LIMIT`` MiB per
minute. ``dptop bench --only soak --soak-minutes 60`` is the full run (root: live capture); the
slow test ``tests/test_live_soak.py`` runs it for ``DPTOP_LIVE_SOAK_MINUTES`` (default 60).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from dptop.monitor.config import SourceSpec
from dptop.monitor.explain import drops_of
from dptop.monitor.memory import limit_arenas
from dptop.monitor.session import Session
from dptop.monitor.states import State

RATE = 20_000
GROWTH_LIMIT = 0.5  # MiB per minute after the warm-up
WARM_UP_MINUTES = 5.0
SHARES = ("127.0.0.2=0.3", "127.0.0.3=0.1")


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def growth_per_minute(samples: list[dict], after_minutes: float) -> float | None:
    """Least-squares slope of RSS (MiB per minute) over the samples taken after ``after_minutes``;
    None with fewer than two."""
    pts = [(s["minute"], s["rss_mib"]) for s in samples if s["minute"] >= after_minutes]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    var = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / var if var else None


def soak(config, minutes: float, rate: float = RATE, every: float = 60.0, port: int = 40777,
         progress=print) -> dict:
    """Run the soak with ``config`` (``dptop capture``'s defaults); returns ``{"samples": [...],
    "sent": packets, "growth_mib_per_min": ...}``."""
    limit_arenas()
    session = Session(config)
    session.open(SourceSpec("live", iface="lo", bpf=f"udp dst port {port}"))
    deadline = time.monotonic() + 600
    while session.state is State.STARTING and time.monotonic() < deadline:
        time.sleep(0.1)
    if session.state is not State.RUNNING:
        session.close(5.0)
        raise RuntimeError(f"the live session did not start: {session.error or session.state}")
    seconds = minutes * 60
    sender = subprocess.Popen([sys.executable, "-m", "dptop.capture.lab.paced", "--rate", str(rate), "--seconds",
                               str(seconds), "--port", str(port), *[a for s in SHARES for a in ("--share", s)]],
                              stdout=subprocess.PIPE, text=True)
    samples = []
    t0 = time.monotonic()
    try:
        while True:
            time.sleep(max(0.0, t0 + every * (len(samples) + 1) - time.monotonic()))
            snap = session.snapshot()
            d = drops_of(snap)
            row = {"minute": round((time.monotonic() - t0) / 60, 2), "rss_mib": round(rss_mib(), 1),
                   "threads": threading.active_count(), "packets": snap.truth_packets, "drops": d.total,
                   "late": d.clock, "kernel": d.kernel, "queues": d.queue, "state": snap.state.value}
            samples.append(row)
            if progress:
                progress(f"soak {row['minute']:6.2f} min: RSS {row['rss_mib']:.1f} MiB, {row['threads']} threads, "
                         f"{row['packets']:,} packets, drops {row['drops']:,}")
            if snap.error or sender.poll() is not None or len(samples) * every >= seconds - 1e-6:
                break
    finally:
        sent = json.loads(sender.communicate(timeout=seconds + 60)[0] or "{}")
        session.close(5.0)
    return {"minutes": minutes, "rate": rate, "algorithms": list(config.names), "samples": samples,
            "sent": sent.get("packets"), "error": session.error,
            "growth_mib_per_min": growth_per_minute(samples, WARM_UP_MINUTES),
            "growth_after": WARM_UP_MINUTES, "limit_mib_per_min": GROWTH_LIMIT}


def rows(config, minutes: float, progress=print) -> list[dict]:
    """``dptop bench`` rows: one per sample, then the growth summary (skipped without root)."""
    if os.geteuid() != 0:
        return [{"bench": "soak", "note": "live capture on lo needs root (CAP_NET_RAW): skipped"}]
    result = soak(config, minutes, progress=progress)
    out = [{"bench": "soak", "minute": s["minute"], "rss_mib": s["rss_mib"], "threads": s["threads"],
            "packets": s["packets"], "drops": s["drops"], "late": s["late"], "kernel": s["kernel"],
            "queues": s["queues"]} for s in result["samples"]]
    out.append({"bench": "soak summary", "minutes": minutes, "rate_pps": result["rate"], "sent": result["sent"],
                "growth_mib_per_min": result["growth_mib_per_min"], "after_minute": result["growth_after"],
                "limit": GROWTH_LIMIT})
    return out
