"""Slow, obviously-correct references for GaussBM, LazySketch and LazyHH (docs/lazyhh.md §11).

Plain Python translations of 001 Alg 1 (with corrections C1–C2), Alg 5 and Alg 6 (option-A
thresholds), with noise injected by the caller. The fast numba kernels are compared with these.
"""
from __future__ import annotations

import math

import numpy as np


class RefTree:
    """One GaussBM counter (Alg 1 with the counter's own 0-based index, C1). ``noise()`` gives a
    node's draw; ``reuse_children=True`` is the broken variant (P12) used as a negative control.
    Every node ever created is recorded as (lo, hi, exact) with 1-based update indices."""

    def __init__(self, height: int, noise, reuse_children: bool = False):
        self.H = height
        self.noise = noise
        self.reuse = reuse_children
        self.ex = [0] * height
        self.nz = [0.0] * height
        self.span = [None] * height
        self.u = 0
        self.nodes: list[tuple[int, int, int]] = []

    def push(self, c: int) -> None:
        if self.u >= 2 ** self.H - 1:
            raise OverflowError("tree full")
        e, noisy, lo, level = c, None, self.u + 1, 0
        children_noise = 0.0
        while (self.u >> level) & 1:
            e += self.ex[level]
            children_noise += self.nz[level] - self.ex[level]
            lo = self.span[level][0]
            self.ex[level], self.nz[level], self.span[level] = 0, 0.0, None
            level += 1
        if self.reuse:
            noisy = e + children_noise + self.noise()
        else:
            noisy = e + self.noise()
        self.ex[level], self.nz[level], self.span[level] = e, noisy, (lo, self.u + 1)
        self.nodes.append((lo, self.u + 1, e))
        self.u += 1

    def occupied(self) -> list[int]:
        return [b for b in range(self.H) if self.span[b] is not None]

    def query(self) -> float:
        total = 0.0
        for b in range(self.H):  # C2: accumulate
            if (self.u >> b) & 1:
                total += self.nz[b]
        return total


def ref_lazy_pushes(buckets: np.ndarray, signs: np.ndarray | None, width: int) -> dict:
    """Alg 5 bookkeeping without noise: {(row, col): [pushed value, ...]} for a stream given by
    its buckets (n, d) (and signs for CS). Arrival t (0-based) increments P, then column t mod w
    is pushed (zeros included) and cleared."""
    n, d = buckets.shape
    P = np.zeros((d, width), dtype=np.int64)
    pushes = {(i, j): [] for i in range(d) for j in range(width)}
    for t in range(n):
        for i in range(d):
            P[i, buckets[t, i]] += 1 if signs is None else signs[t, i]
        j = t % width
        for i in range(d):
            pushes[(i, j)].append(int(P[i, j]))
            P[i, j] = 0
    return pushes


def ref_plain_sketch(buckets: np.ndarray, signs: np.ndarray | None, width: int) -> np.ndarray:
    """The non-private CountMin (signs None) / CountSketch grid (d, w) of the same hashes."""
    n, d = buckets.shape
    grid = np.zeros((d, width), dtype=np.int64)
    for i in range(d):
        np.add.at(grid[i], buckets[:, i], 1 if signs is None else signs[:, i])
    return grid


class RefLazyHH:
    """Alg 6 (docs/lazyhh.md §6.5) over noiseless LazyCMS cells, candidates as a Python list in insertion
    order; PRUNE keeps the k~ largest estimates, ties by lower position, order preserved."""

    def __init__(self, k, k_tilde, width, depth, gamma, bucket_of):
        self.k, self.kt, self.w, self.d, self.gamma = k, k_tilde, width, depth, gamma
        self.bucket_of = bucket_of  # key -> tuple of d buckets
        self.P = np.zeros((depth, width), dtype=np.int64)
        self.O = np.zeros((depth, width), dtype=np.int64)
        self.t = 0
        self.cands: list = []
        self.output: list = []
        self.tau = None

    def threshold(self, t):
        lam1 = self.gamma + self.w
        lam2 = math.e * t / self.w + self.gamma
        return max(t / self.k, t / self.kt + lam1 + 2 * lam2) + 1

    def estimate(self, key):
        b = self.bucket_of(key)
        return min(self.O[i, b[i]] for i in range(self.d))

    def update(self, key):
        b = self.bucket_of(key)
        for i in range(self.d):
            self.P[i, b[i]] += 1
        j = self.t % self.w
        self.O[:, j] += self.P[:, j]
        self.P[:, j] = 0
        self.t += 1
        if key not in self.cands:
            self.cands.append(key)
        if self.t % self.kt == 0:
            tau = self.threshold(self.t)
            vals = [self.estimate(c) for c in self.cands]
            self.output = sorted(((c, v) for c, v in zip(self.cands, vals) if v > tau), key=lambda r: (-r[1], r[0]))
            self.tau = tau
            if len(self.cands) > self.kt:
                order = sorted(range(len(self.cands)), key=lambda i: (-vals[i], i))[: self.kt]
                self.cands = [self.cands[i] for i in sorted(order)]
