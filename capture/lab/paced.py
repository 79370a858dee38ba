"""A paced sender for live tests, the soak and the acceptance run.

On loopback (root not needed): UDP datagrams from chosen 127.0.0.x sources (one socket bound to
each) to 127.0.0.1:PORT, at a steady ``rate`` packets per second, each named source sending its
``share`` and the rest spread evenly over ``others`` sources 127.0.1.1, 127.0.1.2, .... Sources
follow a fixed shuffled schedule of 1,000 slots, so every second carries the exact shares. Run as

    python -m dptop.capture.lab.paced --rate 2000 --seconds 200 --share 127.0.0.2=0.3 --share 127.0.0.3=0.1

which prints ``{"sent": {address: packets}, "first": unix_s, "last": unix_s}`` as one JSON line at the end.

On an interface (``--iface``, root; a namespace's veth end, dptop.capture.lab.netns): the same
schedule as Ethernet/IPv4/UDP frames written to an AF_PACKET socket, so any source address can
be sent; the named sources keep their slots and the rest take ``others`` addresses of
``OTHERS_NET`` in turn (uniform, up to 65,534 of them); "sent" then counts the named sources and
the others together under ``"others"``.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import struct
import time

import numpy as np

SLOTS = 1000
PORT = 40555
OTHERS_NET = ipaddress.IPv4Network("10.1.0.0/16")
FRAME_DESTINATION = "10.255.255.255"  # a broadcast frame to an address nobody holds: only packet sockets see it


def schedule(shares: dict[str, float], others: int, seed: int = 1) -> list[str]:
    """``SLOTS`` source addresses: each named one ``round(share·SLOTS)`` times, the rest over ``others``."""
    slots: list[str] = []
    for address, share in shares.items():
        slots += [address] * round(share * SLOTS)
    if len(slots) > SLOTS:
        raise ValueError(f"shares add up to more than 1 ({sum(shares.values()):g})")
    rest = SLOTS - len(slots)
    if rest and others < 1:
        raise ValueError("shares add up to less than 1: give --others >= 1")
    slots += [f"127.0.1.{1 + i % others}" for i in range(rest)]
    rng = np.random.default_rng(seed)
    return [slots[i] for i in rng.permutation(SLOTS)]


def paced(rate: float, seconds: float, emit, labels, stop=None) -> dict:
    """Call ``emit(n)`` for n = 0, 1, ... at ``rate`` per second for ``seconds`` (``stop()``
    returning True ends it early); ``emit`` returns the label (one of ``labels``) it sent, or None
    when it could not (slot n is tried again on the next tick). Returns the packets sent per label
    and the Unix times of the start and the end (the JSON line ``main`` prints)."""
    sent = dict.fromkeys(labels, 0)
    n = 0
    t0 = time.monotonic()
    first = time.time()
    while True:
        elapsed = time.monotonic() - t0
        if elapsed >= seconds or (stop is not None and stop()):
            break
        due = min(int(rate * elapsed) + 1, int(rate * seconds))
        n = max(n, due - int(rate * 0.05) - 1)  # behind (a busy machine): skip, never burst
        while n < due:
            label = emit(n)
            if label is None:
                break
            sent[label] += 1
            n += 1
        time.sleep(0.002)
    return {"sent": sent, "packets": sum(sent.values()), "first": first, "last": time.time()}


def send(rate: float, seconds: float, shares: dict[str, float], others: int = 20, port: int = PORT,
         stop=None) -> dict:
    """Send for ``seconds`` at ``rate`` packets/s on loopback (``stop()`` returning True ends it early)."""
    plan = schedule(shares, others)
    socks = {}
    for address in set(plan):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((address, 0))
        socks[address] = s
    payload = b"dptop"

    def emit(n: int) -> str | None:
        address = plan[n % SLOTS]
        try:
            socks[address].sendto(payload, ("127.0.0.1", port))
        except OSError:  # loopback queue full: try this slot again on the next tick
            return None
        return address

    try:
        return paced(rate, seconds, emit, socks, stop)
    finally:
        for s in socks.values():
            s.close()


def udp_frame(source: str, port: int = PORT, payload: bytes = b"dptop") -> bytes:
    """A broadcast Ethernet/IPv4/UDP frame from ``source`` to ``FRAME_DESTINATION``:``port``."""
    header = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0x4000, 64, 17, 0,
                                   socket.inet_aton(source), socket.inet_aton(FRAME_DESTINATION)))
    total = sum(struct.unpack("!10H", header))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    header[10:12] = struct.pack("!H", ~total & 0xFFFF)
    udp = struct.pack("!HHHH", port, port, 8 + len(payload), 0)  # UDP checksum 0: none (IPv4)
    return b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + bytes(header) + udp + payload


def send_frames(iface: str, rate: float, seconds: float, shares: dict[str, float], others: int = 10_000,
                port: int = PORT, stop=None) -> dict:
    """Send for ``seconds`` at ``rate`` frames/s on ``iface`` (root): the named sources on their
    slots of ``schedule``, the other slots from ``others`` addresses of ``OTHERS_NET`` in turn."""
    if not 1 <= others < OTHERS_NET.num_addresses - 1:
        raise ValueError(f"--others ({others}) must be in [1, {OTHERS_NET.num_addresses - 2}] with --iface")
    plan = schedule(shares, 1)
    named = {address: udp_frame(address, port) for address in shares}
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    sock.bind((iface, 0))
    other = 0

    def emit(n: int) -> str | None:
        nonlocal other
        address = plan[n % SLOTS]
        frame = named.get(address)
        if frame is None:
            address, frame = "others", udp_frame(str(OTHERS_NET[1 + other % others]), port)
        try:
            sock.send(frame)
        except OSError:  # the interface's queue is full: try this slot again on the next tick
            return None
        other += address == "others"
        return address

    try:
        return paced(rate, seconds, emit, [*shares, "others"], stop)
    finally:
        sock.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dptop.capture.lab.paced",
                                description="Send UDP packets on loopback at a steady rate from 127.0.0.x sources "
                                            "(or frames on a test interface with --iface), some with a fixed share "
                                            "of the traffic (a test sender for dptop capture).")
    p.add_argument("--rate", type=float, default=2000.0, help="packets per second (default 2000)")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to send, in seconds (default 10)")
    p.add_argument("--share", action="append", default=[], metavar="ADDRESS=SHARE",
                   help="a source address and its share of the packets, e.g. 127.0.0.2=0.3 (repeatable; "
                        "default: none, every source alike)")
    p.add_argument("--others", type=int, default=None,
                   help="how many other sources share the rest of the packets evenly (default 20 on loopback, "
                        f"10000 with --iface, from {OTHERS_NET})")
    p.add_argument("--iface", default=None,
                   help="send Ethernet frames on this interface instead of UDP on loopback (root; a test "
                        "namespace's veth end, never a real network)")
    p.add_argument("--port", type=int, default=PORT,
                   help=f"UDP destination port, for a capture filter such as 'udp dst port {PORT}' (default {PORT})")
    args = p.parse_args(argv)
    shares = {a: float(v) for a, _, v in (s.partition("=") for s in args.share)}
    if args.iface:
        result = send_frames(args.iface, args.rate, args.seconds, shares, args.others or 10_000, args.port)
    else:
        result = send(args.rate, args.seconds, shares, args.others or 20, args.port)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
