"""A paced loopback sender for live tests, the soak and the acceptance run (root not needed).

UDP datagrams from chosen 127.0.0.x sources (one socket bound to each) to 127.0.0.1:PORT, at a
steady ``rate`` packets per second, each named source sending its ``share`` and the rest spread
evenly over ``others`` sources 127.0.1.1, 127.0.1.2, .... Sources follow a fixed shuffled schedule
of 1,000 slots, so every second carries the exact shares. Run as

    python -m dptop.capture.lab.paced --rate 2000 --seconds 200 --share 127.0.0.2=0.3 --share 127.0.0.3=0.1

which prints ``{"sent": {address: packets}, "first": unix_s, "last": unix_s}`` as one JSON line at the end.
"""
from __future__ import annotations

import argparse
import json
import socket
import time

import numpy as np

SLOTS = 1000
PORT = 40555


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


def send(rate: float, seconds: float, shares: dict[str, float], others: int = 20, port: int = PORT,
         stop=None) -> dict:
    """Send for ``seconds`` at ``rate`` packets/s (``stop()`` returning True ends it early)."""
    plan = schedule(shares, others)
    socks = {}
    for address in set(plan):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((address, 0))
        socks[address] = s
    sent = dict.fromkeys(socks, 0)
    payload = b"dptop"
    n = 0
    t0 = time.monotonic()
    first = time.time()
    try:
        while True:
            elapsed = time.monotonic() - t0
            if elapsed >= seconds or (stop is not None and stop()):
                break
            due = min(int(rate * elapsed) + 1, int(rate * seconds))
            n = max(n, due - int(rate * 0.05) - 1)  # behind (a busy machine): skip, never burst
            while n < due:
                address = plan[n % SLOTS]
                try:
                    socks[address].sendto(payload, ("127.0.0.1", port))
                    sent[address] += 1
                except OSError:  # loopback queue full: try this slot again on the next tick
                    break
                n += 1
            time.sleep(0.002)
    finally:
        for s in socks.values():
            s.close()
    return {"sent": sent, "packets": sum(sent.values()), "first": first, "last": time.time()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dptop.capture.lab.paced",
                                description="Send UDP packets on loopback at a steady rate from 127.0.0.x sources, "
                                            "some with a fixed share of the traffic (a test sender for dptop capture).")
    p.add_argument("--rate", type=float, default=2000.0, help="packets per second (default 2000)")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to send, in seconds (default 10)")
    p.add_argument("--share", action="append", default=[], metavar="ADDRESS=SHARE",
                   help="a source address and its share of the packets, e.g. 127.0.0.2=0.3 (repeatable; "
                        "default: none, every source alike)")
    p.add_argument("--others", type=int, default=20,
                   help="how many other sources share the rest of the packets evenly (default 20)")
    p.add_argument("--port", type=int, default=PORT,
                   help=f"UDP destination port, for a capture filter such as 'udp dst port {PORT}' (default {PORT})")
    args = p.parse_args(argv)
    shares = {a: float(v) for a, _, v in (s.partition("=") for s in args.share)}
    print(json.dumps(send(args.rate, args.seconds, shares, args.others, args.port)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
