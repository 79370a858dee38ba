"""Item keys: every IPv4 address has its own key, IPv6 keeps all 128 bits, labels round-trip."""
import ipaddress
import random

import numpy as np
import pytest

from dptop.engine.core.keys import (KeyBatch, addresses_from_keys, decode_key, encode_address, hash_key,
                         keys_from_addresses)


def test_ipv4_keys_are_injective_and_round_trip():
    rng = random.Random(1)
    addrs = {str(ipaddress.IPv4Address(rng.getrandbits(32))) for _ in range(5000)}
    addrs |= {"0.0.0.0", "255.255.255.255", "10.0.0.1", "10.0.0.2"}
    keys = {encode_address(a) for a in addrs}
    assert len(keys) == len(addrs)
    for a in addrs:
        assert decode_key(*encode_address(a)) == a


def test_ipv6_keeps_all_128_bits():
    a = "2001:db8::1"
    b = "2001:db8::1:0:0:1"  # differs only in the low word's upper half
    c = "2001:db9::1"  # differs only in the high word
    ka, kb, kc = encode_address(a), encode_address(b), encode_address(c)
    assert len({ka, kb, kc}) == 3
    for addr in (a, b, c, "fe80::8c36:6ff:fe44:acaf", "::1", "::"):
        assert decode_key(*encode_address(addr)) == str(ipaddress.IPv6Address(addr))


def test_ipv4_mapped_ipv6_is_the_same_host():
    assert encode_address("::ffff:192.0.2.1") == encode_address("192.0.2.1")
    assert decode_key(*encode_address("::ffff:192.0.2.1")) == "192.0.2.1"


def test_array_round_trip():
    addrs = ["192.0.2.1", "2001:db8::1", "10.1.2.3", "::1"]
    keys = keys_from_addresses(addrs)
    assert keys.shape == (4, 2) and keys.dtype == np.uint64
    assert addresses_from_keys(keys) == addrs


def test_batch_is_read_only_and_checks_lengths():
    batch = KeyBatch(keys_from_addresses(["192.0.2.1"]), np.array([5]))
    with pytest.raises(ValueError):
        batch.keys[0, 0] = 1
    with pytest.raises(ValueError, match="ts_ns has 2 entries but keys has 1"):
        KeyBatch(keys_from_addresses(["192.0.2.1"]), np.array([1, 2]))


def test_hash_spreads_neighbouring_addresses():
    keys = keys_from_addresses([f"10.0.{i // 256}.{i % 256}" for i in range(4096)])
    seed = np.uint64(12345)
    buckets = np.array([int(hash_key(h, l, seed)) >> 54 for h, l in keys])  # 1024 buckets
    counts = np.bincount(buckets, minlength=1024)
    assert counts.max() <= 16, f"max bucket load {counts.max()} for 4 keys/bucket on average"


def test_taking_every_packet_in_order_retags_the_same_arrays_without_a_copy():
    from dptop.engine.core.keys import KeyBatch

    keys = np.arange(20, dtype=np.uint64).reshape(10, 2)
    batch = KeyBatch(keys, np.arange(10), length=np.full(10, 60))
    for whole in (np.arange(10), np.ones(10, bool), slice(None), slice(0, 10)):
        out = batch.take(whole, 7)
        assert out.epoch == 7 and out.keys is batch.keys and out.length is batch.length
    part = batch.take(np.array([0, 2, 1]), 7)
    assert part.keys is not batch.keys and part.keys[:, 1].tolist() == [1, 5, 3]
    reordered = batch.take(np.array([0, 1, 2, 3, 4, 5, 6, 7, 9, 8]), 7)  # every packet, not in order: a copy
    assert reordered.keys[-1, 1] == 17
