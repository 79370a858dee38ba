"""``dptop bench`` capture table: file parser vs scapy, and live capture on ``lo``.

* parser: packets/s of ``capture.pcap`` over a synthetic Ethernet/IPv4 pcap (capture.synth;
  4M packets, 1M with ``quick``), best of 3 warm runs, file in the page cache;
* scapy ``RawPcapReader`` (record loop, no dissection) and ``rdpcap``-style full dissection
  (``PcapReader``) on prefixes of the same file, and the parser's ratio to each;
* live: ``LiveCapture`` (ring mode) on ``lo`` while a subprocess floods it — dptop.capture.lab.txring
  (TX ring, no per-packet system call) and, if installed, ``tcpreplay --topspeed`` of a
  synthetic pcap — with received packets, kernel drops and the capture's CPU time. Needs root;
  skipped with a note otherwise.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dptop.capture.pcap import open_capture, warm_up
from dptop.capture.synth import write_zipf_pcap


def _parser_rate(path: Path, repeats: int) -> tuple[int, float]:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = 0
        with open_capture(path) as reader:
            for batch in reader.batches(1 << 16):
                n += len(batch)
        best = min(best, time.perf_counter() - t0)
    return n, n / best


def _scapy_rate(path: Path, limit: int, dissect: bool) -> float:
    from scapy.utils import PcapReader, RawPcapReader
    reader = PcapReader(str(path)) if dissect else RawPcapReader(str(path))
    n = 0
    t0 = time.perf_counter()
    for _ in reader:
        n += 1
        if n >= limit:
            break
    dt = time.perf_counter() - t0
    reader.close()
    return n / dt


def _live_run(sent: int, sender: list[str], label: str) -> dict:
    """Capture on ``lo`` while ``sender`` (a subprocess) sends ``sent`` protocol-253 packets."""
    from dptop.capture.live import LiveCapture
    cap = LiveCapture("lo", lambda b: True, bpf="ip proto 253")
    cap.start()
    time.sleep(0.2)
    cpu0, t0 = time.process_time(), time.monotonic()
    out = subprocess.run(sender, capture_output=True, text=True)
    took = time.monotonic() - t0
    deadline = time.monotonic() + 2.0
    while cap.stats().packets < sent and time.monotonic() < deadline:
        time.sleep(0.02)
    cpu = time.process_time() - cpu0
    cap.stop()
    cap.join(5)
    if out.returncode != 0:
        raise RuntimeError(f"{sender[0]} failed: {out.stderr.strip()[-300:]}")
    s = cap.stats()
    m = re.search(r"^\d+ ([\d.]+)$", out.stdout, re.M) or re.search(r"sent in ([\d.]+) seconds", out.stdout)
    took = float(m.group(1)) if m else took  # the sender's own sending time, without its start-up
    return {"what": f"live capture on lo ({cap.mode}), sender {label}", "packets": sent,
            "received": s.ip_packets, "kernel_drops": s.kernel_drops, "seconds": took,
            "packets_per_second": s.ip_packets / took, "capture_cpu_seconds": cpu,
            "capture_capacity_pps": s.ip_packets / cpu if cpu > 0 else None}


def _live_rows(tmp: Path, quick: bool) -> tuple[list[dict], str]:
    if os.geteuid() != 0:
        return [], "Live capture skipped: needs root (CAP_NET_RAW)."
    sent = 300_000 if quick else 2_000_000
    rows = [_live_run(sent, [sys.executable, "-m", "dptop.capture.lab.txring", "lo", str(sent)], "TX ring (dptop.capture.lab.txring)")]
    if shutil.which("tcpreplay"):
        path = tmp / "live.pcap"
        n = sent // 2
        write_zipf_pcap(path, 1.1, 10_000, n, seed=3)
        rows.append(_live_run(n, ["tcpreplay", "-i", "lo", "--topspeed", str(path)], "tcpreplay --topspeed"))
    clean = [r["packets_per_second"] for r in rows if not r["kernel_drops"] and r["received"] == r["packets"]]
    note = (f"Live: highest rate seen without drops {max(clean) / 1e3:.0f}k packets/s" if clean
            else "Live: every run dropped packets")
    return rows, (note + "; on lo the sender's system calls also do the kernel's delivery work, so the "
                  "senders set the rate; capture_capacity_pps = packets / CPU seconds of the capturing "
                  "process (what the capture could take if the sender were faster).")


def run_bench(quick: bool) -> dict:
    n = 1_000_000 if quick else 4_000_000
    with tempfile.TemporaryDirectory(prefix="dptop-bench-") as d:
        tmp = Path(d)
        path = tmp / "zipf.pcap"
        write_zipf_pcap(path, 1.1, 100_000, n, seed=1)
        warm_up()
        _, rate = _parser_rate(path, 2 if quick else 3)
        raw = _scapy_rate(path, 50_000 if quick else 200_000, dissect=False)
        full = _scapy_rate(path, 3_000 if quick else 20_000, dissect=True)
        rows = [
            {"what": "parser (numba record walk, mmap)", "packets": n, "packets_per_second": rate},
            {"what": "scapy RawPcapReader loop", "packets": 50_000 if quick else 200_000,
             "packets_per_second": raw, "parser_ratio": rate / raw},
            {"what": "scapy PcapReader (dissection)", "packets": 3_000 if quick else 20_000,
             "packets_per_second": full, "parser_ratio": rate / full},
        ]
        live, live_note = _live_rows(tmp, quick)
    return {"name": "capture", "rows": rows + live,
            "notes": (f"synthetic Ethernet/IPv4 pcap of {n} packets (page cache); parser best of "
                      f"{2 if quick else 3} runs; scapy on a prefix of the same file. Goals: parser >= 10M/s "
                      f"and >= 50x RawPcapReader; live >= 300k/s on lo. {live_note}")}
