"""The live bench (``dptop bench --only live``, root): what ``dptop capture`` keeps at line rate.

Two network namespaces joined by a veth pair (dptop.capture.lab.netns); the project's TX-ring
sender (dptop.capture.lab.txring) offers 34-byte Ethernet/IPv4 frames at a stepped rate, the last
step as fast as it can send; the receiving interface's kernel counter
(``/sys/class/net/IFACE/statistics/rx_packets``) is what was offered. Contenders alternate at
every step (ABCD ABCD ...): ``dptop capture`` with the default algorithms, with the private trio
and ``exact``, with ``exact`` alone, and ``tcpdump -B 65536 -w /dev/null`` where it is installed
(``DPTOP_BENCH_BASELINE`` may name another ``dptop`` executable, e.g. an older checkout's, run
with its own defaults). Each row: offered, counted and dropped per lane (offered minus what the
lane saw), whether dptop's own drop account says exactly that, the CPU per offered packet of the
capturing process over the traffic (start-up excluded) and the load average.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dptop.capture.lab.netns import VethLab
from dptop.engine.lab.bench.load import load_average

CONTENDERS = {
    "dptop defaults": (),
    "dptop trio + exact": ("--algorithms", "dpss,lazyhh,dpsw,exact"),
    "dptop exact": ("--algorithms", "exact"),
}
RATES = (200_000, 400_000, 800_000, None)
"""Offered frames per second, stepped; None: as fast as the sender goes."""
SECONDS = 4.0
"""Traffic per run (half with ``quick``)."""
TOP_RUNS = 3
"""Runs of every contender at the last step (the acceptance: every packet kept in each)."""
ROOT_NOTE = "the live bench needs root (network namespaces, a veth pair, raw sockets): skipped"


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_socket(lab: VethLab, proc: subprocess.Popen, sockets: int, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while lab.packet_sockets() <= sockets:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the capture did not open its socket: {proc.communicate()[1][-400:]}")
        time.sleep(0.1)
    time.sleep(0.5)


def _tcpdump_counts(stderr: str) -> tuple[int, int]:
    """(captured, dropped by the kernel) from tcpdump's closing lines."""
    numbers = {}
    for line in stderr.splitlines():
        for what in ("captured", "dropped by kernel"):
            if line.endswith(f"packets {what}") or line.endswith(f"packet {what}"):
                numbers[what] = int(line.split()[0])
    return numbers.get("captured", 0), numbers.get("dropped by kernel", 0)


def one_run(lab: VethLab, name: str, argv: tuple[list[str], tuple] | None, rate: float | None, tmp: Path,
            seconds: float = SECONDS) -> dict:
    """One contender (``(dptop executable, capture options)``, None: tcpdump) at one rate: offered,
    counted and dropped per lane, CPU per packet."""
    count = int((rate or 1_200_000) * seconds)
    out = tmp / "capture.json"
    out.unlink(missing_ok=True)
    if argv is None:  # tcpdump
        command = ["tcpdump", "-B", "65536", "-w", os.devnull, "-i", lab.rx, "-n"]
    else:
        executable, options = argv
        command = [*executable, "capture", "--iface", lab.rx, "--json", str(out), *options]
    sockets = lab.packet_sockets()
    proc = subprocess.Popen(lab.command(lab.rx_ns, command), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_socket(lab, proc, sockets)
        before, cpu0 = lab.rx_packets(), _cpu(proc.pid)
        sent = subprocess.run(lab.sender(count, rate), check=True, capture_output=True, text=True, timeout=600)
        sent_seconds = float(sent.stdout.split()[1])  # from its first frame to its last
        time.sleep(1.5)  # the ring's last blocks, the lanes' queues
        cpu = _cpu(proc.pid) - cpu0
        offered = lab.rx_packets() - before
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    row = {"bench": "live", "contender": name, "rate": rate or "max", "offered": offered,
           "offered_per_s": round(offered / sent_seconds), "cpu_us_per_packet": round(1e6 * cpu / max(offered, 1), 3)}
    if argv is None:
        captured, dropped = _tcpdump_counts(err)
        row.update(counted=captured, dropped=offered - captured, account_ok=dropped == offered - captured)
    else:
        result = json.loads(out.read_text())
        drops = result["drops"]
        lanes = {n: a["packets"] for n, a in result["algorithms"].items()}
        counted = min(lanes.values()) if lanes else 0
        by_lane = drops.get("by_lane")  # an older dptop has only the total
        row.update(counted=counted, dropped=offered - counted,
                   dropped_per_lane=", ".join(f"{n} {offered - seen:,}" for n, seen in lanes.items()),
                   account_ok=(drops["total"] == offered - counted and drops.get("offered", offered) == offered
                               and all(x["missed"] == offered - x["seen"] for x in (by_lane or {}).values())))
    row["load"] = load_average()
    return row


def contenders() -> dict[str, tuple[list[str], tuple] | None]:
    dptop = [sys.executable, "-m", "dptop"]
    out: dict[str, tuple[list[str], tuple] | None] = {name: (dptop, args) for name, args in CONTENDERS.items()}
    baseline = os.environ.get("DPTOP_BENCH_BASELINE")
    if baseline:
        out["baseline defaults"] = ([baseline], ())
    if shutil.which("tcpdump"):
        out["tcpdump -B 65536"] = None
    return out


def rows(quick: bool = False, progress=print) -> list[dict]:
    """``dptop bench`` rows: every contender at every step, alternating; ``TOP_RUNS`` at the last."""
    if os.geteuid() != 0:
        return [{"bench": "live", "note": ROOT_NOTE}]
    steps = [(rate, 1) for rate in RATES[:-1]] + [(RATES[-1], TOP_RUNS)]
    if quick:
        steps = [(400_000, 1), (None, TOP_RUNS)]
    seconds = SECONDS / 2 if quick else SECONDS
    out = []
    with VethLab() as lab, tempfile.TemporaryDirectory(prefix="dptop-live-") as tmp:
        for rate, runs in steps:
            for _ in range(runs):
                for name, argv in contenders().items():
                    row = one_run(lab, name, argv, rate, Path(tmp), seconds)
                    out.append(row)
                    if progress:
                        progress(f"live {name:20s} rate {row['rate']!s:>8}: offered {row['offered']:,} "
                                 f"({row['offered_per_s']:,}/s), counted {row['counted']:,}, dropped {row['dropped']:,}"
                                 f"{'' if row['account_ok'] else ' (ACCOUNT DIFFERS)'}, "
                                 f"{row['cpu_us_per_packet']:.3f} us CPU/packet, load {row['load']:.2f}")
    return out
