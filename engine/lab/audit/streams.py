"""Neighbour streams for the audit: labels, streams built from symbol lists, and ``Pair`` (X, X')."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dptop.engine.core.keys import IPV4_MAPPED, decode_key

def label(i: int) -> tuple[int, int]:
    """Key of the IPv4 address 10.0.x.y with i = 256x + y (the symbols of the audit streams)."""
    return 0, IPV4_MAPPED | (0x0A00_0000 + i)


def stream(symbols) -> np.ndarray:
    """A ``(n, 2)`` key array of ``label(s)`` for each symbol."""
    out = np.zeros((len(symbols), 2), dtype=np.uint64)
    out[:, 1] = np.uint64(IPV4_MAPPED | 0x0A00_0000) + np.asarray(symbols, dtype=np.uint64)
    return out


def blocks(counts: dict[int, int], seed: int = 0) -> list[int]:
    """Symbols with the given counts, in a fixed pseudo-random order."""
    syms = [s for s, c in counts.items() for _ in range(c)]
    np.random.default_rng(seed).shuffle(syms)
    return syms


def remove_one(symbols: list[int], symbol: int, last: bool = True) -> list[int]:
    """``symbols`` without one occurrence (the last, or the first) of ``symbol``."""
    idx = (len(symbols) - 1 - symbols[::-1].index(symbol)) if last else symbols.index(symbol)
    return symbols[:idx] + symbols[idx + 1:]


def address(i: int) -> str:
    return decode_key(*label(i))


@dataclass(frozen=True)
class Pair:
    """Neighbouring streams X, X' (add/remove: X is the longer; substitution: same length)."""

    name: str
    x: np.ndarray
    x_prime: np.ndarray
    note: str


def run_seeds(seed: int | None, salt: int, runs: int) -> list[int | None]:
    if seed is None:
        return [None] * runs
    return [int(s) for s in np.random.SeedSequence((seed, salt)).generate_state(runs, dtype=np.uint64) >> 1]
