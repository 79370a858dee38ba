"""The live bench (``dptop bench --only live``, root): what ``dptop capture`` keeps at line rate.

Two network namespaces joined by a veth pair (dptop.capture.lab.netns); the project's TX-ring
sender (dptop.capture.lab.txring) offers 34-byte Ethernet/IPv4 frames from Zipf 1.1 sources at a
stepped rate, the last step as fast as the receiving side takes them. The sender stands in for
another machine, so it runs at real-time priority (``SENDER_REALTIME``) to keep its pace on a shared
machine, pinned to one CPU, while the receive work (the veth's softirq, which fills the capture's
ring) is steered to the others (RPS): the capture pays its own receive work, as on a capture
machine, instead of the sender paying it (``LAB_NOTE``, said in the bench's notes). The kernel's
counters are the ground truth: ``tx_packets`` of the sending interface, ``rx_packets`` of the
receiving one (what was offered to the capture). Contenders alternate at every step (ABCD ABCD
...): ``dptop capture`` with the default algorithms, with the private trio and ``exact``, with
``exact`` alone, and ``tcpdump -B 65536 -w /dev/null`` where it is installed
(``DPTOP_BENCH_BASELINE`` may name another ``dptop`` executable, e.g. an older checkout's, run
with its own defaults).

A run offers its traffic once the capture reads (``VethLab.wait_capturing``: its own socket, open
for a second; not the one its check opens and closes at once, before kernels compile), and stops
it with SIGINT once it has caught up.
Each run's row: offered, counted and dropped per lane (offered minus what the lane saw), the kernel's
drops, the late and queue drops of dptop's account, whether that account (its JSON and its closing
status line) says exactly offered minus counted for every lane, the CPU per offered packet of the
capturing process over the traffic and until it has caught up (start-up excluded) and of the
sender, and the load average.
Then one summary row per rate and contender (medians of the alternating runs, the clean runs out of
all) and a note: whether every run's account held, and the acceptance at the top rate.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
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
RATES = (200_000, 400_000, 600_000, 800_000, 1_000_000, None)
"""Offered frames per second, stepped; None: as fast as the sender goes."""
SECONDS = 4.0
"""Traffic per run (half with ``quick``)."""
TOP_RUNS = 3
"""Runs of every contender at the last step (the acceptance: every packet kept in each)."""
TOP_RATE_FLOOR = 800_000
"""The acceptance's least top rate, frames per second."""
SENDER_REALTIME = True
LAB_NOTE = ("lab: the sender pinned to one CPU at real-time priority, sleeping while its frames are in "
            "flight; the receiving veth's frames steered to the other CPUs (RPS), so the capture pays its own "
            "receive softirq; on 2 cores the sender, the receive work and the capture share the machine, and "
            "the top rate is what the receiving side takes beside the capture (and other load)")
ROOT_NOTE = "the live bench needs root (network namespaces, a veth pair, raw sockets): skipped"
DROPS_LINE = re.compile(r"drops ([\d,]+) of ([\d,]+) offered")


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_idle(pid: int, least: float = 1.5, most: float = 60.0, quiet: float = 0.05) -> None:
    """Wait until the capture has read its ring and emptied its lanes' queues: at least ``least``
    seconds, then until it used under ``quiet`` of a core over two half-seconds running (at most
    ``most`` seconds). A stop before that would measure the stop, not what the capture keeps."""
    time.sleep(least)
    deadline, calm, cpu = time.monotonic() + most, 0, _cpu(pid)
    while calm < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        now = _cpu(pid)
        calm = calm + 1 if now - cpu < quiet * 0.5 else 0
        cpu = now


def _tcpdump_counts(stderr: str) -> tuple[int, int]:
    """(captured, dropped by the kernel) from tcpdump's closing lines."""
    numbers = {}
    for line in stderr.splitlines():
        for what in ("captured", "dropped by kernel"):
            if line.endswith(f"packets {what}") or line.endswith(f"packet {what}"):
                numbers[what] = int(line.split()[0])
    return numbers.get("captured", 0), numbers.get("dropped by kernel", 0)


def account(result: dict, text: str, offered: int) -> tuple[dict, list[str]]:
    """A dptop run's figures from its JSON and printed ``text`` (stdout and stderr: the closing status
    says "drops N of M offered" when it lost any) against the kernel's ``offered``, and every way its
    drop account differs from offered minus counted per lane (empty: it holds on both views)."""
    drops = result["drops"]
    seen = {n: a["packets"] for n, a in result["algorithms"].items()}
    counted = min(seen.values()) if seen else 0
    wrong = []
    if drops.get("offered", offered) != offered:
        wrong.append(f"offered {drops['offered']:,} in the JSON, {offered:,} by the kernel")
    if drops["total"] != offered - counted:
        wrong.append(f"total {drops['total']:,} in the JSON, offered - counted {offered - counted:,}")
    for name, lane in (drops.get("by_lane") or {}).items():  # an older dptop has only the total
        if lane["seen"] != seen.get(name) or lane["missed"] != offered - seen.get(name, 0):
            wrong.append(f"{name}: missed {lane['missed']:,} in the JSON, offered - counted "
                         f"{offered - seen.get(name, 0):,}")
    said = DROPS_LINE.findall(text)
    if said and (int(said[-1][0].replace(",", "")), int(said[-1][1].replace(",", ""))) != (offered - counted, offered):
        wrong.append(f"its status says 'drops {said[-1][0]} of {said[-1][1]} offered'")
    elif not said and offered != counted:
        wrong.append("its status has no drops line")
    if wrong:  # what the capture says it read, to tell a frame never read from one read and not counted
        src = result.get("source") or {}
        wrong.append(f"its source read {src.get('packets', 0):,} frames, {src.get('ip_packets', 0):,} with an IP "
                     f"address, skipped {src.get('skipped') or {}}")
    figures = {"counted": counted, "dropped": offered - counted,
               "dropped_per_lane": ", ".join(f"{n} {offered - k:,}" for n, k in seen.items()),
               "kernel": drops.get("kernel", 0), "late": drops.get("clock", 0), "queue": drops.get("queue", 0)}
    return figures, wrong


def one_run(lab: VethLab, name: str, argv: tuple[list[str], tuple] | None, rate: float | None, tmp: Path,
            seconds: float = SECONDS) -> dict:
    """One contender (``(dptop executable, capture options)``, None: tcpdump) at one rate."""
    count = int((rate or 1_500_000) * seconds)
    out = tmp / "capture.json"
    out.unlink(missing_ok=True)
    if argv is None:  # tcpdump
        command = ["tcpdump", "-B", "65536", "-w", os.devnull, "-i", lab.rx, "-n"]
    else:
        executable, options = argv
        command = [*executable, "capture", "--iface", lab.rx, "--json", str(out), *options]
    sockets = lab.packet_socket_inodes()
    proc = subprocess.Popen(lab.command(lab.rx_ns, command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        lab.wait_capturing(proc, sockets)  # not its check's socket: the traffic waits until it reads
        tx0, before, cpu0 = lab.tx_packets(), lab.rx_packets(), _cpu(proc.pid)
        sent = subprocess.run(lab.sender(count, rate, SENDER_REALTIME), check=True, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})  # no idle BLAS threads
        _, sent_seconds, sender_cpu = sent.stdout.split()  # from its first frame to its last
        _wait_idle(proc.pid)  # the ring's last blocks, the lanes' queues
        cpu = _cpu(proc.pid) - cpu0
        offered, tx = lab.rx_packets() - before, lab.tx_packets() - tx0
    finally:
        proc.send_signal(signal.SIGINT)
        printed, err = proc.communicate(timeout=300)
    row = {"bench": "live", "contender": name, "rate": rate or "max", "sent": tx, "offered": offered,
           "offered_per_s": round(offered / float(sent_seconds))}
    if argv is None:
        captured, kernel = _tcpdump_counts(err)
        row.update(counted=captured, dropped=offered - captured, dropped_per_lane="", kernel=kernel, late=0, queue=0,
                   account_ok=kernel == offered - captured, account_differs="")
    else:
        figures, wrong = account(json.loads(out.read_text()), printed + err, offered)
        row.update(figures, account_ok=not wrong, account_differs="; ".join(wrong))
    row.update(cpu_us_per_packet=round(1e6 * cpu / max(offered, 1), 3),
               sender_cpu_us_per_packet=round(1e6 * float(sender_cpu) / max(tx, 1), 3), load=load_average())
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


def summary(runs: list[dict]) -> list[dict]:
    """One row per rate and contender, in the order run: medians over its runs, the worst drops,
    the runs that kept every packet and those whose account held."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["rate"], r["contender"]), []).append(r)
    out = []
    for (rate, name), rs in groups.items():
        med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
        worst = max(rs, key=lambda r: r["dropped"])
        out.append({"summary": "live", "contender": name, "rate": rate, "runs": len(rs),
                    "offered_per_s": round(med("offered_per_s")), "offered": round(med("offered")),
                    "counted": round(med("counted")), "worst_dropped": worst["dropped"],
                    "worst_dropped_per_lane": worst["dropped_per_lane"], "worst_kernel": worst["kernel"],
                    "worst_late": worst["late"], "worst_queue": worst["queue"],
                    "clean": f"{sum(r['dropped'] == 0 for r in rs)}/{len(rs)}",
                    "account": f"{sum(r['account_ok'] for r in rs)}/{len(rs)}",
                    "cpu_us_per_packet": round(med("cpu_us_per_packet"), 3),
                    "sender_cpu_us_per_packet": round(med("sender_cpu_us_per_packet"), 3),
                    "load": f"{min(r['load'] for r in rs):.2f}-{max(r['load'] for r in rs):.2f}"})
    return out


def verdict(runs: list[dict]) -> str:
    """The closing note: the drop account in every dptop run, and the acceptance at the top rate."""
    dptop = [r for r in runs if r["contender"].startswith("dptop")]
    bad = [f"{r['contender']} at {r['rate']}: {r['account_differs']}" for r in dptop if not r["account_ok"]]
    lines = [f"drop account = offered - counted per lane (JSON and status line): {len(dptop) - len(bad)} of "
             f"{len(dptop)} dptop runs" + ("" if not bad else "; DIFFERS in " + " | ".join(bad))]
    top = [r for r in dptop if r["rate"] == "max"]
    if top:
        reached = statistics.median(r["offered_per_s"] for r in top)
        kept = {name: sum(r["dropped"] == 0 for r in top if r["contender"] == name) for name in CONTENDERS}
        runs_each = {name: sum(r["contender"] == name for r in top) for name in CONTENDERS}
        ok = reached >= TOP_RATE_FLOOR and all(kept[n] == runs_each[n] > 0 for n in CONTENDERS)
        lines.append(f"top rate: the sender reached {reached:,.0f} frames/s (median; acceptance >= "
                     f"{TOP_RATE_FLOOR:,}); "
                     + ", ".join(f"{n} kept every packet in {kept[n]} of {runs_each[n]}" for n in CONTENDERS)
                     + f": {'PASS' if ok else 'FAIL'} (load {load_average():.2f})")
    return "\n".join(lines)


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
                                 f"({row['offered_per_s']:,}/s), counted {row['counted']:,}, "
                                 f"dropped {row['dropped']:,} "
                                 f"(kernel {row['kernel']:,}, late {row['late']:,}, queues {row['queue']:,})"
                                 f"{'' if row['account_ok'] else ' (ACCOUNT DIFFERS)'}, "
                                 f"{row['cpu_us_per_packet']:.3f} us CPU/packet, load {row['load']:.2f}")
    return out


def report(quick: bool = False, progress=print) -> dict:
    """The ``live`` report of ``dptop bench``: every run, the summary per rate and contender, the note."""
    runs = rows(quick, progress)
    if len(runs) == 1 and "note" in runs[0]:
        return {"name": "live", "rows": runs}
    return {"name": "live", "rows": runs + summary(runs), "notes": verdict(runs) + "\n" + LAB_NOTE}
