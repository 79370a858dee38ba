"""How the capture-result fixtures (``capture-*.json``) were made: a bundled capture's frames sent
onto a veth pair between two network namespaces made for the purpose, and ``dptop capture`` with
``--seed`` on the receiving end, its ``--json`` kept. Run as root from the repository's top:

    python tests/data/golden/capture_runs.py [NAME ...]

(about a minute for all; needs ``ip`` and the namespaces; writes ``tests/data/golden/capture-*.json``).
The golden texts are then rendered from these files by tests/test_capture_golden.py.
"""
from __future__ import annotations

import gzip
import math
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
REPO = DATA.parent.parent
RATE = 1000.0  # frames per second (the DNS capture's 4,412 frames take 4.4 s)
RUNS = {  # fixture name: (bundled capture, dptop capture's options)
    "dns-epochs": (DATA / "amp.dns.RRSIG.fragmented.pcap", ["--epoch-seconds", "2"]),
    "dns-bytes": (DATA / "amp.dns.RRSIG.fragmented.pcap",
                  ["--weight", "bytes", "--algorithms", "dpss,dpsw,exact", "--epoch-seconds", "3"]),
    "syn-dport": (DATA / "amp.TCP.syn.optionallyACK.optionallysamePort.pcapng",
                  ["--key", "dport", "--epoch-packets", "500", "--algorithms", "dpss,dpsw,exact"]),
    "dns": (DATA / "amp.dns.RRSIG.fragmented.pcap",  # no epochs: a window and a horizon
            ["--algorithms", "lazyhh,dpsw,exact", "--window", "4000", "--horizon", "5000"]),
    "demo-epochs": (REPO / "resources" / "demo.pcap.gz",
                    ["--algorithms", "dpss,dpsw,exact", "--epoch-seconds", "3", "--window", "3000"]),
}
LIMIT = 6000  # frames sent of each capture (its first ones)
SLACK = 2.0  # seconds the capture runs beyond the frames' own


def frames(path: Path, limit: int = LIMIT) -> list[bytes]:
    """The first ``limit`` frames of a classic little- or big-endian pcap file (gzipped or not)."""
    raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    order = "<" if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, at = [], 24
    while at + 16 <= len(raw) and len(out) < limit:
        incl = struct.unpack(order + "IIII", raw[at:at + 16])[2]
        out.append(raw[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


def send(iface: str, sent: list[bytes], rate: float = RATE) -> None:
    """Each frame on ``iface`` (an AF_PACKET socket; run inside the sender's namespace) at ``rate``/s."""
    import socket

    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    t0 = time.monotonic()
    for i, frame in enumerate(sent):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        s.send(frame)


def main(names: list[str]) -> None:
    sys.path.insert(0, str(REPO))
    from capture.lab.netns import VethLab

    dptop = [sys.executable, "-m", "dptop"]
    with VethLab("gold") as lab:
        for ns, dev in ((lab.tx_ns, lab.tx), (lab.rx_ns, lab.rx)):
            lab.run(ns, ["ip", "link", "set", dev, "mtu", "9000"])  # the captures' largest frames pass whole
        for name, (capture, options) in RUNS.items():
            if names and name not in names:
                continue
            sent = frames(capture)
            out = HERE / f"capture-{name}.json"
            seconds = math.ceil(len(sent) / RATE + SLACK)
            listen = subprocess.Popen(lab.command(lab.rx_ns, [*dptop, "capture", "--iface", lab.rx, "--seed", "7",
                                                              "--duration", str(seconds), "--quiet",
                                                              "--progress", "always", "--json", str(out),
                                                              *options]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            seen = b""
            while b"packets read" not in seen:  # the first progress line: the capture runs
                chunk = listen.stderr.read1(4096)
                if not chunk:
                    raise SystemExit(f"{name}: dptop capture ended first: {seen.decode(errors='replace')}")
                seen += chunk
            lab.run(lab.tx_ns, [sys.executable, __file__, "--send", lab.tx, str(capture)])
            listen.stderr.read()
            print(f"{name}: {len(sent)} frames of {capture.name} in {seconds} s -> {out.name}, exit {listen.wait()}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--send"]:
        send(sys.argv[2], frames(Path(sys.argv[3])))
    else:
        main(sys.argv[1:])
