"""Declared client hosts (``clients`` / ``--clients``): each packet belongs to its client end in
both directions, so one client with all its packets (requests and the replies to it) is the unit.

The neighbouring pair: a base capture, and the same capture plus one client that talks to 400
servers, each answering. Without declared clients the replies make the client an item in 400
servers' sets and it is released as a popular "server"; with them it is never an item."""
from __future__ import annotations

import numpy as np
import pytest

from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4
from dptop.engine.user_level.clients import ClientPrefixes, client_pairs
from tests.naive_user_level import client_server_stream

CLIENTS = "172.16.0.0/20"  # the stream's clients are 172.16.0.0 + i; servers are scrambled over 2^32
BUSY = 0xAC10_0A01  # 172.16.10.1


@pytest.fixture(scope="module")
def captures():
    base, _ = client_server_stream(clients=1500, per_client=20, servers=3000, skew=1.1, packets=60_000, seed=3)
    servers = keys_of_ipv4(ipv4_of_rank(np.arange(100_000, 100_400)))
    client = keys_of_ipv4(np.full(400, BUSY, dtype=np.uint32))
    src = np.concatenate([base.keys, client, servers])  # requests, then the replies
    dst = np.concatenate([base.dst, servers, client])
    return base, KeyBatch(src, np.zeros(len(src), np.int64), dst=dst)


def released(batch, seed, **extra) -> set:
    alg = registry.make("hostdp-dst", Settings(k=64, epsilon=1.0, delta=1e-6, seed=seed, extra={"m": 20, **extra}))
    alg.consume(batch)
    return {it.address for it in alg.finish()[-1].items}


def test_prefix_membership_and_pairing():
    p = ClientPrefixes.parse("10.0.0.0/8, 2001:db8::/32")
    keys = keys_of_ipv4(np.array([0x0A01_0203, 0x0B00_0001], dtype=np.uint32))
    assert p.contains(keys).tolist() == [True, False]
    src, dst = keys, keys[::-1].copy()
    pairs, kept = client_pairs(src, dst, p)
    assert kept.tolist() == [True, True] and (pairs[:, :2] == keys[[0, 0]]).all()  # the client end, both ways
    with pytest.raises(ValueError, match="must be address prefixes"):
        ClientPrefixes.parse("10.0.0.0/33")


def test_busy_client_with_replies_is_never_released_with_declared_clients(captures):
    base, busy = captures
    address = "172.16.10.1"
    without = [address in released(busy, seed) for seed in (1, 2, 3)]
    assert all(without)  # the defect the declaration removes: replies make the client a "server"
    for seed in (1, 2, 3):
        with_busy, alone = released(busy, seed, clients=CLIENTS), released(base, seed, clients=CLIENTS)
        assert address not in with_busy and address not in alone
        assert len(alone) >= 5  # popular servers are still released


def test_declared_clients_name_the_unit():
    g = registry.make("hostdp-dst", Settings(seed=1, extra={"clients": CLIENTS})).guarantee()
    assert g.unit.label() == "one client host, all its packets in the epoch"
    assert g.neighbouring == "add/remove one client host, all its packets in the epoch"
    with pytest.raises(ValueError, match="declare clients on hostdp-dst"):
        registry.make("hostdp-src", Settings(seed=1, extra={"clients": CLIENTS}))
